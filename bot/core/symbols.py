"""Definitions in a source blob (C++, Python, TableGen, MLIR) and the ones enclosing given lines."""

from __future__ import annotations

import bisect
import heapq
import re
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import tree_sitter_cpp
import tree_sitter_python
from tree_sitter import Language, Node, Parser


@dataclass(frozen=True)
class Definition:
    name: str  # qualified: "mlir::triton::gpu::foo", "Cls.method", "TT_LoadOp", "@kernel"
    kind: str  # function, method, class, struct, union, enum, op, tdclass, multiclass, defm, mlir-func
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive


_LANGUAGE_BY_SUFFIX = {
    **dict.fromkeys((".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh", ".inc"), "cpp"),
    ".py": "python",
    ".pyi": "python",
    ".td": "tablegen",
    ".mlir": "mlir",
}


def language_of(path: str) -> str | None:
    return _LANGUAGE_BY_SUFFIX.get(PurePosixPath(path).suffix.lower())


def suffixes_of(languages: Collection[str]) -> tuple[str, ...]:
    """The file suffixes (`.cpp`, `.py`, …) of files in these languages, as `language_of` reads them."""
    return tuple(suffix for suffix, language in _LANGUAGE_BY_SUFFIX.items() if language in languages)


def definitions(path: str, source: bytes) -> tuple[Definition, ...]:
    """Every definition in `source`, sorted by (start_line, name); () for unknown or binary blobs."""
    language = language_of(path)
    # A NUL byte is git's own test for binary content; such blobs have no symbols worth naming.
    if language is None or b"\0" in source:
        return ()
    found = _FINDERS[language](source)
    return tuple(sorted(found, key=lambda d: (d.start_line, d.name, d.end_line, d.kind)))


def enclosing_symbols(path: str, source: bytes, lines: Iterable[int]) -> tuple[str, ...]:
    return innermost_names(definitions(path, source), lines)


def innermost_names(defs: Sequence[Definition], lines: Iterable[int]) -> tuple[str, ...]:
    """Sorted unique names of the smallest definition containing each line, for callers caching `defs`."""
    by_start = sorted(defs, key=lambda d: d.start_line)
    # Heap of open candidates keyed by span; entries that ended before the current line are
    # dropped lazily, which is sound because lines are visited in ascending order.
    heap: list[tuple[int, int, str, int]] = []
    names: set[str] = set()
    next_def = 0
    for line in sorted(set(lines)):
        while next_def < len(by_start) and by_start[next_def].start_line <= line:
            d = by_start[next_def]
            heapq.heappush(heap, (d.end_line - d.start_line, -d.start_line, d.name, d.end_line))
            next_def += 1
        while heap and heap[0][3] < line:
            heapq.heappop(heap)
        if heap:
            names.add(heap[0][2])
    return tuple(sorted(names))


# --- tree-sitter plumbing -------------------------------------------------------------------------

GRAMMARS = {
    "cpp": Language(tree_sitter_cpp.language()),
    "python": Language(tree_sitter_python.language()),
}
# Parsers keep per-parse state, so each thread (the planner parses blobs in worker threads) gets its own;
# the one pool: `conflicts` checks resolutions through it too.
_PARSERS = threading.local()


def parse_tree(grammar: str, source: bytes) -> Node:
    """The tree-sitter syntax tree of `source` in one of GRAMMARS ("cpp", "python")."""
    parser = getattr(_PARSERS, grammar, None)
    if parser is None:
        parser = Parser(GRAMMARS[grammar])
        setattr(_PARSERS, grammar, parser)
    return parser.parse(source).root_node


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _span(node: Node, start_row: int | None) -> tuple[int, int]:
    """1-based inclusive lines of `node`, starting earlier at `start_row` (a decorator or `template<>`)."""
    first = node.start_point.row if start_row is None else start_row
    end = node.end_point
    # A node ending at column 0 stops before that line's first character.
    last = end.row - 1 if end.column == 0 and end.row > first else end.row
    return first + 1, last + 1


# One unit of work for the iterative walks: node, enclosing qualified parts, whether the node sits
# directly in a class body, and the row its definition starts on if earlier than the node.
_Item = tuple[Node, tuple[str, ...], bool, int | None]


