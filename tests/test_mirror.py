"""`sluice mirror`: a local mirror of fork trunk and upstream, fetched incrementally; hostile URLs refused."""

from __future__ import annotations

import fcntl
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import pytest

from bot.app.cli import main
from bot.core.errors import GitAuthRejected, GitError, GitTransportError
from bot.demo import MIN_SIZE, Sandbox, build_sandbox
from bot.git.environment import GIT_ENV
from bot.git.mirror import CredentialsNeeded, Mirror
from bot.git.mirror import failure_of_git as mirror_failure


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return build_sandbox(tmp_path / "sandbox", MIN_SIZE)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def in_pack(repo: Path) -> int:
    counts = dict(line.split(": ") for line in git(repo, "count-objects", "-v").splitlines())
    return int(counts["in-pack"]) + int(counts["count"])


def add_upstream_commit(upstream: Path) -> str:
    """A new upstream commit made with plumbing in the bare repository: one new doc file."""
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=upstream,
        input="new doc\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    listing = git(upstream, "ls-tree", "main") + f"\n100644 blob {blob}\tNEW.md\n"
    tree = subprocess.run(
        ["git", "mktree"], cwd=upstream, input=listing, capture_output=True, text=True, check=True
    ).stdout.strip()
    commit = git(upstream, "commit-tree", tree, "-p", "main", "-m", "[DOCS] New doc (#99999)")
    git(upstream, "update-ref", "refs/heads/main", commit)
    return commit


def commit_graph(repo: Path) -> list[bytes]:
    """The layers of the split commit-graph git keeps in `repo`, each file's bytes."""
    graphs = repo / "objects" / "info" / "commit-graphs"
    chain = (graphs / "commit-graph-chain").read_text().split()
    return [(graphs / f"graph-{layer}.graph").read_bytes() for layer in chain]


def in_commit_graph(repo: Path, sha: str) -> bool:
    """Whether `repo`'s commit-graph lists `sha` (graphs store raw ids) in a layer with changed-path filters
    (its Bloom filter index chunk, `BIDX`)."""
    return any(bytes.fromhex(sha) in layer and b"BIDX" in layer for layer in commit_graph(repo))


