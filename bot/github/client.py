"""GitHub adapter: App JWT, cached installation tokens, rate limits, retries, ETags and pagination."""

from __future__ import annotations

import asyncio
import email.utils
import http
import json
import logging
import random
import urllib.parse
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import jwt
from gidgethub import BadRequest, GitHubBroken, HTTPException, sansio
from gidgethub.aiohttp import GitHubAPI

from bot.core.errors import Forbidden, NotFound, RateLimited, SluiceError, TooLarge, Unavailable, redact
from bot.core.webhooks import GitHubApp, InstallationToken
from bot.github.answers import parsed
from bot.ports import Clock

log = logging.getLogger(__name__)

REQUESTER = "sluice"
DEFAULT_BASE_URL = "https://api.github.com"
JWT_BACKDATE_S = 60  # tolerate clock drift between us and GitHub
JWT_LIFETIME_S = 9 * 60  # GitHub rejects app JWTs that live longer than 10 minutes
TOKEN_REFRESH_MARGIN = timedelta(minutes=5)
CONTENT_CREATING_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
CONTENT_CREATING_PER_MINUTE = 80
SECONDARY_BACKOFF_S = 60.0
SECONDARY_BACKOFF_MAX_S = 15 * 60.0
SERVER_ERROR_BACKOFF_S = 1.0
SERVER_ERROR_BACKOFF_MAX_S = 30.0
PRIMARY_RESET_SLACK_S = 1.0
PRIMARY_WAIT_MAX_S = 3600.0 + 60.0
# GitHub's Retry-After is seconds to a minute or so; a hostile or broken value must not park a worker.
RETRY_AFTER_MAX_S = SECONDARY_BACKOFF_MAX_S
ETAG_CACHE_ENTRIES = 1024
ERROR_BODY_BYTES = 64 * 1024  # of a streamed error answer, read for its message
SECONDARY_LIMIT_WORDS = ("secondary rate limit", "abuse detection")

Sleep = Callable[[float], Awaitable[None]]
OnCall = Callable[[str], None]
OnWait = Callable[[str, float], None]


class GitHubError(SluiceError):
    """GitHub could not be reached or answered in a way we cannot use; never carries a secret."""


class GitHubUnreachable(GitHubError, Unavailable):
    """No answer from GitHub: the connection failed or timed out."""


class GitHubDown(GitHubError, Unavailable):
    """GitHub answered with a server error (5xx)."""


class GitHubRateLimited(GitHubError, RateLimited):
    """GitHub's rate limit still held after the waits one request is allowed."""


class GitHubNotFound(GitHubError, NotFound):
    """GitHub answered 404, 410 or 422: what Sluice asked for is not there or not acceptable as sent."""


class GitHubForbidden(GitHubError, Forbidden):
    """GitHub answered 401 or 403 for a reason other than a rate limit: the App lacks a permission."""


class InstallationGone(GitHubForbidden):
    """The installation was removed or suspended: its tokens are dead and no retry brings them back."""

    def __init__(self, installation_id: int, why: str) -> None:
        super().__init__(
            f"GitHub installation {installation_id} {why}: Sluice cannot act for its repositories",
            "install the App again on that account (or lift the suspension); Sluice registers its "
            "repositories again on the installation event",
        )
        self.installation_id = installation_id


def github_failure(exc: HTTPException) -> GitHubError:
    """The Sluice failure an HTTP error from GitHub stands for, with what to do about it."""
    status = int(exc.status_code)
    answered = f"GitHub answered {status}: {redact(str(exc)) or exc.status_code.phrase}"
    if status >= 500:
        return GitHubDown(answered, "nothing to do: it is tried again later (https://www.githubstatus.com)")
    if status in (403, 429) and (
        _primary_reset_at(exc.headers) is not None or _is_secondary_limit(status, exc)
    ):
        return GitHubRateLimited(answered, "nothing to do: it is tried again once the limit resets")
    if status in (401, 403):
        return GitHubForbidden(
            answered,
            "grant the App the permission GitHub names (accept its new permissions on the installation)",
        )
    if status >= 400:
        return GitHubNotFound(
            answered, "check that the repository, branch or pull request exists and that the request fits it"
        )
    return GitHubError(answered, "report it: Sluice does not expect this answer from GitHub")


