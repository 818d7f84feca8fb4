"""CODEOWNERS as GitHub reads it: gitignore-like patterns, the last matching rule naming a path's owners."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Where GitHub looks, in this order; the first file found is the one it uses.
CODEOWNERS_PATHS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
MAX_CODEOWNERS_BYTES = 3 * 1024 * 1024  # GitHub ignores a larger file
_OWNER = re.compile(r"@[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9._-]+)?|[^@\s]+@[^@\s]+")


@dataclass(frozen=True)
class Rule:
    """One line of CODEOWNERS: its pattern (as written), the compiled matcher, and its owners."""

    pattern: str
    regex: re.Pattern[str]
    owners: tuple[str, ...]  # `@login`, `@org/team` or an email; empty: the path has no owner


@dataclass(frozen=True)
class CodeOwners:
    rules: tuple[Rule, ...] = ()

    def owners_of(self, path: str) -> tuple[str, ...]:
        """The owners GitHub names for `path`: the last rule matching it wins, even one naming nobody."""
        for rule in reversed(self.rules):
            if rule.regex.fullmatch(path.lstrip("/")):
                return rule.owners
        return ()

    def owns(self, login: str, path: str) -> bool:
        """Whether `@login` itself is among `path`'s owners (teams are not expanded here)."""
        wanted = "@" + login.lower()
        return any(owner.lower() == wanted for owner in self.owners_of(path))


def parse(text: str) -> CodeOwners:
    """Every usable rule of a CODEOWNERS file; lines GitHub would flag as errors (negation, a bad
    owner) are skipped, as GitHub skips them."""
    rules = []
    for raw in text.splitlines():
        rule = _rule(raw)
        if rule is not None:
            rules.append(rule)
    return CodeOwners(tuple(rules))


def _rule(raw: str) -> Rule | None:
    line = _strip_comment(raw).strip()
    if not line:
        return None
    words = _split(line)
    pattern, owners = words[0], tuple(words[1:])
    if pattern.startswith("!") or any(not _OWNER.fullmatch(o) for o in owners):
        return None  # GitHub: negation is not supported; an invalid owner makes the line an error
    return Rule(pattern.replace("\\#", "#").replace("\\ ", " "), pattern_regex(pattern), owners)


def _strip_comment(line: str) -> str:
    """The line up to an unescaped `#` (a comment, at the start or after the owners)."""
    for index, char in enumerate(line):
        if char == "#" and (index == 0 or line[index - 1] != "\\"):
            return line[:index]
    return line


def _split(line: str) -> list[str]:
    """Whitespace-separated words, a backslash-escaped space staying inside its word."""
    return [w.replace("\0", "\\ ") for w in line.replace("\\ ", "\0").split()]


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """gitignore's rules as GitHub applies them: a `/` at the start or in the middle anchors the pattern
    at the root, else it matches at any depth; a trailing `/` means everything under a directory; a
    pattern naming a file or directory also covers what is under it, but a trailing `*` matches only one
    level (`docs/*` owns `docs/a.md`, not `docs/x/b.md`)."""
    body = pattern.replace("\\#", "#").replace("\\ ", " ")
    directory = body.endswith("/")
    body = body.strip("/") if body.startswith("/") else body.rstrip("/")
    anchored = pattern.startswith("/") or "/" in body
    regex = _body_regex(body)
    if not anchored and not body.startswith("**"):
        regex = "(?:.*/)?" + regex
    if directory:
        regex += "/.*"
    elif not body.endswith("*"):
        regex += "(?:/.*)?"
    return re.compile(regex, re.DOTALL)


def _body_regex(body: str) -> str:
    parts: list[str] = []
    segments = body.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:.*/)?")
            continue
        parts.append(_segment(segment) + ("" if last else "/"))
    return "".join(parts)


def _segment(segment: str) -> str:
    out = []
    for char in segment:
        out.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
    return "".join(out)
