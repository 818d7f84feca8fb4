"""The intake keeps GitHub's deadline: a stalled or frozen database, starved pools, trickled bodies, floods.

Every case is a real request over loopback to `sluice serve`'s app; the database is stalled for real (a
PostgreSQL table lock held by another connection, a SQLite file locked by another process, a TCP proxy on
loopback that stops forwarding to PostgreSQL).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from bot.app.intake import DatabaseBusy, Intake
from bot.app.service import create_app
from bot.app.settings import Settings
from bot.db.jobs import Delivery, DeliveryOutcome, JobQueue, deliveries, jobs
from bot.db.store import Store, normalise_url
from tests.support.github_sim import GitHubSim
from tests.support.webhooks import signed_headers

SECRET = "intake-secret"
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
GITHUB_DEADLINE_S = 10.0
ANSWER_WITHIN_S = 5.0  # the intake's promise, well inside GitHub's deadline


def push_body(n: int = 0) -> bytes:
    payload = {
        "ref": "refs/heads/main",
        "before": "a" * 40,
        "after": f"{n + 1:040x}",
        "repository": {"full_name": "triton-fork/triton"},
        "installation": {"id": 1},
        "commits": [],
    }
    return json.dumps(payload).encode()


@dataclass
class Answer:
    status: int
    seconds: float
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Bot:
    url: str
    store: Store  # the one the app was created with
    check: Store  # the test's own handle on the database, for assertions
    session: aiohttp.ClientSession

    async def deliver(self, delivery: str | None = None, n: int = 0) -> Answer:
        body = push_body(n)
        return await self.request(
            "POST", "/webhook", data=body, headers=signed_headers(body, secret=SECRET, delivery=delivery)
        )

    async def request(self, method: str, path: str, **kwargs: Any) -> Answer:
        started = time.monotonic()
        async with self.session.request(method, self.url + path, **kwargs) as response:
            raw = await response.read()
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"text": raw.decode(errors="replace")}
            return Answer(response.status, time.monotonic() - started, dict(response.headers), body)

    def recorded(self) -> set[str]:
        """Delivery ids in the database, each with its job."""
        query = select(deliveries.c.id).join(jobs, jobs.c.id == deliveries.c.job_id)
        with self.check._engine.connect() as conn:
            return set(conn.execute(query).scalars())


def settings(**changes: Any) -> Settings:
    base: dict[str, Any] = {"app_id": 1, "private_key": SecretStr("pem"), "poll_interval": 0}
    return Settings(webhook_secret=SecretStr(SECRET), **(base | changes))


@contextlib.asynccontextmanager
async def serve(
    aiohttp_server: Any, url: str, check: Store, *, sim: GitHubSim | None = None, **changes: Any
) -> AsyncIterator[Bot]:
    """`sluice serve`'s app on loopback over the database at `url` (which may be a proxy's); with `sim`, its
    job workers run too, against the GitHub simulator."""
    if sim is not None:
        sim_server = await aiohttp_server(sim.app)
        changes |= {
            "app_id": sim.app_id,
            "private_key": SecretStr(sim.private_key_pem or ""),
            "github_url": str(sim_server.make_url("")).rstrip("/"),
            "data_dir": sim.root / "bot-data",
        }
    store = Store.open(url)
    app = create_app(settings(**changes), store=store, background=sim is not None)
    server = await aiohttp_server(app)
    timeout = aiohttp.ClientTimeout(total=GITHUB_DEADLINE_S + 5)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            yield Bot(str(server.make_url("")).rstrip("/"), store, check, session)
    finally:
        await server.close()
        store.close()


@pytest.fixture
def test_store(database_url: str) -> Iterator[Store]:
    opened = Store.open(database_url)
    yield opened
    opened.close()


@contextlib.contextmanager
def stalled(database_url: str, tables: str = "deliveries") -> Iterator[None]:
    """The database stalled by another client: PostgreSQL's `tables` locked by a transaction left open, or
    the SQLite file held under BEGIN EXCLUSIVE by another process."""
    parsed = make_url(normalise_url(database_url))
    if parsed.get_backend_name() == "postgresql":
        engine = create_engine(parsed, poolclass=NullPool)
        with engine.connect() as conn:
            conn.execute(text(f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE"))
            yield
            conn.rollback()
        engine.dispose()
        return
    holder = (
        "import sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", holder, str(parsed.database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"locked\n"
        yield
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()


def assert_refused_in_time(answer: Answer) -> None:
    assert answer.status == 503, answer
    assert answer.seconds < ANSWER_WITHIN_S, answer
    assert int(answer.headers["Retry-After"]) > 0
    assert "not recorded" in answer.body["error"]


async def test_a_stalled_database_gets_503_with_retry_after_within_5_s(
    aiohttp_server: Any, database_url: str, test_store: Store
) -> None:
    async with serve(aiohttp_server, database_url, test_store) as bot:
        with stalled(database_url):
            answers = await asyncio.gather(*(bot.deliver(f"stalled-{i}") for i in range(3)))
        for answer in answers:
            assert_refused_in_time(answer)
        assert bot.recorded() == set()
        # Once the database is back, GitHub's redelivery of the same delivery is recorded, once.
        again = await bot.deliver("stalled-0")
        assert (again.status, again.body.get("outcome")) == (202, "new")
        assert bot.recorded() == {"stalled-0"}


async def test_readyz_names_the_database_during_a_stall_and_answers_promptly(
    aiohttp_server: Any, database_url: str, test_store: Store
) -> None:
    async with serve(aiohttp_server, database_url, test_store) as bot:
        assert (await bot.request("GET", "/readyz")).status == 200
        with stalled(database_url):
            answers = await asyncio.gather(*(bot.request("GET", "/readyz") for _ in range(4)))
            metrics = await bot.request("GET", "/metrics")
        for answer in answers:
            assert answer.status == 503 and answer.seconds < 2.5, answer
            assert "database" in answer.body and answer.body["database"] != "ok"
        assert metrics.status == 200 and metrics.seconds < 2.5
        assert (await bot.request("GET", "/readyz")).status == 200


async def test_a_locked_database_gets_503_from_the_status_page_and_readyz_keeps_its_address_to_the_log(
    aiohttp_server: Any, database_url: str, test_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Locked past the lane's own timeouts (the driver answers with an error, within the deadline): GET / is
    a 503 saying to reload, never a 500; /readyz names the kind of problem, the log has what the driver
    said (it may name the database's host and port, which the unauthenticated port does not show)."""
    async with serve(aiohttp_server, database_url, test_store) as bot:
        with stalled(database_url, tables="forks, deliveries"):
            page = await bot.request("GET", "/")
            ready = await bot.request("GET", "/readyz")
    assert (page.status, page.body["text"]) == (503, "The database did not answer. Reload later.\n")
    assert ready.status == 503
    assert ready.body["database"] in (
        "unreachable or locked (Sluice's log has the details)",
        "unresponsive (Sluice's log has the details)",
    )
    assert any(r.message.startswith("/readyz: the database is ") for r in caplog.records)


