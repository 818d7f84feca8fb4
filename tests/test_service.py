"""The webhook service over real HTTP on loopback: signatures, limits, durable intake, health and metrics."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from pydantic import SecretStr

from bot.app.service import create_app, github_session
from bot.app.settings import Settings
from bot.db.jobs import JobQueue
from bot.db.registry import Registry
from bot.db.store import Store
from bot.github.client import GitHubClient
from tests.support.rig import installation_created, serve_settings, serve_sim, url_of
from tests.support.webhooks import signature, signed_headers

SECRET = "it's a secret to everybody"
FIXTURES = Path(__file__).parent / "fixtures"
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
HEAD = "c" * 40


def settings() -> Settings:
    return Settings(app_id=1, private_key=SecretStr("pem"), webhook_secret=SecretStr(SECRET))


def push_body(**changes: Any) -> bytes:
    payload = json.loads((FIXTURES / "push.json").read_text())
    payload.update({"after": HEAD, **changes})
    return json.dumps(payload).encode()


HOSTILE_REFS = [
    ("option", "-x"),
    ("range", "a..b"),
    ("shell", "$(id)"),
    ("reflog", "x@{1}"),
    ("long", "b" * 300),
]


def pull_body(*, head_ref: str = "feature", head_sha: str = HEAD) -> bytes:
    """A `pull_request` payload in GitHub's shape, trimmed to what matters here."""
    end = {
        "label": "triton-fork:x",
        "ref": head_ref,
        "sha": head_sha,
        "repo": {"full_name": "triton-fork/triton"},
    }
    payload = {
        "action": "opened",
        "number": 7,
        "pull_request": {
            "number": 7,
            "state": "open",
            "head": end,
            "base": {**end, "ref": "main"},
            "user": {"login": "dev"},
        },
        "repository": {"full_name": "triton-fork/triton", "default_branch": "main"},
        "installation": {"id": 2311213},
        "sender": {"login": "dev"},
    }
    return json.dumps(payload).encode()


def sign(body: bytes, secret: str = SECRET) -> str:
    return signature(body, secret)


def headers(body: bytes, *, event: str = "push", delivery: str | None = None, **extra: str) -> dict[str, str]:
    return {**signed_headers(body, secret=SECRET, event=event, delivery=delivery), **extra}


@pytest.fixture
async def client(aiohttp_client: Any, store: Store) -> Any:
    return await aiohttp_client(create_app(settings(), store=store, clock=lambda: NOW))


async def test_signed_push_is_recorded_and_acknowledged(client: Any, store: Store) -> None:
    body = push_body()
    response = await client.post("/webhook", data=body, headers=headers(body, delivery="d-1"))
    assert response.status == 202
    assert await response.json() == {"delivery": "d-1", "outcome": "new"}
    queue = JobQueue(store)
    assert queue.deliveries() == 1
    assert queue.counts().get("queued") == 1
    job = queue.claim("w1", lease=dt.timedelta(minutes=1), now=NOW)
    assert job is not None and job.kind == "push" and job.key == "triton-fork/triton"
    assert job.payload["after"] == HEAD and job.payload["ref"] == "refs/heads/main"


async def test_redelivery_is_not_processed_twice(client: Any, store: Store) -> None:
    body = push_body()
    for expected in ("new", "duplicate", "duplicate"):
        response = await client.post("/webhook", data=body, headers=headers(body, delivery="d-2"))
        assert (response.status, (await response.json())["outcome"]) == (202, expected)
    assert JobQueue(store).counts().get("queued") == 1


def _signature_cases() -> list[Any]:
    body = push_body()
    good = sign(body)
    sha1 = "sha1=" + hmac.new(SECRET.encode(), body, hashlib.sha1).hexdigest()
    return [
        pytest.param(None, id="missing"),
        pytest.param(sign(body, "wrong secret"), id="wrong"),
        pytest.param(good[:-8], id="truncated"),
        pytest.param(good.upper().replace("SHA256=", "sha256="), id="wrong-case-hex"),
        pytest.param("sha1-only", id="sha1-only"),
        pytest.param(sha1, id="sha1-in-the-sha256-header"),
        pytest.param("sha256=" + "é" * 64, id="non-ascii"),
        pytest.param("", id="empty"),
    ]


@pytest.mark.parametrize("signature", _signature_cases())
async def test_bad_signatures_get_401_and_record_nothing(
    client: Any, store: Store, signature: str | None
) -> None:
    body = push_body()
    sent = headers(body)
    del sent["X-Hub-Signature-256"]
    if signature == "sha1-only":
        sent["X-Hub-Signature"] = "sha1=" + hmac.new(SECRET.encode(), body, hashlib.sha1).hexdigest()
    elif signature is not None:
        sent["X-Hub-Signature-256"] = signature
    response = await client.post("/webhook", data=body, headers=sent)
    assert response.status == 401
    assert "error" in await response.json()
    assert JobQueue(store).deliveries() == 0
    # an alert on this series catches a webhook secret that no longer matches GitHub's
    text = await (await client.get("/metrics")).text()
    assert 'sluice_webhook_deliveries_total{event="unverified",outcome="unauthorized"} 1.0' in text


