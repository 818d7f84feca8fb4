"""A slash command's arguments, parsed strictly: shell-like quoting, typed values, flags from a fixed set.

Nothing here touches git: a value that passes is well-formed (a PR number, a SHA prefix, a ref name, an ISO
date), and whether it names something real is for the command to ask GitHub or the mirror afterwards.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.errors import BadInput
from bot.core.refs import ref_problem

PULL_NUMBER = re.compile(r"#?[1-9][0-9]{0,8}")  # ASCII digits only: `١٨٧٢` is no number here
SHA_PREFIX = re.compile(r"[0-9a-fA-F]{7,40}")
ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
MAX_TEXT = 500


class CommandRefused(BadInput):
    """A command Sluice will not run as written: `message` says why, `remedy` what would work."""


class Kind(enum.Enum):
    PULL_OR_SHA = "upstream PR number or SHA"
    SHA = "SHA"
    SHA_OR_REF = "upstream SHA or tag"
    REF = "upstream ref"
    TEXT = "text"
    SENTENCE = "sentence"  # text a person words (a reason): quoted when it has spaces
    DATE = "YYYY-MM-DD"


@dataclass(frozen=True)
class PullNumber:
    """A PR number. `sha` is the same word read as a SHA prefix when it could be one too (7 to 9 digits,
    not written `#N`): the command decides which it names by what upstream has."""

    number: int
    sha: str | None = None


@dataclass(frozen=True)
class ShaPrefix:
    """7 to 40 hex characters, lower-cased; still to be resolved to an upstream commit."""

    text: str


Value = PullNumber | ShaPrefix | str | dt.date


@dataclass(frozen=True)
class Positional:
    name: str
    kind: Kind
    optional: bool = False

    def usage(self) -> str:
        shown = f'"{self.name}"' if self.kind is Kind.SENTENCE else f"<{self.name}>"
        return f"[{shown}]" if self.optional else shown


@dataclass(frozen=True)
class Flag:
    name: str  # without the dashes: `reason` is `--reason`
    kind: Kind = Kind.TEXT
    required: bool = False

    def usage(self) -> str:
        shown = f'--{self.name} "…"' if self.kind is Kind.TEXT else f"--{self.name} {self.kind.value}"
        return shown if self.required else f"[{shown}]"


@dataclass(frozen=True)
class Usage:
    """What a command takes, in order; its one usage line is shown by /help and in every refusal."""

    name: str
    positionals: tuple[Positional, ...] = ()
    flags: tuple[Flag, ...] = ()

    @property
    def line(self) -> str:
        parts = [f"/{self.name}", *(p.usage() for p in self.positionals), *(f.usage() for f in self.flags)]
        return " ".join(parts)


@dataclass(frozen=True)
class Arguments:
    values: Mapping[str, Value] = field(default_factory=dict)

    def get(self, name: str) -> Value | None:
        return self.values.get(name)


def split_words(rest: str) -> list[str]:
    """`rest` split as a POSIX shell would split words (quotes group, backslashes escape); nothing is
    expanded or run, and `;`, `|` or `$` stay inside their word. Unbalanced quotes are refused."""
    lexer = shlex.shlex(rest, posix=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    try:
        return list(lexer)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise CommandRefused(
            f"the arguments do not parse: {str(exc).lower()}", "balance the quotes"
        ) from None


def parse_arguments(usage: Usage, rest: str) -> Arguments:
    """Every word of `rest` checked against `usage`; the first problem refuses the whole command."""
    words = split_words(rest)
    values: dict[str, Value] = {}
    positionals: list[str] = []
    index = 0
    options = True  # until `--`: the words after it are arguments, even one that starts with `-`
    while index < len(words):
        word = words[index]
        if options and word == "--":
            options, index = False, index + 1
            continue
        if options and word.startswith("-"):
            flag, value, index = _flag(usage, words, index)
            if flag.name in values:
                raise CommandRefused(f"--{flag.name} is given twice", "give it once")
            values[flag.name] = _value(flag.kind, value, what=f"--{flag.name}")
            continue
        positionals.append(word)
        index += 1
    values |= _positionals(usage, positionals)
    missing = [f"--{f.name}" for f in usage.flags if f.required and f.name not in values]
    if missing:
        raise CommandRefused(f"{', '.join(missing)} is required", "add it")
    return Arguments(values)


def _flag(usage: Usage, words: Sequence[str], index: int) -> tuple[Flag, str, int]:
    """The flag at `words[index]` (`--name value` or `--name=value`), its value, and the next index."""
    name, equals, inline = words[index].removeprefix("--").partition("=")
    known = {f.name: f for f in usage.flags}
    if not words[index].startswith("--") or name not in known:
        allowed = ", ".join(f"--{f}" for f in known) or "no flags"
        raise CommandRefused(
            f"{_shown(words[index])} is not an option of /{usage.name}",
            f"it takes {allowed}; an argument that starts with `-` goes after `--`",
        )
    if equals:
        return known[name], inline, index + 1
    if index + 1 >= len(words):
        raise CommandRefused(f"--{name} needs a value", f'write --{name} "…"')
    return known[name], words[index + 1], index + 2


def _positionals(usage: Usage, words: Sequence[str]) -> dict[str, Value]:
    if len(words) > len(usage.positionals):
        extra = " ".join(_shown(w) for w in words[len(usage.positionals) :])
        raise CommandRefused(f"too many arguments: {extra}", _quote_it(usage, words))
    values: dict[str, Value] = {}
    for spec, word in zip(usage.positionals, words, strict=False):
        values[spec.name] = _value(spec.kind, word, what=f"<{spec.name}>")
    missing = [p.usage() for p in usage.positionals[len(words) :] if not p.optional]
    if missing:
        raise CommandRefused(f"missing {' '.join(missing)}", "add it")
    return values


def _quote_it(usage: Usage, words: Sequence[str]) -> str:
    """The remedy for too many words: a sentence's words in quotes, as one argument (the usual slip)."""
    at = next((i for i, p in enumerate(usage.positionals) if p.kind is Kind.SENTENCE), None)
    if at is None:
        return "give one of each"
    sentence = " ".join(words[at:]).replace('"', "'").replace("`", "'")[:80]
    example = " ".join([f"/{usage.name}", *words[:at], f'"{sentence}"'])
    return f"quote the {usage.positionals[at].name}, as in `{example}`"


