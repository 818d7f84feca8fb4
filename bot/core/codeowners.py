"""The fork's CODEOWNERS, read with GitHub's rules: gitignore-like patterns, the last matching line wins."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

# Where GitHub looks for the file, in its order: the first one found is the only one used.
CODEOWNERS_PATHS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
# `@login` (an Enterprise Managed User's has its enterprise's short code after an underscore: `@mona_acme`)
# or `@org/team`: an owner as the config's `owners` name one too.
LOGIN_OR_TEAM = r"@[A-Za-z0-9][A-Za-z0-9-]*(?:_[A-Za-z0-9]+)?(?:/[A-Za-z0-9_.-]+)?"
_OWNER = re.compile(LOGIN_OR_TEAM + r"|[^@\s]+@[^@\s]+")  # or, in CODEOWNERS, an e-mail address


@dataclass(frozen=True)
class Rule:
    pattern: str
    owners: tuple[str, ...]  # '@login', '@org/team' or an e-mail address; () takes ownership away
    line: int

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(_pattern_regex(self.pattern))


@dataclass(frozen=True)
class CodeOwners:
    rules: tuple[Rule, ...] = ()
    problems: tuple[str, ...] = ()  # lines GitHub would also ignore, with why (shown in the gate's summary)

    def owners(self, path: str) -> tuple[str, ...]:
        """The owners of `path`: those of the last rule matching it (GitHub's precedence), else none."""
        for rule in reversed(self.rules):
            if rule.regex.fullmatch(path):
                return rule.owners
        return ()


def parse_codeowners(text: str) -> CodeOwners:
    """Every rule of a CODEOWNERS file; a line GitHub cannot use is skipped and named in `problems`."""
    rules: list[Rule] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        pattern, *owners = line.split()
        problem = _problem(pattern, owners)
        if problem is not None:
            problems.append(f"line {number}: {problem}")
            continue
        rules.append(Rule(pattern.replace("\\#", "#"), tuple(owners), number))
    return CodeOwners(tuple(rules), tuple(problems))


def _strip_comment(line: str) -> str:
    """The line up to an unescaped `#` (`\\#` starts a pattern with a hash)."""
    match = re.search(r"(?<!\\)#", line)
    return line if match is None else line[: match.start()]


def _problem(pattern: str, owners: Sequence[str]) -> str | None:
    if pattern.startswith("!"):
        return f"`{pattern}`: negated patterns are not supported"
    if "[" in pattern or "]" in pattern:
        return f"`{pattern}`: character ranges are not supported"
    bad = [o for o in owners if not _OWNER.fullmatch(o)]
    return f"`{pattern}`: not an owner: {', '.join(bad)}" if bad else None


def _pattern_regex(pattern: str) -> str:
    """gitignore's reading as GitHub applies it to files: a pattern with a slash before its end is anchored at
    the root, one without matches at any depth; a trailing slash or a plain last segment also owns what is
    below; `*` stays in a segment (`docs/*` owns `docs/a.md`, not `docs/build/a.md`); `**` crosses them."""
    anchored = "/" in pattern.rstrip("/")
    directory = pattern.endswith("/")
    body = pattern.strip("/")
    regex = "" if anchored else "(?:.*/)?"
    regex += _glob(body)
    if directory or body.endswith("/**"):
        return regex + ("/.*" if directory else "")
    last = body.rsplit("/", 1)[-1]
    return regex if "*" in last or "?" in last else regex + "(?:/.*)?"


def _glob(body: str) -> str:
    out = []
    i = 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        else:
            char = body[i]
            out.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
            i += 1
    return "".join(out)
