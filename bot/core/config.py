"""The repo configuration `.github/sluice.yml`: its model, the Triton defaults, path globs and validation."""

from __future__ import annotations

import difflib
import enum
import fnmatch
import functools
import hashlib
import importlib
import json
import re
import typing
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import regex
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from bot.core.codeowners import LOGIN_OR_TEAM
from bot.core.errors import ConfigRefused
from bot.core.models import Frozen, RiskLevel
from bot.core.refs import ref_problem

CONFIG_PATH = ".github/sluice.yml"


# --- path globs -------------------------------------------------------------------------------------------


def glob_match(pattern: str, path: str) -> bool:
    """Whether the repo-relative POSIX `path` matches the glob `pattern` (rules in docs/configuration.md)."""
    return _globs_regex((pattern,)).fullmatch(path) is not None


def any_glob(patterns: tuple[str, ...], paths: Sequence[str]) -> bool:
    """Whether any of `paths` matches any of the globs: one compiled regex for all of them."""
    full = _globs_regex(patterns).fullmatch
    return any(full(path) for path in paths)


def all_glob(patterns: tuple[str, ...], paths: Sequence[str]) -> bool:
    """Whether every one of `paths` matches one of the globs (True for no paths)."""
    full = _globs_regex(patterns).fullmatch
    return all(full(path) for path in paths)


@functools.lru_cache(maxsize=4096)
def _globs_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One compiled regex matching a path when any of `patterns` does; cached, configs are reused."""
    return re.compile("|".join(f"(?:{_glob_to_regex(p)})" for p in patterns))


def _glob_to_regex(pattern: str) -> str:
    anchored = pattern.startswith("/")
    body = pattern.removeprefix("/")
    if body.endswith("/"):  # `dir/` means everything under dir
        body += "**"
    if not anchored and "/" not in body:  # `*.md` matches the basename anywhere
        body = "**/" + body
    segments: list[str] = []
    for segment in body.split("/"):
        if not (segment == "**" and segments and segments[-1] == "**"):
            segments.append(segment)
    regex, i = "", 0
    while i < len(segments):
        segment = segments[i]
        after_globstar = i > 0 and segments[i - 1] == "**"
        separator = "/" if i > 0 and not after_globstar else ""
        if segment != "**":
            regex += separator + _segment_regex(segment)
        elif i == len(segments) - 1:  # trailing `**`: zero or more further segments
            regex += "(?:/[^/]+)*" if i > 0 else "[^/]+(?:/[^/]+)*"
        elif "**" in segments[i + 1 :]:
            # Leading or inner `**/` with segments and another `**` after them: those take the first place
            # they fit, in an atomic group, as `_segment_regex`'s middle pieces do (the `**` after absorbs
            # the rest), so `**/a/**/a/**/…` matches in linear time.
            end = segments.index("**", i + 1)
            group = "/".join(_segment_regex(s) for s in segments[i + 1 : end])
            regex += separator + f"(?>(?:[^/]+/)*?{group}(?![^/]))"  # ending where a segment ends
            i = end
            continue
        else:  # the last `**/`: zero or more whole segments
            regex += separator + "(?:[^/]+/)*"
        i += 1
    return regex


def _segment_regex(segment: str) -> str:
    """Regex for one path segment: `*`, `?` and `[...]` never cross a `/`.

    Matched in linear time whatever the pattern: the pieces between stars are fixed-width, so the first place
    each middle piece fits is as good as any later one, and an atomic group takes it without backtracking
    into it (fnmatch's way); `*?*?*?…` or `*a*a*a…*b` would otherwise try exponentially many splits."""
    pieces: list[str] = [""]  # the regexes between the stars; `**` inside a segment is a plain `*`
    i = 0
    while i < len(segment):
        char = segment[i]
        i += 1
        if char == "*":
            pieces.append("")
        elif char == "?":
            pieces[-1] += "[^/]"
        elif char == "[" and (end := _class_end(segment, i)) is not None:
            pieces[-1] += _class_regex(segment[i:end])
            i = end + 1
        else:
            pieces[-1] += re.escape(char)
    if len(pieces) == 1:
        return pieces[0]
    head, *middle, tail = pieces
    return head + "".join(f"(?>[^/]*?{piece})" for piece in middle if piece) + "[^/]*" + tail


def _class_end(segment: str, start: int) -> int | None:
    """Index of the `]` closing a class opened just before `start` (a leading `]` is literal), or None."""
    j = start
    if j < len(segment) and segment[j] in "!^":
        j += 1
    if j < len(segment) and segment[j] == "]":
        j += 1
    end = segment.find("]", j)
    return None if end < 0 else end


def _class_regex(body: str) -> str:
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    escaped = "".join("\\" + c if c in "\\[]^&~|" else c for c in body)
    return "(?!/)[" + ("^" if negate else "") + escaped + "]"


# --- field checks (each raises ValueError with the message an operator reads) -----------------------------

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_OWNER_RE = re.compile(LOGIN_OR_TEAM)
_REPO_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*)/[A-Za-z0-9._-]+")
# `scheme://user[:password]@host`: credentials in a URL (ssh's `ssh://git@host` names a user only).
# The part of a URL before its host, with or without a scheme, however many slashes follow it (`https:/`,
# `https//`): a userinfo there (`user:password@`) is a credential even when the URL is malformed otherwise.
_HOST = re.compile(r"[a-z0-9][a-z0-9.-]*")
_URL_USERINFO = re.compile(
    r"^(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):?(?=/))?/*(?P<userinfo>[^/?#]*)@(?P<rest>[^/]*)"
)


def _check_glob(pattern: str) -> str:
    body = pattern.removeprefix("/").removesuffix("/")
    if not body:
        raise ValueError("empty path pattern")
    if "\\" in pattern:
        raise ValueError(f"{pattern!r}: paths use '/', not '\\'")
    if any(segment in ("", ".", "..") for segment in body.split("/")):
        raise ValueError(
            f"{pattern!r}: paths are relative to the repository root, without '', '.' or '..' segments"
        )
    try:
        re.compile(_glob_to_regex(pattern))
    except re.error as err:
        raise ValueError(f"{pattern!r}: invalid character class ({err.msg})") from None
    return pattern


def _compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    try:
        return re.compile(pattern, flags)
    except re.error as err:
        raise ValueError(f"invalid regular expression: {err}") from None


def _check_regex(pattern: str) -> str:
    _compile(pattern, re.MULTILINE)
    return pattern


