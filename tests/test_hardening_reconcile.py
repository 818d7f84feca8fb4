"""Nothing lost: webhooks GitHub failed to deliver are asked for again, and the resync converges without them.

Every case runs `sluice serve`'s app (`create_app(..., background=True)`) over loopback against the GitHub
simulator, whose delivery log records every attempt as GitHub's does, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import re
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from sqlalchemy import func, select

from bot.app.service import create_app
from bot.app.settings import Settings
from bot.core.ingestion import CLASSIFICATION_MARKER, IngestionRecord
from bot.core.redelivery import HookAttempt, Skip, plan_redeliveries
from bot.db.jobs import JobQueue, deliveries, jobs
from bot.db.leases import Leases
from bot.db.registry import Registry
from bot.db.store import Store
from bot.flows.ingest import pushed_by_sluice
from bot.git.repo import GitRepo
from tests.support.github_sim import GitHubSim
from tests.support.net import free_port
from tests.support.rig import (
    fork_config,
    installation_created,
    serve_settings,
    serve_sim,
    upstream_and_fork,
    url_of,
)
from tests.support.scenarios import Scenario

SECRET = "reconcile-secret"
UPSTREAM = "triton-lang/triton"
FORK = "meta/triton"
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
TIMEOUT_S = 90.0


@dataclass
class Gateway:
    """A load balancer in front of the bot: forwards, answers 503 itself (no healthy backend), or forwards
    and answers 504 (the backend took the delivery but answered too late for GitHub)."""

    target: str
    mode: str = "forward"

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        if self.mode == "unavailable":
            return web.Response(status=503, text="no healthy upstream", headers={"Retry-After": "5"})
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.target, data=body, headers=headers) as r,
        ):
            status, text = r.status, await r.text()
        if self.mode == "late":
            return web.Response(status=504, text="upstream request timeout")
        return web.Response(status=status, text=text, content_type="application/json")


@dataclass
class Rig:
    sim: GitHubSim
    sim_url: str
    database_url: str
    tmp_path: Path
    aiohttp_server: Any
    port: int = field(default_factory=free_port)  # where the App's webhook URL points
    stores: list[Store] = field(default_factory=list)

    @property
    def hook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/webhook"

    @property
    def store(self) -> Store:
        if not self.stores:
            self.stores.append(Store.open(self.database_url))
        return self.stores[0]

    def settings(self, name: str, **changes: Any) -> Settings:
        values: dict[str, Any] = {
            "redelivery_interval": 1,
            "resync_interval": 0,
            "allow_private_upstreams": True,  # the simulator is on loopback, refused by default
        }
        data_dir = self.tmp_path / f"data-{name}"
        return serve_settings(self.sim, self.sim_url, secret=SECRET, data_dir=data_dir, **(values | changes))

    def app(self, name: str, **changes: Any) -> web.Application:
        """A `sluice serve` app with its own store on the shared database, as another replica has."""
        store = Store.open(self.database_url)
        self.stores.append(store)
        return create_app(self.settings(name, **changes), store=store, background=True)

    async def start(self, name: str, *, port: int | None = None, **changes: Any) -> Any:
        """Serve a new app, on the webhook URL's port unless told otherwise."""
        return await self.aiohttp_server(self.app(name, **changes), port=self.port if port is None else port)

    async def until(self, check: Callable[[], Any], *, what: str, timeout: float = TIMEOUT_S) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            await self.sim.drain_hooks()
            result = check()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return result
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; jobs: {JobQueue(self.store).counts()}")

    async def rounds(self, server: Any, counter: str, *, more: int = 2) -> None:
        """Wait until the bot's `counter` (sweeps, resyncs) went up by `more`."""
        url, before = url_of(server), await metric(url_of(server), counter)

        async def done() -> bool:
            return await metric(url, counter) >= before + more

        await self.until(done, what=f"{more} more {counter}")

    def settled(self) -> bool:
        counts = JobQueue(self.store).counts()
        return counts["queued"] == 0 and counts["running"] == 0

    def job_errors(self) -> list[tuple[str, str]]:
        with self.store._engine.connect() as conn:
            rows = conn.execute(select(jobs.c.kind, jobs.c.error).where(jobs.c.error.is_not(None)))
            return [(r.kind, r.error) for r in rows]

    def recorded_guids(self) -> list[str]:
        with self.store._engine.connect() as conn:
            return list(conn.execute(select(deliveries.c.id)).scalars())

    def pulls(self) -> list[Any]:
        return [i for i in self.sim.issues[FORK].values() if i.is_pull]

    def sticky(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.sim.comment_objects(FORK, number) if CLASSIFICATION_MARKER in c["body"]]

    def failed_pushes(self) -> list[str]:
        """GUIDs of upstream pushes whose first attempt failed."""
        return [
            a.guid
            for a in self.sim.hook_log
            if a.event == "push" and not a.redelivery and a.status_code >= 300
        ]

    def redeliveries(self, guid: str) -> list[int]:
        return [a.status_code for a in self.sim.hook_attempts(guid) if a.redelivery]

    def redelivery_requests(self, guid: str) -> list[tuple[str, int]]:
        ids = {str(a.id) for a in self.sim.hook_attempts(guid)}
        return [
            (path, status)
            for method, path, status in self.sim.requests
            if method == "POST" and path.endswith("/attempts") and path.split("/")[-2] in ids
        ]

    async def push_upstream(self, subject: str, files: dict[str, str | None]) -> str:
        sha = self.sim.commit(UPSTREAM, "main", files, message=subject)
        await self.sim.drain_hooks()
        return sha

    async def register_fork(self) -> None:
        """A bot gets the installation webhook of the fork and registers it; then it stops."""
        bot = await self.start("setup", redelivery_interval=0)
        installation = self.sim.install(FORK)
        self.sim.install(UPSTREAM)
        assert (
            await self.sim.deliver(
                self.hook_url,
                "installation",
                installation_created(self.sim, FORK, installation),
                secret=SECRET,
            )
            == 202
        )
        await self.until(
            lambda: Registry(self.store).fork(FORK) is not None and self.settled(), what="registration"
        )
        await bot.close()


