"""Conflict classification and mechanical resolution, checked against real `git merge-file --diff3` output."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from bot.core.conflicts import (
    ConflictClass,
    FileVerdict,
    Hunk3,
    Rule,
    Use,
    _places,
    api_symbols,
    check_resolution,
    classify_file,
    code_use,
    key_of,
    split_diff3,
    unmergeable,
)
from bot.core.diff3 import Diff3Error
from bot.core.rerere import conflict_key
from tests.support.conflict_cases import KINDS, ConflictCase, cases

CASES = cases()
CONFLICTS = [c for c in CASES if c.kind == "content" and c.expected is not None]
MECHANICAL = [c for c in CONFLICTS if c.expected is ConflictClass.MECHANICAL]
CLEAN = [c for c in CASES if c.expected is None]
GIT_LEVEL = [c for c in CASES if c.kind != "content"]


def by_name(items: list[ConflictCase]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("case", items, ids=[c.name for c in items])


def merge_file(tmp_path: Path, base: str, ours: str, theirs: str) -> tuple[int, str]:
    """What the adapter runs for every conflicted file: exit status (conflict count) and the merged text."""
    for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
        (tmp_path / name).write_bytes(text.encode())
    labels = ["-L", "ours", "-L", "base", "-L", "theirs"]
    done = subprocess.run(
        ["git", "merge-file", "-p", "--diff3", *labels, "ours", "base", "theirs"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    return done.returncode, done.stdout.decode()


def grep_uses(case: ConflictCase, tmp_path: Path) -> dict[str, list[Use]]:
    """The adapter's search for fork uses: `git grep -w` over the fork's files for each changed API symbol,
    keeping the lines that use it as code (`code_use`). The case's shared files are upstream's own lines,
    which the adapter leaves out, so they are not written."""
    fork = tmp_path / "fork"
    for path, text in {case.path: case.ours, **case.api_uses}.items():
        (fork / path).parent.mkdir(parents=True, exist_ok=True)
        (fork / path).write_text(text)
    uses: dict[str, list[Use]] = {}
    for symbol in api_symbols(case.path, base=case.base, theirs=case.theirs):
        done = subprocess.run(
            ["git", "grep", "--no-index", "-n", "-w", "-F", "-e", symbol, "--", "."],
            cwd=fork,
            capture_output=True,
            text=True,
            check=False,
        )
        for hit in done.stdout.splitlines():
            path, line, text = hit.split(":", 2)
            if code_use(path, text, symbol, defined_in=case.path):
                uses.setdefault(symbol, []).append(Use(path, int(line), text))
    return uses


def classify_case(case: ConflictCase, tmp_path: Path, *, auto_resolve: bool = True) -> FileVerdict:
    status, merged = merge_file(tmp_path, case.base, case.ours, case.theirs)
    assert status >= 1, "git merged the case cleanly: it is no conflict"
    return classify_file(
        case.path,
        base=case.base,
        ours=case.ours,
        theirs=case.theirs,
        merged=merged,
        uses=grep_uses(case, tmp_path),
        auto_resolve=auto_resolve,
    )


# --- the generated cases ------------------------------------------------------------------------------------


def test_every_class_has_at_least_twenty_distinct_cases() -> None:
    counts = Counter(c.expected for c in CASES)
    assert {cls: counts[cls] >= 20 for cls in ConflictClass} == dict.fromkeys(ConflictClass, True)
    assert counts[None] >= 20
    assert len({c.name for c in CASES}) == len(CASES)
    # One triple appears several times on purpose: with fork uses it is API; without them, or with only
    # mentions and upstream's own callers, mechanical.
    distinct = {(c.base, c.ours, c.theirs, tuple(c.api_uses.items()), tuple(c.shared.items())) for c in CASES}
    assert len(distinct) == len(CASES)
    assert {c.kind for c in CASES} == set(KINDS)
    assert cases() == CASES  # deterministic


def test_only_mechanical_and_clean_cases_carry_the_expected_text() -> None:
    with_text = {c.name for c in CASES if c.expected_text is not None}
    assert with_text == {c.name for c in CASES if c.expected in (ConflictClass.MECHANICAL, None)}
    assert all(c.api_uses for c in CASES if c.expected is ConflictClass.API)


@by_name(CONFLICTS)
def test_case_is_classified_as_labelled(case: ConflictCase, tmp_path: Path) -> None:
    verdict = classify_case(case, tmp_path)
    assert verdict.cls is case.expected, verdict.reason
    if verdict.hunks:  # none only when the merge could not be split at all
        assert verdict.cls is max((h.cls for h in verdict.hunks), key=list(ConflictClass).index)
    else:
        assert verdict.cls is ConflictClass.UNKNOWN and "cannot be split" in verdict.reason
    if case.expected is ConflictClass.MECHANICAL:
        assert verdict.resolved == case.expected_text, verdict.reason
        assert verdict.rules and all(h.rule is not None and h.resolution is not None for h in verdict.hunks)
        assert check_resolution(case.path, case.expected_text or "", reference=case.ours) is None
    else:
        assert verdict.resolved is None
        assert not verdict.rules or any(h.cls is not ConflictClass.MECHANICAL for h in verdict.hunks)


@by_name([c for c in CONFLICTS if c.expected is ConflictClass.API])
def test_api_evidence_names_the_symbol_and_the_fork_uses(case: ConflictCase, tmp_path: Path) -> None:
    verdict = classify_case(case, tmp_path)
    api = [h for h in verdict.hunks if h.cls is ConflictClass.API]
    assert api and api[0].symbol is not None
    assert f"`{api[0].symbol}`" in api[0].evidence
    use_path = next(iter(case.api_uses))
    place = r"lines? \d+(, \d+)* of this file" if use_path == case.path else rf"{re.escape(use_path)}:\d+"
    assert re.search(place, api[0].evidence), api[0].evidence


def test_fork_uses_in_the_conflicted_file_are_named_by_line_and_others_by_path() -> None:
    """Intel's ConcurrencySanitizer.cpp: its 64-character path was repeated for each of seven uses."""
    here = "lib/Dialect/TritonInstrument/Transforms/ConcurrencySanitizer.cpp"
    lines = [(here, 394), (here, 395), ("lib/Other.cpp", 12), (here, 403), (here, 404), (here, 410)]
    uses = [Use(path, line, "") for path, line in lines]
    assert _places(uses[:3], here) == "lines 394, 395 of this file, lib/Other.cpp:12"
    assert _places(uses[:1], here) == "line 394 of this file"
    assert _places(uses, here) == "lines 394, 395, 403, 404 of this file, lib/Other.cpp:12 and 1 more"
    assert _places(uses[2:3], here) == "lib/Other.cpp:12"