def app_jwt(app_id: int, private_key_pem: str, *, now: datetime) -> str:
    """The App's own credential: RS256, backdated 60 s, valid for 9 minutes from `now`."""
    epoch = int(now.timestamp())  # JWT claims are seconds since the epoch
    claims = {"iat": epoch - JWT_BACKDATE_S, "exp": epoch + JWT_LIFETIME_S, "iss": str(app_id)}
    return jwt.encode(claims, private_key_pem, algorithm="RS256")


class TokenCache:
    """Installation id → (token, expires_at); a token is handed out only while it has > 5 minutes left."""

    def __init__(self, *, refresh_margin: timedelta = TOKEN_REFRESH_MARGIN) -> None:
        self._margin = refresh_margin
        self._tokens: dict[int, tuple[str, datetime]] = {}

    def get(self, installation_id: int, *, now: datetime) -> str | None:
        cached = self._tokens.get(installation_id)
        if cached is None or cached[1] - now < self._margin:
            return None
        return cached[0]

    def put(self, installation_id: int, token: str, *, expires_at: datetime) -> None:
        self._tokens[installation_id] = (token, expires_at)

    def forget(self, installation_id: int) -> None:
        self._tokens.pop(installation_id, None)

    def clear(self) -> None:
        self._tokens.clear()


class RollingWindow:
    """At most `limit` slots in any `period` seconds; `reserve` says how long to wait for the next slot.

    A refilling token bucket of 80 still admits up to 160 requests in one rolling minute; this
    reserves slots so that GitHub's "80 content-creating requests per minute" is never exceeded.
    """

    def __init__(
        self, *, limit: int = CONTENT_CREATING_PER_MINUTE, period: timedelta = timedelta(minutes=1)
    ) -> None:
        self._period = period
        self._slots: deque[datetime] = deque(maxlen=limit)

    def reserve(self, *, now: datetime) -> float:
        slot = now
        if len(self._slots) == self._slots.maxlen:
            slot = max(now, self._slots[0] + self._period)
        self._slots.append(slot)
        return (slot - now).total_seconds()


class LRUCache(MutableMapping[str, Any]):
    """A bounded mapping for gidgethub's ETag cache."""

    def __init__(self, *, max_entries: int = ETAG_CACHE_ENTRIES) -> None:
        self._max = max_entries
        self._data: OrderedDict[str, Any] = OrderedDict()

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]
        self._data.move_to_end(key)
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._max:
            self._data.popitem(last=False)

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _retry_after_s(value: str | None, *, now: datetime) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - now.timestamp()
        except (TypeError, ValueError):
            return None
    if seconds != seconds:  # NaN
        return None
    return min(RETRY_AFTER_MAX_S, max(0.0, seconds))


def _primary_reset_at(headers: Mapping[str, str]) -> float | None:
    if headers.get("x-ratelimit-remaining") != "0":
        return None
    try:
        return float(headers["x-ratelimit-reset"])
    except (KeyError, ValueError):
        return None


def _is_secondary_limit(status: int, exc: HTTPException) -> bool:
    if status == 429 or (status == 403 and "retry-after" in exc.headers):
        return True
    text = " ".join(str(arg) for arg in exc.args).lower()
    return status == 403 and any(word in text for word in SECONDARY_LIMIT_WORDS)


