"""Conflict classification and mechanical resolution over `git merge-file -p --diff3` output.

Pure functions over strings: no git, no files, no clock. The adapter runs
`git merge-file -p --diff3 -L ours -L base -L theirs OURS BASE THEIRS` for every conflicted file
(ours: fork trunk; base: the upstream commit's parent; theirs: the upstream commit) and hands the
four texts to `classify_file`. Each conflict block (hunk) is classified in this order, the first
that holds winning; a wrong automatic resolution is the worst outcome, so every rule is strict:

0. API, early: upstream's side of this very hunk changes or removes a line naming a symbol whose
   name or signature upstream changed (`api_symbols`) and `uses` holds fork lines using it. The
   text may well merge mechanically, but the fork's uses need porting, so no rule may hide it.
1. MECHANICAL, by the first `Rule` whose preconditions hold exactly:
   - WHITESPACE: the sides are equal up to whitespace (take upstream's), or one side changed only
     whitespace (take the other). Whitespace counts between the tokens of C++, TableGen, MLIR and
     CMake (never inside strings or comments; a line comment or preprocessor line keeps its line
     end); in Python only inside a line (indentation is syntax); in other files only at line ends.
     Never for a hunk with a line in a Python or C++ string literal spanning lines (a triple-quoted
     string, a raw string `R"(…)"`): its spacing is the string's content.
   - INCLUDE_UNION: every line of the hunk is a `#include` / `include` / `import` / `from … import`
     line (blank lines only at its edges, the same on every side), neither side removed or
     reordered a base line and both added some, no two of them binding one Python name to two
     things (`from a import f` and `from b import f`): the union, sorted when the base block, both sides
     and the include lines around the hunk were sorted, else base order with each side's new lines
     where that side put them (the fork's first).
   - APPEND_UNION: both sides kept the hunk's base part as a prefix and only added after it, at
     the end of the file, before the closer of a list or table (Python `[`/`{`/`= (`, C++ brace
     initialisers, CMake command arguments such as `add_triton_library(`), of a C++
     namespace or `#endif`, of a CMake block (`endif()`…), or at a lit `// -----` boundary (an
     insertion git placed earlier is slid down over identical lines first). Each addition is
     bracket-balanced, list items end with `,`, Python appends only at top level, and the two
     additions define no common name nor set one each its own way (a Python assignment, import or
     definition, a list item's key: Python `key:`/`key=`, C++ `{key, …}`/`.field =`; a CMake
     `set`/`option`, a `#define`): kept both, the later would silently override. Result: the
     fork's block, then upstream's (once when equal; list items deduplicated and kept sorted when
     the list was; `// -----` between lit cases).
   - ADJACENT: line diffs base→ours and base→theirs inside the hunk change disjoint base ranges
     and never insert at the same spot (include-only hunks excluded: see INCLUDE_UNION): apply both.
     Only where the edits' anchors are certain: never for a side's insertion beside a base line the
     other side replaced, unless that side's lines still start (for an insertion before) or end (after)
     with the line edited in place (same indentation, most of its text kept; comment lines above it
     belong to it) or it deleted the lines (one gap is left), and
     only when every equivalent alignment of the sides (difflib forward and backward, insertions and
     deletions slid over identical lines) merges to the same text; otherwise the verdict's evidence
     says why ("not merged as adjacent edits: …").
2. API: as in 0, when the hunk merely mentions such a symbol or lies inside its definition.
3. SEMANTIC: both sides changed lines inside one function/method/`tt.func` body (the innermost
   definition in `ours` strictly holding the hunk); or both changed the same base lines of a
   C++/Python/TableGen/MLIR/CMake file elsewhere ("the same statements"); or both sides added a
   definition of the same name, or set one name or key each to its own value (see APPEND_UNION).
4. UNKNOWN: anything else, e.g. both inserted different lines at the same spot outside any body,
   one side removed an include beside the other's new ones, files of other languages, merges that
   cannot be split unambiguously (the inputs themselves hold conflict-marker lines).

A file's class is the worst of its hunks (unknown > semantic > api > mechanical). `resolved` is
set only when every hunk is mechanical, auto-resolution is on and `check_resolution` passes.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import difflib
import itertools
import re
import tokenize
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePosixPath
from types import MappingProxyType

from bot.core import diff3
from bot.core.diff3 import Block, Diff3Error
from bot.core.rerere import conflict_key
from bot.core.symbols import (
    GRAMMARS,
    Definition,
    definitions,
    innermost_names,
    language_of,
    parse_tree,
    suffixes_of,
)

# --- the API ----------------------------------------------------------------------------------------------


class ConflictClass(StrEnum):
    MECHANICAL = "mechanical"
    API = "api"
    SEMANTIC = "semantic"
    UNKNOWN = "unknown"


class Rule(StrEnum):
    """The mechanical rules; see the module docstring for their exact preconditions."""

    WHITESPACE = "whitespace"
    INCLUDE_UNION = "include-union"
    APPEND_UNION = "append-union"
    ADJACENT = "adjacent-edits"


SEVERITY = {
    ConflictClass.MECHANICAL: 0,
    ConflictClass.API: 1,
    ConflictClass.SEMANTIC: 2,
    ConflictClass.UNKNOWN: 3,
}


@dataclass(frozen=True)
class Hunk3:
    """One conflict block of a `--diff3` merge; lines carry no line ends."""

    index: int  # position among the file's conflict blocks, from 0
    line: int  # 1-based line in `ours` where the block's ours part starts (or would, when empty)
    base: tuple[str, ...]
    ours: tuple[str, ...]
    theirs: tuple[str, ...]
    before: tuple[str, ...]  # up to 3 clean lines of the merged text right before the block
    after: tuple[str, ...]  # up to 3 clean lines right after it


@dataclass(frozen=True)
class Use:
    """A fork line that uses a symbol (found by the adapter, e.g. with `git grep -n -w`)."""

    path: str
    line: int
    text: str


@dataclass(frozen=True)
class HunkVerdict:
    hunk: Hunk3
    cls: ConflictClass
    rule: Rule | None  # the mechanical rule that applies, else None
    resolution: tuple[str, ...] | None  # the lines replacing the block, for mechanical hunks
    symbol: str | None  # the symbol the verdict is about (API: the changed one; SEMANTIC: the enclosing one)
    evidence: str  # one human sentence


@dataclass(frozen=True)
class FileVerdict:
    path: str
    cls: ConflictClass
    hunks: tuple[HunkVerdict, ...]
    resolved: str | None  # the whole merged file, only when every hunk resolved and the result checks out
    rules: tuple[Rule, ...]  # rules used, in order of first use
    reason: str


_NO_USES: Mapping[str, Sequence[Use]] = MappingProxyType({})


def unmergeable(path: str, reason: str) -> FileVerdict:
    """A conflict git cannot express as text (binary, modify/delete, rename/delete, …): UNKNOWN."""
    return FileVerdict(path, ConflictClass.UNKNOWN, (), None, (), reason)


def api_symbols(path: str, *, base: str, theirs: str) -> tuple[str, ...]:
    """Plain names (`getOrder`, `load`, `TT_PtrLike`) of definitions in `base` that `theirs` renamed,
    removed or gave another signature; the adapter greps the fork for them and passes the hits as `uses`."""
    return tuple(sorted(_api_changes(path, base=base, theirs=theirs)))


_BLOCK_COMMENT = re.compile(r"/\*.*?(?:\*/|$)")
_USED_FROM = {"cpp": ("cpp", "tablegen"), "tablegen": ("cpp", "tablegen"), "python": ("python",)}


def _calling_languages(defined_in: str) -> tuple[str, ...]:
    """The languages whose files can use a name defined in the file `defined_in`."""
    return _USED_FROM.get(_language(defined_in) or "", ())


def use_suffixes(defined_in: str) -> tuple[str, ...]:
    """The suffixes of the files that can use a name defined in the file `defined_in` (see `code_use`):
    where the adapter searches for fork uses."""
    return suffixes_of(_calling_languages(defined_in))


def code_use(path: str, text: str, name: str, *, defined_in: str) -> bool:
    """Whether a fork line (`git grep`'s one line of `path`) uses `name`, defined in the file `defined_in`,
    as code: in a file of a language that can call it (C++ and TableGen for a C++ or TableGen name, Python
    for a Python one), outside comments and string literals, and not as a Python `def`/`class` of its own.
    A line of a multi-line comment is known by its leading `*` (`* getOrder returns…`); a line of a Python
    docstring is not known."""
    lang = _language(path)
    if lang not in _calling_languages(defined_in):
        return False  # docs, build files, lit tests (`tt.load` is an op, not the function `load`): mentions
    marker = _COMMENT_MARKER[lang]
    if marker == "//":
        stripped = text.strip()
        if stripped == "*" or stripped.startswith(("* ", "*/")):
            return False
        text = _BLOCK_COMMENT.sub(" ", text)
    tokens = [
        m.group()
        for m in _TOKEN[marker].finditer(text)
        if m.group("comment") is None and m.group("string") is None
    ]
    return any(
        token == name and not (lang == "python" and tokens[i - 1 : i] in (["def"], ["class"]))
        for i, token in enumerate(tokens)
    )


def key_of(hunk: Hunk3) -> str:
    """The rerere key of a conflict block: `bot.core.rerere.conflict_key` of its three sides.

    Position, neighbours and the side labels play no part, so the same conflict met again at
    another line (or in another run) has the same key.
    """
    return conflict_key(hunk.base, hunk.ours, hunk.theirs)


def classify_file(
    path: str,
    *,
    base: str,
    ours: str,
    theirs: str,
    merged: str,
    uses: Mapping[str, Sequence[Use]] = _NO_USES,
    cut: Collection[str] = (),
    auto_resolve: bool = True,
) -> FileVerdict:
    """Classify every conflict block of `merged` and resolve the file when all are mechanical.

    `merged` is `git merge-file -p --diff3 -L ours -L base -L theirs` output for these three texts;
    `uses` maps names from `api_symbols` to the fork lines using them (hits in this very file on
    upstream's own lines or on the definition are ignored), `cut` the names whose search stopped at its
    limit (their uses are the first ones found, not all); `auto_resolve=False` classifies only.
    """
    refusal = _refusal(base, ours, theirs)
    if refusal is not None:
        return unmergeable(path, refusal)
    try:
        parts = split_diff3(merged, ours=ours)
    except Diff3Error as err:
        return unmergeable(path, f"cannot split the merge into conflict blocks: {err}")
    file = _File.build(path, base=base, ours=ours, theirs=theirs, parts=parts, uses=uses, cut=cut)
    verdicts = tuple(_classify_hunk(site, file) for site in file.sites)
    return _file_verdict(file, verdicts, parts, merged=merged, auto_resolve=auto_resolve)


# --- splitting the merge ----------------------------------------------------------------------------------

_CONTEXT = 3


def split_diff3(merged: str, *, ours: str | None = None) -> list[str | Hunk3]:
    """Clean lines and conflict blocks of `merged`, in order.

    Lines are split on "\\n" only and keep no line end ("\\r" of CRLF files stays on the line); a
    final newline ends the last line rather than starting an empty one, so "a\\nb\\n" and "a\\nb"
    split alike and the caller decides the file's last newline. `Hunk3.line` counts lines of
    `merged` with every block's ours part kept; given `ours`, it is mapped onto `ours` itself.
    Raises Diff3Error for markers out of order, a block without a `|||||||` base part (not
    `--diff3` output) or one left open.
    """
    blocks = diff3.parse(merged)
    view, starts = _ours_view(blocks)
    to_ours = _line_mapper(view, diff3.split_lines(ours)) if ours is not None else None
    out: list[str | Hunk3] = []
    index = 0
    for position, part in enumerate(blocks):
        if isinstance(part, str):
            out.append(part)
            continue
        start = starts[position]
        line = to_ours(start) if to_ours is not None else start + 1
        before, after = _clean_around(blocks, position)
        out.append(Hunk3(index, line, part.base, part.ours, part.theirs, before, after))
        index += 1
    return out


def _ours_view(blocks: Sequence[str | Block]) -> tuple[list[str], dict[int, int]]:
    """`merged` with every block's ours part kept, and where each block starts in it."""
    view: list[str] = []
    starts: dict[int, int] = {}
    for position, part in enumerate(blocks):
        if isinstance(part, str):
            view.append(part)
        else:
            starts[position] = len(view)
            view.extend(part.ours)
    return view, starts


def _line_mapper(view: list[str], ours: list[str]) -> _LineMap:
    opcodes = difflib.SequenceMatcher(None, view, ours, autojunk=False).get_opcodes()
    return _LineMap(tuple(opcodes))


@dataclass(frozen=True)
class _LineMap:
    """0-based index in the ours view (ours plus upstream's clean edits) → 1-based line in `ours`."""

    opcodes: tuple[tuple[str, int, int, int, int], ...]

    def __call__(self, index: int) -> int:
        starts = [op[1] for op in self.opcodes]
        at = max(bisect.bisect_right(starts, index) - 1, 0)
        tag, i1, _, j1, _ = self.opcodes[at] if self.opcodes else ("equal", 0, 0, 0, 0)
        return (j1 + (index - i1) if tag == "equal" else j1) + 1


def _clean_around(blocks: Sequence[str | Block], position: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    before: list[str] = []
    for part in reversed(blocks[max(position - _CONTEXT, 0) : position]):
        if not isinstance(part, str):
            break
        before.insert(0, part)
    after: list[str] = []
    for part in blocks[position + 1 : position + 1 + _CONTEXT]:
        if not isinstance(part, str):
            break
        after.append(part)
    return tuple(before), tuple(after)


def _refusal(base: str, ours: str, theirs: str) -> str | None:
    if any("\0" in text for text in (base, ours, theirs)):
        return "binary content (NUL bytes): resolve by hand"
    for side, text in (("base", base), ("ours", ours), ("theirs", theirs)):
        for number, line in diff3.marker_lines(text):
            return (
                f"the {side} version itself has a conflict-marker line"
                f" ({side}:{number}: {line.strip()!r}), so the merge cannot be split unambiguously"
            )
    return None


# --- per-file context -------------------------------------------------------------------------------------

_FUNCTION_KINDS = frozenset({"function", "method", "mlir-func"})
_STATEMENT_LANGUAGES = frozenset({"cpp", "python", "tablegen", "mlir", "cmake"})


def _language(path: str) -> str | None:
    name = PurePosixPath(path).name
    if name == "CMakeLists.txt" or name.endswith(".cmake"):
        return "cmake"
    return language_of(path)


@dataclass(frozen=True)
class _Site:
    hunk: Hunk3
    start: int  # index in the ours view where the hunk's ours part starts
    lead: int  # how many clean lines precede the hunk, back to the previous one
    tail: tuple[str, ...]  # clean lines after the hunk, up to the next hunk or the end of the file
    last: bool  # no other hunk follows


@dataclass(frozen=True)
class _File:
    path: str
    lang: str | None
    base_lines: frozenset[str]  # stripped lines of base
    view: tuple[str, ...]  # the merged text with every hunk's ours part: ours plus upstream's clean edits
    sites: tuple[_Site, ...]
    ours_defs: tuple[Definition, ...]
    api: Mapping[str, _ApiChange]
    uses: Mapping[str, Sequence[Use]]
    cut: frozenset[str]  # names whose uses are the first the search found, not all
    newlines: tuple[bool, bool, bool]  # whether base, ours and theirs end with a newline

    @classmethod
    def build(
        cls,
        path: str,
        *,
        base: str,
        ours: str,
        theirs: str,
        parts: Sequence[str | Hunk3],
        uses: Mapping[str, Sequence[Use]],
        cut: Collection[str],
    ) -> _File:
        view: list[str] = []
        sites: list[_Site] = []
        lead = 0
        for position, part in enumerate(parts):
            if isinstance(part, str):
                view.append(part)
                lead += 1
                continue
            tail = _clean_tail(parts, position)
            sites.append(_Site(part, len(view), lead, tail, position + len(tail) + 1 == len(parts)))
            view.extend(part.ours)
            lead = 0
        return cls(
            path,
            _language(path),
            frozenset(line.strip() for line in diff3.split_lines(base)),
            tuple(view),
            tuple(sites),
            definitions(path, ours.encode()),
            _api_changes(path, base=base, theirs=theirs) if uses else {},
            uses,
            frozenset(cut),
            (base.endswith("\n"), ours.endswith("\n"), theirs.endswith("\n")),
        )

    def fork_uses(self, symbol: str) -> tuple[Use, ...]:
        """Uses of `symbol` by fork lines: in this file, upstream's own lines and definitions don't count."""
        own = self._definition_lines(symbol)
        return tuple(
            use
            for use in self.uses.get(symbol, ())
            if use.path != self.path or (use.line not in own and use.text.strip() not in self.base_lines)
        )

    def _definition_lines(self, symbol: str) -> frozenset[int]:
        spans = [d for d in self.ours_defs if _plain_name(d.name) == symbol]
        return frozenset(line for d in spans for line in range(d.start_line, d.end_line + 1))


def _clean_tail(parts: Sequence[str | Hunk3], position: int) -> tuple[str, ...]:
    tail: list[str] = []
    for part in parts[position + 1 :]:
        if not isinstance(part, str):
            break
        tail.append(part)
    return tuple(tail)


# --- classifying one hunk ---------------------------------------------------------------------------------


def _classify_hunk(site: _Site, file: _File) -> HunkVerdict:
    hunk = site.hunk
    api = _api_hit(site, file, early=True)
    if api is not None:
        return HunkVerdict(hunk, ConflictClass.API, None, None, *api)
    for rule, resolve in _RULES:
        found = resolve(site, file)
        if found is not None:
            lines, evidence = found
            return HunkVerdict(hunk, ConflictClass.MECHANICAL, rule, lines, None, evidence)
    doubt = _anchor_doubt(hunk, file.lang) if _adjacent_candidate(hunk, file.lang) else None
    note = f"; not merged as adjacent edits: {doubt}" if doubt else ""
    api = _api_hit(site, file, early=False)
    if api is not None:
        return HunkVerdict(hunk, ConflictClass.API, None, None, api[0], api[1] + note)
    semantic = _semantic(site, file)
    if semantic is not None:
        return HunkVerdict(hunk, ConflictClass.SEMANTIC, None, None, semantic[0], semantic[1] + note)
    evidence = _unknown_evidence(site, file) + note
    return HunkVerdict(hunk, ConflictClass.UNKNOWN, None, None, None, evidence)


# --- tokens and line diffs --------------------------------------------------------------------------------

_STRING = r""""(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'"""
_OPERATORS = r"<<=|>>=|\.\.\.|->|::|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\*\*"
_COMMENT_MARKER = {"cpp": "//", "tablegen": "//", "mlir": "//", "python": "#", "cmake": "#"}
_TOKEN = {
    marker: re.compile(rf"(?P<comment>{re.escape(marker)}.*)|(?P<string>{_STRING})|\w+|{_OPERATORS}|\S")
    for marker in ("//", "#")
}
_FREE_FORM = frozenset({"cpp", "tablegen", "mlir", "cmake"})


def _tokens(line: str, lang: str | None) -> list[str]:
    """Tokens of one line; a line comment (whitespace collapsed) ends with a "\\n" token."""
    out: list[str] = []
    for match in _TOKEN[_COMMENT_MARKER.get(lang or "", "#")].finditer(line):
        if match.group("comment") is not None:
            out += [" ".join(match.group().split()), "\n"]
        else:
            out.append(match.group())
    if lang == "cpp" and line.lstrip().startswith("#") and out[-1:] != ["\n"]:
        out.append("\n")  # a preprocessor directive ends at its line end
    return out


def _code(line: str, lang: str | None) -> str:
    """`line` without comments, strings reduced to `""`: what brackets and line ends are judged on."""
    out: list[str] = []
    for match in _TOKEN[_COMMENT_MARKER.get(lang or "", "#")].finditer(line):
        if match.group("comment") is None:
            out.append('""' if match.group("string") is not None else match.group())
    return " ".join(out)


def _whitespace_key(lines: Sequence[str], lang: str | None) -> tuple[object, ...]:
    if lang in _FREE_FORM:
        return tuple(token for line in lines for token in _tokens(line, lang))
    if lang == "python":
        return tuple((_indent(line), *_tokens(line, lang)) for line in lines if line.strip())
    return tuple(line.rstrip() for line in lines)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


_Change = tuple[int, int, tuple[str, ...]]  # base range [start, end) and what replaces it


def _changes(base: Sequence[str], side: Sequence[str]) -> list[_Change]:
    matcher = difflib.SequenceMatcher(None, list(base), list(side), autojunk=False)
    return [(i1, i2, tuple(side[j1:j2])) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _clash(a: _Change, b: _Change) -> bool:
    """Whether two changes of the same base lines collide: shared lines, or insertions at one spot."""
    (a1, a2, _), (b1, b2, _) = a, b
    if a1 == a2 and b1 == b2:
        return a1 == b1
    if a1 == a2:
        return b1 < a1 < b2
    if b1 == b2:
        return a1 < b1 < a2
    return a1 < b2 and b1 < a2


def _disjoint(ours: Sequence[_Change], theirs: Sequence[_Change]) -> bool:
    return not any(_clash(a, b) for a in ours for b in theirs)


def _share_base_lines(ours: Sequence[_Change], theirs: Sequence[_Change]) -> bool:
    return any(a1 < b2 and b1 < a2 for a1, a2, _ in ours for b1, b2, _ in theirs if a1 < a2 and b1 < b2)


def _apply(base: Sequence[str], changes: Iterable[_Change]) -> tuple[str, ...]:
    out: list[str] = []
    position = 0
    for start, end, lines in sorted(changes, key=lambda change: (change[0], change[1])):
        out += base[position:start]
        out += lines
        position = end
    return (*out, *base[position:])


# --- mechanical rules -------------------------------------------------------------------------------------

_Resolution = tuple[tuple[str, ...], str]  # the lines replacing the block, and the evidence


def _whitespace(site: _Site, file: _File) -> _Resolution | None:
    found = _whitespace_only(site.hunk, file.lang)
    if found is None or _in_multiline_string(site, file):
        return None  # spacing inside a string literal is its content, not layout
    return found


def _whitespace_only(hunk: Hunk3, lang: str | None) -> _Resolution | None:
    ours, base, theirs = (_whitespace_key(side, lang) for side in (hunk.ours, hunk.base, hunk.theirs))
    if ours == theirs:
        return hunk.theirs, "the two sides differ only in whitespace; took upstream's"
    if ours == base:
        return hunk.theirs, "the fork's side only changed whitespace; took upstream's change"
    if theirs == base:
        return hunk.ours, "upstream's side only changed whitespace; kept the fork's change"
    return None


def _in_multiline_string(site: _Site, file: _File) -> bool:
    """Whether a line of the hunk, on any side, lies in a string literal spanning lines (a Python
    triple-quoted string, a C++ raw string); True when that cannot be told (the file does not tokenize)."""
    scan = _STRING_ROWS.get(file.lang or "")
    if scan is None:
        return False
    hunk = site.hunk
    after = file.view[site.start + len(hunk.ours) :]
    for side in (hunk.ours, hunk.base, hunk.theirs):
        rows = scan("".join(line + "\n" for line in (*file.view[: site.start], *side, *after)))
        if rows is None or not rows.isdisjoint(range(site.start, site.start + len(side))):
            return True
    return False


def _python_string_rows(text: str) -> frozenset[int] | None:
    """0-based lines a Python string literal spanning lines touches; None when `text` does not tokenize."""
    rows: set[int] = set()
    opened: list[int] = []  # f-strings from Python 3.12 on: FSTRING_START … FSTRING_END
    try:
        for token in tokenize.generate_tokens(iter(text.splitlines(keepends=True)).__next__):
            name = tokenize.tok_name[token.type]
            if name.endswith("STRING_START"):
                opened.append(token.start[0])
                continue
            if name.endswith("STRING_END") and opened:
                first = opened.pop()
            elif token.type == tokenize.STRING:
                first = token.start[0]
            else:
                continue
            rows.update(range(first - 1, token.end[0]) if first != token.end[0] else ())
    except (tokenize.TokenError, SyntaxError):
        return None
    return frozenset(rows)


_CPP_STRINGS = frozenset({"string_literal", "raw_string_literal", "char_literal"})


def _cpp_string_rows(text: str) -> frozenset[int] | None:
    """0-based lines that a C++ string literal spanning lines (a raw string, a `\\` continuation) touches;
    None when the parse has errors and a raw string could hide in them."""
    root = parse_tree("cpp", text.encode())
    if root.has_error and 'R"' in text:
        return None
    rows: set[int] = set()
    pending = [root]
    while pending:
        node = pending.pop()
        first, last = node.start_point.row, node.end_point.row
        if first == last:
            continue  # nothing on one line spans lines
        if node.type in _CPP_STRINGS:
            rows.update(range(first, last + 1))
        else:
            pending.extend(node.children)
    return frozenset(rows)


_STRING_ROWS: Mapping[str, Callable[[str], frozenset[int] | None]] = {
    "python": _python_string_rows,
    "cpp": _cpp_string_rows,
}


_INCLUDE_LINE = {
    "cpp": re.compile(r'#\s*include\s*(?:<[^>]+>|"[^"]+")\s*(?://.*)?'),
    "tablegen": re.compile(r'include\s+"[^"]+"\s*(?://.*)?'),
    "python": re.compile(
        r"(?:from\s+\.*[\w.]*\s+import\s+(?:\*|\w+(?:\s+as\s+\w+)?(?:\s*,\s*\w+(?:\s+as\s+\w+)?)*)"
        r"|import\s+[\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)\s*(?:#.*)?"
    ),
}


def _is_include(line: str, lang: str | None) -> bool:
    pattern = _INCLUDE_LINE.get(lang or "")
    return pattern is not None and pattern.fullmatch(line.strip()) is not None


def _include_only(hunk: Hunk3, lang: str | None) -> bool:
    lines = [line for side in (hunk.base, hunk.ours, hunk.theirs) for line in side if line.strip()]
    return (
        bool(lines)
        and all(_is_include(line, lang) for line in lines)
        and len({_indent(x) for x in lines}) == 1
    )


def _include_union(site: _Site, file: _File) -> _Resolution | None:
    hunk = site.hunk
    if not _include_only(hunk, file.lang):
        return None
    framed = _unframe((hunk.base, hunk.ours, hunk.theirs))
    if framed is None:
        return None
    lead, (base, ours, theirs), trail = framed
    if not (_keeps(base, ours) and _keeps(base, theirs)):
        return None
    ours_new, theirs_new = ([line for line in side if line not in base] for side in (ours, theirs))
    if not (ours_new and theirs_new):
        return None
    if _rebound_names(ours_new, theirs_new, file.lang, items=False):
        return None  # two Python imports binding one name: the later would shadow the other
    around = (_edge_includes(reversed(hunk.before), file.lang)[::-1], _edge_includes(hunk.after, file.lang))
    union = _sorted_union(base, ours, theirs, around)
    if union is not None:
        return (*lead, *union, *trail), "both sides added includes to a sorted block: sorted union"
    union = _positional_union(base, ours, theirs)
    return (*lead, *union, *trail), "both sides added includes: union in base order, the fork's first"


def _unframe(
    sides: tuple[Sequence[str], ...],
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...], tuple[str, ...]] | None:
    """Sides without blank edge lines (the same on every side); None when blank lines sit inside."""
    frames = set()
    cores = []
    for side in sides:
        filled = [i for i, line in enumerate(side) if line.strip()]
        first, last = (filled[0], filled[-1] + 1) if filled else (len(side), len(side))
        frames.add((tuple(side[:first]), tuple(side[last:])))
        core = tuple(side[first:last])
        if any(not line.strip() for line in core):
            return None
        cores.append(core)
    if len(frames) != 1:
        return None
    lead, trail = frames.pop()
    return lead, tuple(cores), trail


def _keeps(base: Sequence[str], side: Sequence[str]) -> bool:
    """`side` holds every base line once, in base order (it only added lines)."""
    kept = set(base)
    return len(set(side)) == len(side) and [line for line in side if line in kept] == list(base)


def _edge_includes(lines: Iterable[str], lang: str | None) -> list[str]:
    out: list[str] = []
    for line in lines:
        if not _is_include(line, lang):
            break
        out.append(line)
    return out


_SortKey = Callable[[str], str]
_SORT_KEYS: tuple[_SortKey, ...] = (str.strip, lambda line: line.strip().casefold())


def _is_sorted(lines: Sequence[str], key: _SortKey) -> bool:
    return all(key(a) <= key(b) for a, b in itertools.pairwise(lines))


def _sorted_union(
    base: Sequence[str], ours: Sequence[str], theirs: Sequence[str], around: tuple[list[str], list[str]]
) -> tuple[str, ...] | None:
    before, after = around
    if len(before) + len(base) + len(after) < 2:
        return None  # too little to tell whether the block is kept sorted
    for key in _SORT_KEYS:
        if all(_is_sorted([*before, *side, *after], key) for side in (base, ours, theirs)):
            return tuple(sorted(dict.fromkeys([*ours, *theirs]), key=key))
    return None


def _positional_union(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]) -> tuple[str, ...]:
    ours_gaps, theirs_gaps = _gaps(base, ours), _gaps(base, theirs)
    present = set(ours)
    out: list[str] = []
    for gap in range(len(base) + 1):
        out += ours_gaps[gap] + [line for line in theirs_gaps[gap] if line not in present]
        if gap < len(base):
            out.append(base[gap])
    return tuple(out)


def _gaps(base: Sequence[str], side: Sequence[str]) -> list[list[str]]:
    """The lines `side` added before each base line, and after the last one."""
    gaps: list[list[str]] = [[] for _ in range(len(base) + 1)]
    gap = 0
    for line in side:
        if gap < len(base) and line == base[gap]:
            gap += 1
        else:
            gaps[gap].append(line)
    return gaps


@dataclass(frozen=True)
class _Insertion:
    """Both sides' additions as pure insertions at one point, possibly slid over identical lines."""

    ours: tuple[str, ...]
    theirs: tuple[str, ...]
    before: tuple[str, ...]  # the ours view up to the insertion point
    after: tuple[str, ...]  # clean lines from the insertion point to the next hunk
    at_end: bool  # only blank lines follow, to the end of the file


@dataclass(frozen=True)
class _Point:
    kind: str  # eof, lit, list, args, block
    items: tuple[str, ...] = ()  # list items already before the insertion point (list and args)
    what: str = "the end of the file"


def _append_union(site: _Site, file: _File) -> _Resolution | None:
    head, tail = file.view[: site.start], site.tail
    for insertion in _insertions(site, file):
        point = _append_point(insertion, file)
        if point is None or not _additions_fit(point, insertion, file):
            continue
        combined = _combine(point, insertion, file)
        if combined is None:
            continue
        # The whole stretch around the point; the block's resolution is what lies between the clean lines.
        full = (*insertion.before, *combined, *insertion.after)
        if full[: len(head)] != head or full[len(full) - len(tail) :] != tail:
            continue
        same = insertion.ours == insertion.theirs
        order = "once (both added the same lines)" if same else "the fork's, then upstream's"
        return full[len(head) : len(full) - len(tail)], f"both sides appended at {point.what}: {order}"
    return None


def _insertions(site: _Site, file: _File) -> list[_Insertion]:
    """The hunk as two pure insertions: where git put them, then slid down, then up, over identical lines.

    An insertion next to lines equal to its own edge lines can sit at several places with the same
    result (git may pick the middle of a lit case's header); each place is judged on its own.
    """
    hunk = site.hunk
    size = len(hunk.base)
    if hunk.ours[:size] != hunk.base or hunk.theirs[:size] != hunk.base:
        return []
    ours, theirs = hunk.ours[size:], hunk.theirs[size:]
    if not ours or not theirs:
        return []
    lines = (*file.view[: site.start], *hunk.base, *site.tail)
    point = site.start + size
    down = _slide_room(ours, theirs, lines[point:])
    up = _slide_room(ours[::-1], theirs[::-1], lines[point - size - site.lead : point][::-1])
    shifts = [*range(down + 1), *range(-1, -up - 1, -1)]
    return [_insertion_at(ours, theirs, lines, point, shift, last=site.last) for shift in shifts]


def _slide_room(ours: Sequence[str], theirs: Sequence[str], next_lines: Sequence[str]) -> int:
    limit = min(len(ours), len(theirs), len(next_lines))
    room = 0
    while room < limit and ours[room] == theirs[room] == next_lines[room]:
        room += 1
    return room


def _insertion_at(
    ours: tuple[str, ...],
    theirs: tuple[str, ...],
    lines: tuple[str, ...],
    point: int,
    shift: int,
    *,
    last: bool,
) -> _Insertion:
    if shift >= 0:
        moved = lines[point : point + shift]
        ours, theirs = (*ours[shift:], *moved), (*theirs[shift:], *moved)
    else:
        moved = lines[point + shift : point]
        ours, theirs = (*moved, *ours[:shift]), (*moved, *theirs[:shift])
    after = lines[point + shift :]
    return _Insertion(ours, theirs, lines[: point + shift], after, last and not _first_filled(after))


_LIT_SEPARATOR = "// -----"
_CLOSER = re.compile(r"\s*([)\]}])[)\]}>;,]*\s*(?://.*|#.*)?")
_CMAKE_BLOCK_END = re.compile(r"\s*end(?:if|foreach|while|function|macro)\s*\(.*\)\s*(?:#.*)?", re.IGNORECASE)
_CMAKE_BLOCK_COMMANDS = frozenset({"if", "elseif", "else", "while", "foreach", "function", "macro"})
_CPP_NAMESPACE = re.compile(r"(?:inline\s+)?namespace(?:\s+[\w:\s]+)?")


def _first_filled(lines: Iterable[str]) -> str | None:
    return next((line for line in lines if line.strip()), None)


def _is_separator(line: str | None) -> bool:
    return line is not None and line.strip() == _LIT_SEPARATOR


def _append_point(insertion: _Insertion, file: _File) -> _Point | None:
    """What the insertion point is, when it is one where appending both sides is safe."""
    if file.lang == "mlir":
        last_before = _first_filled(reversed(insertion.before))
        if insertion.at_end or _is_separator(last_before) or _is_separator(_first_filled(insertion.after)):
            return _Point("lit", what="a lit `// -----` boundary")
        return None
    if insertion.at_end:
        return _Point("eof")
    closer = insertion.after[0] if insertion.after else ""
    if file.lang == "cmake" and _CMAKE_BLOCK_END.fullmatch(closer):
        return _Point("block", what=f"the end of a CMake block (`{closer.strip()}`)")
    if file.lang in ("cpp", "tablegen") and closer.strip().startswith("#endif"):
        return _Point("block", what="the end of a `#if` block")
    match = _CLOSER.fullmatch(closer)
    return _closed_point(match.group(1), insertion.before, file.lang) if match else None


def _closed_point(closer: str, before: Sequence[str], lang: str | None) -> _Point | None:
    found = _opener(before, closer, lang)
    if found is None:
        return None
    index, prefix = found
    items = tuple(line for line in before[index + 1 :] if line.strip())
    opener = before[index].strip()
    if lang == "cmake" and closer == ")":
        command = re.search(r"(\w+)$", prefix)
        if command and command.group(1).lower() not in _CMAKE_BLOCK_COMMANDS:
            return _Point("args", items, f"the end of `{opener}`")
    elif lang == "python" and (closer in "]}" or prefix.endswith("=")):
        return _Point("list", items, f"the end of the list `{opener}`")
    elif lang == "cpp" and closer == "}":
        if _CPP_NAMESPACE.fullmatch(prefix):
            return _Point("block", what=f"the end of `{opener}`")
        # Brace initialisers only; enums stay out, since appending renumbers upstream's enumerators.
        if prefix.endswith(("=", "(", ",", "{", "return")):
            return _Point("list", items, f"the end of the initializer `{opener}`")
    return None


_PAIRS = {")": "(", "]": "[", "}": "{"}


def _opener(lines: Sequence[str], closer: str, lang: str | None) -> tuple[int, str] | None:
    """The line with the bracket that `closer` (after `lines`) closes, and the code before that bracket."""
    pending: list[str] = [closer]
    for index in range(len(lines) - 1, -1, -1):
        code = _code(lines[index], lang)
        for column in range(len(code) - 1, -1, -1):
            char = code[column]
            if char in _PAIRS:
                pending.append(char)
            elif char in "([{":
                if _PAIRS[pending.pop()] != char:
                    return None
                if not pending:
                    return index, code[:column].strip()
    return None


def _balanced(lines: Sequence[str], lang: str | None) -> bool:
    depth: list[str] = []
    for line in lines:
        for char in _code(line, lang):
            if char in "([{":
                depth.append(char)
            elif char in _PAIRS and (not depth or depth.pop() != _PAIRS[char]):
                return False
    return not depth


def _additions_fit(point: _Point, insertion: _Insertion, file: _File) -> bool:
    for added in (insertion.ours, insertion.theirs):
        if not _balanced(added, file.lang):
            return False
        codes = [_code(line, file.lang) for line in added]
        last = _first_filled(reversed(codes))
        if point.kind == "list" and (last is None or not last.rstrip().endswith(",")):
            return False
        if point.kind == "args" and any("(" in code or ")" in code for code in codes):
            return False  # a CMake argument list holds arguments, not commands
    # Where indentation is syntax an indented block continues the block above it: the fork's still
    # follows what it followed, but upstream's would now continue the fork's.
    indented = (_first_filled(insertion.theirs) or "")[:1].isspace()
    if point.kind == "eof" and file.lang in (None, "python") and indented:
        return False
    if _common_definitions(insertion.ours, insertion.theirs, file.path):
        return False
    return not _rebound_names(insertion.ours, insertion.theirs, file.lang, items=point.kind == "list")


def _common_definitions(ours: Sequence[str], theirs: Sequence[str], path: str) -> tuple[str, ...]:
    names = [{d.name for d in definitions(path, "\n".join(side).encode())} for side in (ours, theirs)]
    return tuple(sorted(names[0] & names[1]))


# --- names and keys the additions set ---------------------------------------------------------------------

_Bindings = dict[str, set[str]]  # a name or key → what each statement or item setting it gives it
_SETTER = {
    "cmake": re.compile(r"\s*(?:set|option)\s*\(\s*([\w.-]+)", re.IGNORECASE),
    "cpp": re.compile(r"\s*#\s*define\s+(\w+)"),
    "python": re.compile(r"([A-Za-z_][\w.]*(?:\[[^\]]*\])?)\s*(?::[^=]*)?=(?!=)"),  # lines that do not parse
}


def _rebound_names(ours: Sequence[str], theirs: Sequence[str], lang: str | None, *, items: bool) -> list[str]:
    """Names (or, for list items, keys) both additions set, each its own way: kept both, the later one
    would silently override the earlier."""
    found = [_bindings(side, lang, items=items) for side in (ours, theirs)]
    return sorted(name for name in found[0].keys() & found[1].keys() if found[0][name] != found[1][name])


def _bindings(lines: Sequence[str], lang: str | None, *, items: bool) -> _Bindings:
    if items:
        return _item_keys(lines, lang)
    if lang == "python":
        bound = _python_bindings(lines)
        if bound is not None:
            return bound
    found: _Bindings = {}
    pattern = _SETTER.get(lang or "")
    for line in lines:
        match = pattern.match(line) if pattern is not None else None
        if match and not (lang == "cmake" and f"${{{match.group(1)}}}" in line):  # `set(X "${X} …")` adds
            found.setdefault(match.group(1), set()).add(line.strip())
    return found


def _item_keys(lines: Sequence[str], lang: str | None) -> _Bindings:
    """The key of each list item (a Python `key: value` or `key=value`, a C++ `{key, value}` or
    `.field = value`), with the item's lines."""
    found: _Bindings = {}
    for item in _items(lines, lang):
        key = _item_key_of(item[0], lang)
        if key is not None:
            found.setdefault(key, set()).add(" ".join(line.strip() for line in item))
    return found


def _items(lines: Sequence[str], lang: str | None) -> list[list[str]]:
    """`lines` as list items: an item goes on over the next lines while its brackets are open."""
    items: list[list[str]] = []
    depth = 0
    for line in lines:
        if depth == 0 or not items:
            items.append([])
        items[-1].append(line)
        code = _code(line, lang)
        depth = max(depth + sum(map(code.count, "([{")) - sum(map(code.count, ")]}")), 0)
    return items


def _item_key_of(line: str, lang: str | None) -> str | None:
    tokens = [
        m for m in _TOKEN[_COMMENT_MARKER.get(lang or "", "#")].finditer(line) if not m.group("comment")
    ]
    first = tokens[0].group() if tokens else "lambda"
    stops: tuple[str, ...] = (":", "=")  # Python `key: value,` / `key=value,`, C++ `.field = value,`
    if lang == "cpp" and first == "{":
        tokens, stops = tokens[1:], (",",)  # `{key, value},`
    elif first == "lambda" or (lang == "cpp" and first not in (".", "[")):
        return None
    depth = 0
    for token in tokens:
        if depth == 0 and token.group() in stops:
            key = line[tokens[0].start() : token.start()].strip()
            if lang == "python":
                return _literal(key)
            # `{key, value}` is a table's entry only when led by a name or a string: `{16, 16, 16}` is a row
            # of numbers, and `{.m = 16, …}` an initializer, one value in a list of them.
            return key if first != "{" or _ENTRY_KEY.fullmatch(key) else None
        depth += (token.group() in ("(", "[", "{")) - (token.group() in (")", "]", "}"))
    return None


_ENTRY_KEY = re.compile(r'[A-Za-z_][\w:]*|"(?:[^"\\]|\\.)*"')


def _literal(key: str) -> str | None:
    """A Python key as its value is spelt by `repr` (`"a"` and `'a'` are one key)."""
    try:
        return repr(ast.literal_eval(key))
    except (SyntaxError, ValueError):
        return key or None


def _python_bindings(lines: Sequence[str]) -> _Bindings | None:
    """Names the top-level and class-body statements bind (assignments, imports, definitions), with what
    they bind them to; None when the lines do not parse on their own."""
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return None
    return _statement_bindings(tree.body, prefix="")


def _statement_bindings(body: Sequence[ast.stmt], *, prefix: str) -> _Bindings:
    found: _Bindings = {}
    for node in body:
        for name, meaning in _bound_by(node):
            found.setdefault(prefix + name, set()).add(meaning)
        if isinstance(node, ast.ClassDef):
            for name, meanings in _statement_bindings(node.body, prefix=f"{prefix}{node.name}.").items():
                found.setdefault(name, set()).update(meanings)
    return found


def _bound_by(node: ast.stmt) -> list[tuple[str, str]]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return list(_import_bindings(node))
    if isinstance(node, ast.Assign):
        return [(name, ast.dump(node.value)) for target in node.targets for name in _target_names(target)]
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return [(name, ast.dump(node.value)) for name in _target_names(node.target)]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [(node.name, ast.dump(node))]
    return []


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [name for element in target.elts for name in _target_names(element)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return [ast.unparse(target)]  # `CONFIG["key"] = …`, `obj.attr = …`


def _import_bindings(node: ast.Import | ast.ImportFrom) -> Iterable[tuple[str, str]]:
    """(the name an import binds, what it binds it to): `import a.b` binds `a` to the package `a`."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            top = alias.name.split(".")[0]
            yield (alias.asname, alias.name) if alias.asname else (top, top)
        return
    module = "." * node.level + (node.module or "")
    for alias in node.names:
        if alias.name != "*":
            yield alias.asname or alias.name, f"{module}:{alias.name}"


def _combine(point: _Point, insertion: _Insertion, file: _File) -> tuple[str, ...] | None:
    ours, theirs = insertion.ours, insertion.theirs
    if ours == theirs:
        return ours
    if point.kind == "lit":
        return _lit_join(ours, theirs)
    if point.kind in ("list", "args"):
        return _item_union(point, ours, theirs, file.lang)
    if ours[-1].strip() and theirs[0].strip() and (not ours[0].strip() or not theirs[-1].strip()):
        return (*ours, "", *theirs)  # blocks separated by blank lines keep that style between them
    return (*ours, *theirs)


def _lit_join(ours: Sequence[str], theirs: Sequence[str]) -> tuple[str, ...]:
    ours_ends = _is_separator(_first_filled(reversed(ours)))
    theirs_starts = _is_separator(_first_filled(theirs))
    if ours_ends and theirs_starts:
        cut = next(i for i, line in enumerate(theirs) if line.strip()) + 1
        return (*ours, *_strip_blank(theirs[cut:], leading=True))
    if ours_ends or theirs_starts:
        return (*ours, *theirs)
    return (*_strip_blank(ours, leading=False), "", _LIT_SEPARATOR, "", *_strip_blank(theirs, leading=True))


def _strip_blank(lines: Sequence[str], *, leading: bool) -> tuple[str, ...]:
    out = list(lines)
    while out and not out[0 if leading else -1].strip():
        out.pop(0 if leading else -1)
    return tuple(out)


def _item_union(
    point: _Point, ours: Sequence[str], theirs: Sequence[str], lang: str | None
) -> tuple[str, ...]:
    """List items: the fork's, then upstream's not already there; sorted when the list was.

    Lines before the additions that are not items themselves (a CMake `LINK_LIBS PUBLIC` keyword) do
    not stop the union, only the sorting, which needs a list made of items alone.
    """
    if not all(_is_item(line, point.kind, lang) for line in (*ours, *theirs)):
        return (*ours, *theirs)
    items = [line for line in point.items if _is_item(line, point.kind, lang)]
    present = {_item_key(line) for line in (*items, *ours)}
    new = [line for line in theirs if _item_key(line) not in present]
    if len(point.items) >= 2 and len(items) == len(point.items):
        for key in map(_by_item, _SORT_KEYS):
            if all(_is_sorted([*point.items, *side], key) for side in (ours, theirs)):
                return tuple(sorted([*ours, *new], key=key))
    return (*ours, *new)


def _by_item(key: _SortKey) -> _SortKey:
    return lambda line: key(_item_key(line))


def _item_key(line: str) -> str:
    return line.strip().removesuffix(",").strip()


def _is_item(line: str, kind: str, lang: str | None) -> bool:
    """One list item per line: a CMake argument, or a balanced entry ending with `,`."""
    code = _code(line, lang).strip()
    if kind == "args":
        return bool(code) and len(line.split()) == 1 and "(" not in code and ")" not in code
    return code.endswith(",") and _balanced([line], lang)


def _adjacent(site: _Site, file: _File) -> _Resolution | None:
    hunk = site.hunk
    if not _adjacent_candidate(hunk, file.lang) or _anchor_doubt(hunk, file.lang) is not None:
        return None
    ours, theirs = _changes(hunk.base, hunk.ours), _changes(hunk.base, hunk.theirs)
    evidence = "the sides changed different lines that merely touch: applied both"
    return _apply(hunk.base, [*ours, *theirs]), evidence


def _adjacent_candidate(hunk: Hunk3, lang: str | None) -> bool:
    """Whether the line diffs of the two sides, as difflib aligns them, change disjoint base ranges."""
    if _include_only(hunk, lang):
        return False  # include blocks merge only by INCLUDE_UNION, which refuses removals
    ours, theirs = _changes(hunk.base, hunk.ours), _changes(hunk.base, hunk.theirs)
    return bool(ours and theirs) and _disjoint(ours, theirs)


def _anchor_doubt(hunk: Hunk3, lang: str | None) -> str | None:
    """Why the sides' edits cannot be placed by their anchors alone, or None when only one placement fits.

    diff3 positions the block, not the edits inside it: those are placed by the base lines around them.
    An insertion next to a base line the other side replaced has lost that anchor; and when an edit's
    edge lines repeat the lines beside it, it can be aligned in several ways, which must all merge alike.
    """
    base = hunk.base
    ways = [(o, t) for o in _alignments(base, hunk.ours) for t in _alignments(base, hunk.theirs)]
    for ours, theirs in ways:
        replaced = _replaced_anchor(base, ours, theirs, lang)
        if replaced is not None:
            inserter, line = replaced
            anchor = base[line].strip()
            return f"{inserter} inserted lines beside base line `{anchor}`, which the other side replaced"
    merges = {_apply(base, [*ours, *theirs]) if _disjoint(ours, theirs) else None for ours, theirs in ways}
    if len(merges) > 1:
        repeated = _repeated_edge(base, [change for way in ways for side in way for change in side])
        quoted = f" (`{repeated.strip()}`)" if repeated else ""
        return f"the lines around the edits repeat{quoted}, so they can be aligned in more than one way"
    return None


def _repeated_edge(base: Sequence[str], changes: Iterable[_Change]) -> str | None:
    """A base line beside a change that equals the change's own edge line (what lets it slide)."""
    for start, end, lines in changes:
        if lines and start < len(base) and lines[0] == base[start] and start == end:
            return base[start]
        if lines and start > 0 and lines[-1] == base[start - 1]:
            return base[start - 1]
    return None


def _replaced_anchor(
    base: Sequence[str], ours: Sequence[_Change], theirs: Sequence[_Change], lang: str | None
) -> tuple[str, int] | None:
    """(who inserted, the base line) for an insertion beside a base line the other side replaced."""
    for inserter, inserted, other in (("upstream", theirs, ours), ("the fork", ours, theirs)):
        for point, end, _ in inserted:
            if point != end:
                continue
            for start, stop, lines in other:
                if start < stop and point in (start, stop):
                    anchor = start if point == start else stop - 1
                    if not _keeps_anchor(base[anchor], lines, after=point == stop, lang=lang):
                        return inserter, anchor
    return None


_KEPT_SHARE = 0.6


def _keeps_anchor(anchor: str, lines: Sequence[str], *, after: bool, lang: str | None) -> bool:
    """Whether the other side's `lines`, which replace a range starting (or, `after`, ending) with the
    `anchor` line, still hold it at that edge, edited in place; then an insertion beside it keeps its place.

    A deletion leaves a single gap, so the insertion's place is certain too. Comment lines belong to the
    line below them, so an insertion before them is still an insertion before that line.
    """
    if not lines:
        return True
    if after:
        edge: str | None = lines[-1]
    else:
        code = lang in _COMMENT_MARKER
        edge = next((line for line in lines if not (code and _is_comment(line, lang))), None)
    return edge is not None and _edited_in_place(anchor, edge)


def _edited_in_place(old: str, new: str) -> bool:
    """Same indentation, and most of the old line's text kept."""
    if _indent(old) != _indent(new):
        return False
    before, after = old.strip(), new.strip()
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    kept = sum(block.size for block in matcher.get_matching_blocks())
    return bool(before) and kept >= _KEPT_SHARE * len(before)


def _is_comment(line: str, lang: str | None) -> bool:
    return bool(line.strip()) and not _code(line, lang).strip()


def _alignments(base: Sequence[str], side: Sequence[str]) -> list[list[_Change]]:
    """Equivalent line diffs base → side: difflib's forward and backward ones, each slid up and down."""
    size = len(base)
    forward = _changes(base, side)
    backward = [
        (size - end, size - start, tuple(reversed(lines)))
        for start, end, lines in reversed(_changes(base[::-1], side[::-1]))
    ]
    found: list[list[_Change]] = []
    for changes in (forward, backward):
        for way in (changes, _slid(base, changes, down=False), _slid(base, changes, down=True)):
            if way not in found:
                found.append(way)
    return found


def _slid(base: Sequence[str], changes: Sequence[_Change], *, down: bool) -> list[_Change]:
    """`changes` with every pure insertion and deletion moved as far as identical lines allow."""
    out = list(changes)
    order = range(len(out) - 1, -1, -1) if down else range(len(out))
    for index in order:
        start, end, lines = out[index]
        if (start == end) == (not lines):
            continue  # a replacement, or nothing: no slide
        low = out[index - 1][1] if index > 0 else 0
        high = out[index + 1][0] if index + 1 < len(out) else len(base)
        out[index] = _slide(base, (start, end, lines), low, high, down=down)
    return out


def _slide(base: Sequence[str], change: _Change, low: int, high: int, *, down: bool) -> _Change:
    start, end, lines = change
    if down:
        while end < high and (lines[0] if lines else base[start]) == base[end]:
            lines = (*lines[1:], base[end]) if lines else lines
            start, end = start + 1, end + 1
    else:
        while start > low and (lines[-1] if lines else base[end - 1]) == base[start - 1]:
            lines = (base[start - 1], *lines[:-1]) if lines else lines
            start, end = start - 1, end - 1
    return start, end, lines


_RULES = (
    (Rule.WHITESPACE, _whitespace),
    (Rule.INCLUDE_UNION, _include_union),
    (Rule.APPEND_UNION, _append_union),
    (Rule.ADJACENT, _adjacent),
)


# --- API changes ------------------------------------------------------------------------------------------

_API_KINDS = {
    "cpp": frozenset({"function", "method", "class", "struct", "union", "enum"}),
    "python": frozenset({"function", "method", "class"}),
    "tablegen": frozenset({"op", "tdclass", "multiclass"}),
}
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class _ApiChange:
    symbol: str
    old: str  # a base signature, on one line
    new: str | None  # theirs' signature under the same name; None when removed (or renamed)
    renamed_to: str | None

    def describe(self) -> str:
        if self.renamed_to is not None:
            return f"upstream renamed `{self.symbol}` to `{self.renamed_to}`"
        if self.new is None:
            return f"upstream removed `{self.symbol}` (`{self.old}`)"
        return f"upstream changed the signature of `{self.symbol}` from `{self.old}` to `{self.new}`"


_Signatures = dict[str, dict[tuple[str, ...], str]]  # plain name → signature tokens → as written


def _api_changes(path: str, *, base: str, theirs: str) -> dict[str, _ApiChange]:
    lang = language_of(path)
    if lang not in _API_KINDS or "\0" in base or "\0" in theirs:
        return {}
    old, new = _signatures(path, base, lang), _signatures(path, theirs, lang)
    added = {name: signatures for name, signatures in new.items() if name not in old}
    changes: dict[str, _ApiChange] = {}
    for name, signatures in old.items():
        kept = new.get(name, {})
        if kept and signatures.keys() <= kept.keys():
            continue
        before = next(text for tokens, text in signatures.items() if tokens not in kept)
        after = next((text for tokens, text in kept.items() if tokens not in signatures), None)
        renamed = None if kept else _renamed_to(name, signatures, added)
        changes[name] = _ApiChange(name, before, after, renamed)
    return changes


def _plain_name(qualified: str) -> str:
    return re.split(r"::|\.", qualified)[-1]


def _signatures(path: str, source: str, lang: str) -> _Signatures:
    lines = diff3.split_lines(source)
    found: _Signatures = {}
    defined = definitions(path, source.encode())
    functions = {d.name for d in defined if d.kind in _FUNCTION_KINDS}
    for d in defined:
        name = _plain_name(d.name)
        # Dunder methods are called through syntax, not by name: grepping for `__init__` finds noise.
        dunder = name.startswith("__") and name.endswith("__")
        local = lang == "python" and d.name.rpartition(".")[0] in functions  # a function's own `def kernel`
        if d.kind in _API_KINDS[lang] and _IDENTIFIER.fullmatch(name) and not dunder and not local:
            tokens, text = _signature(lines[d.start_line - 1 : d.end_line], lang)
            found.setdefault(name, {})[tokens] = text
    return found


_SIGNATURE_LINES = 30


def _signature(lines: Sequence[str], lang: str) -> tuple[tuple[str, ...], str]:
    """Tokens of a definition's head (up to its body, `;` or `:`), and the head as one line of text."""
    tokens: list[str] = []
    text: list[str] = []
    depth = 0
    started = lang != "python"  # Python heads start at `def`/`class`, after any decorators
    for line in lines[:_SIGNATURE_LINES]:
        begin = 0
        for match in _TOKEN[_COMMENT_MARKER[lang]].finditer(line):
            token = match.group()
            if match.group("comment") is not None or (not started and token not in ("def", "class")):
                continue
            if not started:
                started, begin = True, match.start()
            if depth == 0 and _ends_head(token, tokens, lang):
                return tuple(tokens), " ".join(" ".join([*text, line[begin : match.start()]]).split())
            if token in ("(", "["):
                depth += 1
            elif token in (")", "]"):
                depth -= 1
            tokens.append(token)
        if started:
            text.append(line[begin:])
    return tuple(tokens), " ".join(" ".join(text).split())


def _ends_head(token: str, before: Sequence[str], lang: str) -> bool:
    if lang == "python":
        return token == ":"
    if token in ("{", ";"):
        return True
    return lang == "cpp" and token == ":" and before[-1:] == [")"]  # a constructor's initializer list


def _renamed_to(name: str, signatures: Mapping[tuple[str, ...], str], added: _Signatures) -> str | None:
    for candidate in sorted(added):
        for tokens in signatures:
            renamed = tuple(candidate if token == name else token for token in tokens)
            if renamed in added[candidate]:
                return candidate
    return None


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")


def _api_hit(site: _Site, file: _File, *, early: bool) -> tuple[str, str] | None:
    """(symbol, evidence) for the first changed API symbol, used by the fork, that this hunk involves."""
    hunk = site.hunk
    if early:
        changes = _changes(hunk.base, hunk.theirs)
        involved = [hunk.base[i] for start, end, _ in changes for i in range(start, end)]
        involved += [line for _, _, lines in changes for line in lines]
    else:
        involved = [*hunk.base, *hunk.ours, *hunk.theirs]
    for symbol, change in sorted(file.api.items()):
        uses = file.fork_uses(symbol)
        if not uses:
            continue
        pattern = _word(symbol)
        if any(pattern.search(line) for line in involved) or (not early and _inside(site, file, symbol)):
            return (
                symbol,
                f"{change.describe()}; fork uses it at {_places(uses, file.path, cut=symbol in file.cut)}",
            )
    return None


def _inside(site: _Site, file: _File, symbol: str) -> bool:
    first, last = _ours_range(site.hunk)
    return any(
        d.start_line <= first and last <= d.end_line for d in file.ours_defs if _plain_name(d.name) == symbol
    )


def _places(uses: Sequence[Use], here: str, *, cut: bool = False, limit: int = 5) -> str:
    """`lines 394, 395 of this file, lib/Other.cpp:12 and 2 more`: the path only for a use in another file;
    `and at least 2 more` where the search was `cut` at its limit."""
    local = [str(use.line) for use in uses[:limit] if use.path == here]
    shown = [f"{use.path}:{use.line}" for use in uses[:limit] if use.path != here]
    if local:
        shown.insert(0, f"{'line' if len(local) == 1 else 'lines'} {', '.join(local)} of this file")
    more = len(uses) - limit
    if cut:
        return ", ".join(shown) + (f" and at least {more} more" if more > 0 else " and perhaps more")
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


# --- semantic and unknown ---------------------------------------------------------------------------------


def _ours_range(hunk: Hunk3) -> tuple[int, int]:
    """First and last line of the hunk's ours part in `ours`; an empty part is the gap before `line`."""
    if hunk.ours:
        return hunk.line, hunk.line + len(hunk.ours) - 1
    return hunk.line - 1, hunk.line


def _enclosing_body(hunk: Hunk3, defs: Sequence[Definition]) -> str | None:
    """The innermost function in `ours` whose body strictly holds the hunk (its head line excluded)."""
    first, last = _ours_range(hunk)
    holding = [d for d in defs if d.kind in _FUNCTION_KINDS and d.start_line < first and last <= d.end_line]
    return min(holding, key=lambda d: d.end_line - d.start_line).name if holding else None


def _semantic(site: _Site, file: _File) -> tuple[str | None, str] | None:
    hunk = site.hunk
    at = f"fork line {hunk.line}"
    common = _added_in_common(site, file)
    if common:
        return common[0], f"both sides added a definition of `{common[0]}`"
    body = _enclosing_body(hunk, file.ours_defs)
    if body is not None:
        return body, f"both sides changed the body of `{body}` ({at})"
    rebound = _set_in_common(site, file)
    if rebound:
        return None, f"both sides set `{rebound[0]}`, each to something else ({at})"
    ours, theirs = _changes(hunk.base, hunk.ours), _changes(hunk.base, hunk.theirs)
    if file.lang in _STATEMENT_LANGUAGES and _share_base_lines(ours, theirs):
        first, last = _ours_range(hunk)
        names = innermost_names(file.ours_defs, range(first, last + 1))
        where = f" of `{names[0]}`" if names else ""
        return names[0] if names else None, f"both sides changed the same statements{where} ({at})"
    return None


def _added_in_common(site: _Site, file: _File) -> tuple[str, ...]:
    size = len(site.hunk.base)
    hunk = site.hunk
    if hunk.ours[:size] != hunk.base or hunk.theirs[:size] != hunk.base:
        return ()
    return _common_definitions(hunk.ours[size:], hunk.theirs[size:], file.path)


def _set_in_common(site: _Site, file: _File) -> list[str]:
    """Names or keys both sides' added lines set differently: imports, assignments, list keys."""
    hunk = site.hunk
    ours, theirs = (
        [line for _, _, lines in _changes(hunk.base, side) for line in lines]
        for side in (hunk.ours, hunk.theirs)
    )
    insertions = _insertions(site, file)
    point = _append_point(insertions[0], file) if insertions else None
    return _rebound_names(ours, theirs, file.lang, items=point is not None and point.kind == "list")


def _unknown_evidence(site: _Site, file: _File) -> str:
    hunk = site.hunk
    ours, theirs = _changes(hunk.base, hunk.ours), _changes(hunk.base, hunk.theirs)
    at = f"at fork line {hunk.line}"
    if _include_only(hunk, file.lang):
        return f"the include lists {at} also drop or reorder lines, so a union could be wrong"
    if file.lang not in _STATEMENT_LANGUAGES and _share_base_lines(ours, theirs):
        return f"both sides changed the same lines {at} of a file Sluice does not parse"
    if not _disjoint(ours, theirs):
        return f"both sides inserted different lines at the same place {at}, outside any function body"
    return f"no rule covers the edits {at}"


# --- the file verdict -------------------------------------------------------------------------------------


def _file_verdict(
    file: _File,
    verdicts: tuple[HunkVerdict, ...],
    parts: Sequence[str | Hunk3],
    *,
    merged: str,
    auto_resolve: bool,
) -> FileVerdict:
    cls = max((v.cls for v in verdicts), key=SEVERITY.__getitem__, default=ConflictClass.MECHANICAL)
    rules = tuple(dict.fromkeys(v.rule for v in verdicts if v.rule is not None))
    shown = verdicts if auto_resolve else tuple(dataclasses.replace(v, resolution=None) for v in verdicts)
    note = _api_note(file, verdicts)
    if cls is not ConflictClass.MECHANICAL:
        return FileVerdict(file.path, cls, shown, None, rules, _human_reason(verdicts) + note)
    used = ", ".join(rules) or "none needed"
    if not auto_resolve:
        reason = f"auto-resolution is off for this path (rules: {used})"
        return FileVerdict(file.path, cls, shown, None, rules, reason)
    text = _assemble(parts, verdicts, file, merged)
    problem = check_resolution(file.path, text, reference="\n".join(file.view))
    if problem is not None:
        reason = f"the mechanical resolution fails its check: {problem}"
        return FileVerdict(file.path, cls, shown, None, rules, reason)
    reason = (
        f"resolved {len(verdicts)} conflict block(s) mechanically ({used})"
        if verdicts
        else "no conflict blocks"
    )
    return FileVerdict(file.path, cls, shown, text, rules, reason + note)


NOTED_CHANGES, NOTED_NAMES = 3, 10  # a refactor of a whole module changes dozens: a reason stays readable


def _api_note(file: _File, verdicts: Sequence[HunkVerdict]) -> str:
    """API changes the fork uses that merged cleanly: not conflicts here, but worth a line in the reason.
    The first few are described; the rest are named."""
    reported = {v.symbol for v in verdicts if v.cls is ConflictClass.API}
    used = [
        (symbol, change, uses)
        for symbol, change in sorted(file.api.items())
        if symbol not in reported and (uses := file.fork_uses(symbol))
    ]
    notes = [
        f"{change.describe()} (fork uses it at {_places(uses, file.path, cut=symbol in file.cut)})"
        for symbol, change, uses in used[:NOTED_CHANGES]
    ]
    rest = [f"`{change.symbol}`" for _, change, _ in used[NOTED_CHANGES:]]
    if rest:
        names = ", ".join(rest[:NOTED_NAMES]) + (", …" if len(rest) > NOTED_NAMES else "")
        notes.append(f"and {len(rest)} more changed API(s) the fork uses: {names}")
    return "; note: " + "; ".join(notes) if notes else ""


def _human_reason(verdicts: Sequence[HunkVerdict]) -> str:
    open_ = [v for v in verdicts if v.cls is not ConflictClass.MECHANICAL]
    worst = max(open_, key=lambda v: SEVERITY[v.cls])
    others = f" ({len(open_) - 1} more block(s) need a human)" if len(open_) > 1 else ""
    where = f"block {worst.hunk.index + 1} at fork line {worst.hunk.line}"
    return f"{where} is {worst.cls}: {worst.evidence}{others}"


def _assemble(parts: Sequence[str | Hunk3], verdicts: Sequence[HunkVerdict], file: _File, merged: str) -> str:
    lines: list[str] = []
    for part in parts:
        if isinstance(part, str):
            lines.append(part)
        else:
            lines.extend(verdicts[part.index].resolution or ())
    text = "\n".join(lines)
    return text + "\n" if lines and _ends_with_newline(parts, verdicts, file, merged) else text


def _ends_with_newline(
    parts: Sequence[str | Hunk3], verdicts: Sequence[HunkVerdict], file: _File, merged: str
) -> bool:
    """A clean last line keeps the merge's own ending; git ends every conflict block with a newline,
    so a file ending in one gets the ending merged like any other change (a side that changed it wins),
    except that both sides' appends end with upstream's last line, and so with upstream's ending."""
    last = parts[-1] if parts else ""
    if isinstance(last, str):
        return merged.endswith("\n")
    base, ours, theirs = file.newlines
    if verdicts[last.index].rule is Rule.APPEND_UNION and last.ours != last.theirs:
        return theirs  # the fork's missing newline was on a line that is no longer last
    return theirs if ours == base else ours


# --- checking a resolution --------------------------------------------------------------------------------


def check_resolution(path: str, text: str, *, reference: str | None = None) -> str | None:
    """None when `text` may be committed; else why not.

    Refused: any conflict-marker line as `diff3.marker` reads them (unless `reference`, the fork's own
    version, has that very line as often), and for C++ and Python a parse with more ERROR/MISSING
    nodes than `reference` (Python: also `ast.parse` failing where `reference` parses).
    """
    marker = _leftover_marker(text, reference)
    if marker is not None:
        return marker
    lang = language_of(path)
    if lang in GRAMMARS:
        return _parse_problem(lang, text, reference)
    return None


def _leftover_marker(text: str, reference: str | None) -> str | None:
    allowed = Counter(line for _, line in diff3.marker_lines(reference or ""))
    for number, line in diff3.marker_lines(text):
        if allowed[line] > 0:
            allowed[line] -= 1
            continue
        return f"conflict marker left at line {number}: {line.strip()!r}"
    return None


def _syntax_errors(lang: str, text: str) -> list[int]:
    """1-based lines of the ERROR and MISSING nodes of a tree-sitter parse."""
    root = parse_tree(lang, text.encode())
    found: list[int] = []
    pending = [root] if root.has_error else []
    while pending:
        node = pending.pop()
        if node.is_error or node.is_missing:
            found.append(node.start_point.row + 1)
            continue
        pending.extend(child for child in node.children if child.has_error or child.is_missing)
    return sorted(found)


def _parse_problem(lang: str, text: str, reference: str | None) -> str | None:
    errors = _syntax_errors(lang, text)
    allowed = len(_syntax_errors(lang, reference)) if reference is not None else 0
    language = "C++" if lang == "cpp" else "Python"
    if len(errors) > allowed:
        return f"{language} does not parse: syntax error near line {errors[0]} (tree-sitter)"
    if lang == "python":
        failure = _python_syntax_error(text)
        if failure is not None and (reference is None or _python_syntax_error(reference) is None):
            return f"Python does not parse: {failure}"
    return None


def _python_syntax_error(text: str) -> str | None:
    try:
        ast.parse(text)
    except SyntaxError as err:
        return f"{err.msg} at line {err.lineno}"
    except (ValueError, RecursionError, MemoryError) as err:
        return str(err) or type(err).__name__
    return None