@by_name([c for c in CONFLICTS if c.expected is ConflictClass.SEMANTIC])
def test_semantic_evidence_says_where(case: ConflictCase, tmp_path: Path) -> None:
    verdict = classify_case(case, tmp_path)
    semantic = [h for h in verdict.hunks if h.cls is ConflictClass.SEMANTIC]
    assert semantic and "both sides" in semantic[0].evidence
    assert (
        f"fork line {semantic[0].hunk.line}" in semantic[0].evidence or "definition" in semantic[0].evidence
    )
    if "body of" in semantic[0].evidence or "definition of" in semantic[0].evidence:
        assert semantic[0].symbol is not None and f"`{semantic[0].symbol}`" in semantic[0].evidence


@by_name(MECHANICAL)
def test_auto_resolve_off_classifies_but_never_resolves(case: ConflictCase, tmp_path: Path) -> None:
    verdict = classify_case(case, tmp_path, auto_resolve=False)
    assert verdict.cls is ConflictClass.MECHANICAL
    assert verdict.resolved is None and "off" in verdict.reason
    assert all(h.rule is not None and h.resolution is None for h in verdict.hunks)


@by_name(CLEAN)
def test_clean_case_merges_cleanly_to_the_expected_text(case: ConflictCase, tmp_path: Path) -> None:
    status, merged = merge_file(tmp_path, case.base, case.ours, case.theirs)
    assert (status, merged) == (0, case.expected_text)
    assert split_diff3(merged) == merged.splitlines()
    verdict = classify_file(case.path, base=case.base, ours=case.ours, theirs=case.theirs, merged=merged)
    assert (verdict.cls, verdict.hunks, verdict.resolved) == (ConflictClass.MECHANICAL, (), merged)


