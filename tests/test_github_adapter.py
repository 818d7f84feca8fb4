"""The GitHub adapter against a small real HTTP server on loopback: auth, pages, ETags, limits, retries."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
import gidgethub
import jwt
import pytest
import pytest_asyncio
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.core.errors import TooLarge, Unavailable
from bot.github.client import GitHubClient, GitHubError, InstallationAPI, app_jwt

APP_ID = 4242
INSTALLATION = 77
T0 = 1_760_000_000.0
TOKEN_LIFETIME_S = 3600
GHE_PREFIX = "/api/v3"
# Explicit, so these run whether pytest-asyncio is in strict or auto mode.
pytestmark = pytest.mark.asyncio

SECONDARY = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."}


@dataclass(frozen=True)
class AppKey:
    private_pem: str
    public_pem: str


@pytest.fixture(scope="module")
def app_key() -> AppKey:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return AppKey(private.decode(), public.decode())


class FakeClock:
    """The client's clock (an aware datetime when called); the fake GitHub reads its epoch seconds `now()`."""

    def __init__(self, start: float = T0) -> None:
        self.t = start

    def __call__(self) -> datetime:
        return datetime.fromtimestamp(self.t, UTC)

    def now(self) -> float:
        return self.t


@dataclass
class Fault:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=lambda: {"message": "Server Error"})


