"""One reading of `git merge-file --diff3` output: the classifier, the resolution memory and the guard."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

from bot.core import conflicts, diff3, rerere
from bot.core.diff3 import Block, Diff3Error, Marker

BLOCK = "<<<<<<< ours\nfork\n||||||| base\nold\n=======\nupstream\n>>>>>>> theirs\n"
FORK_OLD_UPSTREAM = Block(("fork",), ("old",), ("upstream",))


# --- which lines are markers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("<<<<<<< ours", Marker.OURS),
        ("<<<<<<<", Marker.OURS),  # no label
        ("<<<<<<< ", Marker.OURS),  # an empty label: `-L ""`
        ("<<<<<<< a\tlabel with a tab", Marker.OURS),
        ("<<<<<<< ours\r", Marker.OURS),  # CRLF file
        ("||||||| base", Marker.BASE),
        ("|||||||", Marker.BASE),
        ("=======", Marker.SEPARATOR),
        ("=======\r", Marker.SEPARATOR),
        (">>>>>>> theirs", Marker.THEIRS),
        (">>>>>>> theirs\r", Marker.THEIRS),
        ("<<<<<<<\tnote", None),  # a tab right after the seven
        ("=======\t", None),
        ("======= ", None),  # git writes nothing after `=======`
        ("======= Title", None),
        ("<<<<<<<< eight", None),
        ("========", None),
        ("<<<<<<", None),
        ("<<<<<<<x", None),
        ("  <<<<<<< ours", None),  # not at line start
        ('s = "<<<<<<< ours"', None),  # inside a string
        ("// ======= ", None),  # inside a comment
        ("# >>>>>>> theirs", None),
        ("<<<<<<<\r\r", None),
        ("", None),
    ],
)
def test_a_marker_is_what_git_writes(line: str, kind: Marker | None) -> None:
    assert diff3.marker(line) is kind
    text = f"x\n{line}\n"
    assert diff3.has_markers(text) is (kind is not None)
    # The "never commit conflict markers" guard refuses exactly these lines.
    problem = conflicts.check_resolution("notes.txt", text)
    assert (problem is not None) is (kind is not None)
    if kind is not None:
        assert problem is not None and problem.startswith("conflict marker left at line 2")


def test_marker_lines_number_every_marker_line() -> None:
    text = f"a\n{BLOCK}<<<<<<<\tnote\n"
    assert list(diff3.marker_lines(text)) == [
        (2, "<<<<<<< ours"),
        (4, "||||||| base"),
        (6, "======="),
        (8, ">>>>>>> theirs"),
    ]


# --- parsing: one table, one answer for every reader ------------------------------------------------------

PARSES = [
    ("no conflict", "a\nb\n", ("a", "b")),
    ("empty", "", ()),
    ("one block", f"a\n{BLOCK}z\n", ("a", FORK_OLD_UPSTREAM, "z")),
    ("no final newline", f"a\n{BLOCK}z", ("a", FORK_OLD_UPSTREAM, "z")),
    (
        "tab after the opening seven: content",
        f"<<<<<<<\tnote\n{BLOCK}",
        ("<<<<<<<\tnote", FORK_OLD_UPSTREAM),
    ),
    (
        "trailing space after the separator: content",
        "<<<<<<< ours\nfork\n||||||| base\n======= \n=======\nupstream\n>>>>>>> theirs\n",
        (Block(("fork",), ("======= ",), ("upstream",)),),
    ),
    (
        "CRLF: markers read, the \\r stays on content lines",
        f"a\n{BLOCK}z\n".replace("\n", "\r\n"),
        ("a\r", Block(("fork\r",), ("old\r",), ("upstream\r",)), "z\r"),
    ),
    (
        "look-alikes not at line start",
        f'  <<<<<<< ours\ns = "======="\n// >>>>>>> theirs\n{BLOCK}',
        ("  <<<<<<< ours", 's = "======="', "// >>>>>>> theirs", FORK_OLD_UPSTREAM),
    ),
    (
        "eight wide: content",
        f"========\n<<<<<<<< x\n{BLOCK}",
        ("========", "<<<<<<<< x", FORK_OLD_UPSTREAM),
    ),
    (
        "empty and missing labels",
        "<<<<<<< \nfork\n|||||||\n=======\n>>>>>>>\n",
        (Block(("fork",), (), ()),),
    ),
    (
        "empty sides",
        "<<<<<<< ours\n||||||| base\nold\n=======\n>>>>>>> theirs\n",
        (Block((), ("old",), ()),),
    ),
    (
        "zdiff3: the sides' common lines moved out of the block",
        "a\nx\n<<<<<<< ours\nB1\n||||||| base\nb\n=======\nB2\n>>>>>>> theirs\nz\nc\n",
        ("a", "x", Block(("B1",), ("b",), ("B2",)), "z", "c"),
    ),
    (
        "two blocks",
        f"{BLOCK}mid\n{BLOCK}",
        (FORK_OLD_UPSTREAM, "mid", FORK_OLD_UPSTREAM),
    ),
]

REFUSED = [
    ("merge style, no base part", "<<<<<<< ours\nfork\n=======\nupstream\n>>>>>>> theirs\n", "not --diff3"),
    ("never closed", "<<<<<<< ours\nfork\n||||||| base\nold\n=======\nupstream\n", "never closed"),
    ("nested", f"<<<<<<< ours\n{BLOCK}", "line 2: unexpected <<<<<<<"),
    ("a separator outside any block", "Title\n=======\n", "line 2: unexpected ======="),
    ("a closer outside any block", f"{BLOCK}>>>>>>> theirs\n", "line 8: unexpected >>>>>>>"),
    ("a base marker outside any block", "||||||| base\n", "line 1: unexpected |||||||"),
    ("markers out of order", "<<<<<<< ours\n=======\n||||||| base\n>>>>>>> theirs\n", "unexpected ======="),
    ("a second separator", BLOCK.replace("upstream\n", "=======\n"), "line 6: unexpected ======="),
]


def triples(
    blocks: Iterable[Block | conflicts.Hunk3 | rerere.ConflictBlock],
) -> list[tuple[tuple[str, ...], ...]]:
    """(ours, base, theirs) of each block, from any reader's block type."""
    return [(b.ours, b.base, b.theirs) for b in blocks]