@by_name(GIT_LEVEL)
def test_git_level_conflicts_are_unknown(case: ConflictCase, tmp_path: Path) -> None:
    if case.kind == "binary":
        status, _ = merge_file(tmp_path, case.base, case.ours, case.theirs)
        assert status < 0 or status > 127, "git merges binary files only by picking a side"
        verdict = classify_file(case.path, base=case.base, ours=case.ours, theirs=case.theirs, merged="")
        assert "binary" in verdict.reason
    else:
        assert "" in (case.base, case.ours, case.theirs)
        verdict = unmergeable(case.path, f"{case.kind}: {case.note}")
        assert verdict.reason == f"{case.kind}: {case.note}"
    assert (verdict.cls, verdict.resolved, verdict.hunks) == (ConflictClass.UNKNOWN, None, ())


# --- splitting the merge ------------------------------------------------------------------------------------

MERGED = """\
keep 1
keep 2
<<<<<<< ours
fork
||||||| base
old
=======
upstream
>>>>>>> theirs
keep 3
"""


def test_split_diff3_gives_clean_lines_and_blocks_with_context() -> None:
    parts = split_diff3(MERGED)
    assert parts == [
        "keep 1",
        "keep 2",
        Hunk3(0, 3, ("old",), ("fork",), ("upstream",), ("keep 1", "keep 2"), ("keep 3",)),
        "keep 3",
    ]
    assert split_diff3(MERGED.removesuffix("\n")) == parts  # the last newline is the caller's business


def test_split_diff3_maps_the_line_onto_ours() -> None:
    # Upstream's clean edit above the block adds two lines to the merge that `ours` does not have.
    merged = "new a\nnew b\n" + MERGED
    ours = "keep 1\nkeep 2\nfork\nkeep 3\n"
    [hunk] = [p for p in split_diff3(merged, ours=ours) if isinstance(p, Hunk3)]
    assert hunk.line == 3
    [unmapped] = [p for p in split_diff3(merged) if isinstance(p, Hunk3)]
    assert unmapped.line == 5


def test_split_diff3_keeps_carriage_returns_on_lines() -> None:
    parts = split_diff3(MERGED.replace("\n", "\r\n"))
    assert parts[0] == "keep 1\r" and isinstance(parts[2], Hunk3) and parts[2].ours == ("fork\r",)


@pytest.mark.parametrize(
    ("merged", "message"),
    [
        ("<<<<<<< ours\nfork\n=======\nupstream\n>>>>>>> theirs\n", "not --diff3"),
        ("<<<<<<< ours\nfork\n||||||| base\nold\n=======\nupstream\n", "never closed"),
        ("a\n=======\nb\n", "unexpected ======="),
        ("<<<<<<< ours\n<<<<<<< ours\n", "unexpected <<<<<<<"),
    ],
)
def test_split_diff3_refuses_what_it_cannot_split(merged: str, message: str) -> None:
    with pytest.raises(Diff3Error, match=message):
        split_diff3(merged)


def test_unsplittable_merge_is_unknown_not_a_crash() -> None:
    merged = "<<<<<<< ours\nfork\n=======\nupstream\n>>>>>>> theirs\n"
    verdict = classify_file("a.txt", base="old\n", ours="fork\n", theirs="upstream\n", merged=merged)
    assert (verdict.cls, verdict.resolved) == (ConflictClass.UNKNOWN, None)
    assert "--diff3" in verdict.reason


# --- resolutions --------------------------------------------------------------------------------------------


def test_file_ending_in_a_block_keeps_the_sides_missing_final_newline(tmp_path: Path) -> None:
    base, ours, theirs = "x = 1\n", "x = 1\ny = 2", "x = 1\nz = 3"
    _, merged = merge_file(tmp_path, base, ours, theirs)
    verdict = classify_file("notes.txt", base=base, ours=ours, theirs=theirs, merged=merged)
    assert (verdict.rules, verdict.resolved) == ((Rule.APPEND_UNION,), "x = 1\ny = 2\nz = 3")


def test_appends_at_the_end_end_with_upstreams_final_newline_after_a_fork_line_without_one(
    tmp_path: Path,
) -> None:
    base, ours, theirs = "x = 1\n", "x = 1\ny = 2", "x = 1\nz = 3\n"
    _, merged = merge_file(tmp_path, base, ours, theirs)
    verdict = classify_file("notes.txt", base=base, ours=ours, theirs=theirs, merged=merged)
    assert (verdict.rules, verdict.resolved) == ((Rule.APPEND_UNION,), "x = 1\ny = 2\nz = 3\n")