class FreezingProxy:
    """A TCP proxy on loopback in front of PostgreSQL that can stop forwarding, connections left open:
    what a frozen database host or a cut link looks like to its clients. It runs its own event loop in a
    thread, so that nothing the test's loop does (opening a store blocks it) can hold it up."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.loop = asyncio.new_event_loop()
        self.flowing = asyncio.Event()
        self.flowing.set()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        assert ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._connect, "127.0.0.1", 0))
        self.port: int = self.server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    def freeze(self) -> None:
        self.loop.call_soon_threadsafe(self.flowing.clear)

    def thaw(self) -> None:
        self.loop.call_soon_threadsafe(self.flowing.set)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()

    async def _shutdown(self) -> None:
        self.flowing.set()
        self.server.close()
        pumps = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        await asyncio.gather(
            self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
        )

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()


@pytest.mark.postgres
async def test_a_frozen_database_connection_gets_fast_503s_and_readyz_says_so(
    aiohttp_server: Any, postgres_url: str
) -> None:
    parsed = make_url(normalise_url(postgres_url))
    proxy = FreezingProxy(parsed.host or "127.0.0.1", parsed.port or 5432)
    proxied = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    test_store = Store.open(postgres_url)
    try:
        async with serve(aiohttp_server, proxied, test_store) as bot:
            assert (await bot.deliver("before")).status == 202
            proxy.freeze()
            first = await bot.deliver("frozen-1")
            assert_refused_in_time(first)
            # The intake's thread is still stuck on the frozen connection: later deliveries are refused at
            # once, not queued behind it, and /readyz says why.
            later = await asyncio.gather(*(bot.deliver(f"frozen-{i}") for i in range(2, 12)))
            for answer in later:
                assert_refused_in_time(answer)
                assert answer.seconds < 1.0, answer
            ready = await bot.request("GET", "/readyz")
            assert ready.status == 503 and ready.seconds < 2.5, ready
            assert "database" in ready.body and ready.body["database"] != "ok"
            assert str(proxy.port) not in json.dumps(ready.body)
            page = await bot.request("GET", "/")
            assert page.status == 503 and page.seconds < 2.5, page
            proxy.thaw()
            # Thawed: the stuck write completes, and the intake takes deliveries again.
            for _ in range(50):
                if (answer := await bot.deliver("after")).status == 202:
                    break
                await asyncio.sleep(0.1)
            assert answer.status == 202, answer
            assert "after" in bot.recorded() and not {f"frozen-{i}" for i in range(2, 12)} & bot.recorded()
    finally:
        proxy.close()
        test_store.close()


@contextlib.contextmanager
def job_side_saturated(store: Store) -> Iterator[None]:
    """Every thread of the default executor (where workers claim jobs and run git) and every connection of
    the main engine's pool taken, as by long-running jobs."""
    loop = asyncio.get_running_loop()
    release = threading.Event()
    blockers = [loop.run_in_executor(None, release.wait) for _ in range(64)]
    pool = store._engine.pool
    held = [store._engine.connect() for _ in range(pool.size() + max(0, pool._max_overflow))]  # type: ignore[attr-defined]
    try:
        yield
    finally:
        release.set()
        for conn in held:
            conn.close()
        del blockers