# --- C++ ------------------------------------------------------------------------------------------

_CPP_CLASS_KINDS = {
    "class_specifier": "class",
    "struct_specifier": "struct",
    "union_specifier": "union",
    "enum_specifier": "enum",
}
_CPP_CONTAINERS = frozenset(
    {
        "translation_unit",
        "declaration_list",
        "field_declaration_list",
        "linkage_specification",
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
    }
)
_CPP_DECLARATIONS = frozenset({"declaration", "field_declaration", "type_definition"})
_CPP_NAMES = frozenset(
    {
        "identifier",
        "field_identifier",
        "type_identifier",
        "qualified_identifier",
        "destructor_name",
        "operator_name",
        "operator_cast",
        "template_function",
        "template_method",
    }
)
_CPP_WRAPPERS = frozenset({"pointer_declarator", "reference_declarator", "parenthesized_declarator"})
_CPP_DECORATIONS = frozenset({"type_qualifier", "attribute_declaration", "ms_pointer_modifier"})
# Error recovery around unknown macros (`LLVM_DUMP_METHOD void Foo::dump()`) can fold a return
# type into a qualified name; keywords are never names, so they are dropped.
_CPP_KEYWORDS = frozenset(
    {
        *("void", "bool", "char", "int", "short", "long", "unsigned", "signed", "float", "double", "auto"),
        *("static", "inline", "const", "constexpr", "virtual", "explicit", "extern", "typename", "template"),
    }
)


def _cpp_definitions(source: bytes) -> Iterator[Definition]:
    stack: list[_Item] = [(parse_tree("cpp", source), (), False, None)]
    while stack:
        node, scope, in_class, start = stack.pop()
        kind = node.type
        if kind == "function_definition":
            yield from _cpp_function(node, scope, in_class=in_class, start=start)
        elif kind in _CPP_CLASS_KINDS:
            yield from _cpp_class(node, scope, start=start, stack=stack)
        elif kind == "namespace_definition":
            body = node.child_by_field_name("body")
            if body is not None:
                stack.append((body, scope + _cpp_namespace_parts(node), False, None))
        elif kind == "template_declaration":
            first = node.start_point.row if start is None else start
            stack.extend((child, scope, in_class, first) for child in node.named_children)
        elif kind in _CPP_DECLARATIONS:
            yield from _cpp_declaration(node, scope, in_class=in_class, start=start, stack=stack)
        elif kind == "friend_declaration":
            # A friend is not a member: keep its definitions under the class name, drop its declarations.
            stack.extend(
                (child, scope, False, start) for child in node.named_children if child.type != "declaration"
            )
        elif kind == "ERROR":
            stack.extend((child, inner, in_class, None) for child, inner in _cpp_error_children(node, scope))
        elif kind in _CPP_CONTAINERS:
            stack.extend((child, scope, in_class, None) for child in node.named_children)


def _cpp_error_children(node: Node, scope: tuple[str, ...]) -> Iterator[tuple[Node, tuple[str, ...]]]:
    """Named children of an ERROR node, each with the namespaces left open around it.

    An unbalanced brace later in a file makes tree-sitter flatten `namespace mlir {` into loose
    tokens inside ERROR; replaying them keeps `mlir::first` from turning into `first`.
    """
    scopes = [scope]
    opening: tuple[str, ...] | None = None  # name parts after a `namespace` token, until its `{`
    for child in node.children:
        kind = child.type
        if kind == "namespace":
            opening = ()
        elif opening is not None and kind in ("identifier", "namespace_identifier"):
            opening += (_text(child),)
        elif opening is not None and kind == "nested_namespace_specifier":
            opening += _cpp_nested_namespace(child)
        elif kind == "{":
            scopes.append(scopes[-1] + (opening or ()))
            opening = None
        elif kind == "}":
            if len(scopes) > 1:
                scopes.pop()
        elif child.is_named:
            opening = None
            yield child, scopes[-1]