def wait_before_retry(
    exc: HTTPException, *, method: str, attempt: int, now: datetime, rng: random.Random
) -> tuple[str, float] | None:
    """(reason, seconds) to wait before retrying a failed request, or None when retrying cannot help.

    5xx on POST is not retried: GitHub may have created the thing before failing, and a blind
    retry would duplicate a comment or check run. The caller's job decides what to do.
    """
    status = int(exc.status_code)
    reset_at = _primary_reset_at(exc.headers)
    if status in (403, 429) and reset_at is not None:
        until_reset = reset_at - now.timestamp()  # the header is epoch seconds
        return "primary_rate_limit", min(PRIMARY_WAIT_MAX_S, max(0.0, until_reset) + PRIMARY_RESET_SLACK_S)
    if _is_secondary_limit(status, exc):
        retry_after = _retry_after_s(exc.headers.get("retry-after"), now=now)
        if retry_after is not None:
            return "secondary_rate_limit", retry_after
        return "secondary_rate_limit", min(SECONDARY_BACKOFF_MAX_S, SECONDARY_BACKOFF_S * 2 ** (attempt - 1))
    if status >= 500 and method != "POST":
        ceiling = min(SERVER_ERROR_BACKOFF_MAX_S, SERVER_ERROR_BACKOFF_S * 2 ** (attempt - 1))
        return "server_error", ceiling * rng.uniform(0.5, 1.0)
    return None


@dataclass
class _Policy:
    """What every request shares: time, the hooks, and how often to retry."""

    clock: Clock
    sleep: Sleep
    max_retries: int
    on_call: OnCall | None
    on_wait: OnWait | None
    rng: random.Random = field(default_factory=random.Random)

    async def wait(self, reason: str, seconds: float) -> None:
        log.info("GitHub: waiting %.1f s (%s)", seconds, reason)
        if self.on_wait is not None:
            self.on_wait(reason, seconds)
        await self.sleep(seconds)


