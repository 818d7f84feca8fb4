"""`Plumbing.blame`, the fork commits a conflict's evidence names, in a real repository: for each range of
lines, every commit that last touched them (the root one too), or with `since` only the commits `since`
lacks, the walk ending there; several ranges in one walk, one past the file's end naming no commit; a
`since` that is no SHA, or a range that is no range of lines, refused before git runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.core.errors import GitError
from bot.git.environment import git_environ
from bot.git.repo import GitRepo


class History:
    """A file of four lines: the root commit wrote them, upstream then changed line 2, and the fork, on top
    of that, lines 3 and 4 in two commits."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        self.git("init", "-q", "-b", "main")
        self.root = self.write(["a", "b", "c", "d"], "root")
        self.upstream = self.write(["a", "B", "c", "d"], "upstream changes b")
        self.fork_c = self.write(["a", "B", "C", "d"], "fork changes c")
        self.fork_d = self.write(["a", "B", "C", "D"], "fork changes d")

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=self.path, env=git_environ(), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def write(self, lines: list[str], message: str) -> str:
        (self.path / "f.cpp").write_text("".join(f"{line}\n" for line in lines))
        self.git("add", "f.cpp")
        self.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def history(tmp_path: Path) -> History:
    return History(tmp_path / "repo")


def test_without_since_every_commit_that_last_touched_a_line_is_named_the_root_too(history: History) -> None:
    blame = GitRepo(history.path).plumbing().blame(history.fork_d, "f.cpp", [(1, 4)])
    assert blame == [(history.root, history.upstream, history.fork_c, history.fork_d)]


def test_with_since_only_the_commits_it_lacks_are_named(history: History) -> None:
    repo = GitRepo(history.path).plumbing()
    assert repo.blame(history.fork_d, "f.cpp", [(1, 4)], since=history.upstream) == [
        (history.fork_c, history.fork_d)
    ]
    assert repo.blame(history.fork_d, "f.cpp", [(1, 2)], since=history.upstream) == [()]
    assert repo.blame(history.fork_d, "f.cpp", [(2, 3)], since=history.root) == [
        (history.upstream, history.fork_c)
    ]


def test_several_ranges_are_answered_each_in_one_walk(history: History) -> None:
    repo = GitRepo(history.path).plumbing()
    ranges = [(4, 4), (1, 2), (2, 3)]  # in any order, overlapping
    assert repo.blame(history.fork_d, "f.cpp", ranges, since=history.root) == [
        (history.fork_d,),
        (history.upstream,),
        (history.upstream, history.fork_c),
    ]


def test_a_range_past_the_end_names_no_commit_and_spoils_no_other(history: History) -> None:
    repo = GitRepo(history.path).plumbing()
    assert repo.blame(history.fork_d, "f.cpp", [(3, 3), (5, 5), (4, 9)]) == [
        (history.fork_c,),
        (),
        (history.fork_d,),
    ]


@pytest.mark.parametrize("since", ["--output=/tmp/x", "HEAD~1", "abc"])
def test_a_since_that_is_no_sha_is_refused(history: History, since: str) -> None:
    with pytest.raises(GitError, match="not a full commit SHA"):
        GitRepo(history.path).plumbing().blame(history.fork_d, "f.cpp", [(1, 4)], since=since)


@pytest.mark.parametrize("ranges", [[(0, 2)], [(3, 2)], [(1, 1), (-1, 2)]])
def test_a_range_that_is_no_range_of_lines_is_refused(
    history: History, ranges: list[tuple[int, int]]
) -> None:
    with pytest.raises(ValueError, match="not a range of lines"):
        GitRepo(history.path).plumbing().blame(history.fork_d, "f.cpp", ranges)