def _cpp_function(
    node: Node, scope: tuple[str, ...], *, in_class: bool, start: int | None
) -> Iterator[Definition]:
    name = _cpp_declared_name(node.child_by_field_name("declarator"), declaration=False)
    if name is None:
        return
    parts, is_global = _cpp_name_parts(name)
    if not parts:
        return
    # Out-of-line `Foo::bar` is a method; LLVM style names classes in CamelCase and namespaces in
    # lowercase, the only cue available without the header that declares it.
    is_method = in_class or (len(parts) > 1 and parts[-2][:1].isupper())
    qualified = "::".join(parts if is_global else scope + parts)
    yield Definition(qualified, "method" if is_method else "function", *_span(node, start))


def _cpp_class(
    node: Node, scope: tuple[str, ...], *, start: int | None, stack: list[_Item]
) -> Iterator[Definition]:
    body = node.child_by_field_name("body")
    if body is None:  # forward declaration or elaborated type
        return
    name = node.child_by_field_name("name")
    parts = _cpp_name_parts(name)[0] if name is not None else ()
    if parts:
        yield Definition("::".join(scope + parts), _CPP_CLASS_KINDS[node.type], *_span(node, start))
    if node.type != "enum_specifier":
        stack.append((body, scope + parts, True, None))


def _cpp_declaration(
    node: Node, scope: tuple[str, ...], *, in_class: bool, start: int | None, stack: list[_Item]
) -> Iterator[Definition]:
    declared_type = node.child_by_field_name("type")
    if declared_type is not None and declared_type.type in _CPP_CLASS_KINDS:
        stack.append((declared_type, scope, in_class, start))
    if node.type == "type_definition":
        return
    # Prototypes count too: a header's `LogicalResult foo(Operation *op);` is where a signature change
    # shows, and it links to the definition in the source file through the qualified name.
    for declarator in node.children_by_field_name("declarator"):
        name = _cpp_declared_name(declarator, declaration=True)
        if name is not None and (parts := _cpp_name_parts(name)[0]):
            qualified = "::".join(scope + parts)
            yield Definition(qualified, "method" if in_class else "function", *_span(node, start))


def _cpp_declared_name(declarator: Node | None, *, declaration: bool) -> Node | None:
    """The name a declarator declares as a function, or None (variables, function pointers)."""
    node, is_function = declarator, False
    while node is not None:
        kind = node.type
        if kind in _CPP_NAMES:
            # `int (*fp)(int);` has a function declarator too, but around a pointer, not the name.
            return node if is_function or kind == "operator_cast" or not declaration else None
        if kind == "function_declarator":
            is_function = True
        elif kind in _CPP_WRAPPERS:
            is_function = False
        elif kind != "attributed_declarator":
            return None
        node = node.child_by_field_name("declarator") or next(
            (c for c in node.named_children if c.type not in _CPP_DECORATIONS), None
        )
    return None


def _cpp_name_parts(node: Node) -> tuple[tuple[str, ...], bool]:
    """`a::Foo<T>::bar` as ("a", "Foo", "bar"), and whether it was written `::bar` (global)."""
    parts: list[str] = []
    is_global = False
    while node.type == "qualified_identifier":
        scope = node.child_by_field_name("scope")
        if scope is not None:
            parts.append(_cpp_simple_name(scope))
        elif not parts:
            is_global = True
        parts.extend(_text(c) for c in node.named_children if c.type == "ERROR")
        name = node.child_by_field_name("name")
        if name is None:
            break
        node = name
    else:
        parts.append(_cpp_simple_name(node))
    return tuple(p for p in parts if p and p not in _CPP_KEYWORDS), is_global


def _cpp_simple_name(node: Node) -> str:
    kind = node.type
    if kind in ("template_type", "template_function", "template_method"):
        name = node.child_by_field_name("name")
        return _cpp_simple_name(name) if name is not None else _squash(_text(node))
    if kind == "operator_cast":  # `operator bool() const` is named `operator bool`
        return _cpp_operator(_text(node).split("(", 1)[0])
    if kind == "operator_name":
        return _cpp_operator(_text(node))
    if kind == "destructor_name":
        return "".join(_text(node).split())
    return _squash(_text(node))


