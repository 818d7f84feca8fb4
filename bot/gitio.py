"""Git adapter: reads history, diffs, blobs and patch-ids, and probes merges without a work tree."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

import git
from gitdb.base import IStream

from bot.diffparse import COMMIT_MARK, parse_patch_section, split_log
from bot.errors import GitError
from bot.models import CommitInfo, FileChange

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
# What `git check-ref-format` rejects, plus anything that git could read as an option.
BAD_REF = re.compile(r"(^-)|(\.\.)|(@\{)|([\x00-\x20\x7f~^:?*\[\\])|(/\.)|(^\.)|(\.lock$)|(/$)|(\.$)|(//)")
FIELD = "\x1f"
META_FORMAT = FIELD.join(["%H", "%P", "%an", "%ae", "%at", "%ct", "%B"])
GIT_ENV = {
    "LC_ALL": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_LITERAL_PATHSPECS": "1",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
}
DIFF_OPTIONS = (
    "--raw",
    "-p",
    "-U0",
    "--no-renames",
    "--no-abbrev",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
)


def validate_ref(ref: str) -> str:
    """Reject ref names git would refuse or could take for an option; SHAs pass."""
    if not ref or len(ref) > 255 or BAD_REF.search(ref):
        raise GitError(
            f"not a valid git ref name: {ref!r}", "give a branch, remote-tracking branch, tag or SHA"
        )
    return ref


def validate_sha(sha: str) -> str:
    if not SHA_RE.match(sha):
        raise GitError(f"not a full commit SHA: {sha!r}", "give the 40-hex SHA")
    return sha


@dataclass(frozen=True)
class MergeProbe:
    clean: bool
    tree: str
    conflicts: tuple[str, ...]


class GitRepo:
    """One local repository (bare or not), driven through `git` with an explicit `cwd`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).resolve()
        if not self.path.exists():
            raise GitError(f"{path} does not exist", "pass --repo the path of a clone or mirror")
        try:
            self._repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
            raise GitError(
                f"{path} is not a git repository", "pass --repo the path of a clone or mirror"
            ) from exc
        self.git_dir = Path(self._repo.git_dir)
        if (self.git_dir / "shallow").exists():
            raise GitError(
                f"{path} is a shallow clone; Sluice needs the whole history to recognise ingested commits",
                "run `git fetch --unshallow` in it, or clone without --depth",
            )

    # -- running git -------------------------------------------------------------------------------

    def run(self, *args: str, stdin: bytes | None = None, ok: Sequence[int] = (0,)) -> str:
        return self.run_bytes(*args, stdin=stdin, ok=ok).decode("utf-8", "replace")

    def run_bytes(self, *args: str, stdin: bytes | None = None, ok: Sequence[int] = (0,)) -> bytes:
        proc = subprocess.run(
            ["git", *args], cwd=self.path, input=stdin, capture_output=True, env={**os.environ, **GIT_ENV}
        )
        if proc.returncode not in ok:
            message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise GitError(f"git {args[0]} failed: {message[-1] if message else proc.returncode}")
        return proc.stdout

    # -- refs --------------------------------------------------------------------------------------

    def resolve(self, ref: str) -> str:
        """The commit SHA a ref names; a clear error for unknown refs."""
        validate_ref(ref)
        out = self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", ok=(0, 1)).strip()
        if not SHA_RE.match(out):
            raise GitError(
                f"unknown ref {ref!r} in {self.path}", "check the name with `git branch -a` / `git tag`"
            )
        return out

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        proc = subprocess.run(
            ["git", "merge-base", "--is-ancestor", validate_sha(ancestor), validate_sha(descendant)],
            cwd=self.path,
            capture_output=True,
            env={**os.environ, **GIT_ENV},
        )
        return proc.returncode == 0

    # -- history -----------------------------------------------------------------------------------

    def first_parent_times(self, head: str) -> list[tuple[str, int]]:
        """The first-parent stream ending at `head`, oldest first, with committer times."""
        out = self.run("log", "--first-parent", "--reverse", "--format=%H %ct", validate_sha(head), "--")
        return [(sha, int(ts)) for sha, ts in (line.split() for line in out.splitlines())]

    def first_parent_missing(self, upstream: str, fork: str) -> set[str]:
        """First-parent upstream commits that are not ancestors of the fork."""
        out = self.run(
            "rev-list", "--first-parent", validate_sha(upstream), "--not", validate_sha(fork), "--"
        )
        return set(out.split())

    def commits(self, *revs: str, first_parent: bool = False, no_merges: bool = False) -> list[CommitInfo]:
        """Commit metadata for a revision range given as arguments (SHAs and `--not`), oldest first."""
        flags = [*(["--first-parent"] if first_parent else []), *(["--no-merges"] if no_merges else [])]
        out = self.run("log", "--reverse", *flags, f"--format={COMMIT_MARK}{META_FORMAT}", *revs, "--")
        return [_commit_info(chunk) for chunk in out.split(COMMIT_MARK)[1:]]

    def patches(self, shas: Iterable[str]) -> dict[str, tuple[FileChange, ...]]:
        """Raw + `-U0` patches of the given commits (against their first parent)."""
        todo = [validate_sha(s) for s in shas]
        if not todo:
            return {}
        out = self.run(
            "log",
            "--no-walk=unsorted",
            "--stdin",
            "--diff-merges=first-parent",
            *DIFF_OPTIONS,
            f"--format={COMMIT_MARK}%H",
            stdin="\n".join(todo).encode() + b"\n",
        )
        return {sha: parse_patch_section(body) for sha, body in split_log(out)}

    def range_patches(
        self, *revs: str, paths: Sequence[str] = (), no_merges: bool = False
    ) -> dict[str, tuple[FileChange, ...]]:
        """Patches of every commit in a range (first-parent diffs), optionally limited to paths."""
        flags = ["--no-merges"] if no_merges else ["--diff-merges=first-parent"]
        out = self.run("log", *flags, *DIFF_OPTIONS, f"--format={COMMIT_MARK}%H", *revs, "--", *paths)
        return {sha: parse_patch_section(body) for sha, body in split_log(out)}

    def patch_ids(self, *revs: str, stdin_shas: Sequence[str] = ()) -> dict[str, str]:
        """commit SHA -> `git patch-id --stable` for a range (or for the listed SHAs), merges excluded."""
        if stdin_shas:
            args = [
                "log",
                "--no-walk=unsorted",
                "--stdin",
                "--no-merges",
                "-p",
                "--no-color",
                "--format=commit %H",
            ]
            data = "\n".join(validate_sha(s) for s in stdin_shas).encode() + b"\n"
        elif revs:
            args = ["log", "--no-merges", "-p", "--no-color", "--format=commit %H", *revs, "--"]
            data = None
        else:
            return {}
        env = {**os.environ, **GIT_ENV}
        with subprocess.Popen(
            ["git", *args], cwd=self.path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        ) as log:
            assert log.stdin is not None
            # `log --stdin` reads every SHA before it writes anything, so this cannot block on our side.
            log.stdin.write(data or b"")
            log.stdin.close()
            patch = subprocess.run(
                ["git", "patch-id", "--stable"], cwd=self.path, stdin=log.stdout, capture_output=True, env=env
            )
        if log.returncode or patch.returncode:
            raise GitError("git patch-id failed", "check that the repository is readable and not corrupt")
        pairs = (line.split() for line in patch.stdout.decode().splitlines())
        return {commit: pid for pid, commit in pairs}

    def read_file(self, rev: str, path: str) -> bytes | None:
        """A file's content at a commit, or None when it is not there."""
        proc = subprocess.run(
            ["git", "cat-file", "blob", f"{validate_sha(rev)}:{path}"],
            cwd=self.path,
            capture_output=True,
            env={**os.environ, **GIT_ENV},
        )
        return proc.stdout if proc.returncode == 0 else None

    def blobs(self, shas: Iterable[str]) -> dict[str, bytes]:
        """Read many blobs through one `git cat-file --batch`."""
        wanted = sorted({validate_sha(s) for s in shas})
        if not wanted:
            return {}
        out = self.run_bytes("cat-file", "--batch", stdin=("\n".join(wanted) + "\n").encode())
        result: dict[str, bytes] = {}
        pos = 0
        for sha in wanted:
            header_end = out.index(b"\n", pos)
            header = out[pos:header_end].split()
            if len(header) < 3 or header[1] == b"missing":
                pos = header_end + 1
                continue
            size = int(header[2])
            result[sha] = out[header_end + 1 : header_end + 1 + size]
            pos = header_end + 1 + size + 1
        return result

    # -- merges without a work tree ----------------------------------------------------------------

    def tree_of(self, commit: str) -> str:
        return self.run("rev-parse", f"{validate_sha(commit)}^{{tree}}").strip()

    def write_commit(self, tree: str, parents: Sequence[str], message: str, *, timestamp: int) -> str:
        """Write a commit object directly into the object database (no process, no ref).

        The timestamp matters: git's merge-base walk goes in date order, and a commit dated 1970 would make
        it walk the whole history before reaching it.
        """
        lines = [f"tree {validate_sha(tree)}", *(f"parent {validate_sha(p)}" for p in parents)]
        ident = f"Sluice <sluice@localhost> {timestamp} +0000"
        body = "\n".join([*lines, f"author {ident}", f"committer {ident}", "", message, ""]).encode()
        stream = self._repo.odb.store(IStream(b"commit", len(body), BytesIO(body)))
        return str(stream.hexsha.decode() if isinstance(stream.hexsha, bytes) else stream.hexsha)

    def probe_pick(self, onto_tree: str, commit: CommitInfo) -> MergeProbe:
        """Three-way merge of `commit`'s change onto `onto_tree`, with the commit's first parent as base.

        git 2.39 has no `merge-tree --merge-base`, so we make the base the merge base: a temporary commit
        holding `onto_tree` whose parent is the commit's parent.
        """
        if not commit.parents:
            raise GitError(f"{commit.sha} is a root commit and cannot be picked")
        ours = self.write_commit(
            onto_tree, [commit.parents[0]], "sluice: conflict probe", timestamp=commit.committer_time
        )
        out = self.run(
            "merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", ours, commit.sha, ok=(0, 1)
        )
        fields = out.split("\0")
        conflicts = tuple(sorted({f for f in fields[1:] if f}))
        return MergeProbe(clean=not conflicts, tree=fields[0], conflicts=conflicts)


def _commit_info(chunk: str) -> CommitInfo:
    sha, parents, name, email, at, ct, message = chunk.split(FIELD, 6)
    return CommitInfo(
        sha=sha,
        parents=tuple(parents.split()),
        author_name=name,
        author_email=email,
        author_time=int(at),
        committer_time=int(ct),
        message=message.rstrip("\n"),
    )