def test_mirror_then_plan_and_sync_incrementally(sandbox: Sandbox, tmp_path: Path, capsys) -> None:
    mirror = tmp_path / "mirror.git"
    argv = [
        "mirror",
        "--dir",
        str(mirror),
        "--fork-url",
        str(sandbox.fork),
        "--upstream-url",
        str(sandbox.upstream),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"main: {sandbox.manifest.fork_head[:10]}\n" in out
    assert f"upstream/main: {sandbox.manifest.upstream_head[:10]}\n" in out
    assert (
        main(["status", "--repo", str(mirror), "--fork", "main", "--upstream", "upstream/main", "--json"])
        == 0
    )
    assert f'"ingestion_tip": "{sandbox.manifest.ingestion_tip}"' in capsys.readouterr().out
    assert in_commit_graph(mirror, sandbox.manifest.fork_head)
    assert in_commit_graph(mirror, sandbox.manifest.upstream_head)

    objects = in_pack(mirror)
    assert main(argv) == 0
    assert "(unchanged)" in capsys.readouterr().out
    new = add_upstream_commit(sandbox.upstream)
    assert main(argv) == 0
    assert f"upstream/main: {new[:10]}\n" in capsys.readouterr().out
    assert 0 < in_pack(mirror) - objects <= 3  # the commit, its tree, its blob: nothing fetched twice
    assert in_commit_graph(mirror, new)


@pytest.mark.parametrize(
    "url",
    [
        "--upload-pack=touch /tmp/sluice-pwned",
        "ext::sh -c touch% /tmp/sluice-pwned",
        "fd::17",
        "relative/path",
        "https://example.com/repo\n--upload-pack=x",
    ],
)
def test_hostile_urls_are_refused_before_anything_runs(tmp_path: Path, capsys, url: str) -> None:
    mirror = tmp_path / "mirror.git"
    code = main(["mirror", "--dir", str(mirror), "--fork-url", url, "--upstream-url", "/nowhere"])
    assert code == 2
    assert "not a repository URL" in capsys.readouterr().err
    assert not mirror.exists()
    assert not Path("/tmp/sluice-pwned").exists()


def test_credentials_never_reach_the_message(tmp_path: Path, capsys) -> None:
    code = main(
        [
            "mirror",
            "--dir",
            str(tmp_path / "m"),
            "--fork-url=-https://user:s3cret@host/x",
            "--upstream-url",
            "/nowhere",
        ]
    )
    assert code == 2
    assert "s3cret" not in capsys.readouterr().err


def one_commit_repo(path: Path, message: str) -> str:
    """A bare repository whose `main` is one commit with `message`; its SHA."""
    git(path.parent, "init", "--quiet", "--bare", str(path))
    tree = git(path, "mktree", "--missing")  # the empty tree, from no input
    sha = subprocess.run(
        ["git", "commit-tree", tree, "-m", message],
        cwd=path,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    ).stdout.strip()
    git(path, "update-ref", "refs/heads/main", sha)
    return sha


def test_fetches_into_one_mirror_take_turns_so_each_gets_its_own_remote(tmp_path: Path) -> None:
    """Workers share a fork's mirror. A fetch sets the remote's URL and then fetches: two at once would
    fetch each other's URL, or have git refuse the second config or ref write. Under the mirror's lock each
    one reads the repository it named."""
    heads = {
        one_commit_repo(tmp_path / f"r{n}.git", f"repo {n}"): str(tmp_path / f"r{n}.git") for n in (1, 2)
    }
    mirror = Mirror(tmp_path / "mirror.git")

    def fetch(url: str) -> list[str]:
        return [mirror.fetch_branch(url, "main") for _ in range(12)]

    with ThreadPoolExecutor(max_workers=2) as pool:
        got = {sha: pool.submit(fetch, url) for sha, url in heads.items()}
        assert {sha: set(f.result()) for sha, f in got.items()} == {sha: {sha} for sha in heads}


def test_each_fetch_of_a_fork_ref_joins_the_commit_graph(tmp_path: Path) -> None:
    """Picks and tier runs walk what `fetch_branch`, `fetch_branches` and `fetch_ref` brought: each one
    writes it into the commit-graph, as `sync` does."""
    mirror = Mirror(tmp_path / "mirror.git")
    fetches = {
        "branch": lambda url: mirror.fetch_branch(url, "main"),
        "branches": lambda url: mirror.fetch_branches(url, "sluice/ingest/")["sluice/ingest/bundle-1"],
        "ref": lambda url: mirror.fetch_ref(url, "refs/pull/7/head"),
    }
    for name, fetch in fetches.items():
        repo = tmp_path / f"{name}.git"
        sha = one_commit_repo(repo, f"fetched by {name}")
        git(repo, "update-ref", "refs/heads/sluice/ingest/bundle-1", sha)
        git(repo, "update-ref", "refs/pull/7/head", sha)
        assert fetch(str(repo)) == sha
        assert in_commit_graph(mirror.path, sha), name


def test_a_fetch_waits_for_the_mirror_lock(tmp_path: Path) -> None:
    sha = one_commit_repo(tmp_path / "r.git", "repo")
    mirror = Mirror(tmp_path / "mirror.git")
    with open(tmp_path / "mirror.git.lock", "a") as held:  # as another worker would hold it
        fcntl.flock(held, fcntl.LOCK_EX)
        with ThreadPoolExecutor(max_workers=1) as pool:
            fetching = pool.submit(mirror.fetch_branch, str(tmp_path / "r.git"), "main")
            with pytest.raises(FutureTimeout):
                fetching.result(timeout=1.0)
            assert not (tmp_path / "mirror.git" / "HEAD").exists()  # not even created while held
            fcntl.flock(held, fcntl.LOCK_UN)
            assert fetching.result(timeout=30) == sha


@pytest.mark.parametrize(
    ("stderr", "authenticated", "kind", "remedy"),
    [
        (
            "fatal: repository 'https://github.example.com/org/fork.git/' not found",
            True,
            GitAuthRejected,
            "a new token is minted for the next attempt; if this repeats while the App is installed on the "
            "repository, the git host's URL is wrong (SLUICE_GIT_URL) or the repository was renamed or moved",
        ),
        (
            "fatal: could not read Username for 'https://github.com': terminal prompts disabled",
            False,
            CredentialsNeeded,
            "make the repository public, or let Sluice read it with a token",
        ),
        (
            "fatal: unable to access 'https://github.com/o/r/': Could not resolve host: github.com",
            True,
            GitTransportError,
            "check that the remote is reachable; it is tried again later",
        ),
    ],
)
def test_what_a_failed_fetch_means_is_read_from_what_git_said(
    stderr: str, authenticated: bool, kind: type[GitError], remedy: str
) -> None:
    """A git host that answers 404 to the App's token is not fixed by waiting: the remedy names the URL."""
    failure = mirror_failure("fetch", stderr, 128, authenticated=authenticated)
    assert type(failure) is kind and failure.remedy == remedy
