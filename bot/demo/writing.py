"""Picking and filling words: the base every source writer of the sandbox builds on."""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from bot.demo.vocabulary import (
    ARCHES,
    CPP_ATTRS,
    CPP_CONDS,
    CPP_EXPRS,
    CPP_OPS,
    CPP_VARS,
    FN_NOUNS,
    FN_VERBS,
    NOUNS,
    PROBLEMS,
    SENTENCES,
    SNAKE,
)

_T = TypeVar("_T")


def camel_words(stem: str) -> str:
    return " ".join(w.lower() for w in re.findall(r"[A-Z0-9]+(?![a-z])|[A-Z]?[a-z0-9]+", stem)) or stem


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


_FIELDS: dict[str, tuple[str, ...]] = {}


def _fields(template: str) -> tuple[str, ...]:
    got = _FIELDS.get(template)
    if got is None:
        got = tuple(f for _, f, _, _ in string.Formatter().parse(template) if f)
        _FIELDS[template] = got
    return got


_FIELD_WORDS: dict[str, Sequence[str]] = {
    "n": ("1", "2", "4", "8", "16", "32", "64", "128"),
    "i": ("0", "1", "2", "3"),
    "attr": CPP_ATTRS,
    "op": CPP_OPS,
    "n1": NOUNS,
    "n2": NOUNS,
    "n3": NOUNS,
    "problem": PROBLEMS,
    "arch": ARCHES,
}


class WriterBase:
    """Draws words and fills templates from one random stream."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.serial = 0

    # -- small pieces

    def pick(self, seq: Sequence[_T]) -> _T:
        return seq[int(self.rng.random() * len(seq))]

    def sentence(self) -> str:
        return self.fill(self.pick(SENTENCES), [], [])

    def fill(
        self,
        template: str,
        names: Sequence[str],
        helpers: Sequence[str],
        *,
        pool: Sequence[str] = CPP_VARS,
        **given: str,
    ) -> str:
        """Fill a template, generating only the fields it uses."""
        values = dict(given)
        for f in _fields(template):
            if f not in values:
                values[f] = self.field(f, names, helpers, pool)
        return template.format(**values)

    def field(self, name: str, names: Sequence[str], helpers: Sequence[str], pool: Sequence[str]) -> str:
        words = _FIELD_WORDS.get(name)
        if words is not None:
            return self.pick(words)
        if name in ("a", "b"):
            return self.pick(names) if names and self.rng.random() < 0.85 else self.pick(pool)
        if name == "v":
            return self.pick(pool)
        if name in ("expr", "cond"):
            return self.fill(self.pick(CPP_EXPRS if name == "expr" else CPP_CONDS), names, helpers)
        if name in ("word", "attrname"):
            return self.pick(SNAKE) + "." + self.pick(SNAKE)
        if name == "helper":
            return self.pick(helpers) if helpers else "getOrder"
        if name == "fn":
            return self.pick(FN_VERBS) + self.pick(FN_NOUNS)
        return f"expected a valid {self.pick(NOUNS)}"  # msg, comment

    def unique(self, taken: Iterable[str], make: Callable[[], str]) -> str:
        taken = set(taken)
        for _ in range(30):
            name = make()
            if name not in taken:
                return name
        self.serial += 1
        return f"{make()}{self.serial}"

    def fn_name(self) -> str:
        return self.pick(FN_VERBS) + self.pick(FN_NOUNS)

    def llvm_hash(self) -> str:
        return f"{self.rng.getrandbits(160):040x}"