def _cpp_operator(text: str) -> str:
    """`operator ==` → `operator==`; `operator new` and `operator bool` keep their space."""
    rest = _squash(text.removeprefix("operator"))
    if rest[:1].isalpha() or rest[:1] == "_":
        return f"operator {rest}"
    return "operator" + rest.replace(" ", "")


def _cpp_namespace_parts(node: Node) -> tuple[str, ...]:
    name = node.child_by_field_name("name")
    if name is None:  # anonymous namespaces add nothing to a name
        return ()
    if name.type != "nested_namespace_specifier":
        return (_text(name),)
    return _cpp_nested_namespace(name)


def _cpp_nested_namespace(node: Node) -> tuple[str, ...]:
    """`mlir::triton::gpu` from `namespace mlir::triton::gpu {`, whichever way the grammar nests it."""
    parts: list[str] = []
    pending = [node]
    while pending:
        current = pending.pop()
        if current.type == "namespace_identifier":
            parts.append(_text(current))
        else:
            pending.extend(reversed(current.named_children))
    return tuple(parts)


def _squash(text: str) -> str:
    return " ".join(text.split())


# --- Python ---------------------------------------------------------------------------------------

_PY_CONTAINERS = frozenset(
    {
        "module",
        "block",
        "if_statement",
        "elif_clause",
        "else_clause",
        "try_statement",
        "except_clause",
        "except_group_clause",
        "finally_clause",
        "with_statement",
        "for_statement",
        "while_statement",
        "match_statement",
        "case_clause",
        "ERROR",
    }
)


def _python_definitions(source: bytes) -> Iterator[Definition]:
    stack: list[_Item] = [(parse_tree("python", source), (), False, None)]
    while stack:
        node, scope, in_class, start = stack.pop()
        kind = node.type
        if kind == "decorated_definition":
            inner = node.child_by_field_name("definition")
            if inner is not None:
                stack.append((inner, scope, in_class, node.start_point.row))
        elif kind in ("function_definition", "class_definition"):
            name, body = node.child_by_field_name("name"), node.child_by_field_name("body")
            if name is None:
                continue
            parts = (*scope, _text(name))
            is_class = kind == "class_definition"
            label = "class" if is_class else "method" if in_class else "function"
            yield Definition(".".join(parts), label, *_span(node, start))
            if body is not None:
                stack.append((body, parts, is_class, None))
        elif kind in _PY_CONTAINERS:
            stack.extend((child, scope, in_class, None) for child in node.named_children)


# --- TableGen -------------------------------------------------------------------------------------

# Comments, strings and `[{ code }]` literals are skipped whole so their braces and words don't count.
_TD_TOKEN = re.compile(
    r"""
    (?P<skip>//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\[\{.*?\}\])
    | \b(?P<keyword>def|class|multiclass|defm)\b(?:\s+(?P<name>\w[\w#]*))?
    | (?P<punct>[{};])
    """,
    re.DOTALL | re.VERBOSE,
)
_TD_KINDS = {"def": "op", "class": "tdclass", "multiclass": "multiclass", "defm": "defm"}


@dataclass
class _OpenRecord:
    name: str | None  # None for anonymous `def : Pat<...>;`, whose extent must still be skipped
    kind: str
    start: int  # offset of the keyword
    depth: int  # brace depth outside the record
    braced: bool = False


def _tablegen_definitions(source: bytes) -> Iterator[Definition]:
    text = source.decode("utf-8", "replace")
    line_of = _line_finder(text)
    depth = 0
    record: _OpenRecord | None = None
    for match in _TD_TOKEN.finditer(text):
        keyword, punct = match.group("keyword"), match.group("punct")
        if keyword is not None:
            # Records nested in a multiclass or `let ... in {` are part of whatever encloses them;
            # only records outside any other record are reported.
            if record is None:
                record = _OpenRecord(match.group("name"), _TD_KINDS[keyword], match.start(), depth)
            continue
        if punct == "{":
            depth += 1
            if record is not None and depth == record.depth + 1:
                record.braced = True
            continue
        if punct == "}":
            depth = max(depth - 1, 0)
        if punct is None or record is None:
            continue
        closes = depth <= record.depth if punct == "}" else not record.braced and depth == record.depth
        if closes:
            if record.name is not None:
                yield Definition(record.name, record.kind, line_of(record.start), line_of(match.start()))
            record = None
    if record is not None and record.name is not None:
        # Unterminated at end of file: it runs to the last non-blank line.
        last = max(len(text.rstrip()) - 1, record.start)
        yield Definition(record.name, record.kind, line_of(record.start), line_of(last))