def test_crlf_file_resolves_with_its_line_ends(tmp_path: Path) -> None:
    base, ours, theirs = (
        "int a = 1;\r\nint b = 2;\r\n",
        "int a = 1;\r\nint b  = 2;\r\n",
        "int a = 1;\r\nint b = 3;\r\n",
    )
    _, merged = merge_file(tmp_path, base, ours, theirs)
    verdict = classify_file("x.cpp", base=base, ours=ours, theirs=theirs, merged=merged)
    assert (verdict.rules, verdict.resolved) == ((Rule.WHITESPACE,), theirs)


def test_python_reindent_is_not_whitespace(tmp_path: Path) -> None:
    base = "def f(x):\n    if x:\n        y = 1\n    return x\n"
    ours = "def f(x):\n    if x:\n        y = 1\n        return x\n"  # indentation is syntax here
    theirs = "def f(x):\n    if x:\n        y = 1\n    return x + 1\n"
    _, merged = merge_file(tmp_path, base, ours, theirs)
    verdict = classify_file("m.py", base=base, ours=ours, theirs=theirs, merged=merged)
    assert verdict.cls is ConflictClass.SEMANTIC and verdict.resolved is None


def test_a_resolution_that_does_not_parse_is_withheld(tmp_path: Path) -> None:
    # The fork only re-indented, so WHITESPACE takes upstream's side; that side does not parse
    # (a tree-sitter blind spot or a broken commit) while the fork's file does: nothing is written.
    base = "int f() {\n  return 1;\n}\n"
    ours = "int f() {\n    return 1;\n}\n"
    theirs = "int f() {\n  return (1;\n}\n"
    _, merged = merge_file(tmp_path, base, ours, theirs)
    verdict = classify_file("f.cpp", base=base, ours=ours, theirs=theirs, merged=merged)
    assert verdict.rules == (Rule.WHITESPACE,)
    assert verdict.resolved is None and "does not parse" in verdict.reason


def test_an_api_change_that_merged_cleanly_is_noted_in_the_reason(tmp_path: Path) -> None:
    [case] = [c for c in CASES if c.name.startswith("semantic/api-change-elsewhere/")]
    verdict = classify_case(case, tmp_path)
    assert verdict.cls is ConflictClass.SEMANTIC
    assert "note: upstream renamed `isExpensiveLoadOrStore` to `isExpensiveMemoryOp`" in verdict.reason


def test_a_module_wide_api_change_is_noted_briefly(tmp_path: Path) -> None:
    """Upstream gives every function of a module a new first parameter (Triton's move of `semantic.py`'s
    functions into a class); the fork calls them all. Three are described, the rest named."""
    names = [f"op{i:02d}" for i in range(20)]
    base = "".join(f"def {n}(x, builder):\n    return x\n\n\n" for n in names) + "def main():\n    return 0\n"
    theirs = base.replace("(x, builder)", "(self, x)").replace("return 0", "return 1")
    ours = base.replace("return 0", "return 2")
    uses = {n: [Use("third_party/intel/ops.py", i + 1, f"y = {n}(x, b)")] for i, n in enumerate(names)}
    _, merged = merge_file(tmp_path, base, ours, theirs)
    verdict = classify_file("python/m.py", base=base, ours=ours, theirs=theirs, merged=merged, uses=uses)
    assert verdict.cls is ConflictClass.SEMANTIC
    note = verdict.reason.split("; note: ", 1)[1]
    assert note.count("changed the signature of") == 3 and "`op00`" in note and "ops.py:3)" in note
    assert note.endswith(
        "and 17 more changed API(s) the fork uses: " + ", ".join(f"`{n}`" for n in names[3:13]) + ", …"
    )