async def metric(url: str, name: str) -> float:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/metrics") as resp:
        text = await resp.text()
    found = re.findall(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.M)
    return sum(float(v) for v in found)


@pytest.fixture
async def rig(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[Rig]:
    sim, sim_url = await serve_sim(aiohttp_server, tmp_path / "sim")
    upstream_and_fork(sim, UPSTREAM, FORK, {"README.md": "triton\n", "docs/guide.md": "guide\n"})
    config = fork_config(sim_url, UPSTREAM)
    sim.commit(
        FORK, "main", {".github/sluice.yml": config, "third_party/tlx/tlx.py": "x = 1\n"}, message="fork"
    )
    servers: list[Any] = []

    async def serve(app: web.Application, **options: Any) -> Any:
        server = await aiohttp_server(app, **options)
        servers.append(server)
        return server

    rig = Rig(sim, sim_url, database_url, tmp_path, serve)
    sim.hook(rig.hook_url, SECRET)
    yield rig
    # The apps' workers use the database: stop them before their stores close and the schema is dropped
    # (aiohttp_server's own teardown comes after database_url's).
    for server in reversed(servers):
        await server.close()
    for store in rig.stores:
        store.close()


def back_in_time(sim: GitHubSim, by: dt.timedelta) -> Callable[[], None]:
    """Run the sim's clock `by` behind (GitHub's log then says the delivery was made that long ago); the
    returned function puts it right again."""
    real = sim.now
    sim.now = lambda: real() - by
    return lambda: setattr(sim, "now", real)


# ---------------------------------------------------------------- the sweep


async def test_pushes_made_while_sluice_was_down_are_ingested_once_after_it_starts(rig: Rig) -> None:
    await rig.register_fork()
    # No `sluice serve` runs: GitHub's deliveries fail to connect.
    first = await rig.push_upstream("docs: clarify", {"docs/guide.md": "guide, clarified\n"})
    second = await rig.push_upstream("test: a lit test", {"test/new.mlir": "// RUN: true\n"})
    lost = rig.failed_pushes()
    assert len(lost) == 2 and {a.status for g in lost for a in rig.sim.hook_attempts(g)} == {
        "failed to connect to host"
    }
    assert rig.pulls() == []

    bot = await rig.start("after")
    await rig.until(lambda: rig.pulls() and rig.settled(), what="the lost pushes to be ingested")
    await rig.rounds(bot, "sluice_redelivery_sweeps_total")
    await rig.until(rig.settled, what="jobs to settle")

    (pull,) = rig.pulls()  # one PR, with both commits
    assert pull.state == "open" and first[:7] in pull.title and second[:7] in pull.title
    assert len(rig.sticky(pull.number)) == 1
    for guid in lost:
        assert rig.redeliveries(guid) == [202]  # asked for once, delivered once
    recorded = rig.recorded_guids()
    assert set(lost) <= set(recorded) and len(recorded) == len(set(recorded))
    assert rig.job_errors() == []
    assert rig.sim.schema_violations == [] and rig.sim.undocumented_statuses == []
    assert await metric(url_of(bot), 'sluice_redeliveries_total{outcome="asked"}') == 2
    await bot.close()


async def test_a_delivery_answered_503_is_redelivered(rig: Rig) -> None:
    await rig.register_fork()
    bot = await rig.start("bot", port=free_port(), redelivery_interval=2)
    gateway = Gateway(f"{url_of(bot)}/webhook", mode="unavailable")
    proxy = web.Application()
    proxy.router.add_post("/webhook", gateway.handle)
    await rig.aiohttp_server(proxy, port=rig.port)

    await rig.push_upstream("docs: clarify", {"docs/guide.md": "guide, clarified\n"})
    gateway.mode = "forward"
    (guid,) = rig.failed_pushes()
    assert [a.status for a in rig.sim.hook_attempts(guid)] == ["Invalid HTTP Response: 503"]

    await rig.until(lambda: rig.pulls() and rig.settled(), what="the 503'd push to be ingested")
    assert rig.redeliveries(guid)[-1] == 202
    assert sum(1 for a in rig.sim.hook_attempts(guid) if a.status_code == 202) == 1
    assert guid in rig.recorded_guids()
    assert len(rig.pulls()) == 1 and rig.job_errors() == []


async def test_a_delivery_sluice_recorded_is_not_redelivered(rig: Rig) -> None:
    await rig.register_fork()
    bot = await rig.start("bot", port=free_port())
    gateway = Gateway(f"{url_of(bot)}/webhook", mode="late")
    proxy = web.Application()
    proxy.router.add_post("/webhook", gateway.handle)
    await rig.aiohttp_server(proxy, port=rig.port)

    await rig.push_upstream("docs: clarify", {"docs/guide.md": "guide, clarified\n"})
    gateway.mode = "forward"
    (guid,) = rig.failed_pushes()  # GitHub saw a 504, but the bot had recorded the delivery
    assert [a.status_code for a in rig.sim.hook_attempts(guid)] == [504]
    assert guid in rig.recorded_guids()
    await rig.until(lambda: rig.pulls() and rig.settled(), what="the push to be ingested")

    await rig.rounds(bot, "sluice_redelivery_sweeps_total")
    assert rig.redelivery_requests(guid) == [] and rig.redeliveries(guid) == []
    assert await metric(url_of(bot), 'sluice_redelivery_skipped_total{reason="recorded"}') >= 2
    assert len(rig.pulls()) == 1


async def test_a_delivery_older_than_three_days_is_not_asked_for(rig: Rig) -> None:
    await rig.register_fork()
    restore = back_in_time(rig.sim, dt.timedelta(days=3, hours=1))
    await rig.push_upstream("docs: long ago", {"docs/old.md": "old\n"})
    restore()
    await rig.push_upstream("docs: recent", {"docs/new.md": "new\n"})
    old, recent = rig.failed_pushes()

    bot = await rig.start("bot")
    await rig.until(lambda: rig.redeliveries(recent) == [202] and rig.settled(), what="the recent push")
    await rig.rounds(bot, "sluice_redelivery_sweeps_total")
    assert rig.redelivery_requests(old) == [] and rig.redeliveries(old) == []
    assert rig.redelivery_requests(recent) == [
        (f"/app/hook/deliveries/{rig.sim.hook_attempts(recent)[0].id}/attempts", 202)
    ]
    assert old not in rig.recorded_guids()


async def test_two_sweepers_on_one_database_redeliver_each_guid_once(rig: Rig) -> None:
    await rig.register_fork()
    await rig.push_upstream("docs: clarify", {"docs/guide.md": "guide, clarified\n"})
    await rig.push_upstream("docs: more", {"docs/more.md": "more\n"})
    lost = rig.failed_pushes()
    assert len(lost) == 2
    # Listing the log is slow: without a lease, both replicas would list before either redelivery lands.
    rig.sim.slow(r"^/app/hook/deliveries$", 1.5, times=2)
    apps = rig.app("a", redelivery_interval=30), rig.app("b", redelivery_interval=30)
    first, second = await asyncio.gather(
        rig.aiohttp_server(apps[0], port=rig.port), rig.aiohttp_server(apps[1], port=free_port())
    )
    await rig.until(
        lambda: all(rig.redeliveries(g) for g in lost) and rig.pulls() and rig.settled(),
        what="the lost pushes to be redelivered",
    )
    await asyncio.sleep(1.0)  # a second sweep, had one started, would have asked by now
    await rig.sim.drain_hooks()
    for guid in lost:
        assert rig.redeliveries(guid) == [202] and len(rig.redelivery_requests(guid)) == 1
    sweeps = [await metric(url_of(s), "sluice_redelivery_sweeps_total") for s in (first, second)]
    assert sorted(sweeps) == [0, 1]
    assert len(rig.pulls()) == 1


# ---------------------------------------------------------------- the resync


async def test_resync_ingests_a_fork_whose_push_was_lost_beyond_the_delivery_log(rig: Rig) -> None:
    await rig.register_fork()
    restore = back_in_time(rig.sim, dt.timedelta(days=4))
    sha = await rig.push_upstream("docs: lost", {"docs/lost.md": "lost\n"})
    restore()
    (lost,) = rig.failed_pushes()

    bot = await rig.start("bot", resync_interval=1)
    await rig.until(lambda: rig.pulls() and rig.settled(), what="the resync to ingest the fork")
    (pull,) = rig.pulls()
    assert sha[:7] in pull.title and len(rig.sticky(pull.number)) == 1
    assert rig.redelivery_requests(lost) == []  # the sweep could not help: GitHub's window had passed
    await rig.rounds(bot, "sluice_resyncs_total")
    await rig.until(rig.settled, what="jobs to settle")
    assert len(rig.pulls()) == 1 and len(rig.sticky(pull.number)) == 1  # re-planning changed nothing
    with rig.store._engine.connect() as conn:
        waiting = conn.execute(
            select(func.count()).select_from(jobs).where(jobs.c.state == "queued", jobs.c.kind == "ingest")
        ).scalar_one()
    assert waiting <= 1 and rig.job_errors() == []


# ---------------------------------------------------------------- the lease and the decisions


def test_one_of_several_replicas_claims_an_expired_lease(database_url: str) -> None:
    stores = [Store.open(database_url) for _ in range(4)]
    start, won = threading.Barrier(4), []

    def claim(store: Store, name: str) -> None:
        start.wait()
        if Leases(store).claim("redelivery", name, now=NOW, hold=dt.timedelta(minutes=5)):
            won.append(name)

    threads = [threading.Thread(target=claim, args=(s, f"replica-{i}")) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    leases = Leases(stores[0])
    assert not leases.claim(
        "redelivery", "late", now=NOW + dt.timedelta(minutes=4), hold=dt.timedelta(minutes=5)
    )
    assert leases.claim("redelivery", "late", now=NOW + dt.timedelta(minutes=5), hold=dt.timedelta(minutes=5))
    assert leases.holder("redelivery") == ("late", NOW + dt.timedelta(minutes=10))
    for store in stores:
        store.close()


def attempt(id: int, guid: str, code: int, *, age: dt.timedelta = dt.timedelta(minutes=1)) -> HookAttempt:
    status = "OK" if 200 <= code < 300 else f"Invalid HTTP Response: {code}"
    return HookAttempt(
        id=id,
        guid=guid,
        delivered_at=NOW - age,
        redelivery=False,
        status=status,
        status_code=code,
        event="push",
    )


@pytest.mark.parametrize(
    ("attempts", "recorded", "asked", "skipped"),
    [
        ([attempt(1, "a", 502)], set(), [(1, "a")], {}),
        ([attempt(1, "a", 503), attempt(2, "a", 502)], set(), [(2, "a")], {}),  # the newest attempt, once
        ([attempt(1, "a", 503), attempt(2, "a", 202)], set(), [], {Skip.DELIVERED: 1}),
        ([attempt(1, "a", 504)], {"a"}, [], {Skip.RECORDED: 1}),
        ([attempt(1, "a", 502, age=dt.timedelta(days=3))], set(), [], {Skip.EXPIRED: 1}),
        (
            [attempt(1, "a", 502, age=dt.timedelta(days=2, hours=23, minutes=55))],
            set(),
            [],
            {Skip.EXPIRED: 1},
        ),
        ([attempt(1, "a", 422)], set(), [], {Skip.REFUSED: 1}),
        ([attempt(i, "a", 503) for i in range(1, 8)], set(), [(7, "a")], {}),
        ([attempt(i, "a", 503) for i in range(1, 9)], set(), [], {Skip.GAVE_UP: 1}),  # the resync's now
        ([attempt(1, "a", 401)], set(), [(1, "a")], {}),  # a secret fixed since: GitHub's payload is genuine
        ([attempt(2, "b", 502), attempt(1, "a", 502)], set(), [(1, "a"), (2, "b")], {}),  # oldest event first
    ],
)
def test_plan_redeliveries(
    attempts: list[HookAttempt], recorded: set[str], asked: list[tuple[int, str]], skipped: dict[Skip, int]
) -> None:
    plan = plan_redeliveries(attempts, recorded=recorded, now=NOW)
    assert [(r.attempt_id, r.guid) for r in plan.redeliver] == asked
    assert dict(plan.skipped) == skipped


# ---------------------------------------------------------------- the simulator's delivery log


async def test_the_sims_delivery_log_pages_and_redelivers_as_github_does(aiohttp_server: Any) -> None:
    sim = GitHubSim()
    api = url_of(await aiohttp_server(sim.app))
    received: list[tuple[str, bytes]] = []

    async def receive(request: web.Request) -> web.Response:
        received.append((request.headers["X-GitHub-Delivery"], await request.read()))
        return web.json_response({}, status=202)

    receiver = web.Application()
    receiver.router.add_post("/webhook", receive)
    live = f"{url_of(await aiohttp_server(receiver))}/webhook"
    payload = {"action": "opened", "installation": {"id": 7}, "repository": {"id": 9}}
    assert await sim.deliver(live, "pull_request", payload, secret=SECRET) == 202
    with pytest.raises(aiohttp.ClientError):
        await sim.deliver(f"http://127.0.0.1:{free_port()}/webhook", "push", {"ref": "x"}, secret=SECRET)
    assert await sim.deliver(live, "ping", {"zen": "Keep it logically awesome."}, secret=SECRET) == 202
    sim.hook(live, SECRET)

    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {sim.app_jwt()}"}) as session:
        async with session.get(f"{api}/app/hook/deliveries?per_page=2") as resp:
            page = await resp.json()
            next_url = resp.links["next"]["url"]
        assert [(d["event"], d["status_code"], d["status"]) for d in page] == [
            ("ping", 202, "OK"),
            ("push", 502, "failed to connect to host"),
        ]
        assert page[0]["installation_id"] is None and "cursor=v1_" in str(next_url)
        async with session.get(next_url) as resp:
            (oldest,) = await resp.json()
            assert "next" not in resp.links
        assert (oldest["action"], oldest["installation_id"], oldest["repository_id"]) == ("opened", 7, 9)
        async with session.get(f"{api}/app/hook/deliveries/{page[1]['id']}") as resp:
            full = await resp.json()
        assert full["request"]["payload"] == {"ref": "x"} and full["guid"] == page[1]["guid"]
        async with session.get(f"{api}/app/hook/deliveries?cursor=nonsense") as resp:
            assert resp.status == 400
        async with session.get(f"{api}/app/hook/deliveries/1") as resp:
            assert resp.status == 404
        async with session.post(f"{api}/app/hook/deliveries/{page[1]['id']}/attempts") as resp:
            assert resp.status == 202
        await sim.drain_hooks()
        assert received[-1][0] == page[1]["guid"] and received[-1][1] == b'{"ref":"x"}'
        assert [(a.redelivery, a.status_code) for a in sim.hook_attempts(page[1]["guid"])] == [
            (False, 502),
            (True, 202),
        ]
        real = sim.now
        sim.now = lambda: real() + dt.timedelta(days=3, minutes=1)
        headers = {"Authorization": f"Bearer {sim.app_jwt()}"}
        async with session.post(
            f"{api}/app/hook/deliveries/{oldest['id']}/attempts", headers=headers
        ) as resp:
            assert resp.status == 422  # GitHub redelivers only deliveries of the past 3 days
    async with aiohttp.ClientSession() as session:
        token = sim.installation_token(7)
        async with session.get(
            f"{api}/app/hook/deliveries", headers={"Authorization": f"token {token}"}
        ) as r:
            assert r.status == 401  # the App's own JWT only
    assert sim.schema_violations == [] and sim.undocumented_statuses == []


def test_a_branch_head_a_person_made_from_sluices_commit_is_not_sluices_to_replace(tmp_path: Path) -> None:
    """A person who resolves by `git cherry-pick -x` of Sluice's commit keeps its Sluice-Ingestion trailer
    and gains a `(cherry picked from commit …)` line; a reviewer's `commit --amend` keeps the message
    whole but makes them the committer: those heads are the person's, and a re-plan must not force-push
    over them."""
    s = Scenario(tmp_path)
    s.upstream("Initial import (#1)", {"a.txt": "a\n"})
    s.fork_here()
    s.fork("[DOCS] a (#2)\n\nUpstream-Commit: " + "1" * 40 + "\nSluice-Ingestion: bundle-1", {})
    as_sluice = {"GIT_COMMITTER_NAME": "Sluice", "GIT_COMMITTER_EMAIL": "sluice@users.noreply.github.com"}
    s.git("commit", "-q", "--amend", "--no-edit", "--allow-empty", env=as_sluice)  # what Sluice commits
    sluices = s.git("rev-parse", "HEAD")
    s.git("checkout", "-q", "-b", "person", "main~1")
    s.git("cherry-pick", "-x", "--allow-empty", sluices)
    persons = s.git("rev-parse", "HEAD")
    s.git("checkout", "-q", "-b", "amended", sluices)
    s.git("commit", "-q", "--amend", "--no-edit", "--allow-empty")  # a reviewer's fix-up: the same message
    amended = s.git("rev-parse", "HEAD")
    repo = GitRepo(s.path)
    assert pushed_by_sluice(repo, sluices, "bundle-1", None)
    assert not pushed_by_sluice(repo, persons, "bundle-1", None)
    assert not pushed_by_sluice(repo, amended, "bundle-1", None)  # the trailer kept, the committer theirs
    assert not pushed_by_sluice(repo, sluices, "bundle-2", None)  # another unit's commit
    recorded = IngestionRecord("o/f", "bundle-1", "bundle", "open", 7, persons, "1" * 40, "1" * 40, 1, None)
    assert pushed_by_sluice(repo, persons, "bundle-1", recorded)  # the head Sluice recorded pushing