async def test_oversized_body_is_413_before_parsing(client: Any, store: Store) -> None:
    body = b"{" + b" " * (25 * 1024 * 1024) + b"}"
    response = await client.post("/webhook", data=body, headers=headers(body))
    assert response.status == 413
    assert JobQueue(store).deliveries() == 0
    text = await (await client.get("/metrics")).text()
    assert 'sluice_webhook_deliveries_total{event="unverified",outcome="too_large"} 1.0' in text


async def test_a_rejected_deliverys_id_is_logged_cut_to_100_characters(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    body = push_body()
    sent = headers(body) | {
        "X-Hub-Signature-256": sign(body, "wrong secret"),
        "X-GitHub-Delivery": "d" * 8000,
    }
    assert (await client.post("/webhook", data=body, headers=sent)).status == 401
    (rejected,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("rejected delivery")]
    assert rejected == f"rejected delivery {'d' * 100}: X-Hub-Signature-256 does not match the body"


async def test_ping_is_answered(client: Any) -> None:
    body = json.dumps({"zen": "Design for failure.", "hook_id": 1}).encode()
    response = await client.post("/webhook", data=body, headers=headers(body, event="ping"))
    assert (response.status, await response.json()) == (200, {"msg": "pong"})


@pytest.mark.parametrize(
    ("body", "event", "status", "message"),
    [
        pytest.param(b"{not json", "push", 400, "body is not JSON", id="malformed-json"),
        pytest.param(  # valid JSON, but no text: neither database could record it (GitHub's 503 loop)
            push_body(ref="refs/heads/main").replace(b'"refs/heads/main"', b'"refs/heads/\\ud800"', 1),
            "push",
            400,
            "unpaired UTF-16 surrogate",
            id="lone-surrogate",
        ),
        pytest.param(push_body(ref="refs/heads/-x"), "push", 422, "ref", id="option-branch"),
        pytest.param(push_body(ref="refs/heads/a..b"), "push", 422, "ref", id="range-branch"),
        pytest.param(push_body(ref="refs/heads/$(id)"), "push", 422, "ref", id="shell-branch"),
        pytest.param(push_body(ref="refs/heads/x@{1}"), "push", 422, "ref", id="reflog-branch"),
        pytest.param(push_body(ref="refs/heads/" + "b" * 300), "push", 422, "ref", id="300-characters"),
        pytest.param(push_body(after="--upload-pack=x"), "push", 422, "after", id="option-sha"),
        pytest.param(push_body(after="a" * 40 + "\n"), "push", 422, "after", id="sha-and-a-newline"),
        pytest.param(
            push_body(repository={"full_name": "../../etc"}), "push", 422, "full_name", id="bad-repo"
        ),
        pytest.param(
            push_body(repository={"full_name": "../.."}), "push", 422, "full_name", id="dot-dot-repo"
        ),
        pytest.param(push_body(installation=None), "push", 422, "installation", id="uninstalled-repo"),
        *(
            pytest.param(pull_body(head_ref=ref), "pull_request", 422, "head.ref", id=f"pr-head-{name}")
            for name, ref in HOSTILE_REFS
        ),
        pytest.param(pull_body(head_sha="$(id)"), "pull_request", 422, "head.sha", id="pr-head-sha"),
    ],
)
async def test_bad_payloads_get_a_clear_4xx_and_no_job(
    client: Any, store: Store, body: bytes, event: str, status: int, message: str
) -> None:
    response = await client.post("/webhook", data=body, headers=headers(body, event=event))
    assert response.status == status
    assert message in (await response.json())["error"]
    assert JobQueue(store).deliveries() == 0


async def test_unknown_events_are_acknowledged_and_ignored(client: Any, store: Store) -> None:
    body = json.dumps({"action": "created"}).encode()
    response = await client.post("/webhook", data=body, headers=headers(body, event="sponsorship"))
    assert response.status == 202
    assert "not handled" in (await response.json())["ignored"]
    assert JobQueue(store).deliveries() == 0


async def test_github_calls_go_through_the_proxy_the_environment_names(
    aiohttp_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network that reaches GitHub through a proxy only: git honours HTTP(S)_PROXY, so must the API."""
    asked: list[tuple[str, str | None, str]] = []

    async def proxy(request: web.Request) -> web.Response:
        asked.append((request.method, request.host, request.path))
        return web.json_response({"slug": "sluice"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy)
    server = await aiohttp_server(app)
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
    async with github_session() as session, session.get("http://github.example.invalid/api/v3/app") as answer:
        assert await answer.json() == {"slug": "sluice"}
    assert asked == [("GET", "github.example.invalid", "/api/v3/app")]


async def test_the_workers_call_github_through_the_client_they_are_given(
    aiohttp_server: Any, tmp_path: Path, store: Store
) -> None:
    """`create_app(..., github=)`: the workers log in and work through that client, not one of their own
    on `settings.github_url`, which here reaches nothing."""
    sim, sim_url = await serve_sim(aiohttp_server, tmp_path / "sim")
    sim.create_repo("triton-fork/triton")
    sim.commit("triton-fork/triton", "main", {"README.md": "triton\n"}, message="initial")
    nowhere = serve_settings(sim, "http://127.0.0.1:9", secret=SECRET, data_dir=tmp_path / "data")
    installation = sim.install("triton-fork/triton")
    async with aiohttp.ClientSession() as session:
        github = GitHubClient(
            session,
            app_id=sim.app_id,
            private_key=sim.private_key_pem or "",
            base_url=sim_url,
            clock=lambda: dt.datetime.now(dt.UTC),
        )
        bot = await aiohttp_server(create_app(nowhere, store=store, background=True, github=github))
        payload = installation_created(sim, "triton-fork/triton", installation)
        await sim.deliver(f"{url_of(bot)}/webhook", "installation", payload, secret=SECRET)
        for _ in range(600):
            if JobQueue(store).counts()["done"]:
                break
            await asyncio.sleep(0.05)
        await bot.close()
    assert JobQueue(store).counts()["done"] >= 1  # the installation; what it queued clones from github_url
    assert Registry(store).installation_of("triton-fork/triton") == installation


async def test_health_readiness_and_metrics(client: Any) -> None:
    assert (await client.get("/healthz")).status == 200
    ready = await client.get("/readyz")
    assert (ready.status, await ready.json()) == (200, {"database": "ok"})
    body = push_body()
    await client.post("/webhook", data=body, headers=headers(body))
    text = await (await client.get("/metrics")).text()
    assert 'sluice_webhook_deliveries_total{event="push",outcome="new"} 1.0' in text
    assert 'sluice_jobs{state="queued"} 1.0' in text


@pytest.mark.parametrize("secret", [None, ""])
def test_the_app_is_never_made_without_a_webhook_secret(store: Store, secret: str | None) -> None:
    """An empty secret would accept anyone's signature (HMAC with an empty key is anyone's to compute)."""
    unsigned = settings().model_copy(update={"webhook_secret": None if secret is None else SecretStr(secret)})
    with pytest.raises(ValueError, match="a webhook secret is required"):
        create_app(unsigned, store=store)


def test_settings_report_every_missing_value(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLUICE_APP_ID", "SLUICE_PRIVATE_KEY", "SLUICE_PRIVATE_KEY_FILE", "SLUICE_WEBHOOK_SECRET"):
        monkeypatch.delenv(name, raising=False)
    problems = Settings().problems()
    assert [p.split()[0] for p in problems] == ["SLUICE_APP_ID", "neither", "SLUICE_WEBHOOK_SECRET"]
    monkeypatch.setenv("SLUICE_PRIVATE_KEY_FILE", "/nonexistent.pem")
    assert "SLUICE_PRIVATE_KEY_FILE=/nonexistent.pem is not a readable file" in Settings().problems()


async def test_healthz_fails_once_a_background_loop_has_ended(
    aiohttp_server: Any, tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No loop ends while the service runs; one that does (a bug past its own error handling) turns /healthz
    to 503 naming it, so that the orchestrator restarts the process instead of keeping one whose queue
    nobody works off. The other loops run on."""
    from handlers import poll

    sim, sim_url = await serve_sim(aiohttp_server, tmp_path / "sim")
    polled = asyncio.Event()

    async def broken_loop(ctx: Any, stop: asyncio.Event) -> None:
        polled.set()
        raise RuntimeError("a bug past the round's own except")

    monkeypatch.setattr(poll, "loop", broken_loop)
    settings = serve_settings(sim, sim_url, secret=SECRET, data_dir=tmp_path / "data", poll_interval=60)
    bot = await aiohttp_server(create_app(settings, store=store, background=True))
    async with aiohttp.ClientSession() as session:
        await asyncio.wait_for(polled.wait(), 30)
        for _ in range(100):
            async with session.get(f"{url_of(bot)}/healthz") as answer:
                status, body = answer.status, await answer.json()
            if status != 200:
                break
            await asyncio.sleep(0.05)
    await bot.close()
    assert (status, body) == (503, {"status": "failed", "ended": {"poll": "failed: RuntimeError"}})