async def test_the_intake_answers_while_jobs_take_every_thread_and_connection(
    aiohttp_server: Any, database_url: str, test_store: Store
) -> None:
    async with serve(aiohttp_server, database_url, test_store) as bot:
        await bot.deliver("warm")
        with job_side_saturated(bot.store):
            answers = await asyncio.gather(*(bot.deliver(f"busy-{i}") for i in range(10)))
            ready = await bot.request("GET", "/readyz")
        assert [a.status for a in answers] == [202] * 10
        assert max(a.seconds for a in answers) < 1.0, answers
        assert ready.status == 200 and ready.seconds < 1.0
        assert {f"busy-{i}" for i in range(10)} <= bot.recorded()


@pytest.mark.postgres
async def test_a_stuck_intake_starves_neither_readyz_metrics_nor_the_jobs(
    aiohttp_server: Any, postgres_url: str, tmp_path: Path
) -> None:
    check = Store.open(postgres_url)
    try:
        async with serve(aiohttp_server, postgres_url, check, sim=GitHubSim(root=tmp_path / "sim")) as bot:
            with stalled(postgres_url):  # deliveries locked: the intake waits; the jobs table is free
                flood = [asyncio.create_task(bot.deliver(f"stuck-{i}")) for i in range(20)]
                await asyncio.sleep(0.5)
                metrics = await bot.request("GET", "/metrics")
                started = time.monotonic()
                job = await asyncio.wait_for(asyncio.to_thread(_enqueue_and_wait_done, bot.store), 10)
                job_seconds = time.monotonic() - started
                answers = await asyncio.gather(*flood)
        assert metrics.status == 200 and metrics.seconds < 1.0, metrics
        assert job_seconds < 3.0 and job == "done", (job, job_seconds)
        for answer in answers:
            assert_refused_in_time(answer)
    finally:
        check.close()


def _enqueue_and_wait_done(store: Store) -> str:
    """A job enqueued beside the stuck intake, and the state a background worker leaves it in."""
    queue = JobQueue(store)
    job_id = queue.enqueue(
        "push", json.loads(push_body(99)), key="triton-fork/triton", now=dt.datetime.now(dt.UTC)
    )
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        with store._engine.connect() as conn:
            state = conn.execute(select(jobs.c.state).where(jobs.c.id == job_id)).scalar_one()
        if state in ("done", "failed"):
            return str(state)
        time.sleep(0.05)
    return str(state)