@pytest.mark.parametrize(("merged", "expected"), [p[1:] for p in PARSES], ids=[p[0] for p in PARSES])
def test_parse(merged: str, expected: tuple[str | Block, ...]) -> None:
    assert diff3.parse(merged) == expected


@pytest.mark.parametrize(("merged", "expected"), [p[1:] for p in PARSES], ids=[p[0] for p in PARSES])
def test_the_classifier_and_the_memory_read_the_same_blocks(
    merged: str, expected: tuple[str | Block, ...]
) -> None:
    blocks = [part for part in expected if isinstance(part, Block)]
    hunks = [part for part in conflicts.split_diff3(merged) if isinstance(part, conflicts.Hunk3)]
    assert triples(hunks) == triples(rerere.conflict_blocks(merged)) == triples(blocks)
    assert [conflicts.key_of(h) for h in hunks] == [b.key for b in rerere.conflict_blocks(merged)]
    clean = [part for part in expected if isinstance(part, str)]
    assert [part for part in conflicts.split_diff3(merged) if isinstance(part, str)] == clean


@pytest.mark.parametrize(("merged", "message"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_every_reader_refuses_what_does_not_split(merged: str, message: str) -> None:
    with pytest.raises(Diff3Error, match=message):
        diff3.parse(merged)
    with pytest.raises(Diff3Error, match=message):
        conflicts.split_diff3(merged)
    with pytest.raises(Diff3Error, match=message):
        rerere.conflict_blocks(merged)
    with pytest.raises(Diff3Error, match=message):
        rerere.apply(merged, {})
    assert rerere.learn(merged, "anything\n") == {}
    verdict = conflicts.classify_file("a.txt", base="b\n", ours="o\n", theirs="t\n", merged=merged)
    assert verdict.cls is conflicts.ConflictClass.UNKNOWN and "cannot split the merge" in verdict.reason


# --- what git itself writes ------------------------------------------------------------------------------


def git_merge_file(tmp_path: Path, base: str, ours: str, theirs: str, *options: str) -> tuple[int, str]:
    """`git merge-file -p` of the three texts with `options`: (conflict count, merged text)."""
    for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
        (tmp_path / name).write_bytes(text.encode())
    done = subprocess.run(
        ["git", "merge-file", "-p", *options, "ours", "base", "theirs"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    assert 0 <= done.returncode < 128, done.stderr
    return done.returncode, done.stdout.decode()


def assembled(parts: tuple[str | Block, ...], side: str, *, crlf: bool = False) -> str:
    """The merged text with every block replaced by one of its sides."""
    lines: list[str] = []
    for part in parts:
        lines.extend([part] if isinstance(part, str) else getattr(part, side))
    ending = "\r\n" if crlf else "\n"
    return "".join(line.removesuffix("\r") + ending for line in lines)


LABELS = ("-L", "ours", "-L", "base", "-L", "theirs")
TWO_CONFLICTS = (
    "int a = 0;\nint keep1;\nint keep2;\nint keep3;\nint b = 0;\n",
    "int a = 1;\nint keep1;\nint keep2;\nint keep3;\nint b = 1;\n",
    "int a = 2;\nint keep1;\nint keep2;\nint keep3;\nint b = 2;\n",
)
LOOK_ALIKES = "<<<<<<<\tnote\n======= x\n<<<<<<<< eight\n  >>>>>>> indented\n"
GIT_OUTPUTS = [
    ("two conflicts", TWO_CONFLICTS, (*LABELS, "--diff3"), 2),
    ("look-alike lines in the files", tuple(LOOK_ALIKES + t for t in TWO_CONFLICTS), (*LABELS, "--diff3"), 2),
    ("no final newline", tuple(t.rstrip("\n") for t in TWO_CONFLICTS), (*LABELS, "--diff3"), 2),
    ("empty labels", TWO_CONFLICTS, ("-L", "", "-L", "", "-L", "", "--diff3"), 2),
    ("labels with tabs", TWO_CONFLICTS, ("-L", "o\tx", "-L", "b\tx", "-L", "t\tx", "--diff3"), 2),
    ("file names as labels", TWO_CONFLICTS, ("--diff3",), 2),
]


@pytest.mark.parametrize(
    ("texts", "options", "count"), [g[1:] for g in GIT_OUTPUTS], ids=[g[0] for g in GIT_OUTPUTS]
)
def test_git_merge_file_diff3_output_parses_back_into_its_sides(
    tmp_path: Path, texts: tuple[str, str, str], options: tuple[str, ...], count: int
) -> None:
    base, ours, theirs = texts
    status, merged = git_merge_file(tmp_path, base, ours, theirs, *options)
    parts = diff3.parse(merged)

    assert status == count == sum(isinstance(p, Block) for p in parts)
    for side, text in (("ours", ours), ("base", base), ("theirs", theirs)):
        # git ends every conflict block with a newline, so the file's own last newline is lost there.
        assert assembled(parts, side).rstrip("\n") == text.rstrip("\n")
    hunks = [p for p in conflicts.split_diff3(merged) if isinstance(p, conflicts.Hunk3)]
    assert triples(hunks) == triples(rerere.conflict_blocks(merged))


def test_git_merge_file_crlf_output(tmp_path: Path) -> None:
    base, ours, theirs = (t.replace("\n", "\r\n") for t in TWO_CONFLICTS)
    status, merged = git_merge_file(tmp_path, base, ours, theirs, *LABELS, "--diff3")

    assert "<<<<<<< ours\r\n" in merged and "=======\r\n" in merged  # git writes CRLF markers
    parts = diff3.parse(merged)
    assert status == 2 == sum(isinstance(p, Block) for p in parts)
    assert assembled(parts, "ours", crlf=True) == ours and assembled(parts, "theirs", crlf=True) == theirs
    assert triples(rerere.conflict_blocks(merged)) == triples(p for p in parts if isinstance(p, Block))


def test_git_merge_file_zdiff3_output(tmp_path: Path) -> None:
    base, ours, theirs = "a\nb\nc\n", "a\nx\nB1\nz\nc\n", "a\nx\nB2\nz\nc\n"
    status, merged = git_merge_file(tmp_path, base, ours, theirs, *LABELS, "--zdiff3")

    assert status == 1
    assert diff3.parse(merged) == ("a", "x", Block(("B1",), ("b",), ("B2",)), "z", "c")
    assert assembled(diff3.parse(merged), "ours") == ours
    (hunk,) = [p for p in conflicts.split_diff3(merged) if isinstance(p, conflicts.Hunk3)]
    (block,) = rerere.conflict_blocks(merged)
    assert (
        (hunk.ours, hunk.base, hunk.theirs)
        == (block.ours, block.base, block.theirs)
        == (("B1",), ("b",), ("B2",))
    )


def test_git_merge_file_plain_merge_style_is_not_diff3(tmp_path: Path) -> None:
    status, merged = git_merge_file(tmp_path, *TWO_CONFLICTS, *LABELS)

    assert status > 0  # git joins the two conflicts into one block here
    with pytest.raises(Diff3Error, match="not --diff3"):
        diff3.parse(merged)


def test_git_merge_file_with_another_marker_size_is_content(tmp_path: Path) -> None:
    # Sluice runs `git merge-file` with the default size; nine-wide markers are just lines.
    status, merged = git_merge_file(tmp_path, *TWO_CONFLICTS, *LABELS, "--diff3", "--marker-size=9")

    assert status == 2 and "<<<<<<<<< ours" in merged
    assert diff3.parse(merged) == tuple(diff3.split_lines(merged))
    assert not diff3.has_markers(merged)


def test_a_seven_wide_underline_in_the_files_stops_every_reader(tmp_path: Path) -> None:
    base, ours, theirs = (f"Title\n=======\n\n{t}" for t in TWO_CONFLICTS)
    status, merged = git_merge_file(tmp_path, base, ours, theirs, *LABELS, "--diff3")

    assert status == 2
    with pytest.raises(Diff3Error, match="line 2: unexpected ======="):
        diff3.parse(merged)
    verdict = conflicts.classify_file("README.rst", base=base, ours=ours, theirs=theirs, merged=merged)
    assert verdict.cls is conflicts.ConflictClass.UNKNOWN and "conflict-marker line" in verdict.reason
    assert rerere.learn(merged, ours) == {}
