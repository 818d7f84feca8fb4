"""The sandbox's text model: files as blocks, and the edit operations history is made of."""

from __future__ import annotations

from dataclasses import dataclass, replace

Key = tuple[str, str]  # (path, block name or one of the pseudo names below)
HEADER, BOF, EOF, WHOLE = "<header>", "<bof>", "<eof>", "<file>"


@dataclass(frozen=True, slots=True)
class Block:
    """One top-level unit of a file: a function, class, lit case, doc section, op definition."""

    name: str
    lines: tuple[str, ...]


_SEPARATORS: dict[str, tuple[str, ...]] = {
    "py": ("", ""),
    "pytest": ("", ""),
    "mlir": ("", "// -----", ""),
    "text": (),
    "json": (),
    "yaml": (),
}


@dataclass(frozen=True, slots=True)
class SourceFile:
    kind: str  # cpp, h, td, py, pytest, mlir, md, cmake, text, json, yaml
    header: tuple[str, ...]
    blocks: tuple[Block, ...]
    footer: tuple[str, ...] = ()
    scope: str = ""  # C++ namespace that qualifies the blocks' names
    executable: bool = False  # written with mode 100755 (a script people run)

    def render(self) -> bytes:
        sep = _SEPARATORS.get(self.kind, ("",))
        out = list(self.header)
        for i, block in enumerate(self.blocks):
            if i:
                out.extend(sep)
            out.extend(block.lines)
        out.extend(self.footer)
        return ("\n".join(out) + "\n").encode()

    def find(self, name: str) -> int:
        for i, block in enumerate(self.blocks):
            if block.name == name:
                return i
        raise GeneratorBug(f"no block {name!r}")

    def qualname(self, name: str) -> str:
        return f"{self.scope}::{name}" if self.scope else name

    def with_block(self, index: int, block: Block) -> SourceFile:
        return replace(self, blocks=(*self.blocks[:index], block, *self.blocks[index + 1 :]))


class GeneratorBug(RuntimeError):
    """An edit did not apply: the generator broke one of its own invariants."""


@dataclass(frozen=True, slots=True)
class ReplaceBlock:
    path: str
    old: Block
    new: Block


@dataclass(frozen=True, slots=True)
class InsertBlock:
    path: str
    anchor: str | None  # insert after this block; None: before the first one
    new: Block


@dataclass(frozen=True, slots=True)
class RemoveBlock:
    path: str
    anchor: str | None
    old: Block


@dataclass(frozen=True, slots=True)
class SetHeader:
    path: str
    old: tuple[str, ...]
    new: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AddFile:
    path: str
    file: SourceFile


Op = ReplaceBlock | InsertBlock | RemoveBlock | SetHeader | AddFile


def apply_op(tree: dict[str, SourceFile], op: Op) -> None:
    if isinstance(op, AddFile):
        if op.path in tree:
            raise GeneratorBug(f"{op.path} exists")
        tree[op.path] = op.file
        return
    f = tree[op.path]
    if isinstance(op, ReplaceBlock):
        i = f.find(op.old.name)
        if f.blocks[i] != op.old:
            raise GeneratorBug(f"{op.path}:{op.old.name} changed underneath")
        tree[op.path] = f.with_block(i, op.new)
    elif isinstance(op, InsertBlock):
        i = 0 if op.anchor is None else f.find(op.anchor) + 1
        tree[op.path] = replace(f, blocks=(*f.blocks[:i], op.new, *f.blocks[i:]))
    elif isinstance(op, RemoveBlock):
        i = f.find(op.old.name)
        if f.blocks[i] != op.old:
            raise GeneratorBug(f"{op.path}:{op.old.name} changed underneath")
        tree[op.path] = replace(f, blocks=(*f.blocks[:i], *f.blocks[i + 1 :]))
    else:
        if f.header != op.old:
            raise GeneratorBug(f"{op.path} header changed underneath")
        tree[op.path] = replace(f, header=op.new)


def inverse_op(op: Op) -> Op:
    if isinstance(op, ReplaceBlock):
        return ReplaceBlock(op.path, op.new, op.old)
    if isinstance(op, InsertBlock):
        return RemoveBlock(op.path, op.anchor, op.new)
    if isinstance(op, RemoveBlock):
        return InsertBlock(op.path, op.anchor, op.old)
    if isinstance(op, SetHeader):
        return SetHeader(op.path, op.new, op.old)
    raise GeneratorBug("file additions are never reverted")


def op_keys(op: Op, before: SourceFile | None) -> set[Key]:
    """The regions an op touches or borders, for dependency bookkeeping."""
    p = op.path
    if isinstance(op, AddFile):
        return {(p, WHOLE)}
    if isinstance(op, SetHeader):
        return {(p, HEADER)}
    if isinstance(op, ReplaceBlock):
        return {(p, op.old.name), (p, op.new.name)}
    assert before is not None
    names = [b.name for b in before.blocks]
    at = 0 if op.anchor is None else names.index(op.anchor) + 1
    if isinstance(op, RemoveBlock):
        at = names.index(op.old.name) + 1
    following = names[at] if at < len(names) else EOF
    changed = op.new.name if isinstance(op, InsertBlock) else op.old.name
    return {(p, op.anchor or BOF), (p, changed), (p, following)}