async def test_a_trickled_body_is_cut_off_after_the_body_timeout(
    aiohttp_server: Any, sqlite_url: str
) -> None:
    check = Store.open(sqlite_url)
    try:
        async with serve(aiohttp_server, sqlite_url, check, webhook_body_timeout=1.0) as bot:
            body = push_body()
            host, port = bot.url.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            head = "".join(
                f"{k}: {v}\r\n" for k, v in signed_headers(body, secret=SECRET, delivery="trickled").items()
            )
            writer.write(
                f"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode()
            )
            started = time.monotonic()

            async def trickle() -> None:
                with contextlib.suppress(ConnectionError):
                    for byte in body:
                        writer.write(bytes([byte]))
                        await writer.drain()
                        await asyncio.sleep(0.2)

            sending = asyncio.create_task(trickle())
            answer = await asyncio.wait_for(reader.read(), 5)  # everything until the server closes
            elapsed = time.monotonic() - started
            sending.cancel()
            writer.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"did not arrive within 1 s" in answer
        assert elapsed < 3.0, elapsed  # cut off and closed, not read for another 10 s
        assert JobQueue(check).deliveries() == 0
    finally:
        check.close()


async def test_a_flood_beyond_the_store_gets_fast_503s_and_loses_nothing_it_accepted(
    aiohttp_server: Any, database_url: str, test_store: Store, tmp_path: Path
) -> None:
    sim = GitHubSim(root=tmp_path / "sim")
    async with serve(aiohttp_server, database_url, test_store, sim=sim, intake_capacity=20) as bot:
        ids = [f"flood-{i}" for i in range(150)]
        with stalled(database_url):
            flood = [asyncio.create_task(bot.deliver(d, n)) for n, d in enumerate(ids)]
            # Beyond the line's 20, each is refused without waiting for the database: those answers all
            # arrive while it is still stalled (however slowly a loaded machine runs the loop).
            await _until(lambda: sum(task.done() for task in flood) >= 130, within=ANSWER_WITHIN_S)
            while_stalled = [task.result() for task in flood if task.done()]
        answers = await asyncio.gather(*flood)
        statuses = {a.status for a in answers}
        assert statuses <= {202, 503}, statuses  # never a 500
        assert max(a.seconds for a in answers) < ANSWER_WITHIN_S
        refused = [d for d, a in zip(ids, answers, strict=True) if a.status == 503]
        assert len(while_stalled) >= 130 and {a.status for a in while_stalled} == {503}, while_stalled[:3]
        accepted = {d for d, a in zip(ids, answers, strict=True) if a.status == 202}
        assert accepted <= bot.recorded()
        # GitHub's redelivery of every refused delivery (the reconciliation sweep asks for it) is taken.
        again = [await bot.deliver(d, ids.index(d)) for d in refused]
        assert {a.status for a in again} == {202}
        assert bot.recorded() == set(ids)


async def _until(done: Callable[[], bool], *, within: float) -> None:
    """Wait until `done()` holds, or `within` seconds have passed (the caller's assertion then says what)."""
    deadline = time.monotonic() + within
    while not done() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


async def test_one_delivery_the_store_cannot_take_does_not_fail_its_batch(test_store: Store) -> None:
    intake = Intake(JobQueue(test_store), capacity=10, deadline=4.0, clock=lambda: NOW)
    intake.start()
    try:
        batch = [
            Delivery(f"d-{i}", event="push", body=b"{}", kind="push", key=None, payload={"n": i})
            for i in range(4)
        ]
        poison = Delivery(
            "d-poison", event="push", body=b"{}", kind="push", key=None, payload={"x": object()}
        )
        results = await asyncio.gather(
            *(intake.accept(d) for d in [*batch[:2], poison, *batch[2:]]), return_exceptions=True
        )
    finally:
        await intake.close()
    assert isinstance(results[2], DatabaseBusy)
    assert [r for i, r in enumerate(results) if i != 2] == [DeliveryOutcome.NEW] * 4
    assert JobQueue(test_store).deliveries() == 4