class _PolicedAPI(GitHubAPI):
    """gidgethub's aiohttp API with fresh credentials on every attempt and Sluice's rate-limit policy."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        base_url: str,
        authorization: Callable[[], Awaitable[str]],
        policy: _Policy,
        cache: MutableMapping[str, Any] | None,
        installation_id: int | None = None,
        on_rejected: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(session, REQUESTER, cache=cache, base_url=base_url)
        self._installation_id = installation_id
        self._authorization = authorization
        self._policy = policy
        self._content_window = RollingWindow()
        self._on_rejected = on_rejected  # drops a token GitHub answered 401 for, so the next one is new

    async def _make_request(self, *args: Any, **kwargs: Any) -> tuple[bytes, str | None, int]:
        """One re-mint on a 401: a token can die before its expiry (revoked, rotated, GitHub's own reset)."""
        try:
            return await super()._make_request(*args, **kwargs)
        except BadRequest as exc:
            if exc.status_code != 401 or self._on_rejected is None:
                raise
        log.warning("GitHub: %s %s answered 401; minting a new installation token once", args[0], args[1])
        self._on_rejected()
        try:
            return await super()._make_request(*args, **kwargs)
        except BadRequest as exc:
            if exc.status_code == 401 and self._installation_id is not None:
                raise InstallationGone(self._installation_id, "rejects even a new token (401)") from None
            raise

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        # Credentials are added per attempt so a retry after a long wait uses an unexpired token.
        credential = await self._authorization()
        authorised = {**headers, "authorization": credential} if credential else dict(headers)
        if method == "GET" and self._full_last_page(url):
            # A 304 would hand back the page's old Link header: no next page, though item 101 is there now.
            authorised.pop("if-none-match", None)
            authorised.pop("if-modified-since", None)
        if self._policy.on_call is not None:
            self._policy.on_call(method)
        log.debug("GitHub: %s %s", method, url)
        try:
            answer = await super()._request(method, url, authorised, body)
        except (aiohttp.ClientError, TimeoutError) as exc:
            detail = redact(f"{type(exc).__name__}: {exc}")
            raise GitHubUnreachable(
                f"{method} {url} failed: {detail}",
                "check the GitHub URL and network; it is tried again later",
            ) from None
        if answer[0] == 304 and self.rate_limit is not None:
            # gidgethub counted the request before asking, and reads GitHub's count only from other answers;
            # GitHub does not count a 304, and without this a run of them would wait for the hour's reset.
            self.rate_limit.remaining += 1
        return answer

    def _full_last_page(self, url: str) -> bool:
        """Whether the ETag cache holds `url` as a full page of a list with no next page: a new item goes
        to a next page, the cached page's body (and so its ETag) stays the same, and its Link is stale."""
        cached = self._cache.get(url) if self._cache is not None else None
        if cached is None or cached[3] is not None:  # (etag, last-modified, data, next page)
            return False
        data = cached[2]
        if not isinstance(data, list | dict):
            return False
        lists = [data] if isinstance(data, list) else [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            return False
        per_page = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("per_page", ["30"])[-1]
        return per_page.isdigit() and len(lists[0]) >= int(per_page)

    async def stream_get(
        self, url: str, headers: Mapping[str, str], *, max_bytes: int, what: str
    ) -> tuple[int, bytes]:
        """GET `url` read in chunks, at most `max_bytes` of body (TooLarge beyond). An error answer raises
        what `github_failure` makes of it (a rate limit is retryable, as for every other request), its
        message read from at most ERROR_BODY_BYTES of its body."""
        credential = await self._authorization()
        authorised = {**headers, "authorization": credential} if credential else dict(headers)
        if self._policy.on_call is not None:
            self._policy.on_call("GET")
        log.debug("GitHub: GET %s (streamed, at most %d bytes)", url, max_bytes)
        try:
            async with self._session.get(url, headers=authorised) as response:
                if response.status >= 400:
                    said = (await response.content.read(ERROR_BODY_BYTES)).decode("utf-8", "replace")
                    raise github_failure(_http_error(response.status, said, response.headers))
                declared = response.content_length
                if declared is not None and declared > max_bytes:
                    raise TooLarge(what, declared, max_bytes)
                body = bytearray()
                async for chunk in response.content.iter_chunked(64 * 1024):
                    body += chunk
                    if len(body) > max_bytes:
                        raise TooLarge(what, None, max_bytes)
                return response.status, bytes(body)
        except (aiohttp.ClientError, TimeoutError) as exc:
            detail = redact(f"{type(exc).__name__}: {exc}")
            raise GitHubUnreachable(
                f"GET {url} failed: {detail}", "check the GitHub URL and network; it is tried again later"
            ) from None

    async def sleep(self, seconds: float) -> None:
        await self._policy.sleep(seconds)

    async def manage_rate_limit(self, *, method: str, url: str) -> None:
        now = self._policy.clock()
        # gidgethub decrements `remaining` before each request, so < 0 means the quota is spent.
        if self.rate_limit is not None and self.rate_limit.remaining < 0:
            until_reset = (self.rate_limit.reset_datetime - now).total_seconds()
            if until_reset > 0:
                await self._policy.wait("primary_rate_limit", min(PRIMARY_WAIT_MAX_S, until_reset))
        if method in CONTENT_CREATING_METHODS:
            wait = self._content_window.reserve(now=self._policy.clock())
            if wait > 0:
                await self._policy.wait("content_creation", wait)

    async def handle_rate_limit_error(
        self, *, method: str, url: str, exception: HTTPException, attempt: int
    ) -> bool:
        if attempt > self._policy.max_retries:
            return False
        decision = wait_before_retry(
            exception, method=method, attempt=attempt, now=self._policy.clock(), rng=self._policy.rng
        )
        if decision is None:
            return False
        reason, seconds = decision
        log.warning("GitHub: %s %s answered %d; retry %d", method, url, exception.status_code, attempt)
        await self._policy.wait(reason, seconds)
        return True


def _http_error(status: int, body: str, headers: Mapping[str, str]) -> HTTPException:
    """A streamed error answer as gidgethub would have raised it: its JSON `message`, else its text."""
    try:
        message = json.loads(body).get("message", "") if body.lstrip().startswith("{") else body
    except (ValueError, AttributeError):
        message = body
    cls = BadRequest if status < 500 else GitHubBroken
    try:
        code = http.HTTPStatus(status)
    except ValueError:  # a status Python does not name: the class's generic one
        code = http.HTTPStatus.BAD_REQUEST if status < 500 else http.HTTPStatus.INTERNAL_SERVER_ERROR
    return cls(code, str(message)[:200], headers={k.lower(): v for k, v in headers.items()})


def _page_items(data: Any, iterable_key: str | None) -> list[Any]:
    if isinstance(data, list):
        return data
    if not isinstance(data, dict):
        raise GitHubError(f"expected a list page, got {type(data).__name__}", "pass a list endpoint")
    if iterable_key is not None:
        return list(data[iterable_key])
    lists = [value for value in data.values() if isinstance(value, list)]
    if len(lists) != 1:
        keys = sorted(data)
        raise GitHubError(f"cannot tell which key holds the items among {keys}", "pass iterable_key=")
    return lists[0]


class InstallationAPI:
    """Requests as one installation; its token is refreshed as needed, even mid-retry."""

    def __init__(self, api: _PolicedAPI) -> None:
        self._api = api

    async def get(self, url: str, url_vars: Mapping[str, Any] | None = None, **kw: Any) -> Any:
        return await self._api.getitem(url, url_vars or {}, **kw)

    async def getiter(
        self,
        url: str,
        url_vars: Mapping[str, Any] | None = None,
        *,
        iterable_key: str | None = None,
        accept: str = sansio.accept_format(),
    ) -> AsyncIterator[Any]:
        """Every item across the pages (Link: rel="next"); list pages or {"total_count", "<items>"} pages."""
        next_url: str | None = url
        while next_url:
            # gidgethub's own getiter does this; it needs the key up front, we find it per page.
            data, next_url, _ = await self._api._make_request("GET", next_url, url_vars or {}, b"", accept)
            for item in _page_items(data, iterable_key):
                yield item

    async def post(self, url: str, url_vars: Mapping[str, Any] | None = None, *, data: Any, **kw: Any) -> Any:
        return await self._api.post(url, url_vars or {}, data=data, **kw)

    async def download(self, url: str, *, max_bytes: int, what: str = "the download") -> bytes:
        """A binary body (an artifact's zip): GitHub answers 302 to its storage, which is followed. Read as
        a stream: more than `max_bytes` (as Content-Length says, or as it arrives) raises TooLarge."""
        full = sansio.format_url(url, {}, base_url=self._api.base_url)
        headers = sansio.create_headers(REQUESTER, accept=sansio.accept_format())
        try:
            _, body = await self._api.stream_get(full, headers, max_bytes=max_bytes, what=what)
        except GitHubNotFound as gone:
            raise GitHubNotFound(
                gone.message, "the artifact expired or was deleted: run the tier again"
            ) from None
        return body

    async def patch(
        self, url: str, url_vars: Mapping[str, Any] | None = None, *, data: Any, **kw: Any
    ) -> Any:
        return await self._api.patch(url, url_vars or {}, data=data, **kw)

    async def put(
        self, url: str, url_vars: Mapping[str, Any] | None = None, *, data: Any = b"", **kw: Any
    ) -> Any:
        return await self._api.put(url, url_vars or {}, data=data, **kw)

    async def delete(
        self, url: str, url_vars: Mapping[str, Any] | None = None, *, data: Any = b"", **kw: Any
    ) -> None:
        await self._api.delete(url, url_vars or {}, data=data, **kw)


class GitHubClient:
    """The App: mints JWTs and installation tokens and hands out per-installation APIs."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        app_id: int,
        private_key: str,
        base_url: str = DEFAULT_BASE_URL,
        clock: Clock,
        sleep: Sleep | None = None,
        max_retries: int = 4,
        on_call: OnCall | None = None,
        on_wait: OnWait | None = None,
    ) -> None:
        self._session = session
        self._app_id = app_id
        self._private_key = private_key
        self._base_url = base_url
        self._clock = clock  # epoch seconds only where JWT claims and GitHub's headers need them
        self._policy = _Policy(self._clock, sleep or asyncio.sleep, max_retries, on_call, on_wait)
        self._tokens = TokenCache()
        self._token_locks: dict[int, asyncio.Lock] = {}
        self._installations: dict[int, InstallationAPI] = {}
        self._app_api = self._api(self._app_authorization, cache=None)
        self._anonymous: InstallationAPI | None = None

    def __repr__(self) -> str:
        return f"GitHubClient(app_id={self._app_id}, base_url={self._base_url!r})"

    def _api(
        self,
        authorization: Callable[[], Awaitable[str]],
        *,
        cache: LRUCache | None,
        installation_id: int | None = None,
        on_rejected: Callable[[], None] | None = None,
    ) -> _PolicedAPI:
        return _PolicedAPI(
            self._session,
            base_url=self._base_url,
            authorization=authorization,
            policy=self._policy,
            cache=cache,
            installation_id=installation_id,
            on_rejected=on_rejected,
        )

    async def _app_authorization(self) -> str:
        return f"bearer {app_jwt(self._app_id, self._private_key, now=self._clock())}"

    async def app_info(self) -> GitHubApp:
        """`GET /app` as the App itself: its id and slug."""
        return parsed(GitHubApp, await self._app_api.getitem("/app"), what="the App")

    def app_api(self) -> InstallationAPI:
        """Requests as the App itself (JWT), e.g. its webhook delivery log under `/app/hook/deliveries`."""
        return InstallationAPI(self._app_api)

    async def app_get(self, url: str, url_vars: Mapping[str, Any] | None = None) -> Any:
        """`GET` as the App itself (JWT): `/app/installations/{id}`, `/repos/{owner}/{repo}/installation`."""
        return await self._app_api.getitem(url, url_vars or {})

    async def installation_token(self, installation_id: int) -> str:
        """A token with more than 5 minutes left; minted once per installation however many ask at once."""
        lock = self._token_locks.setdefault(installation_id, asyncio.Lock())
        async with lock:
            token = self._tokens.get(installation_id, now=self._clock())
            if token is not None:
                return token
            minted = await self._mint(installation_id)
            self._tokens.put(installation_id, minted.token, expires_at=minted.expires_at)
            log.info(
                "GitHub: new token for installation %d, expires at %s", installation_id, minted.expires_at
            )
            return minted.token

    async def _mint(self, installation_id: int) -> InstallationToken:
        try:
            answer = await self._app_api.post(
                "/app/installations/{installation_id}/access_tokens",
                {"installation_id": installation_id},
                data=b"",
            )
        except BadRequest as exc:
            # 404: the installation was deleted; a 403 that is no rate limit: it is suspended (Sluice asks
            # for no more than it was granted). Only a person's act brings either back.
            if exc.status_code == 404:
                raise InstallationGone(installation_id, "no longer exists (GitHub answers 404)") from None
            if isinstance(github_failure(exc), GitHubForbidden) and exc.status_code == 403:
                raise InstallationGone(installation_id, "is suspended (GitHub answers 403)") from None
            raise
        return parsed(InstallationToken, answer, what=f"installation {installation_id}'s token")

    def forget_token(self, installation_id: int) -> None:
        """Drop the cached token: GitHub refused it, so the next request mints a new one."""
        self._tokens.forget(installation_id)

    def forget_tokens(self) -> None:
        """Drop every cached token (git said one was refused, not which)."""
        self._tokens.clear()

    def anonymous(self) -> InstallationAPI:
        """Requests without credentials: what GitHub shows anyone of a public repository (its own, lower
        rate limit), for an upstream the App is not installed on."""
        if self._anonymous is None:

            async def no_credentials() -> str:
                return ""

            self._anonymous = InstallationAPI(self._api(no_credentials, cache=LRUCache()))
        return self._anonymous

    def for_installation(self, installation_id: int) -> InstallationAPI:
        api = self._installations.get(installation_id)
        if api is None:

            async def authorization() -> str:
                return f"token {await self.installation_token(installation_id)}"

            api = InstallationAPI(
                self._api(
                    authorization,
                    cache=LRUCache(),
                    installation_id=installation_id,
                    on_rejected=lambda: self.forget_token(installation_id),
                )
            )
            self._installations[installation_id] = api
        return api