@pytest.mark.parametrize(
    ("found", "cut", "places"),
    [
        (7, False, "ops.py:1, ops.py:2, ops.py:3, ops.py:4, ops.py:5 and 2 more)"),
        (7, True, "ops.py:1, ops.py:2, ops.py:3, ops.py:4, ops.py:5 and at least 2 more)"),
        (2, True, "ops.py:1, ops.py:2 and perhaps more)"),
        (2, False, "ops.py:1, ops.py:2)"),
    ],
)
def test_uses_from_a_search_cut_at_its_limit_are_counted_as_a_lower_bound(
    tmp_path: Path, found: int, cut: bool, places: str
) -> None:
    """The search for a common name stops at its limit: the uses it found are some, not all, and the
    reason says so rather than give their count as the whole."""
    base = "def op(x, builder):\n    return x\n\n\ndef main():\n    return 0\n"
    theirs = base.replace("(x, builder)", "(self, x)").replace("return 0", "return 1")
    ours = base.replace("return 0", "return 2")
    uses = {"op": [Use("ops.py", i + 1, "y = op(x, b)") for i in range(found)]}
    _, merged = merge_file(tmp_path, base, ours, theirs)
    verdict = classify_file(
        "python/m.py",
        base=base,
        ours=ours,
        theirs=theirs,
        merged=merged,
        uses=uses,
        cut={"op"} if cut else (),
    )
    assert verdict.reason.endswith(f"(fork uses it at {places}")


@pytest.mark.parametrize(
    ("path", "text", "reference", "problem"),
    [
        ("a.cpp", "int x;\n<<<<<<< ours\n", None, "conflict marker left at line 2"),
        ("a.py", "x = 1\n||||||| base\n", "x = 1\n", "conflict marker left at line 2"),
        ("a.md", "Title\n=======\n", None, "conflict marker left at line 2"),
        ("a.md", "a\n>>>>>>> theirs\n", None, "conflict marker left at line 2"),
        ("a.cpp", "int f() {\n  return (1;\n}\n", "int f() {\n  return 1;\n}\n", "C++ does not parse"),
        ("a.h", "struct S {\n  int x\n};\n", None, "C++ does not parse"),
        ("a.py", "def f(:\n    pass\n", "def f():\n    pass\n", "Python does not parse"),
        ("a.py", "def f():\nreturn 1\n", None, "Python does not parse"),
    ],
)
def test_check_resolution_refuses(path: str, text: str, reference: str | None, problem: str) -> None:
    found = check_resolution(path, text, reference=reference)
    assert found is not None and problem in found


@pytest.mark.parametrize(
    ("path", "text", "reference"),
    [
        ("a.cpp", "int f() { return 1; }\n", None),
        ("a.py", "def f():\n    return 1\n", "def f():\n    return 0\n"),
        ("a.rst", "Title\n=======\n", "Title\n=======\n"),  # the fork's own underline is no marker
        ("a.cpp", "int f( {\n", "int f( {\n"),  # already broken in the fork: not this resolution's fault
        ("a.py", "def f(:\n", "def f(:\n"),
        ("a.mlir", "tt.func @f() {\n", None),  # only C++ and Python are parsed
    ],
)
def test_check_resolution_accepts(path: str, text: str, reference: str | None) -> None:
    assert check_resolution(path, text, reference=reference) is None


# --- keys, symbols ------------------------------------------------------------------------------------------


def first_hunk(merged: str) -> Hunk3:
    return next(p for p in split_diff3(merged) if isinstance(p, Hunk3))


SPLITTABLE = [c for c in CONFLICTS if c.name != "unknown/marker-like-lines"]


@by_name(SPLITTABLE[::5])
def test_key_of_is_stable_under_line_shifts(case: ConflictCase, tmp_path: Path) -> None:
    _, merged = merge_file(tmp_path, case.base, case.ours, case.theirs)
    # The same conflict further down a longer file, and in a later run.
    shift = "".join(f"// line {n} added above\n" for n in range(7))
    _, shifted = merge_file(tmp_path, shift + case.base, shift + case.ours, shift + case.theirs)
    hunk, moved = first_hunk(merged), first_hunk(shifted)
    assert moved.line == hunk.line + 7
    assert key_of(moved) == key_of(hunk) == key_of(dataclasses.replace(hunk, index=3, before=()))
    assert re.fullmatch(r"[0-9a-f]{64}", key_of(hunk))


def test_key_of_is_the_key_rerere_stores_resolutions_under() -> None:
    hunk = first_hunk(MERGED)
    assert key_of(hunk) == conflict_key(hunk.base, hunk.ours, hunk.theirs)


