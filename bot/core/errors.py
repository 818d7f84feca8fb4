"""Errors a person can act on: what went wrong, what to do next, and whether trying again may help."""

from __future__ import annotations

import re

from pydantic import ValidationError

# What a credential looks like in a message: in a URL, an Authorization header, a token, a JWT, a PEM key.
URL_CREDENTIALS = re.compile(r"//[^/@\s]*@")
# `user:password@host` without its `//` (a URL with no scheme, `https:/`): a word, a colon, more, then `@`.
BARE_CREDENTIALS = re.compile(r"(?<![^\s'\"(<\[/=])[^\s/@:'\"]+:[^\s/@'\"]+@")
SECRETS = re.compile(
    r"(?i)\b(?:token|bearer)\s+\S+"  # an Authorization header value
    r"|\bgh[opsuvr]_\w+"  # GitHub token prefixes
    r"|\beyJ[\w-]*\.[\w-]+\.[\w-]+"  # a JWT
    r"|-----BEGIN[^-]*PRIVATE KEY-----.*?(?:-----END[^-]*PRIVATE KEY-----|$)",
    re.DOTALL,
)


def redact(text: str) -> str:
    """`text` without credentials, for messages, logs and comments: `https://user:token@host` becomes
    `https://host` (and `user:token@host` `host`), and tokens, JWTs and private keys become `[redacted]`."""
    return SECRETS.sub("[redacted]", BARE_CREDENTIALS.sub("", URL_CREDENTIALS.sub("//", text)))


def first_line(exc: BaseException) -> str:
    """The first line of what an exception says (its type's name when it says nothing), redacted and at most
    300 characters: for a log line or a refusal that must stay one line."""
    return (redact(str(exc)).strip().splitlines() or [type(exc).__name__])[0][:300]


class SluiceError(Exception):
    """A failure with a remedy; the CLI prints both and exits 2, a job records both.

    `retryable` says whether the same job may succeed later on its own (the network comes back, a limit
    resets): the worker retries it. Not retryable means a person must change something first. Each
    family below sets its default; a raise may say otherwise for its one case.
    """

    exit_code = 2
    retryable = False

    def __init__(self, message: str, remedy: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.remedy = remedy
        if retryable is not None:
            self.retryable = retryable

    def __str__(self) -> str:
        return f"{self.message}\n  → {self.remedy}" if self.remedy else self.message


# -- not retryable: the same input fails the same way ----------------------------------------------------


class BadInput(SluiceError):
    """What a person gave Sluice (an argument, a ref, a path, a URL, a webhook payload) cannot be used."""


class ConfigRefused(SluiceError):
    """A configuration Sluice will not run with: invalid, or refused by the operator's policy."""


class NotFound(SluiceError):
    """What was asked for is not there, or cannot be processed as sent (GitHub's 404, 410 and 422)."""


class Forbidden(SluiceError):
    """Sluice is not allowed to do it (GitHub's 401 and 403 that are not a rate limit): a permission,
    an installation or a token is missing."""


# -- retryable: it may pass on its own -------------------------------------------------------------------


class Unavailable(SluiceError):
    """Something Sluice depends on did not answer (the network, DNS, GitHub's 5xx, the database)."""

    retryable = True


class RateLimited(SluiceError):
    """GitHub's primary or secondary rate limit held longer than one request may wait."""

    retryable = True


# -- git -------------------------------------------------------------------------------------------------


class MergeRefused(SluiceError):
    """GitHub refused the merge: 409 (the head moved since the gate looked), 405 (not mergeable), 422."""

    def __init__(self, status: int, message: str) -> None:
        remedy = (
            "nothing to do: the new head is validated and gated again"
            if status == 409
            else "resolve what GitHub names (conflicts with trunk, branch protection), then push"
        )
        super().__init__(f"GitHub refused the merge ({status}): {message}", remedy)
        self.status = status


class TooLarge(BadInput):
    """A download (a tier run's artifact) is over Sluice's limit: refused, never read whole into memory."""

    def __init__(self, what: str, size: int | None, limit: int) -> None:
        told = f"{size:,} bytes" if size is not None else "more"
        super().__init__(
            f"{what} is {told}, over Sluice's limit of {limit:,} bytes: refused",
            "make the tier upload only report.json and tier.log (a smaller log), then run the tier again",
        )
        self.size, self.limit = size, limit


class DispatchRefused(BadInput):
    """GitHub refused a workflow dispatch: 404 (no such workflow on that ref) or 422 (inputs it does not
    take). Retrying the same request cannot help; the check run says what to fix."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(
            f"GitHub refused the workflow dispatch ({status}): {message}",
            "add the tier's workflow from deploy/workflows/ to fork trunk, with the inputs Sluice sends",
        )
        self.status, self.reason = status, message


class GitError(SluiceError):
    """A git command failed or a repository is not usable as given (a path, a ref, a URL)."""


class MissingObject(GitError):
    """git needs an object this repository lacks (a partial clone, a snapshot without large blobs)."""

    def __init__(self, message: str, *, oid: str) -> None:
        super().__init__(message, f"fetch object {oid} into the repository, or judge the commit without it")
        self.oid = oid


class GitTransportError(GitError):
    """A fetch, push or ls-remote over the network did not go through (the remote was unreachable, or a
    push's lease was lost because the branch moved): the next attempt fetches again."""

    retryable = True


class GitAuthRejected(GitTransportError):
    """A remote refused the token git sent (revoked, or its installation gone): a new one must be minted."""


def first_problem(exc: ValidationError, *, whole: str = "") -> tuple[str, str]:
    """Where and why the first of a model's validation errors is: the field's dotted path (`whole` when it
    is the input as a whole) and pydantic's reason. Never the value: it may be a secret or hostile text."""
    first = exc.errors(include_input=False, include_url=False)[0]
    return ".".join(str(part) for part in first["loc"]) or whole, first["msg"]