@dataclass
class FakeGitHub:
    """A few GitHub endpoints that check credentials the way GitHub does and record what they saw."""

    clock: FakeClock
    public_pem: str
    jwts_seen: list[str] = field(default_factory=list)
    tokens: dict[str, float] = field(default_factory=dict)  # issued token → expires at
    paths: list[str] = field(default_factory=list)
    if_none_match: list[str | None] = field(default_factory=list)
    faults: dict[str, list[Fault]] = field(default_factory=dict)
    fault_calls: dict[str, int] = field(default_factory=dict)
    posts_at: list[float] = field(default_factory=list)
    mint_drops: str | None = None  # a field the token answer leaves out (GitHub misbehaving)

    def routes(self, prefix: str) -> list[web.RouteDef]:
        return [
            web.post(prefix + "/app/installations/{id}/access_tokens", self.mint_token),
            web.get(prefix + "/repos/{owner}/{repo}", self.repo),
            web.get(prefix + "/repos/{owner}/{repo}/pulls", self.pulls),
            web.get(prefix + "/repos/{owner}/{repo}/commits/{sha}/check-runs", self.check_runs),
            web.post(prefix + "/repos/{owner}/{repo}/issues/{number}/comments", self.comment),
            web.route("*", prefix + "/fault/{name}", self.fault),
            web.get(prefix + "/blob/{size}", self.blob),
        ]

    @web.middleware
    async def authenticate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.paths.append(request.path)
        auth = request.headers.get("Authorization", "")
        if request.path.endswith("/access_tokens"):
            scheme, _, token = auth.partition(" ")
            if scheme.lower() != "bearer":
                return web.json_response({"message": "A JSON web token could not be decoded"}, status=401)
            # The fake clock is far from real time, so GitHub's own time checks are ours to make.
            claims = jwt.decode(
                token,
                self.public_pem,
                algorithms=["RS256"],
                options={"verify_exp": False, "verify_iat": False},
            )
            assert claims["iss"] == str(APP_ID)
            assert claims["iat"] <= self.clock.now() < claims["exp"]
            self.jwts_seen.append(token)
        else:
            scheme, _, token = auth.partition(" ")
            if scheme != "token" or self.tokens.get(token, 0) <= self.clock.now():
                return web.json_response({"message": "Bad credentials"}, status=401)
        return await handler(request)

    async def mint_token(self, request: web.Request) -> web.Response:
        token = f"ghs_installation{request.match_info['id']}n{len(self.tokens)}"
        expires_at = self.clock.now() + TOKEN_LIFETIME_S
        self.tokens[token] = expires_at
        stamp = datetime.fromtimestamp(expires_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        answer = {"token": token, "expires_at": stamp}
        answer.pop(self.mint_drops or "", None)
        return web.json_response(answer, status=201)

    async def repo(self, request: web.Request) -> web.Response:
        self.if_none_match.append(request.headers.get("If-None-Match"))
        if request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304, headers={"ETag": '"v1"'})
        full_name = f"{request.match_info['owner']}/{request.match_info['repo']}"
        return web.json_response({"full_name": full_name}, headers={"ETag": '"v1"'})

    def _page(self, request: web.Request, pages: int) -> tuple[int, dict[str, str]]:
        page = int(request.query.get("page", "1"))
        headers = {}
        if page < pages:
            headers["Link"] = f'<{request.url.with_query(page=page + 1)}>; rel="next"'
        return page, headers

    async def pulls(self, request: web.Request) -> web.Response:
        page, headers = self._page(request, pages=3)
        return web.json_response([{"number": page * 10 + i} for i in range(2)], headers=headers)

    async def check_runs(self, request: web.Request) -> web.Response:
        page, headers = self._page(request, pages=2)
        runs = [{"name": f"L{page}-{i}"} for i in range(2)]
        return web.json_response({"total_count": 4, "check_runs": runs}, headers=headers)

    async def comment(self, request: web.Request) -> web.Response:
        self.posts_at.append(self.clock.now())
        return web.json_response(
            {"id": len(self.posts_at), "body": (await request.json())["body"]}, status=201
        )

    async def blob(self, request: web.Request) -> web.StreamResponse:
        """`size` bytes, with Content-Length (`?declared=no`: chunked, as a storage that streams answers)."""
        size = int(request.match_info["size"])
        if request.query.get("declared") != "no":
            return web.Response(body=b"z" * size)
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for _ in range(0, size, 1000):
            await response.write(b"z" * min(1000, size))
        await response.write_eof()
        return response

    async def fault(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.fault_calls[name] = self.fault_calls.get(name, 0) + 1
        queue = self.faults.get(name, [])
        if queue:
            fault = queue.pop(0)
            return web.json_response(fault.body, status=fault.status, headers=fault.headers)
        return web.json_response({"ok": name})


@dataclass
class Harness:
    github: GitHubClient
    server: FakeGitHub
    clock: FakeClock
    sleeps: list[float]
    waits: list[tuple[str, float]]
    calls: list[str]

    @property
    def api(self) -> InstallationAPI:
        return self.github.for_installation(INSTALLATION)


MakeHarness = Callable[..., Any]


@pytest_asyncio.fixture
async def harness(aiohttp_server: Any, app_key: AppKey) -> AsyncIterator[MakeHarness]:
    sessions: list[aiohttp.ClientSession] = []

    async def make(*, base_path: str = "", max_retries: int = 4) -> Harness:
        clock = FakeClock()
        fake = FakeGitHub(clock, app_key.public_pem)
        app = web.Application(middlewares=[fake.authenticate])
        app.add_routes(fake.routes(""))
        app.add_routes(fake.routes(GHE_PREFIX))
        server = await aiohttp_server(app)
        session = aiohttp.ClientSession()
        sessions.append(session)
        sleeps: list[float] = []
        waits: list[tuple[str, float]] = []
        calls: list[str] = []

        async def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            clock.t += seconds

        github = GitHubClient(
            session,
            app_id=APP_ID,
            private_key=app_key.private_pem,
            base_url=str(server.make_url(base_path)),
            clock=clock,
            sleep=sleep,
            max_retries=max_retries,
            on_call=calls.append,
            on_wait=lambda reason, seconds: waits.append((reason, seconds)),
        )
        return Harness(github, fake, clock, sleeps, waits, calls)

    yield make
    for session in sessions:
        await session.close()


@pytest.mark.parametrize("declared", ["yes", "no"])
async def test_a_download_over_its_limit_is_refused_as_it_streams(
    harness: MakeHarness, declared: str
) -> None:
    h = await harness()
    assert await h.api.download(f"/blob/5000?declared={declared}", max_bytes=5000) == b"z" * 5000
    with pytest.raises(TooLarge) as refused:
        await h.api.download(f"/blob/50000?declared={declared}", max_bytes=5000, what="the zip")
    told = "50,000 bytes" if declared == "yes" else "more"  # without Content-Length: cut off as it arrives
    assert refused.value.message == f"the zip is {told}, over Sluice's limit of 5,000 bytes: refused"


async def test_app_jwt_is_rs256_backdated_and_short_lived(app_key: AppKey) -> None:
    token = app_jwt(APP_ID, app_key.private_pem, now=datetime.fromtimestamp(T0, UTC))

    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    claims = jwt.decode(token, app_key.public_pem, algorithms=["RS256"], options={"verify_exp": False})
    assert claims["iss"] == str(APP_ID)
    assert claims["iat"] == T0 - 60
    assert 0 < claims["exp"] - claims["iat"] <= 600
    assert claims["exp"] > T0


async def test_installation_token_is_cached_until_five_minutes_before_expiry(harness: MakeHarness) -> None:
    h = await harness()

    first = await h.github.installation_token(INSTALLATION)
    assert await h.api.get("/repos/org/fork") == {"full_name": "org/fork"}
    h.clock.t = T0 + TOKEN_LIFETIME_S - 301
    assert await h.github.installation_token(INSTALLATION) == first
    await h.api.get("/repos/org/other")
    assert len(h.server.jwts_seen) == 1

    h.clock.t = T0 + TOKEN_LIFETIME_S - 299
    await h.api.get("/repos/org/fork")
    second = await h.github.installation_token(INSTALLATION)

    assert second != first
    assert len(h.server.jwts_seen) == 2
    assert set(h.server.tokens) == {first, second}


@pytest.mark.parametrize("dropped", ["expires_at", "token"])
async def test_a_token_answer_github_did_not_shape_so_is_retried_and_names_no_secret(
    harness: MakeHarness, dropped: str
) -> None:
    h = await harness()
    h.server.mint_drops = dropped
    with pytest.raises(Unavailable) as refused:
        await h.github.installation_token(INSTALLATION)
    assert refused.value.retryable and f"unusable {dropped}: Field required" in refused.value.message
    assert not any(token in refused.value.message for token in h.server.tokens)
    h.server.mint_drops = None
    assert await h.github.installation_token(INSTALLATION) in h.server.tokens  # nothing cached meanwhile


async def test_token_is_refreshed_when_a_long_wait_outlives_it(harness: MakeHarness) -> None:
    h = await harness()
    await h.api.get("/repos/org/fork")  # the first token, minted at T0
    h.clock.t = T0 + 2500  # 1100 s left: still handed out
    h.server.faults["slow"] = [Fault(403, {"Retry-After": "900"}, SECONDARY)]

    assert await h.api.get("/fault/slow") == {"ok": "slow"}

    assert h.waits == [("secondary_rate_limit", 900.0)]
    assert len(h.server.tokens) == 2  # the retry would have got a 401 with the first token


async def test_pagination_follows_link_headers_over_three_pages(harness: MakeHarness) -> None:
    h = await harness()

    numbers = [pr["number"] async for pr in h.api.getiter("/repos/org/fork/pulls")]

    assert numbers == [10, 11, 20, 21, 30, 31]
    assert h.server.paths.count("/repos/org/fork/pulls") == 3


async def test_pagination_of_check_runs_shaped_pages(harness: MakeHarness) -> None:
    h = await harness()

    runs = [run["name"] async for run in h.api.getiter("/repos/org/fork/commits/abc/check-runs")]

    assert runs == ["L1-0", "L1-1", "L2-0", "L2-1"]


async def test_etag_makes_the_second_get_conditional_and_serves_the_304_from_cache(
    harness: MakeHarness,
) -> None:
    h = await harness()

    first = await h.api.get("/repos/org/fork")
    second = await h.api.get("/repos/org/fork")

    assert first == second == {"full_name": "org/fork"}
    assert h.server.if_none_match == [None, '"v1"']


async def test_server_errors_are_retried_with_bounded_jittered_backoff(harness: MakeHarness) -> None:
    h = await harness()
    h.server.faults["flaky"] = [Fault(502), Fault(503)]

    assert await h.api.get("/fault/flaky") == {"ok": "flaky"}

    assert h.server.fault_calls["flaky"] == 3
    assert h.calls.count("GET") == 3
    assert [reason for reason, _ in h.waits] == ["server_error", "server_error"]
    assert 0.5 <= h.sleeps[0] <= 1.0
    assert 1.0 <= h.sleeps[1] <= 2.0


async def test_server_errors_give_up_after_max_retries(harness: MakeHarness) -> None:
    h = await harness(max_retries=3)
    h.server.faults["down"] = [Fault(503) for _ in range(50)]

    with pytest.raises(gidgethub.GitHubBroken):
        await h.api.get("/fault/down")

    assert h.server.fault_calls["down"] == 4
    assert len(h.sleeps) == 3
    assert all(s <= 30 for s in h.sleeps)


async def test_server_error_on_post_is_not_blindly_repeated(harness: MakeHarness) -> None:
    h = await harness()
    h.server.faults["create"] = [Fault(502)]

    with pytest.raises(gidgethub.GitHubBroken):
        await h.api.post("/fault/create", data={"body": "hi"})

    assert h.server.fault_calls["create"] == 1


async def test_secondary_limit_honours_retry_after(harness: MakeHarness) -> None:
    h = await harness()
    h.server.faults["busy"] = [Fault(403, {"Retry-After": "7"}, SECONDARY)]

    assert await h.api.get("/fault/busy") == {"ok": "busy"}

    assert h.sleeps == [7.0]
    assert h.waits == [("secondary_rate_limit", 7.0)]


@pytest.mark.parametrize("status", [403, 429])
async def test_secondary_limit_without_retry_after_backs_off_from_a_minute(
    harness: MakeHarness, status: int
) -> None:
    h = await harness()
    h.server.faults["busy"] = [Fault(status, {}, SECONDARY), Fault(status, {}, SECONDARY)]

    assert await h.api.get("/fault/busy") == {"ok": "busy"}

    assert h.sleeps[0] >= 60
    assert h.sleeps[1] > h.sleeps[0]


async def test_forbidden_that_is_not_a_rate_limit_fails_at_once(harness: MakeHarness) -> None:
    h = await harness()
    h.server.faults["nope"] = [Fault(403, {}, {"message": "Resource not accessible by integration"})]

    with pytest.raises(gidgethub.BadRequest):
        await h.api.get("/fault/nope")

    assert h.sleeps == []


async def test_primary_exhaustion_waits_for_the_reset(harness: MakeHarness) -> None:
    h = await harness()
    spent = {
        "X-RateLimit-Limit": "5000",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": str(int(T0 + 30)),
    }
    h.server.faults["quota"] = [Fault(403, spent, {"message": "API rate limit exceeded"})]

    assert await h.api.get("/fault/quota") == {"ok": "quota"}

    assert [reason for reason, _ in h.waits] == ["primary_rate_limit"]
    assert 30 <= h.sleeps[0] <= 32
    assert h.clock.now() >= T0 + 30


async def test_content_creating_requests_stay_under_80_per_minute(harness: MakeHarness) -> None:
    h = await harness()
    posted_before_wait: list[int] = []
    h.github._policy.on_wait = lambda reason, s: posted_before_wait.append(len(h.server.posts_at))

    for i in range(85):
        await h.api.post("/repos/org/fork/issues/1/comments", data={"body": f"c{i}"})

    assert len(h.server.posts_at) == 85
    # All 80 went out at T0, so the 81st waits until the first leaves the window; then 81–85 all fit.
    assert posted_before_wait == [80]
    assert h.sleeps == [60.0]
    assert h.server.posts_at[80] == T0 + 60
    times = h.server.posts_at
    assert max(sum(1 for t in times if start <= t < start + 60) for start in times) <= 80


async def test_enterprise_base_url_prefixes_every_request(harness: MakeHarness) -> None:
    h = await harness(base_path=GHE_PREFIX)

    assert await h.api.get("/repos/org/fork") == {"full_name": "org/fork"}
    pulls = [pr async for pr in h.api.getiter("repos/org/fork/pulls")]

    assert len(pulls) == 6
    assert h.server.paths and all(p.startswith(GHE_PREFIX + "/") for p in h.server.paths)
    assert f"{GHE_PREFIX}/app/installations/{INSTALLATION}/access_tokens" in h.server.paths


async def test_no_secret_reaches_logs_or_exceptions(
    harness: MakeHarness, app_key: AppKey, caplog: pytest.LogCaptureFixture, unused_tcp_port: int
) -> None:
    caplog.set_level(logging.DEBUG)
    h = await harness(max_retries=2)
    h.server.faults["down"] = [Fault(503) for _ in range(5)]
    h.server.faults["busy"] = [Fault(429, {"Retry-After": "1"}, SECONDARY)]
    h.server.faults["nope"] = [Fault(404, {}, {"message": "Not Found"})]
    errors: list[BaseException] = []

    await h.api.get("/repos/org/fork")
    await h.api.get("/fault/busy")
    for path in ("/fault/down", "/fault/nope"):
        try:
            await h.api.get(path)
        except gidgethub.HTTPException as exc:
            errors.append(exc)
    async with aiohttp.ClientSession() as session:
        unreachable = GitHubClient(
            session,
            app_id=APP_ID,
            private_key=app_key.private_pem,
            base_url=f"http://127.0.0.1:{unused_tcp_port}",
            clock=h.clock,
            max_retries=0,
        )
        with pytest.raises(GitHubError) as unreachable_error:
            await unreachable.installation_token(INSTALLATION)
        errors.append(unreachable_error.value)

    # RS256 signatures are deterministic: this is the JWT the unreachable client sent.
    secrets = [*h.server.jwts_seen, *h.server.tokens, app_jwt(APP_ID, app_key.private_pem, now=h.clock())]
    assert len(h.server.jwts_seen) == 1 and len(h.server.tokens) == 1
    key_body = "".join(app_key.private_pem.splitlines()[1:-1])
    texts = [json.dumps(r.__dict__, default=repr) + caplog.text for r in caplog.records]
    texts += [repr(e) + str(e) + repr(e.__cause__) + repr(e.__context__) for e in errors]
    assert len(errors) == 3 and caplog.records
    for text in texts:
        flat = text.replace("\\n", "").replace("\n", "")
        assert key_body[:64] not in flat
        assert "eyJ" not in text and "ghs_" not in text  # no JWT, no installation token of any age
        for secret in secrets:
            assert secret not in text
    assert repr(h.github).startswith("GitHubClient(") and app_key.private_pem not in repr(h.github)