def test_key_of_tells_conflicts_and_sides_apart(tmp_path: Path) -> None:
    hunks = [first_hunk(merge_file(tmp_path, c.base, c.ours, c.theirs)[1]) for c in SPLITTABLE]
    # Equal blocks in different files share a key (that is the point of rerere); different ones never do.
    assert len({key_of(h) for h in hunks}) == len({(h.base, h.ours, h.theirs) for h in hunks}) > 50
    hunk = first_hunk(MERGED)
    assert key_of(hunk) != key_of(dataclasses.replace(hunk, ours=hunk.theirs, theirs=hunk.ours))
    assert key_of(hunk) == key_of(dataclasses.replace(hunk, ours=("fork   ",)))  # line-end whitespace


CPP_TWO = "int f(int x) { return x; }\nint g() { return 0; }\n"
PY_TWO = "def f(a):\n    pass\n\n\nclass C:\n    pass\n"


@pytest.mark.parametrize(
    ("path", "base", "theirs", "symbols"),
    [
        ("a.cpp", CPP_TWO, "int f(long x) { return x; }\n", ("f", "g")),  # changed; removed
        ("a.cpp", CPP_TWO, CPP_TWO.replace("return 0", "return 1"), ()),  # bodies are no API
        ("a.py", PY_TWO, PY_TWO.replace("f(a)", "f(a, b=1)").replace("C:", "D:"), ("C", "f")),
        (
            "a.py",
            "class C:\n    def __init__(self):\n        pass\n",
            "class C:\n    def __init__(self, x):\n        pass\n",
            (),
        ),
        ("a.td", 'def TT_A : Op<"a">;\n', 'def TT_B : Op<"a">;\n', ("TT_A",)),
        ("a.mlir", "tt.func @f() {\n}\n", "", ()),  # test functions are no API
        ("README.md", "# f\n", "# g\n", ()),
    ],
)
def test_api_symbols(path: str, base: str, theirs: str, symbols: tuple[str, ...]) -> None:
    assert api_symbols(path, base=base, theirs=theirs) == symbols


def test_a_python_functions_own_local_function_is_no_api() -> None:
    base = "def test_x(device):\n    def kernel(X):\n        pass\n\n\n"
    base += "class C:\n    def m(self):\n        pass\n"
    theirs = base.replace("kernel(X)", "kernel(X, Y)").replace("m(self)", "m(self, y)")
    assert api_symbols("t.py", base=base, theirs=theirs) == ("m",)  # a method is API; `kernel` is a local


@pytest.mark.parametrize(
    ("path", "text", "used"),
    [
        ("lib/A.cpp", "  auto order = getOrder(layout);", True),
        ("lib/A.cpp", "  auto order = ttg::getOrder(layout); // getOrder", True),
        ("lib/A.cpp", "*ptr = getOrder(layout);", True),  # a dereference, not a comment line
        ("lib/A.cpp", "  // getOrder gives the fastest-varying dimension first", False),
        ("lib/A.cpp", "  int x = 1; // was getOrder", False),
        ("lib/A.cpp", " * Like getOrder, for TLX.", False),
        ("lib/A.cpp", "/* getOrder */ int x = 1;", False),
        ("lib/A.cpp", '  llvm::errs() << "getOrder failed";', False),
        ("lib/A.cpp", "  auto order = getOrderForMemory(layout);", False),  # another name
        ("include/A.td", "  let extraClassDeclaration = [{ auto o = getOrder(); }];", True),
        ("python/a.py", "order = getOrder(layout)", False),  # Python cannot call a C++ function
        ("docs/a.md", "Call `getOrder` first.", False),
        ("test/a.mlir", "// CHECK: getOrder", False),
        ("CMakeLists.txt", "add_triton_library(getOrder)", False),
    ],
)
def test_code_use_of_a_cpp_name(path: str, text: str, used: bool) -> None:
    assert code_use(path, text, "getOrder", defined_in="lib/Dialect/TritonGPU/IR/Dialect.cpp") is used


@pytest.mark.parametrize(
    ("path", "text", "used"),
    [
        ("python/a.py", "    return tl.load(ptr)  # load it", True),
        ("python/a.py", "from triton.language import load", True),
        ("python/a.py", "    # load the tile first", False),
        ("python/a.py", "def load(ptr):", False),  # a definition of its own, not a use
        ("python/a.py", "class load:", False),
        ("python/a.py", '    name = "load"', False),
        ("lib/A.cpp", "  auto v = load(ptr);", False),  # C++ cannot call a Python function
        ("test/a.mlir", "  %0 = tt.load %arg0", False),  # an op, not the function
    ],
)
def test_code_use_of_a_python_name(path: str, text: str, used: bool) -> None:
    assert code_use(path, text, "load", defined_in="python/triton/language/core.py") is used