def _line_finder(text: str) -> Callable[[int], int]:
    newlines = [m.start() for m in re.finditer("\n", text)]
    return lambda offset: bisect.bisect_left(newlines, offset) + 1


# --- MLIR -----------------------------------------------------------------------------------------

_MLIR_SPLIT = re.compile(r"\s*// -----")
_MLIR_MASK = re.compile(r'"(?:\\.|[^"\\])*"|//.*')
_MLIR_FUNC = re.compile(r"(?<![\w.])(?:func\.func|tt\.func|llvm\.func|gpu\.func)\b")
_MLIR_NAME = re.compile(r'\s*(?:[a-z_]+\s+)*@("(?:\\.|[^"\\])*"|[\w$.\-]+)')
_MLIR_TOKEN = re.compile(r"->|\battributes\b|[(){}<>]")
# A signature line at bracket depth 0 that ends like this, or a next line that starts like this,
# means the signature goes on rather than being a body-less declaration.
_MLIR_CONTINUED_END = (",", "(", "->", ":", "=", "attributes")
_MLIR_CONTINUES_NEXT = ("->", "attributes", "{", "(", "loc(")


def _mlir_definitions(source: bytes) -> Iterator[Definition]:
    raw = source.decode("utf-8", "replace").split("\n")
    masked = [_MLIR_MASK.sub(_mlir_blank, line) for line in raw]
    row = 0
    while row < len(raw):
        func = _MLIR_FUNC.search(masked[row])
        name = _MLIR_NAME.match(raw[row], func.end()) if func is not None else None
        if func is None or name is None:
            row += 1
            continue
        end = _mlir_func_end(raw, masked, first=row, column=func.end())
        yield Definition("@" + name.group(1), "mlir-func", row + 1, end + 1)
        row = end + 1


def _mlir_blank(match: re.Match[str]) -> str:
    # Strings keep their width so columns stay valid; comments are simply dropped.
    return "" if match.group().startswith("//") else " " * len(match.group())


def _mlir_func_end(raw: list[str], masked: list[str], *, first: int, column: int) -> int:
    """0-based last line of the function whose keyword ends at `column` of line `first`."""
    nesting = depth = 0  # nesting: () and <> in the signature; depth: braces
    in_body = in_attributes = False
    last = first
    for row in range(first, len(raw)):
        if row > first and _MLIR_SPLIT.match(raw[row]):
            return last
        text = masked[row][column:] if row == first else masked[row]
        for token in _MLIR_TOKEN.finditer(text):
            tok = token.group()
            if in_body:
                depth += {"{": 1, "}": -1}.get(tok, 0)
                if depth == 0:
                    return row
            elif tok in "(<":
                nesting += 1
            elif tok in ")>":
                nesting = max(nesting - 1, 0)
            elif tok == "attributes":
                in_attributes = True
            elif tok == "{" and nesting == 0:
                depth += 1
                in_body = not in_attributes
            elif tok == "}" and nesting == 0:
                if depth == 0:  # the enclosing module closed: a body-less declaration
                    return last
                depth -= 1
                in_attributes = in_attributes and depth > 0
        if text.strip():
            last = row
        if not in_body and nesting == 0 and depth == 0 and not _mlir_signature_goes_on(masked, row):
            return last
    return last


def _mlir_signature_goes_on(masked: list[str], row: int) -> bool:
    if masked[row].rstrip().endswith(_MLIR_CONTINUED_END):
        return True
    following = next((line.strip() for line in masked[row + 1 :] if line.strip()), "")
    return following.startswith(_MLIR_CONTINUES_NEXT)


_FINDERS: dict[str, Callable[[bytes], Iterable[Definition]]] = {
    "cpp": _cpp_definitions,
    "python": _python_definitions,
    "tablegen": _tablegen_definitions,
    "mlir": _mlir_definitions,
}