def _value(kind: Kind, word: str, *, what: str) -> Value:
    if kind in (Kind.TEXT, Kind.SENTENCE):
        text = word.strip()
        if not text or len(text) > MAX_TEXT:
            raise CommandRefused(f"{what} must be 1 to {MAX_TEXT} characters", "say it in a sentence")
        return text
    if kind is Kind.DATE:
        return _date(word, what=what)
    if kind is Kind.SHA_OR_REF and SHA_PREFIX.fullmatch(word):
        return ShaPrefix(word.lower())
    if kind in (Kind.REF, Kind.SHA_OR_REF):
        problem = None if word.isascii() and not word.startswith("-") else "it is not a plain ASCII name"
        problem = problem or ref_problem(word)
        if problem is not None:
            raise CommandRefused(
                f"{what} {_shown(word)} is not a ref: {problem}", "name an upstream branch or tag"
            )
        return word
    return _commit(kind, word, what=what)


def _commit(kind: Kind, word: str, *, what: str) -> PullNumber | ShaPrefix:
    """A PR number (decimal ASCII digits, no sign, `#` allowed before them) or a SHA prefix (7 to 40 hex
    characters). Seven to nine bare digits are both, as `295168145` may start a SHA."""
    if kind is Kind.PULL_OR_SHA and PULL_NUMBER.fullmatch(word):
        both = not word.startswith("#") and SHA_PREFIX.fullmatch(word)
        return PullNumber(int(word.removeprefix("#")), sha=word if both else None)
    if SHA_PREFIX.fullmatch(word):
        return ShaPrefix(word.lower())
    wanted = "an upstream SHA"
    if kind is Kind.PULL_OR_SHA:
        wanted = "a PR number (like 1872 or #1872) or an upstream SHA"
    raise CommandRefused(f"{what} {_shown(word)} is not {wanted}", f"give {wanted} (7 to 40 hex characters)")


def _date(word: str, *, what: str) -> dt.date:
    if ISO_DATE.fullmatch(word):
        try:
            return dt.date.fromisoformat(word)
        except ValueError:
            pass
    raise CommandRefused(f"{what} {_shown(word)} is not a date", "give an ISO date, YYYY-MM-DD")


def _shown(word: str) -> str:
    """A word quoted for a reply: short, and with anything unprintable escaped."""
    shown = ascii(word[:40])[1:-1].replace("`", "'")
    return f"`{shown}`"
