"""The search for fork uses of a changed API, in a real repository: `Plumbing.grep_word` by file suffix
(any case), in a commit or a tree, and only with suffixes Sluice writes itself; `GitRepo.read_files`, the
upstream files the hits are compared with, in one read."""

from __future__ import annotations

import subprocess

import pytest

from bot.git.environment import git_environ
from bot.git.repo import GitRepo

FILES = {
    "lib/Order.cpp": "int a = getOrder(x);\n// getOrder, again\n",
    "include/ORDER.H": "int getOrder(int x);\n",
    "python/order.py": "order = getOrder(x)\n",
    "docs/order.md": "Call getOrder first.\n",
    "lib/getOrderForMemory.cpp": "int b = getOrderForMemory(x);\n",  # another word
    "docs/with space missing.md": "a name that ends like cat-file's answer for a missing one\n",
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepo, str]:
    path = tmp_path_factory.mktemp("grep") / "repo"
    for name, text in FILES.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=path, env=git_environ(), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "files")
    return GitRepo(path), git("rev-parse", "HEAD")


def hits(repo: GitRepo, rev: str, **options: object) -> list[tuple[str, int]]:
    return sorted((p, n) for p, n, _ in repo.plumbing().grep_word(rev, "getOrder", **options))  # type: ignore[arg-type]


def test_only_files_with_the_suffixes_in_any_case(repo: tuple[GitRepo, str]) -> None:
    git, commit = repo
    cpp = [("include/ORDER.H", 1), ("lib/Order.cpp", 1), ("lib/Order.cpp", 2)]
    assert hits(git, commit, suffixes=(".cpp", ".h")) == cpp
    assert hits(git, git.tree_of(commit), suffixes=(".cpp", ".h")) == cpp  # a tree, as planning gives
    assert hits(git, commit, suffixes=(".py",)) == [("python/order.py", 1)]


def test_without_suffixes_every_file_and_at_most_limit_lines(repo: tuple[GitRepo, str]) -> None:
    git, commit = repo
    assert len(hits(git, commit, limit=500)) == 5
    assert len(hits(git, commit, limit=2)) == 2


@pytest.mark.parametrize("suffix", ["*.cpp", ".c*", ".cpp/../x", ":(top).cpp", "cpp", ""])
def test_a_suffix_that_is_no_plain_suffix_is_refused(repo: tuple[GitRepo, str], suffix: str) -> None:
    git, commit = repo
    with pytest.raises(ValueError, match="not a file suffix"):
        git.plumbing().grep_word(commit, "getOrder", suffixes=(".cpp", suffix))


def test_read_files_reads_those_there_in_one_go(repo: tuple[GitRepo, str]) -> None:
    git, commit = repo
    asked = ["lib/Order.cpp", "docs/with space missing.md", "lib", "nothing/here.cpp", "odd\nname.cpp"]
    found = git.read_files(commit, asked)
    assert found == {p: FILES[p].encode() for p in ("lib/Order.cpp", "docs/with space missing.md")}
    assert git.read_files(git.tree_of(commit), ["include/ORDER.H"]) == {
        "include/ORDER.H": FILES["include/ORDER.H"].encode()
    }
    assert git.read_files(commit, []) == {}
