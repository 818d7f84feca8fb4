"""Ref and SHA validation: what Sluice accepts as a ref, a revision or a commit SHA before any git call."""

from __future__ import annotations

import re
import unicodedata

from bot.core.errors import GitError

SHA_RE = re.compile(r"^[0-9a-f]{40}\Z")
# Ancestry steps after a ref or SHA (`main~3`, `<sha>^`, `main^2~1`): the only revision syntax accepted.
REV_STEPS = re.compile(r"(?:[~^][0-9]{0,6})*$")
MAX_REF_LENGTH = 255
# `git check-ref-format`'s forbidden characters, plus the shell metacharacters that git allows but branches do
# not use, which expand, chain, redirect or quote in a POSIX shell (`$(id)`, `a;b`, bash's `!` history): refs
# reach logs, comments and commands people copy. Parentheses are allowed: real branches use them
# (`fix(parser)`, a conventional-commit scope), and alone they expand nothing (a paste fails, runs nothing).
REF_FORBIDDEN = frozenset("~^:?*[\\") | frozenset("$`;|&<>'\"!")


def non_ascii_problem(text: str) -> str | None:
    """The first character that is not printable ASCII, named by code point; Sluice acts on no other."""
    for char in text:
        if not " " < char < "\x7f":
            name = unicodedata.name(char, "a control character" if char.isascii() else "unnamed")
            return f"U+{ord(char):04X} ({name}) is not allowed (only printable ASCII, no spaces)"
    return None


def ref_problem(ref: str) -> str | None:
    """Why `git check-ref-format --allow-onelevel` (or Sluice, stricter) refuses `ref`; None when fine."""
    if not ref or len(ref) > MAX_REF_LENGTH:
        return f"a ref name has 1 to {MAX_REF_LENGTH} characters"
    if (problem := non_ascii_problem(ref)) is not None:
        return problem
    if ref.startswith("-"):
        return "a ref name cannot start with '-' (git would read it as an option)"
    if ref == "@" or "@{" in ref or ".." in ref:
        return "a ref name cannot be '@' or contain '@{' or '..' (git reads those as revisions)"
    if bad := sorted(set(ref) & REF_FORBIDDEN):
        return f"a ref name cannot contain {' '.join(bad)}"
    if ref.endswith("."):
        return "a ref name cannot end with '.'"
    return next(filter(None, map(_component_problem, ref.split("/"))), None)


def _component_problem(component: str) -> str | None:
    if not component:
        return "a ref name cannot start or end with '/' or contain '//'"
    if component.startswith("."):
        return f"the component {component!r} starts with '.'"
    if component.endswith(".lock"):
        return f"the component {component!r} ends with '.lock'"
    return None


def validate_ref(ref: str) -> str:
    """Reject ref names git would refuse or could take for an option, and anything not printable ASCII;
    SHAs pass."""
    problem = ref_problem(ref)
    if problem is not None:
        raise GitError(
            f"not a valid git ref name: {ref[:MAX_REF_LENGTH]!a}: {problem}",
            "give a branch, remote-tracking branch, tag or SHA",
        )
    return ref


def validate_rev(rev: str) -> str:
    """A ref name or SHA, optionally followed by `~N` / `^N` steps; ranges, options and reflogs fail."""
    steps = REV_STEPS.search(rev)
    base = rev[: steps.start()] if steps else rev
    if not base or len(rev) > MAX_REF_LENGTH or ref_problem(base) is not None:
        raise GitError(
            f"not a valid git ref name or revision: {rev!r}",
            "give a branch, remote-tracking branch, tag or SHA, optionally with ~N or ^N (main~3); "
            "ranges (a..b), options and reflog entries (@{1}) are refused",
        )
    return rev


def validate_sha(sha: str) -> str:
    if not SHA_RE.match(sha):
        raise GitError(f"not a full commit SHA: {sha!r}", "give the 40-hex SHA")
    return sha