SUBJECT_GROUPS = ("pr", "prs", "title")
# The regex parser of the standard library: the one way to see what a group can match. Untyped, so Any.
_SRE_PARSER: Any = importlib.import_module("re._parser")
_DIGIT_OPS = {"LITERAL", "IN", "RANGE", "CATEGORY", "MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
_DIGIT_OPS |= {"SUBPATTERN", "BRANCH", "ATOMIC_GROUP", "AT"}


def _check_subject_pattern(pattern: str) -> str:
    groups = _compile(pattern).groupindex
    if not set(SUBJECT_GROUPS) & set(groups):
        raise ValueError("a subject pattern needs a named group `pr`, `prs` or `title`, e.g. (?P<pr>\\d+)")
    if "pr" in groups and not _matches_digits_only(pattern, groups["pr"]):
        raise ValueError(
            "the group `pr` must match digits only, e.g. (?P<pr>\\d+): it is looked up as an upstream "
            "PR number (for several numbers such as '#12 #34' use a group `prs`)"
        )
    return pattern


def _matches_digits_only(pattern: str, group: int) -> bool:
    """Whether group number `group` of `pattern` can match nothing but the digits 0-9."""
    found = _find_group(list(_SRE_PARSER.parse(pattern)), group)
    return found is not None and _digits_only(found)


def _find_group(items: list[Any], group: int) -> list[Any] | None:
    for op, arg in items:
        subs = _sub_sequences(op.name, arg)
        if op.name == "SUBPATTERN" and arg[0] == group:
            return list(arg[3])
        for sub in subs:
            found = _find_group(sub, group)
            if found is not None:
                return found
    return None


def _sub_sequences(op: str, arg: Any) -> list[list[Any]]:
    if op == "SUBPATTERN":
        return [list(arg[3])]
    if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return [list(arg[2])]
    if op == "BRANCH":
        return [list(b) for b in arg[1]]
    if op == "ATOMIC_GROUP":
        return [list(arg)]
    return []


def _digits_only(items: list[Any]) -> bool:
    for op, arg in items:
        name = op.name
        if name not in _DIGIT_OPS:
            return False
        if name == "LITERAL" and not 0x30 <= arg <= 0x39:
            return False
        if name == "IN" and not all(_digit_class_item(o.name, a) for o, a in arg):
            return False
        if not all(_digits_only(sub) for sub in _sub_sequences(name, arg)):
            return False
    return True


def _digit_class_item(op: str, arg: Any) -> bool:
    """One member of a `[...]` class that holds only digits: `\\d`, `0-9` or a digit."""
    if op == "CATEGORY":
        return bool(arg.name == "CATEGORY_DIGIT")
    if op == "RANGE":
        return bool(arg[0] >= 0x30 and arg[1] <= 0x39)
    return op == "LITERAL" and 0x30 <= arg <= 0x39


def _check_name(name: str) -> str:
    if not _NAME_RE.fullmatch(name):
        raise ValueError(f"{name!r}: use letters, digits, '.', '_' and '-', starting with a letter or digit")
    return name


def _check_owner(owner: str) -> str:
    if not _OWNER_RE.fullmatch(owner):
        raise ValueError(f"{owner!r}: expected '@login' or '@org/team'")
    return owner


def _check_repo(repo: str) -> str:
    if repo and (not _REPO_RE.fullmatch(repo) or repo.split("/")[1] in (".", "..")):
        raise ValueError(f"{repo!r}: expected 'owner/name'")
    return repo


def _check_url(url: str) -> str:
    if not url.strip():
        raise ValueError("the upstream URL or path is empty")
    if _has_credentials(url):
        # The message never repeats the URL: it holds a secret that must not reach a log or a check run.
        raise ValueError(
            "the upstream URL carries credentials (a user, password or token before '@'); Sluice never "
            "stores or sends them: remove them. A private upstream on GitHub is read with the App's "
            "installation token (see `downstreams:`), a public one anonymously"
        )
    return url


def _has_credentials(url: str) -> bool:
    """Whether anything stands before the host and an `@`; but for ssh's user (`ssh://git@host/path`,
    `git@host:path`), which names no secret."""
    match = _URL_USERINFO.match(url)
    if match is None:
        return False
    scheme, userinfo = (match["scheme"] or "").lower(), match["userinfo"]
    scp_like = not scheme and ":" in match["rest"]  # `user@host:path`, ssh's short form
    return ":" in userinfo or not (scheme == "ssh" or scp_like)


def _check_printable(url: str) -> str:
    """urlsplit drops a tab or a newline silently and git refuses the URL: neither may decide alone."""
    if control := next((ch for ch in url if ord(ch) < 0x21 or ord(ch) == 0x7F), None):
        where = url.index(control) + 1
        code = f"U+{ord(control):04X}"
        raise ValueError(f"the upstream URL has a space or control character ({code}) at character {where}")
    return url


def _check_downstream(repo: str) -> str:
    if not repo:
        raise ValueError("expected 'owner/name', got an empty string")
    return _check_repo(repo)


# Validation context key: URL prefixes besides https:// that the reader trusts (the service: its own GitHub).
TRUSTED_URL_PREFIXES = "trusted_url_prefixes"
# Validation context key: whether the file may name paths on the reading machine (`risk.model: /abs/path`):
# a person's own file on their machine may; a repository's config the service reads may not.
MACHINE_PATHS = "machine_paths"


def _check_https(url: str, info: ValidationInfo) -> str:
    """The App fetches upstreams over https only: a fork's config must not make it read the server's own
    files (`file://`, a path) or run another transport (ssh); `sluice mirror --upstream-url` takes those."""
    trusted: tuple[str, ...] = tuple((info.context or {}).get(TRUSTED_URL_PREFIXES, ()))
    if url.startswith(("https://", *trusted)):
        return url
    raise ValueError(
        f"{_shown(url)} is not an https:// URL; Sluice fetches upstreams over https only "
        "(for a local mirror or ssh, give `sluice mirror --upstream-url`)"
    )


def _shown(url: str) -> str:
    """What a refused URL's message may repeat of it: its scheme and host, never a user, path or query (a
    malformed URL may hide a password anywhere)."""
    parts = urllib.parse.urlsplit(url)
    try:
        host = parts.hostname or ""
    except ValueError:
        host = ""
    if not parts.scheme or not url.startswith(f"{parts.scheme}://"):
        return "the URL"
    return f"'{parts.scheme}://{host}/…'" if _HOST.fullmatch(host) else f"'{parts.scheme}://…'"


def _check_branch(branch: str) -> str:
    """`git check-ref-format --branch` rules, so a bad name fails here rather than at the first fetch."""
    problem = _branch_problem(branch)
    if problem:
        raise ValueError(f"{branch!r} is not a valid git branch name: {problem}")
    return branch


def _branch_problem(branch: str) -> str | None:
    """The ref rules every git call applies (bot.core.refs), and the two names git keeps for itself."""
    if branch in ("@", "HEAD"):
        return f"'{branch}' is reserved"
    return ref_problem(branch)


Glob = Annotated[str, AfterValidator(_check_glob)]
# A number setting: `.inf` or `.nan` would break what counts with it.
Number = Annotated[StrictFloat, Field(allow_inf_nan=False)]
Paths = Annotated[tuple[Glob, ...], Field(min_length=1)]
Count = Annotated[StrictInt, Field(ge=1)]
Branch = Annotated[str, AfterValidator(_check_branch)]
Downstream = Annotated[str, AfterValidator(_check_downstream)]
Name = Annotated[str, AfterValidator(_check_name)]
Owner = Annotated[str, AfterValidator(_check_owner)]
MessagePattern = Annotated[str, AfterValidator(_check_regex)]
SubjectPattern = Annotated[str, AfterValidator(_check_subject_pattern)]


# --- the model --------------------------------------------------------------------------------------------


class Strategy(enum.StrEnum):
    CHERRY_PICK = "cherry-pick"  # one fork commit per upstream commit (FBTriton)
    MERGE = "merge"  # merge an upstream commit (Intel XPU backend)


# `skip` and `defer` on a `merge` fork: (what is wrong, what to do instead), for the CLI and the command.
MERGE_HOLDS_NOTHING = (
    "with `strategy: merge` a merge brings every upstream commit before the one it merges, so no commit can "
    "be skipped or deferred while later ones go in",
    "to wait for it, pause ingestion (`/pause`); to leave it out, revert it in the fork once it is in",
)


class UpstreamConfig(Frozen):
    url: Annotated[
        str, AfterValidator(_check_url), AfterValidator(_check_https), AfterValidator(_check_printable)
    ] = "https://github.com/triton-lang/triton.git"
    branch: Branch = "main"


class ForkConfig(Frozen):
    repo: Annotated[str, AfterValidator(_check_repo)] = ""  # "owner/name"; the store key when set
    branch: Branch = "main"


class Component(Frozen):
    """A named area of the tree with a risk level; an upstream change there carries that risk."""

    name: Name
    paths: Paths
    risk: RiskLevel
    owners: tuple[Owner, ...] = ()

    def matches(self, path: str) -> bool:
        return _globs_regex(self.paths).fullmatch(path) is not None


class Extension(Frozen):
    """One of the fork's internal extensions: its own code, the upstream paths it builds on, its suites."""

    name: Name
    paths: Paths
    interfaces: tuple[Glob, ...] = ()
    suites: tuple[Annotated[str, Field(min_length=1)], ...] = ()

    def owns(self, path: str) -> bool:
        return _globs_regex(self.paths).fullmatch(path) is not None

    def depends_on(self, path: str) -> bool:
        return bool(self.interfaces) and _globs_regex(self.interfaces).fullmatch(path) is not None


class BundleLimits(Frozen):
    max_commits: Count = 30
    max_changed_lines: Count = 3000


def _check_model_name(value: str, info: ValidationInfo) -> str:
    if not value.strip() or "\n" in value or "\x00" in value:
        raise ValueError("expected `default`, `none`, or the path of a model `sluice calibrate` wrote")
    if value.startswith("/") and not (info.context or {}).get(MACHINE_PATHS, True):
        raise ValueError(
            f"{value[:80]!r} is a path on Sluice's own machine, which a repository's config may not make it "
            "read; commit the model to the fork and give its path in the tree (`models/risk.json`)"
        )
    return value


class RiskPolicy(Frozen):
    # Measured on a real Triton fork: 500+ line commits were 14% of upstream but 37% of fork breakages.
    large_commit_lines: Count = 500
    file_overlap_is_risky: StrictBool = False
    # The calibrated risk model: `none` (the rules), `default` (the one Sluice ships; the rules when it is not
    # installed), or a path: absolute on the machine that plans, else in fork trunk's tree. Opt-in for now:
    # the shipped model does not yet chain 80 % of the culprits at 70 % bundled.
    model: Annotated[str, AfterValidator(_check_model_name)] = "none"
    # With a model: chain this share of the commits, most likely to break first, instead of the share that
    # minimises expected tier runs: of the fork's stream when the model carries its fitted commits'
    # probabilities (`sluice calibrate` writes them), else of each plan.
    chain_share: Annotated[Number, Field(ge=0, le=1)] | None = None
    # A longer chain is split into the fewest pieces, where the fewest and weakest dependencies cross: a
    # person reads each piece's PR (GitHub lists at most 250 commits on one). `null`: never split.
    max_chain: Count | None = 50
    # With a model: a bundle closes before its summed probability (its expected culprits) passes this.
    bundle_culprits: Annotated[Number, Field(gt=0)] = 0.5


class ResolverConfig(Frozen):
    """An external command (e.g. an agent) asked to propose a resolution; a code owner approves it."""

    command: tuple[Annotated[str, Field(min_length=1)], ...] = ()  # argv, never run through a shell
    timeout_seconds: Annotated[StrictInt, Field(ge=1, le=3600)] = 120

    @field_validator("command", mode="before")
    @classmethod
    def _argv_not_a_command_line(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("expected a list of arguments, e.g. [my-agent, --json] (no shell runs it)")
        return value


class AutoResolve(Frozen):
    exclude: tuple[Glob, ...] = ()  # paths whose mechanical conflicts always go to a person

    def allowed(self, path: str) -> bool:
        return not self.exclude or _globs_regex(self.exclude).fullmatch(path) is None


Fraction = Annotated[Number, Field(gt=0, lt=1)]


class KernelThreshold(Frozen):
    """Per-kernel overrides of the performance thresholds (`performance.kernels.<name>`)."""

    floor: Fraction | None = None
    k: Annotated[Number, Field(gt=0)] | None = None
    critical: StrictBool | None = None


class PerformanceConfig(Frozen):
    """How L3 benchmark results are judged (`python -m runners compare`).

    A benchmark regressed when its median slowed by more than max(floor, k x its measured noise), the
    bootstrap interval of the median ratio excludes no change, and the rank test holds after the
    false-discovery-rate correction across all benchmarks compared (docs/compare.md).
    """

    floor: Fraction = 0.02  # importance floor: a change smaller than this never matters
    k: Annotated[Number, Field(gt=0)] = 3.0  # threshold in units of the measured noise (relative IQR/2)
    fdr: Fraction = 0.05  # false discovery rate across all benchmarks (Benjamini-Hochberg)
    confidence: Fraction = 0.95  # of the bootstrap interval of the median ratio
    critical: tuple[Annotated[str, Field(min_length=1)], ...] = ()  # kernels whose regression fails the run
    kernels: dict[Annotated[str, Field(min_length=1)], KernelThreshold] = Field(default_factory=dict)

    def threshold_for(self, kernel: str, noise: float) -> float:
        """The relative change that matters for `kernel` given its measured relative noise."""
        override = self.kernels.get(kernel, KernelThreshold())
        floor = override.floor if override.floor is not None else self.floor
        k = override.k if override.k is not None else self.k
        return max(floor, k * noise)

    def is_critical(self, kernel: str) -> bool:
        override = self.kernels.get(kernel)
        if override is not None and override.critical is not None:
            return override.critical
        return kernel in self.critical


def _unique_names(value: Any, handler: ValidatorFunctionWrapHandler, *, field: str) -> Any:
    """Report duplicate names at the duplicate's `name`, alongside any other errors in the list."""
    duplicates = _duplicate_names(value, kind=field.removesuffix("_extra").removesuffix("s"))
    if not duplicates:
        return handler(value)
    item_errors: list[InitErrorDetails] = []
    try:
        handler(value)
    except ValidationError as err:
        item_errors = [_reraisable(e) for e in err.errors()]
    raise ValidationError.from_exception_data(field, item_errors + duplicates)


def _duplicate_names(items: object, *, kind: str) -> list[InitErrorDetails]:
    if not isinstance(items, list | tuple):
        return []
    first: dict[str, int] = {}
    duplicates: list[InitErrorDetails] = []
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else getattr(item, "name", None)
        if not isinstance(name, str):
            continue
        if name in first:
            error = PydanticCustomError(
                "duplicate_name",
                "duplicate {kind} name '{name}' (first used by item {first})",
                {"kind": kind, "name": name, "first": first[name]},
            )
            duplicates.append(InitErrorDetails(type=error, loc=(index, "name"), input=name))
        else:
            first[name] = index
    return duplicates


def _error_at(loc: tuple[int | str, ...], message: str, value: object) -> ValidationError:
    """A problem a model-wide check found, reported at the field it is about (and so at its line)."""
    error = PydanticCustomError("config_check", "{why}", {"why": message})
    return ValidationError.from_exception_data(
        "SluiceConfig", [InitErrorDetails(type=error, loc=loc, input=value)]
    )


def _reraisable(error: ErrorDetails) -> InitErrorDetails:
    return InitErrorDetails(
        type=error["type"], loc=error["loc"], input=error["input"], ctx=error.get("ctx", {})
    )


# --- tiers: the suites each tier runs, and the built-in Triton suites' settings -----------------------------


class BuiltinSuite(enum.StrEnum):
    SMOKE = "smoke"  # L1: each kernel once, checked against torch
    NUMERICS = "numerics"  # L2: matmul over shapes, dtypes and block configs
    BENCH = "bench"  # L3: timings with warmup and repetitions, raw samples kept


class DType(enum.StrEnum):
    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"


class BenchKernel(enum.StrEnum):
    VECTOR_ADD = "vector_add"
    SOFTMAX = "softmax"
    LAYER_NORM = "layer_norm"
    SUM = "sum"
    MATMUL = "matmul"


# The shape each benchmark kernel takes, in words for the error message.
BENCH_SHAPES: dict[BenchKernel, tuple[str, ...]] = {
    BenchKernel.VECTOR_ADD: ("n",),
    BenchKernel.SOFTMAX: ("rows", "cols"),
    BenchKernel.LAYER_NORM: ("rows", "cols"),
    BenchKernel.SUM: ("n",),
    BenchKernel.MATMUL: ("M", "N", "K"),
}
MAX_ROW = 65536  # softmax and layer norm keep a row in one block


def _check_matmul_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(shape) != 3:
        raise ValueError(f"a matmul shape is [M, N, K], got {len(shape)} numbers")
    return shape


def _check_block(block: tuple[int, ...]) -> tuple[int, ...]:
    if len(block) != 3:
        raise ValueError(f"a block is [BLOCK_M, BLOCK_N, BLOCK_K], got {len(block)} numbers")
    bad = [size for size in block if size < 16 or size & (size - 1)]
    if bad:
        raise ValueError(f"block sizes are powers of two, at least 16 (tl.dot needs 16), got {bad[0]}")
    return block


def _check_power_of_two(value: int) -> int:
    if value & (value - 1):
        raise ValueError(f"must be a power of two, got {value}")
    return value


Argument = Annotated[str, Field(min_length=1)]
MatmulShape = Annotated[tuple[Count, ...], AfterValidator(_check_matmul_shape)]
Block = Annotated[tuple[StrictInt, ...], AfterValidator(_check_block)]
Milliseconds = Annotated[StrictInt, Field(ge=1, le=60_000)]


def _no_command_line(value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError("expected a list of arguments, e.g. [pytest, python/test/unit] (no shell runs it)")
    return value


DEFAULT_SUITE_TIMEOUT = 3600


class SuiteConfig(Frozen):
    """One suite of a tier: a built-in Triton suite, or a command whose JUnit XML or exit code is read."""

    name: Name
    builtin: BuiltinSuite | None = None
    command: tuple[Argument, ...] = ()  # argv, never run through a shell; `{junit}` becomes the XML's path
    expected_tests: Count | None = None  # fewer executed tests than this fails the suite
    timeout_seconds: Annotated[StrictInt, Field(ge=1, le=7 * 24 * 3600)] | None = None  # commands only

    _argv_not_a_command_line = field_validator("command", mode="before")(_no_command_line)

    @model_validator(mode="after")
    def _builtin_or_command(self) -> SuiteConfig:
        if self.builtin is None and not self.command:
            raise ValueError("a suite needs `builtin` (smoke, numerics or bench) or `command` (an argv list)")
        if self.builtin is not None and self.command:
            raise ValueError("a suite has `builtin` or `command`, not both")
        if self.builtin is not None and self.timeout_seconds is not None:
            raise ValueError("`timeout_seconds` applies to command suites only")
        return self

    @property
    def timeout(self) -> int:
        return self.timeout_seconds or DEFAULT_SUITE_TIMEOUT


RunnerLabel = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
WorkflowFile = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,100}\.ya?ml$")]
Minutes = Annotated[StrictInt, Field(ge=1, le=7 * 24 * 60)]
Retries = Annotated[StrictInt, Field(ge=0, le=5)]


class TierConfig(Frozen):
    """One tier: its suites, where its workflow runs, how long it may take, who owns a failure."""

    suites: Annotated[tuple[SuiteConfig, ...], Field(min_length=1)]
    workflow: WorkflowFile = "sluice-l1.yml"  # the fork's workflow file Sluice dispatches for this tier
    runs_on: tuple[RunnerLabel, ...] = ("ubuntu-latest",)  # the runner labels its workflow asks for
    owner: Owner | None = None  # the team a failed run of this tier is for
    timeout_minutes: Minutes = 60  # a run still not finished then is marked timed out
    retries: Retries = 2  # infrastructure failures (runner lost, GPU busy...) retried this many times
    critical: tuple[Name, ...] = ()  # the suites a fork PR runs (the critical-kernel subset); () = all

    @field_validator("suites", mode="wrap")
    @classmethod
    def _names_are_unique(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        return _unique_names(value, handler, field=str(info.field_name))

    @model_validator(mode="after")
    def _critical_are_suites(self) -> TierConfig:
        names = {s.name for s in self.suites}
        unknown = [name for name in self.critical if name not in names]
        if unknown:
            raise ValueError(f"`critical` names {unknown[0]!r}, which is none of this tier's suites")
        return self


class L2Config(TierConfig):
    workflow: WorkflowFile = "sluice-l2.yml"
    runs_on: tuple[RunnerLabel, ...] = ("self-hosted", "linux", "gpu")
    timeout_minutes: Minutes = 360


KernelPattern = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.*?-]+$")]


class L3Area(Frozen):
    """An area of L3's benchmarks: the kernels it covers (names, `*` and `?` wildcards) and who owns their
    performance: `owners`, and the code owners (CODEOWNERS, component owners) of the kernels' `files`."""

    name: Name
    kernels: Annotated[tuple[KernelPattern, ...], Field(min_length=1)]
    owners: tuple[Owner, ...] = ()
    files: tuple[Glob, ...] = ()

    @model_validator(mode="after")
    def _someone_owns_it(self) -> L3Area:
        if not self.owners and not self.files:
            raise ValueError(
                f"area {self.name!r} names neither `owners` nor `files`: nobody could sign it off"
            )
        literal = next((f for f in self.files if any(c in f for c in "*?[")), None)
        if literal is not None:
            raise ValueError(f"`files` names paths, not globs: {literal!r}")
        return self

    def covers(self, kernel: str) -> bool:
        return any(fnmatch.fnmatchcase(kernel, pattern) for pattern in self.kernels)


class L3Config(TierConfig):
    workflow: WorkflowFile = "sluice-l3.yml"
    runs_on: tuple[RunnerLabel, ...] = ("self-hosted", "linux", "gpu")
    timeout_minutes: Minutes = 720
    areas: tuple[L3Area, ...] = ()  # who signs off a regressed kernel (`/signoff l3`); first match wins

    @field_validator("areas", mode="wrap")
    @classmethod
    def _area_names_are_unique(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        return _unique_names(value, handler, field=str(info.field_name))

    def area_of(self, kernel: str) -> L3Area | None:
        """The first area covering `kernel`; None: L3's `owner` (else the config's code owners) own it."""
        return next((area for area in self.areas if area.covers(kernel)), None)


class L3Policy(enum.StrEnum):
    REQUEST = "request"  # only when someone asks (the check run's "Run L3" button)
    CHAINS = "chains"  # every risky chain, and on request
    ALWAYS = "always"  # every ingestion, after L2 passed


def _tier(name: str, builtin: BuiltinSuite) -> tuple[SuiteConfig, ...]:
    return (SuiteConfig(name=name, builtin=builtin),)


ProductionGate = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9_.-]+$")]
BUILD_SUITE = "build"  # the name the build's result has in a tier report
DEFAULT_BUILD_TIMEOUT = 45 * 60  # under L1's default 60 minutes, which bound the build and the suites


class BuildConfig(Frozen):
    """What every tier job builds in the checkout under test before any suite runs (a Triton fork: its own
    Triton, e.g. `[python, -m, pip, install, .]`), so the suites test the commit and not an installed
    release. The commands run in order; the first that fails stops the build and no suite runs."""

    commands: Annotated[tuple[Annotated[tuple[Argument, ...], Field(min_length=1)], ...], Field(min_length=1)]
    timeout_seconds: Annotated[StrictInt, Field(ge=1, le=7 * 24 * 3600)] = DEFAULT_BUILD_TIMEOUT  # all of it

    @field_validator("commands", mode="before")
    @classmethod
    def _argv_lists(cls, value: Any) -> Any:
        commands = value if isinstance(value, list | tuple) else [value]
        if any(isinstance(command, str) for command in commands):  # `commands: "pip install ."`
            raise ValueError(
                "expected a list of commands, each a list of arguments, e.g. [[python, -m, pip, install, .]] "
                "(no shell runs them)"
            )
        return value


class Tiers(Frozen):
    l1: TierConfig = TierConfig(suites=_tier("smoke", BuiltinSuite.SMOKE))
    l2: L2Config = L2Config(suites=_tier("numerics", BuiltinSuite.NUMERICS))
    l3: L3Config = L3Config(suites=_tier("bench", BuiltinSuite.BENCH))
    l3_policy: L3Policy = L3Policy.REQUEST
    environment: ProductionGate = "compiler-production-gate"  # L3's GitHub environment (required reviewers)
    build: BuildConfig | None = None  # None: the suites test whatever Triton the job's environment has

    @model_validator(mode="after")
    def _build_fits_every_tier(self) -> Tiers:
        if self.build is None:
            return self
        for level, tier in (("l1", self.l1), ("l2", self.l2), ("l3", self.l3)):
            if any(s.name == BUILD_SUITE for s in tier.suites):
                raise ValueError(
                    f"{level} has a suite named {BUILD_SUITE!r}, the name `build`'s result has in the "
                    "report: rename the suite"
                )
            if self.build.timeout_seconds >= tier.timeout_minutes * 60:
                raise ValueError(
                    f"`build.timeout_seconds` ({self.build.timeout_seconds} s) is not less than {level}'s "
                    f"`timeout_minutes` ({tier.timeout_minutes} min), which bounds the build and the suites "
                    "together: a build that long would be cut off with no report; raise "
                    f"{level}'s `timeout_minutes` or lower the build's"
                )
        return self


class BisectConfig(Frozen):
    """Bisection of an ingestion that failed a tier for a real reason: whether it starts on its own, and its
    budget (runs and runner hours, counting each probe's tier run) and how many probes run at once."""

    auto: StrictBool = True  # bisect a bundle or chain when a tier fails it for a real reason
    max_runs: Count = 12  # probes with a result per bisection, confirmations included (lost runs are retried)
    # None: only `max_runs` bounds it. Bounded so that hours over hours per run is a count of runs.
    max_runner_hours: Annotated[Number, Field(gt=0, le=100_000)] | None = None
    hours_per_run: Annotated[Number, Field(ge=0.01, le=1000)] = 1.0  # one probe's charge against the hours
    parallel: Annotated[StrictInt, Field(ge=1, le=16)] = 1  # probes dispatched at once (free runners)


class TrunkWatch(Frozen):
    """`trunk_watch`: L2 (and the L3 suites named) on fork trunk's head on a schedule; a test or a critical
    kernel's metric that got worse between two trunk runs is bisected over the trunk commits between them and
    tracked in one issue per failure."""

    enabled: StrictBool = False  # opt in: each run takes L2's self-hosted GPU runners
    interval_hours: Annotated[StrictInt, Field(ge=1, le=24 * 30)] = 24  # at most one trunk run this often
    # L3 suites to run on trunk too (their benchmarks are compared); one suite, or every one of them
    l3_suites: tuple[Name, ...] = ()
    bisect_runs: Annotated[StrictInt, Field(ge=0, le=100)] = 12  # tier runs one failure's bisection may use
    parallel: Annotated[StrictInt, Field(ge=1, le=16)] = 1  # bisection runs dispatched at once


GateTier = Literal["l1", "l2", "l3"]


class GatePolicy(Frozen):
    """When an ingestion PR may merge (`sluice/gate`), whether Sluice merges it, and its safety throttle."""

    # L1 is always required; list L2 (and L3) to require them too.
    required_tiers: tuple[GateTier, ...] = ("l1", "l2")
    # An emergency pick (`/cherry-pick`) is urgent: L1 alone by default, then a code owner's approval.
    emergency_required_tiers: tuple[GateTier, ...] = ("l1",)
    auto_merge: StrictBool = False  # merge when the gate passes; otherwise a person merges
    # Automatic ingestion pauses after this many failed ingestions in a row, until a maintainer resumes it.
    pause_after_failures: Count = 3

    @field_validator("required_tiers", "emergency_required_tiers")
    @classmethod
    def _l1_is_required(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if "l1" not in value:
            raise ValueError("l1 is always required: list it (and l2, l3 as policy wants)")
        return value


class Tolerance(Frozen):
    """An element passes when |got - expected| <= atol + rtol * |expected| (torch.isclose's rule)."""

    atol: Annotated[Number, Field(ge=0)]
    rtol: Annotated[Number, Field(ge=0)]


class Tolerances(Frozen):
    # The inputs are scaled so every output element has unit variance whatever K is. fp32 allows for TF32,
    # which tl.dot uses for fp32 inputs on NVIDIA GPUs by default; fp16 and bf16 for rounding the output.
    float32: Tolerance = Tolerance(atol=0.01, rtol=0.01)
    float16: Tolerance = Tolerance(atol=0.01, rtol=0.01)
    bfloat16: Tolerance = Tolerance(atol=0.02, rtol=0.02)

    def for_dtype(self, dtype: DType) -> Tolerance:
        tolerance: Tolerance = getattr(self, dtype.value)
        return tolerance


def _shapes(*shapes: tuple[int, int, int]) -> tuple[tuple[int, ...], ...]:
    return shapes


class NumericsConfig(Frozen):
    """The L2 matmul sweep: every shape x dtype x block, each checked against torch."""

    shapes: Annotated[tuple[MatmulShape, ...], Field(min_length=1)] = _shapes(
        (128, 128, 128), (100, 70, 50), (1, 96, 130), (257, 33, 64), (130, 260, 390),
        (512, 512, 512), (1000, 1000, 1000), (2048, 1536, 4096), (4096, 4096, 4096),
    )  # fmt: skip
    # Used instead of `shapes` when the kernels run in the interpreter (no GPU), which is far slower.
    interpreter_shapes: Annotated[tuple[MatmulShape, ...], Field(min_length=1)] = _shapes(
        (128, 128, 128), (100, 70, 50), (1, 96, 130), (257, 33, 64), (130, 260, 390),
    )  # fmt: skip
    dtypes: Annotated[tuple[DType, ...], Field(min_length=1)] = (DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16)
    blocks: Annotated[tuple[Block, ...], Field(min_length=1)] = ((32, 32, 32), (64, 64, 32), (16, 64, 128))
    tolerances: Tolerances = Tolerances()


class BenchCase(Frozen):
    """One benchmark: a kernel at one shape and dtype (and, for matmul, one block config)."""

    kernel: BenchKernel
    shape: tuple[Count, ...]
    dtype: DType = DType.FLOAT16
    block: Block | None = None  # matmul only; default [64, 64, 32]
    num_warps: Annotated[StrictInt, Field(ge=1, le=32), AfterValidator(_check_power_of_two)] | None = None
    num_stages: Annotated[StrictInt, Field(ge=1, le=8)] | None = None

    @model_validator(mode="after")
    def _fits_the_kernel(self) -> BenchCase:
        dims = BENCH_SHAPES[self.kernel]
        if len(self.shape) != len(dims):
            raise ValueError(f"a {self.kernel} shape is [{', '.join(dims)}], got {len(self.shape)} numbers")
        if dims[-1] == "cols" and self.shape[-1] > MAX_ROW:
            raise ValueError(f"{self.kernel} keeps a row in one block: at most {MAX_ROW} cols")
        tuning = [key for key in ("block", "num_warps", "num_stages") if getattr(self, key) is not None]
        if tuning and self.kernel != BenchKernel.MATMUL:
            raise ValueError(f"only matmul takes `{tuning[0]}`")
        return self


def _case(kernel: BenchKernel, *shape: int, **options: Any) -> BenchCase:
    return BenchCase(kernel=kernel, shape=shape, **options)


class BenchConfig(Frozen):
    """The L3 benchmarks: `cases` on a GPU, `interpreter_cases` when the kernels run in the interpreter."""

    warmup_ms: Milliseconds = 25  # triton.testing.do_bench's warmup budget
    rep_ms: Milliseconds = 100  # and its measurement budget
    interpreter_warmup_iters: Annotated[StrictInt, Field(ge=0, le=1000)] = 1
    interpreter_iters: Annotated[StrictInt, Field(ge=1, le=1000)] = 5
    cases: Annotated[tuple[BenchCase, ...], Field(min_length=1)] = (
        _case(BenchKernel.VECTOR_ADD, 1 << 24, dtype=DType.FLOAT32),
        _case(BenchKernel.SOFTMAX, 4096, 4096),
        _case(BenchKernel.LAYER_NORM, 4096, 4096),
        _case(BenchKernel.SUM, 1 << 24, dtype=DType.FLOAT32),
        _case(BenchKernel.MATMUL, 4096, 4096, 4096, block=(128, 128, 64), num_warps=4, num_stages=3),
    )
    interpreter_cases: Annotated[tuple[BenchCase, ...], Field(min_length=1)] = (
        _case(BenchKernel.VECTOR_ADD, 4096, dtype=DType.FLOAT32),
        _case(BenchKernel.SOFTMAX, 64, 128, dtype=DType.FLOAT32),
        _case(BenchKernel.LAYER_NORM, 64, 128, dtype=DType.FLOAT32),
        _case(BenchKernel.SUM, 8192, dtype=DType.FLOAT32),
        _case(BenchKernel.MATMUL, 64, 64, 64, block=(32, 32, 32)),
    )


@dataclass(frozen=True)
class PickedSubject:
    """What a subject pattern recognised in a fork commit's subject."""

    pr: str | None
    title: str | None
    prs: tuple[str, ...] = ()  # the PR numbers of a bundle pick, in subject order

    @classmethod
    def of(cls, found: re.Match[str] | regex.Match[str]) -> PickedSubject:
        groups = found.groupdict()
        prs = tuple(re.findall(r"\d+", groups.get("prs") or ""))
        return cls(pr=groups.get("pr"), title=groups.get("title"), prs=prs)


# FBTriton's pick subjects: any tags, then `[Cherry-pick]` and its own tags (`[RESOLVED]`), the upstream
# subject, and the fork PR's own `(#M)` that GitHub's squash merge appends (never the upstream PR).
_PICK = r"^(?:\[[^\]]*\]\s*)*\[(?i:cherry-pick)\](?:\[(?!BUNDLE\])[^\]]*\])*\s*"
_FORK_PR = r"(?:\s*\(#\d+\))?$"
_BUNDLE = r"\[BUNDLE\][^(]*\((?P<prs>#\d+(?:[\s,]+#\d+)*)[^)]*\)"
DEFAULT_SUBJECT_PATTERNS: tuple[str, ...] = (
    # [Cherry-pick][BUNDLE] Cherry-pick 15 upstream(#10702 #10689 …) (#2877): one fork commit, many picks
    r"^(?:\[[^\]]*\]\s*)*\[(?i:cherry-pick)\]" + _BUNDLE + _FORK_PR,
    # [triton][beta] [Cherry-pick] '<title> (#N)' (#M), [Cherry-pick][RESOLVED] '<title> (#N)'
    _PICK + r"'(?P<title>.+) \(#(?P<pr>\d+)\)'" + _FORK_PR,
    _PICK + r"(?![\s']|\[BUNDLE\])(?P<title>.+?) \(#(?P<pr>\d+)\)" + _FORK_PR,  # the same without quotes
    _PICK + r"'(?P<title>.+)'" + _FORK_PR,  # a quoted upstream subject without its PR number
)
# Files holding one toolchain version: a fork whose pin has a later upstream value has passed the older ones.
# The LLVM pin, in both the files upstream kept it in (llvm-info.json replaced llvm-hash.txt in 2026).
DEFAULT_PINS: tuple[str, ...] = ("cmake/llvm-hash.txt", "cmake/llvm-info.json")


class Recognition(Frozen):
    subject_patterns: tuple[SubjectPattern, ...] = DEFAULT_SUBJECT_PATTERNS
    emergency_patterns: tuple[MessagePattern, ...] = ()
    pins: tuple[Glob, ...] = DEFAULT_PINS

    def match_subject(self, subject: str) -> PickedSubject | None:
        """The first subject pattern that matches (`re.search`), as its `pr`, `prs` and `title` groups."""
        return next(iter(self.subject_matches(subject)), None)

    def subject_matches(self, subject: str) -> list[PickedSubject]:
        """What each subject pattern that matches says, in pattern order."""
        found = (
            _bounded_search("recognition.subject_patterns", i, p, 0, subject)
            for i, p in enumerate(self.subject_patterns)
        )
        return [PickedSubject.of(m) for m in found if m]

    def is_pin(self, path: str) -> bool:
        return bool(self.pins) and _globs_regex(self.pins).fullmatch(path) is not None

    def is_emergency(self, message: str) -> bool:
        """Whether a fork commit's full message matches an emergency pattern (`re.search`, multi-line)."""
        return any(
            _bounded_search("recognition.emergency_patterns", i, p, regex.MULTILINE, message)
            for i, p in enumerate(self.emergency_patterns)
        )


# A configured pattern runs on text the fork does not control (picks copy upstream's messages): one that
# backtracks catastrophically on it would hold an ingestion for hours. The `regex` engine (the same syntax)
# stops it at this bound, and the pattern is refused by name.
PATTERN_TIMEOUT_S = 0.5


def _bounded_search(field: str, index: int, pattern: str, flags: int, text: str) -> regex.Match[str] | None:
    try:
        return _cached_regex(pattern, flags).search(text, timeout=PATTERN_TIMEOUT_S)
    except TimeoutError:
        message = (
            f"took over {PATTERN_TIMEOUT_S:g} s on a text of {len(text):,} characters: it backtracks "
            "catastrophically (nested quantifiers such as (a+)+); write it so that each character can be "
            "matched one way only"
        )
        raise ConfigError((ConfigProblem(f"{field}.{index}", None, message),)) from None


@functools.lru_cache(maxsize=256)
def _cached_regex(pattern: str, flags: int) -> regex.Pattern[str]:
    return regex.compile(pattern, flags)


def _component(name: str, risk: RiskLevel, *paths: str) -> Component:
    return Component(name=name, paths=paths, risk=risk)


# First match wins, so the narrow, riskier areas come before the broad ones.
DEFAULT_COMPONENTS: tuple[Component, ...] = (
    _component("llvm-pin", RiskLevel.CRITICAL, "cmake/llvm-hash.txt", "cmake/llvm-info.json"),
    _component(
        "toolchain-pin",
        RiskLevel.CRITICAL,
        "cmake/nvidia-toolchain-version.json",
        "cmake/*-toolchain-version.json",
    ),
    _component("core-passes", RiskLevel.HIGH, "lib/Dialect/*/Transforms/**", "lib/Analysis/**"),
    _component(
        "codegen", RiskLevel.HIGH, "lib/Conversion/**", "third_party/nvidia/lib/**", "third_party/amd/lib/**"
    ),
    _component("bindings", RiskLevel.HIGH, "python/src/**"),
    _component("runtime-abi", RiskLevel.HIGH, "python/triton/runtime/**", "third_party/*/backend/driver.*"),
    _component("dialect-ir", RiskLevel.MEDIUM, "include/triton/Dialect/**", "lib/Dialect/*/IR/**"),
    _component("frontend", RiskLevel.LOW, "python/triton/language/**", "python/triton/compiler/**"),
    _component("tests", RiskLevel.LOW, "test/**", "python/test/**"),
    _component("docs", RiskLevel.LOW, "docs/**", "*.md"),
)


class SluiceConfig(Frozen):
    """`.github/sluice.yml`; every key is optional and the defaults suit a Triton fork."""

    upstream: UpstreamConfig = UpstreamConfig()
    fork: ForkConfig = ForkConfig()
    strategy: Strategy = Strategy.CHERRY_PICK
    components: tuple[Component, ...] = DEFAULT_COMPONENTS
    # Added to `components` rather than replacing them: see `all_components`.
    components_extra: tuple[Component, ...] = ()
    extensions: tuple[Extension, ...] = ()
    bundles: BundleLimits = BundleLimits()
    risk: RiskPolicy = RiskPolicy()
    recognition: Recognition = Recognition()
    resolver: ResolverConfig = ResolverConfig()
    auto_resolve: AutoResolve = AutoResolve()
    tiers: Tiers = Tiers()
    gate: GatePolicy = GatePolicy()
    bisect: BisectConfig = BisectConfig()
    numerics: NumericsConfig = NumericsConfig()
    bench: BenchConfig = BenchConfig()
    performance: PerformanceConfig = PerformanceConfig()
    trunk_watch: TrunkWatch = TrunkWatch()
    # Forks in other installations of the App that may read this repository (it is their upstream).
    downstreams: tuple[Downstream, ...] = ()

    @field_validator("components", "components_extra", "extensions", mode="wrap")
    @classmethod
    def _names_are_unique(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        return _unique_names(value, handler, field=str(info.field_name))

    @model_validator(mode="after")
    def _trunk_watch_names_l3_suites(self) -> SluiceConfig:
        """Reported at the name (its line), though it needs the tiers to check."""
        names = [s.name for s in self.tiers.l3.suites]
        wanted = self.trunk_watch.l3_suites
        unknown = [(index, name) for index, name in enumerate(wanted) if name not in names]
        if unknown:
            index, name = unknown[0]
            why = f"{name!r} is none of L3's suites ({', '.join(names)})"
            raise _error_at(("trunk_watch", "l3_suites", index), why, name)
        if 1 < len(set(wanted)) < len(names):
            why = "name one L3 suite, or every one of them"
            raise _error_at(("trunk_watch", "l3_suites"), why, list(wanted))
        return self

    @functools.cached_property
    def all_components(self) -> tuple[Component, ...]:
        """`components_extra` over `components`: an extra component with a component's name replaces it
        where it stands; the others come first (the first match wins, and a fork's own areas are usually
        narrower than the defaults, e.g. `third_party/intel/**` before nothing, or a TLX pass in a
        `core-passes` directory)."""
        extra = {c.name: c for c in self.components_extra}
        kept = tuple(extra.pop(c.name, c) for c in self.components)
        return (*extra.values(), *kept)

    def component_for(self, path: str) -> Component | None:
        """The first component whose paths match `path`, or None."""
        return next((c for c in self.all_components if c.matches(path)), None)

    def extensions_for_interface(self, path: str) -> tuple[Extension, ...]:
        """Extensions that depend on the upstream `path` through their `interfaces`."""
        return tuple(e for e in self.extensions if e.depends_on(path))

    def extensions_for_path(self, path: str) -> tuple[Extension, ...]:
        """Extensions whose own code (`paths`) includes `path`."""
        return tuple(e for e in self.extensions if e.owns(path))

    def auto_resolve_allowed(self, path: str) -> bool:
        """Whether a mechanical conflict in `path` may be resolved without a person (not excluded)."""
        return self.auto_resolve.allowed(path)

    def allows_downstream(self, fork: str) -> bool:
        """Whether `downstreams` names `fork` (GitHub's names are case-insensitive)."""
        return fork.lower() in {repo.lower() for repo in self.downstreams}

    def digest(self) -> str:
        """sha256 of the canonical JSON dump: equal configs (defaults spelled out or not) share a digest."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


# --- problems ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigProblem:
    field: str  # dotted path, e.g. "components.2.risk"; "" for the file as a whole
    line: int | None  # 1-based line in the file
    message: str

    def render(self, filename: str) -> str:
        """`FILE:LINE: field: message`, the form `sluice config check` prints."""
        where = filename if self.line is None else f"{filename}:{self.line}"
        return ": ".join(part for part in (where, self.field, self.message) if part)


class ConfigError(ConfigRefused):
    """The configuration cannot be used; `problems` lists every reason."""

    def __init__(self, problems: tuple[ConfigProblem, ...], *, filename: str = CONFIG_PATH) -> None:
        super().__init__(
            "\n".join(p.render(filename) for p in problems),
            f"fix it (`sluice config check {filename}` lists every problem)",
        )
        self.problems = problems
        self.filename = filename


def check_config(
    text: str,
    *,
    filename: str = CONFIG_PATH,
    trusted_url_prefixes: Sequence[str] = (),
    machine_paths: bool = True,
) -> tuple[ConfigProblem, ...]:
    """Every problem in the configuration `text`, in file order; empty when it is valid."""
    return _validate(text, trusted_url_prefixes, machine_paths=machine_paths)[1]


def parse_config(
    text: str,
    *,
    filename: str = CONFIG_PATH,
    trusted_url_prefixes: Sequence[str] = (),
    machine_paths: bool = True,
) -> SluiceConfig:
    """The configuration in `text`; raises ConfigError listing every problem.

    `upstream.url` must be https://, or start with one of `trusted_url_prefixes` (the service's own
    GitHub, which may be plain http on a test bench). Without `machine_paths` (a repository's config, as the
    service reads it) `risk.model` may not be an absolute path on this machine.
    """
    config, problems = _validate(text, trusted_url_prefixes, machine_paths=machine_paths)
    if config is None or problems:
        raise ConfigError(problems, filename=filename)
    return config


def parse_config_bytes(
    raw: bytes,
    *,
    filename: str,
    trusted_url_prefixes: Sequence[str] = (),
    machine_paths: bool = True,
) -> SluiceConfig:
    """The configuration in the bytes of a file (every reader of a committed `.github/sluice.yml` comes
    here, so the App, the CLI and the runners read the same text); a file that is not UTF-8 is a ConfigError
    naming the byte, never text with U+FFFD in it that means something else."""
    return parse_config(
        config_text(raw, filename=filename),
        filename=filename,
        trusted_url_prefixes=trusted_url_prefixes,
        machine_paths=machine_paths,
    )


def config_text(raw: bytes, *, filename: str) -> str:
    """The text of a config file's bytes; ConfigError naming the line and byte where they are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        problem = ConfigProblem(
            "", line, f"not UTF-8 text (byte {raw[err.start]:#04x} at offset {err.start})"
        )
        raise ConfigError((problem,), filename=filename) from None


# --- validation -------------------------------------------------------------------------------------------


MAX_CONFIG_BYTES = 256 * 1024
"""The largest `.github/sluice.yml` Sluice reads: far above any real one, far below what would hold it up."""
MAX_ALIASED_NODES = 10_000
"""How many YAML nodes aliases may stand for in one file (`*defaults` counts the nodes it repeats): a few
short lists or mappings written once and named again are fine; a small file that aliases a long list
thousands of times would otherwise expand to millions of values to validate."""


_BOOL_TAG, _STR_TAG = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:str"


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps dates as strings (`branch: 2026-01-01` names a branch) and refuses a document
    whose aliases stand for more than MAX_ALIASED_NODES nodes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliased = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        alias = self.peek_event() if self.check_event(yaml.AliasEvent) else None
        node = super().compose_node(parent, index)
        if alias is not None and node is not None:
            self._aliased += self._size(node, set())
            if self._aliased > MAX_ALIASED_NODES:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"aliases repeat more than {MAX_ALIASED_NODES:,} values; write the values out",
                    alias.start_mark,
                )
        return node

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:  # typeshed says a dict: a name
        """A plain key YAML 1.1 reads as a boolean (`on:`, `off:`, `yes:`) is the word as written, as YAML 1.2
        and GitHub read it: no key here is a boolean, and the problem must name the key, not `True`."""
        node: yaml.MappingNode = super().compose_mapping_node(anchor)
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag == _BOOL_TAG and key.style is None:
                key.tag = _STR_TAG
        return node

    def _size(self, node: yaml.Node, composing: set[int]) -> int:
        """The nodes `node` stands for, aliases expanded (a node that contains itself counts once)."""
        if id(node) in self._sizes or id(node) in composing:
            return self._sizes.get(id(node), 1)
        composing.add(id(node))
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        size = 1 + sum(self._size(child, composing) for child in children)
        composing.discard(id(node))
        self._sizes[id(node)] = size
        return size


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# YAML 1.2's numbers without a dot (`atol: 1e-2`), which PyYAML (YAML 1.1) reads as strings: numbers here, so
# the number settings can be strict (a quoted "0.5" or a `true` is refused, not taken for a number).
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def yaml_data(text: str) -> object:
    """A YAML document read as this file is (dates stay strings, as GitHub's YAML keeps them; aliases
    bounded), for the fork's other YAML files Sluice reads; raises yaml.YAMLError, or ValueError for a value
    an explicit tag cannot take (`!!int x`)."""
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _validate(
    text: str, trusted_url_prefixes: Sequence[str] = (), *, machine_paths: bool = True
) -> tuple[SluiceConfig | None, tuple[ConfigProblem, ...]]:
    loaded = _too_large(text) or _load_yaml(text)
    if isinstance(loaded, ConfigProblem):
        return None, (loaded,)
    root, data, problems = loaded
    if data is None:
        data = {}
    if not isinstance(data, dict):
        line = root.start_mark.line + 1 if root else 1
        return None, (ConfigProblem("", line, f"the top level must be a mapping, got {_kind(data)}"),)
    try:
        context = {TRUSTED_URL_PREFIXES: tuple(trusted_url_prefixes), MACHINE_PATHS: machine_paths}
        config: SluiceConfig | None = SluiceConfig.model_validate(data, context=context)
    except ValidationError as err:
        config = None
        problems += [_problem(e, root) for e in err.errors() if not _counts_failed_items(e)]
    except RecursionError:
        config = None
        problems.append(ConfigProblem("", None, "the document is nested too deeply or refers to itself"))
    return config, tuple(sorted(problems, key=lambda p: (p.line or 0, p.field)))


def _too_large(text: str) -> ConfigProblem | None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= MAX_CONFIG_BYTES:
        return None
    limit = f"{MAX_CONFIG_BYTES:,} ({MAX_CONFIG_BYTES // 1024} KiB)"
    return ConfigProblem("", None, f"the file is {size:,} bytes; Sluice reads at most {limit}")


def _load_yaml(text: str) -> tuple[yaml.Node | None, object, list[ConfigProblem]] | ConfigProblem:
    """The node tree (for line numbers), the data and duplicate keys; or why the YAML is unreadable."""
    try:
        return _compose(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        reason = ", ".join(str(part) for part in (err.context, err.problem) if part)
        return ConfigProblem("", mark.line + 1 if mark else None, f"invalid YAML: {reason}")
    except yaml.reader.ReaderError as err:
        line = text.count("\n", 0, err.position) + 1
        return ConfigProblem("", line, f"invalid YAML: character U+{err.character:04X} is not allowed")
    except (yaml.YAMLError, ValueError) as err:
        return ConfigProblem("", None, f"invalid YAML: {err}")
    except RecursionError:
        return ConfigProblem("", None, "invalid YAML: nested too deeply")


def _compose(text: str) -> tuple[yaml.Node | None, object, list[ConfigProblem]]:
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        duplicates = _duplicate_keys(root, (), set())
        return root, loader.construct_document(root) if root else None, duplicates
    finally:
        loader.dispose()


def _duplicate_keys(node: yaml.Node | None, path: tuple[str, ...], seen: set[int]) -> list[ConfigProblem]:
    """PyYAML keeps the last of two equal keys silently; a repeated section is almost always a mistake."""
    if node is None or id(node) in seen:
        return []
    seen.add(id(node))
    problems: list[ConfigProblem] = []
    if isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            problems += _duplicate_keys(item, (*path, str(index)), seen)
    elif isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name is None or name == "<<":
                continue
            line = key.start_mark.line + 1
            if name in first:
                problems.append(
                    ConfigProblem(
                        ".".join((*path, name)), line, f"duplicate key (first at line {first[name]})"
                    )
                )
            first.setdefault(name, line)
            problems += _duplicate_keys(value, (*path, name), seen)
    return problems


def _counts_failed_items(error: ErrorDetails) -> bool:
    """Pydantic also calls a non-empty list whose items all failed "too short"; the item errors say why."""
    value, ctx = error["input"], error.get("ctx", {})
    return (
        error["type"] == "too_short"
        and isinstance(value, list | tuple)
        and len(value) >= ctx.get("min_length", len(value) + 1)
    )


def _problem(error: ErrorDetails, root: yaml.Node | None) -> ConfigProblem:
    loc = error["loc"]
    line = _line_of(root, loc, key=error["type"] == "extra_forbidden")
    return ConfigProblem(".".join(str(part) for part in loc), line, _message(error))


def _line_of(root: yaml.Node | None, loc: tuple[int | str, ...], *, key: bool) -> int | None:
    """The line of the node at `loc` (of its key when `key`); of the nearest parent when it is missing."""
    if root is None:
        return None
    node = root
    for depth, part in enumerate(loc):
        child: tuple[yaml.Node, yaml.Node] | None = None
        if isinstance(node, yaml.MappingNode):
            matches = [
                (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)
            ]
            child = matches[-1] if matches else None  # the last of equal keys wins, as in PyYAML
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            child = (node.value[part], node.value[part])
        if child is None:
            break
        if key and depth == len(loc) - 1:
            return int(child[0].start_mark.line) + 1
        node = child[1]
    return int(node.start_mark.line) + 1


_YAML_KINDS: dict[type, str] = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def _kind(value: object) -> str:
    return _YAML_KINDS.get(type(value), type(value).__name__)


def _message(error: ErrorDetails) -> str:
    kind, ctx, value, loc = error["type"], error.get("ctx", {}), error["input"], error["loc"]
    match kind:
        case "missing":
            return f"missing required key '{loc[-1]}'"
        case "extra_forbidden":
            return _unknown_key(loc)
        case "value_error":
            return str(ctx["error"])
        case "model_type" | "model_attributes_type" | "dict_type":
            return f"expected a mapping, got {_kind(value)}"
        case "tuple_type" | "list_type":
            return f"expected a list, got {_kind(value)}"
        case "string_type":
            quote = " (quote it)" if isinstance(value, int | float | bool) else ""
            return f"expected a string, got {_kind(value)}{quote}"
        case "int_type":
            return f"expected an integer, got {_kind(value)}"
        case "bool_type":
            return f"expected true or false, got {_kind(value)}"
        case "enum" | "literal_error":
            return f"expected one of {ctx['expected']}, got {value!r}"
        case "invalid_key":
            return "keys must be strings"
        case "too_short" | "string_too_short":
            return "must not be empty"
        case "greater_than_equal":
            return f"must be at least {ctx['ge']}, got {value!r}"
        case "less_than_equal":
            return f"must be at most {ctx['le']}, got {value!r}"
        case "greater_than":
            return f"must be more than {ctx['gt']}, got {value!r}"
        case "less_than":
            return f"must be less than {ctx['lt']}, got {value!r}"
        case "float_type" | "float_parsing":
            return f"expected a number, got {_kind(value)}"
        case "finite_number":
            return f"expected a finite number, got {value!r}"
    return str(error["msg"])


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    key, known = str(loc[-1]), _keys_at(loc[:-1])
    unknown = f"unknown key '{key}'"
    elsewhere = [path for path in _key_paths(SluiceConfig) if path.rpartition(".")[2] == key]
    if 0 < len(elsewhere) <= 2:  # a key of another section (`branch:` at the top, for `fork.branch`)
        return f"{unknown} here; did you mean {' or '.join(f'`{path}`' for path in elsewhere)}?"
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f"{unknown}; did you mean '{close[0]}'?"
    return f"{unknown}; expected one of: {', '.join(known)}" if known else unknown


def _keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the model allows in the mapping at `loc` (through lists, and through a mapping of names to
    models such as `performance.kernels.<kernel>`)."""
    model: type[BaseModel] | None = SluiceConfig
    named = False  # the next part is a name the user chose, a key of a mapping of models
    for part in loc:
        if model is None:
            break
        if named or not isinstance(part, str):
            named = False
            continue
        field = model.model_fields.get(part)
        model = _nested_model(field.annotation) if field else None
        named = field is not None and _is_mapping(field.annotation)
    return list(model.model_fields) if model else []


def _key_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key the model allows, as dotted paths (`fork.branch`), in declaration order."""
    paths = []
    for name, field in model.model_fields.items():
        paths.append(prefix + name)
        nested = _nested_model(field.annotation)
        if nested is not None:
            paths += _key_paths(nested, f"{prefix}{name}{_step(field.annotation)}")
    return paths


def _step(annotation: object) -> str:
    """How a dotted path goes into a field's models: `.` into one, `.<name>.` into a mapping of them, `[].`
    into a list of them."""
    if _is_mapping(annotation):
        return ".<name>."
    sequence = typing.get_origin(annotation) in (tuple, list)
    return "[]." if sequence or any(_step(arg) == "[]." for arg in typing.get_args(annotation)) else "."


def _is_mapping(annotation: object) -> bool:
    if typing.get_origin(annotation) in (dict, Mapping):
        return True
    return any(_is_mapping(arg) for arg in typing.get_args(annotation))


def _nested_model(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(filter(None, (_nested_model(arg) for arg in typing.get_args(annotation))), None)
