"""The webhook service: verify, record durably, answer 202; the work happens in jobs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Mapping

import aiohttp
from aiohttp import web
from gidgethub import ValidationFailure
from gidgethub.sansio import validate_event
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from sqlalchemy.exc import SQLAlchemyError

from bot.app.clock import utc_now
from bot.app.context import Context
from bot.app.intake import RETRY_AFTER_S, DatabaseBusy, Intake, Lane
from bot.app.settings import MAX_WEBHOOK_BYTES, Settings
from bot.app.status import BisectGauges, LagGauges, TierGauges, fork_views, registered_figures
from bot.core import webhooks
from bot.core.errors import first_line
from bot.core.status_page import status_page
from bot.db.jobs import Delivery, JobQueue, JobState
from bot.db.registry import Registry
from bot.db.store import Store
from bot.github.client import GitHubClient
from bot.ports import Clock

log = logging.getLogger("sluice.service")

SETTINGS = web.AppKey("settings", Settings)
STORE = web.AppKey("store", Store)
QUEUE = web.AppKey("queue", JobQueue)
CLOCK: web.AppKey[Clock] = web.AppKey("clock")
INTAKE = web.AppKey("intake", Intake)
HEALTH = web.AppKey("health", Lane)  # /readyz and /metrics: their own threads and connections
HEALTH_QUEUE = web.AppKey("health_queue", JobQueue)
HEALTH_STORE = web.AppKey("health_store", Store)  # the health lane's connections (GET / reads through them)
HEALTH_DEADLINE_S = 2.0
GITHUB: web.AppKey[GitHubClient | None] = web.AppKey("github")  # given to create_app, else made per run
SAID_UNREADY: web.AppKey[dict[str, str]] = web.AppKey("said_unready")  # the problem /readyz last logged
ENDED: web.AppKey[dict[str, str]] = web.AppKey("ended")  # background loops that ended early, and how
# The event loop answering webhooks and the threads doing database work hand the GIL back and forth many
# times per delivery; at Python's default 5 ms a thread busy in Python (a worker claiming jobs) makes each
# handoff cost up to that. 0.1 ms measured best with workers running (benchmarks/webhook_bench.py).
GIL_SWITCH_INTERVAL_S = 0.0001
SIGNATURE_PREFIX = "sha256="
UNVERIFIED = "unverified"  # the event label of a request whose signature was not checked or did not match


class Metrics:
    """Prometheus metrics of one app (its own registry, so several apps can live in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.deliveries = Counter(
            "sluice_webhook_deliveries",
            "Webhook deliveries by event and outcome",
            ["event", "outcome"],
            registry=self.registry,
        )
        self.jobs = Gauge("sluice_jobs", "Jobs in the database by state", ["state"], registry=self.registry)
        self.github_calls = Counter(
            "sluice_github_api_calls", "GitHub API requests by method", ["method"], registry=self.registry
        )
        self.rate_limit_waits = Counter(
            "sluice_github_rate_limit_waits",
            "Waits before a GitHub request, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.rate_limit_wait_seconds = Counter(
            "sluice_github_rate_limit_wait_seconds",
            "Seconds spent waiting on GitHub's limits and errors",
            registry=self.registry,
        )
        self.lag = LagGauges(self.registry)
        self.tiers = TierGauges(self.registry)
        self.bisections = BisectGauges(self.registry)

    def count_call(self, method: str) -> None:
        self.github_calls.labels(method=method).inc()

    def count_wait(self, reason: str, seconds: float) -> None:
        # reason is one of primary_rate_limit, secondary_rate_limit, content_creation, server_error
        self.rate_limit_waits.labels(reason=reason).inc()
        self.rate_limit_wait_seconds.inc(seconds)


METRICS = web.AppKey("metrics", Metrics)


def _problem(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def signature_problem(headers: Mapping[str, str], body: bytes, secret: str) -> str | None:
    """Why a delivery's `X-Hub-Signature-256` does not prove it came from GitHub, or None when it does."""
    signature = headers.get("X-Hub-Signature-256")
    if signature is None:
        return "missing X-Hub-Signature-256 (an X-Hub-Signature SHA-1 alone is not accepted)"
    if not signature.isascii() or not signature.startswith(SIGNATURE_PREFIX):
        return "X-Hub-Signature-256 is not a sha256= signature"
    if len(signature) != len(SIGNATURE_PREFIX) + 64:
        return "X-Hub-Signature-256 has the wrong length"
    try:
        validate_event(body, signature=signature, secret=secret)
    except ValidationFailure:
        return "X-Hub-Signature-256 does not match the body"
    return None


async def webhook(request: web.Request) -> web.Response:
    app = request.app
    secret = app[SETTINGS].webhook_secret
    body = await _read_body(request)
    if body is None:
        _count_unverified(app, "timed_out")
        return await _body_timed_out(request)
    problem = signature_problem(request.headers, body, secret.get_secret_value() if secret else "")
    if problem is not None:
        log.warning("rejected delivery %s: %s", _delivery_id(request), problem)
        _count_unverified(app, "unauthorized")  # a secret that differs from GitHub's shows here first
        return _problem(401, problem)
    event, delivery = request.headers.get("X-GitHub-Event"), request.headers.get("X-GitHub-Delivery")
    if not event or not delivery or len(delivery) > 100 or not delivery.isascii():
        _count_unverified(app, "malformed")
        return _problem(400, "missing or malformed X-GitHub-Event / X-GitHub-Delivery")
    if event == "ping":
        return web.json_response({"msg": "pong"})
    if event not in webhooks.MODELS:
        log.info("ignored delivery %s: Sluice does not handle %r events", delivery, event)
        app[METRICS].deliveries.labels(event="other", outcome="ignored").inc()
        return web.json_response({"ignored": f"event {event!r} is not handled"}, status=202)
    try:
        payload = webhooks.parse(event, body)
    except webhooks.RejectedPayload as exc:
        log.warning("rejected delivery %s (%s): %s", delivery, event, exc)
        app[METRICS].deliveries.labels(event=event, outcome="rejected").inc()
        return _problem(exc.status, exc.message)  # the status comes with the type; the sender gets the reason
    job = Delivery(
        delivery,
        event=event,
        body=body,
        kind=event,
        key=webhooks.job_key(payload),
        payload=payload.model_dump(mode="json"),
    )
    return await _record(app, job)


async def _read_body(request: web.Request) -> bytes | None:
    """The whole body, or None when it did not arrive within the body timeout (a trickle, a stalled client).

    aiohttp answers 413 itself above client_max_size, before we read.
    """
    try:
        return await asyncio.wait_for(request.read(), request.app[SETTINGS].webhook_body_timeout)
    except TimeoutError:
        return None
    except web.HTTPRequestEntityTooLarge:
        log.warning(
            "rejected delivery %s: its body is over %d bytes", _delivery_id(request), MAX_WEBHOOK_BYTES
        )
        _count_unverified(request.app, "too_large")
        raise


def _count_unverified(app: web.Application, outcome: str) -> None:
    """Count a request turned away before its signature was checked, or because it failed the check: its
    event header is anyone's word, so it is no label."""
    app[METRICS].deliveries.labels(event=UNVERIFIED, outcome=outcome).inc()


async def _body_timed_out(request: web.Request) -> web.Response:
    timeout = request.app[SETTINGS].webhook_body_timeout
    log.warning("delivery %s cut off: its body did not arrive within %g s", _delivery_id(request), timeout)
    response = _problem(408, f"the request body did not arrive within {timeout:g} s")
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    if request.transport is not None:  # else aiohttp keeps reading ("lingering") the rest of the body
        request.transport.close()
    return response


def _delivery_id(request: web.Request) -> str:
    return request.headers.get("X-GitHub-Delivery", "?")[:100]


async def _record(app: web.Application, delivery: Delivery) -> web.Response:
    """202 once the delivery and its job are in the database; 503 with Retry-After if that failed in time."""
    try:
        outcome = await app[INTAKE].accept(delivery)
    except DatabaseBusy as exc:
        log.warning("delivery %s (%s) not recorded: %s", delivery.id, delivery.event, exc.message)
        app[METRICS].deliveries.labels(event=delivery.event, outcome="refused").inc()
        response = _problem(503, f"not recorded: {exc.message}; {exc.remedy}")
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response
    app[METRICS].deliveries.labels(event=delivery.event, outcome=outcome.value).inc()
    return web.json_response({"delivery": delivery.id, "outcome": outcome.value}, status=202)


async def status(request: web.Request) -> web.Response:
    """Where each fork stands: its figures, charts of its lag history, its open ingestions."""
    app = request.app
    try:
        views = await app[HEALTH].run(lambda: fork_views(app[HEALTH_STORE]))
    except DatabaseBusy as exc:
        return web.Response(status=503, text=f"The database did not answer: {exc.message}. Reload later.\n")
    except SQLAlchemyError as exc:  # unreachable, locked past its timeout: what it said is for the log only
        log.warning("GET /: the database failed: %s", first_line(exc))
        return web.Response(status=503, text="The database did not answer. Reload later.\n")
    page = status_page(views, web_url=app[SETTINGS].web_url(), now=app[CLOCK]())
    return web.Response(text=page, content_type="text/html", headers={"Cache-Control": "no-cache"})


async def healthz(request: web.Request) -> web.Response:
    """200 while the process can do its work; 503 once one of its background loops (a job worker, the poll
    loop, a sweep) has ended, which none does while the service runs: a restart brings it back."""
    ended = request.app[ENDED]
    if ended:
        return web.json_response({"status": "failed", "ended": dict(sorted(ended.items()))}, status=503)
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """200 when the database answers in time and the intake takes deliveries; else 503 saying why."""
    app = request.app
    try:
        problem = await app[HEALTH].run(app[HEALTH_QUEUE].intake_problem) or app[INTAKE].problem()
    except DatabaseBusy as exc:
        problem = f"unresponsive: {exc.message}"
    if problem is None:
        app[SAID_UNREADY].pop("problem", None)
        return web.json_response({"database": "ok"})
    shown = problem.split(":", 1)[0]  # "unreachable or locked": what the driver said may name hosts and ports
    if app[SAID_UNREADY].get("problem") != problem:  # logged once a problem, not once a probe
        log.warning("/readyz: the database is %s", problem)
    app[SAID_UNREADY]["problem"] = problem
    return web.json_response({"database": f"{shown} (Sluice's log has the details)"}, status=503)


async def metrics(request: web.Request) -> web.Response:
    app = request.app
    store = app[HEALTH_STORE]
    try:  # one call on the lane: a stalled database costs /metrics one deadline, not one per figure
        counts, figures = await app[HEALTH].run(
            lambda: (app[HEALTH_QUEUE].counts(), registered_figures(store))
        )
    except (DatabaseBusy, SQLAlchemyError) as exc:  # the gauges keep their last values; the rest matter
        log.warning("/metrics: job, lag and tier gauges not refreshed: %s", first_line(exc))
    else:
        for state in JobState:
            app[METRICS].jobs.labels(state=state.value).set(counts.get(state.value, 0))
        app[METRICS].lag.update(figures.latest)
        app[METRICS].tiers.update(figures.tiers)
        app[METRICS].bisections.update(figures.bisections)
    body = generate_latest(app[METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


APP_INFO_RETRY_S = 30.0
SHUTDOWN_GRACE_S = 20.0  # under the usual container stop grace (Kubernetes: 30 s)


def create_app(
    settings: Settings,
    *,
    store: Store,
    clock: Clock = utc_now,
    background: bool = False,
    github: GitHubClient | None = None,
) -> web.Application:
    """The aiohttp application; dependencies are passed in, nothing is read from the environment here.

    With `background`, the app also runs `settings.workers` job workers, the upstream poll loop, the
    redelivery sweep, the periodic resync and the trunk-watch loop. They reach GitHub through `github`, or
    through a client of their own on `settings.github_url`; the caller who passes `github` owns its session.
    """
    if settings.webhook_secret is None or not settings.webhook_secret.get_secret_value():
        raise ValueError("a webhook secret is required")  # an empty one would accept anyone's signature
    app = web.Application(client_max_size=MAX_WEBHOOK_BYTES)
    app[SETTINGS], app[STORE], app[QUEUE], app[CLOCK] = settings, store, JobQueue(store), clock
    app[METRICS], app[SAID_UNREADY], app[ENDED], app[GITHUB] = Metrics(), {}, {}, github
    _add_lanes(app, settings, store, clock)
    periodic = (
        settings.poll_interval,
        settings.redelivery_interval,
        settings.resync_interval,
        settings.tier_sweep_interval,
        settings.trunk_watch_interval,
    )
    if background and (settings.workers > 0 or any(periodic)):
        app.cleanup_ctx.append(_background)
    app.router.add_post("/webhook", webhook)
    app.router.add_get("/", status)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


def _add_lanes(app: web.Application, settings: Settings, store: Store, clock: Clock) -> None:
    """The intake and the health checks each get their own threads and connections with bounded waits,
    so neither they nor the jobs can starve one another."""
    intake_store = store.lane(timeout=0.75 * settings.intake_deadline, connections=1)
    health_store = store.lane(timeout=0.75 * HEALTH_DEADLINE_S, connections=2)
    app[INTAKE] = Intake(
        JobQueue(intake_store),
        capacity=settings.intake_capacity,
        deadline=settings.intake_deadline,
        clock=clock,
    )
    app[HEALTH] = Lane("sluice-health", threads=2, deadline=HEALTH_DEADLINE_S)
    app[HEALTH_QUEUE], app[HEALTH_STORE] = JobQueue(health_store), health_store

    async def lanes(app: web.Application) -> AsyncIterator[None]:
        app[INTAKE].start()
        yield
        await app[INTAKE].close()
        app[HEALTH].close()
        for lane in {intake_store, health_store} - {store}:
            lane.close()

    app.cleanup_ctx.append(lanes)


def github_session() -> aiohttp.ClientSession:
    """The session the workers call GitHub through: it honours HTTPS_PROXY, HTTP_PROXY and NO_PROXY as git
    does, so a network that reaches GitHub through a proxy serves both."""
    return aiohttp.ClientSession(trust_env=True)


async def _background(app: web.Application) -> AsyncIterator[None]:
    """Job workers, the poll loop, the sweep, the resync and trunk watch, sharing one HTTP session and GitHub
    client."""
    from bot.app.worker import Worker
    from handlers import ROUTES, poll, resync, trunk_watch  # the core never imports handlers

    settings, metrics = app[SETTINGS], app[METRICS]
    stop = asyncio.Event()
    async with contextlib.AsyncExitStack() as owned:
        github = app[GITHUB]
        if github is None:
            github = _github_client(app, await owned.enter_async_context(github_session()))

        async def start() -> None:
            login = await _bot_login(github, stop)
            ctx = Context(settings, app[STORE], app[QUEUE], Registry(app[STORE]), github, login, app[CLOCK])
            name = f"{socket.gethostname()}:{os.getpid()}"
            runners = {
                f"worker {i}": Worker(ctx, ROUTES, name=f"{name}:{i}").run(stop)
                for i in range(settings.workers)
            }
            if settings.poll_interval > 0:
                runners["poll"] = poll.loop(ctx, stop)
            runners |= resync.loops(ctx, registry=metrics.registry, holder=name, stop=stop)
            runners |= trunk_watch.loops(ctx, holder=name, stop=stop)
            log.info(
                "%d workers started as %s%s",
                settings.workers,
                login,
                f", polling every {settings.poll_interval:g} s" if settings.poll_interval > 0 else "",
            )
            await asyncio.gather(*(_watched(n, runner, stop, app[ENDED]) for n, runner in runners.items()))

        task = asyncio.create_task(_watched("start", start(), stop, app[ENDED]))
        yield
        stop.set()  # workers finish the job in hand; one still running after the grace is handed back
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=SHUTDOWN_GRACE_S)


async def _watched(name: str, runner: Awaitable[None], stop: asyncio.Event, ended: dict[str, str]) -> None:
    """Run one background loop. None ends before `stop` (each outlives its rounds' failures): one that does
    is logged and kept in `ended`, which turns /healthz to 503, so the orchestrator restarts a process that
    would otherwise take webhooks that no worker works off."""
    try:
        await runner
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        ended[name] = f"failed: {type(exc).__name__}"
        log.exception("the %s loop failed; /healthz answers 503 from now on", name)
    else:
        if not stop.is_set():
            ended[name] = "ended"
            log.error("the %s loop ended while the service runs; /healthz answers 503 from now on", name)


def _github_client(app: web.Application, session: aiohttp.ClientSession) -> GitHubClient:
    settings, metrics = app[SETTINGS], app[METRICS]
    return GitHubClient(
        session,
        app_id=settings.app_id or 0,
        private_key=settings.private_key_pem(),
        base_url=settings.github_url,
        clock=app[CLOCK],
        on_call=metrics.count_call,
        on_wait=metrics.count_wait,
    )


async def _bot_login(github: GitHubClient, stop: asyncio.Event) -> str:
    """`<slug>[bot]`, the login of the App's comments and pushes; retried until GitHub answers."""
    while True:
        try:
            return f"{(await github.app_info()).slug}[bot]"
        except Exception as exc:  # GitHub down or the App misconfigured: the intake keeps working meanwhile
            log.error("cannot read the App from GitHub (%s); workers wait %.0f s", exc, APP_INFO_RETRY_S)
            try:
                await asyncio.wait_for(stop.wait(), APP_INFO_RETRY_S)
            except TimeoutError:
                continue
            raise asyncio.CancelledError from exc