def test_fork_uses_in_the_conflicted_file_itself_count_only_for_fork_lines(tmp_path: Path) -> None:
    [case] = [c for c in CASES if c.name.startswith("mechanical/adjacent/rename-unused-by-fork/")]
    uses = grep_uses(case, tmp_path)
    assert uses, "git grep finds the definition itself in the fork's copy"
    assert classify_case(case, tmp_path).cls is ConflictClass.MECHANICAL  # ... which is no fork use


# --- anchors: edits inside a block are placed only where one placement fits -----------------------------

MISPLACED = [c for c in CONFLICTS if "/misplaced-anchor/" in c.name]


@by_name(MISPLACED)
def test_misplaced_anchor_shapes_name_the_anchor_in_the_evidence(case: ConflictCase, tmp_path: Path) -> None:
    verdict = classify_case(case, tmp_path)
    assert verdict.resolved is None and verdict.cls is case.expected
    assert "not merged as adjacent edits" in verdict.reason, verdict.reason
    assert "which the other side replaced" in verdict.reason or "repeat (`" in verdict.reason


def text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def classify_lines(
    tmp_path: Path, path: str, base: list[str], ours: list[str], theirs: list[str]
) -> FileVerdict:
    status, merged = merge_file(tmp_path, text(base), text(ours), text(theirs))
    assert status >= 1
    return classify_file(path, base=text(base), ours=text(ours), theirs=text(theirs), merged=merged)


DOCS = "See the [docs](https://triton-lang.org)."
NOTES = ["# Notes", "", "## Install", "", "Run `pip install triton`.", "", DOCS, "", "## Usage", "", DOCS, ""]
SECTION = ["## Debugging", "", "Set `TRITON_INTERPRET=1`.", "", DOCS, ""]


def test_an_insertion_beside_a_line_the_fork_only_edited_still_merges(tmp_path: Path) -> None:
    at = NOTES.index("## Usage")
    ours = [*NOTES[:at], "## Usage on Intel GPUs", *NOTES[at + 1 :]]
    theirs = [*NOTES[:at], *SECTION, *NOTES[at:]]
    verdict = classify_lines(tmp_path, "README.md", NOTES, ours, theirs)
    assert verdict.rules == (Rule.ADJACENT,), verdict.reason
    assert verdict.resolved == text([*NOTES[:at], *SECTION, "## Usage on Intel GPUs", *NOTES[at + 1 :]])


def test_an_insertion_beside_a_line_the_fork_rewrote_needs_a_human(tmp_path: Path) -> None:
    at = NOTES.index("## Usage")
    ours = [*NOTES[:at], "## Running on XPU", "", "See docs/xpu.md.", *NOTES[at + 1 :]]
    theirs = [*NOTES[:at], *SECTION, *NOTES[at:]]
    verdict = classify_lines(tmp_path, "README.md", NOTES, ours, theirs)
    assert verdict.cls is ConflictClass.UNKNOWN and verdict.resolved is None
    assert (
        "upstream inserted lines beside base line `## Usage`, which the other side replaced" in verdict.reason
    )


def test_a_file_with_a_mechanical_and_a_semantic_block_is_semantic_and_left_to_a_person(
    tmp_path: Path,
) -> None:
    """The file's class is its worst block's: resolving it as mechanical would drop the semantic block's
    lines (both sides changed `j`) while the whitespace block resolves."""
    base = "int f() {\n  int i = 1;\n  int j = 10;\n  return i + j;\n}\n\n\n\nint g() {\n  return 0;\n}\n"
    ours = base.replace("int j = 10;", "int j = 11;").replace("  return 0;", "  return 0;   ")
    theirs = base.replace("int j = 10;", "int j = 12;").replace("  return 0;", "    return 0;")
    _, merged = merge_file(tmp_path, base, ours, theirs)
    verdict = classify_file("lib/A.cpp", base=base, ours=ours, theirs=theirs, merged=merged)
    assert [h.cls for h in verdict.hunks] == [ConflictClass.SEMANTIC, ConflictClass.MECHANICAL]
    assert verdict.cls is ConflictClass.SEMANTIC and verdict.resolved is None
