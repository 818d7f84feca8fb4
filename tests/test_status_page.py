"""The lag history, the lag gauges on `/metrics`, and the status page (`GET /`), in a real browser too."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from pydantic import SecretStr

from bot.app.service import create_app
from bot.app.settings import Settings
from bot.app.status import LagGauges, fork_views, registered_figures
from bot.core.charts import Series, line_chart
from bot.core.ingestion import IngestionRecord
from bot.core.lag import LagPoint
from bot.core.status_page import ForkView, status_page
from bot.core.tiers import Level, RunState, TierRun, TierStats, Verdict
from bot.db.lag import LagHistory
from bot.db.registry import Fork, Registry
from bot.db.store import Store
from bot.db.tier_runs import TierRuns
from tests.conftest import running_in_ci
from tests.support.browser import browser, chromium_path

FORK, OTHER = "meta/triton", "intel/triton-xpu"
START = dt.datetime(2026, 11, 1, 6, 0, tzinfo=dt.UTC)
NOW = START + dt.timedelta(days=10)
SCREENSHOT_ENV = "SLUICE_STATUS_SCREENSHOT"  # where to save the phone-sized screenshot (the README's)


def point(fork: str, day: int, *, days_behind: float | None, backlog: int, pending: int = 5) -> LagPoint:
    return LagPoint(
        fork=fork,
        at=START + dt.timedelta(days=day),
        days_behind=days_behind,
        backlog_commits=backlog,
        pending_commits=pending,
        oldest_missing_days=None if days_behind is None else days_behind + 0.5,
        open_ingestions=2,
        ingestion_tip=None if days_behind is None else f"{day:x}".rjust(40, "a"),
        upstream_head="f" * 40,
        lead_time_days_median=None if days_behind is None else 0.4,
        lead_time_days_p90=None if days_behind is None else 1.1,
    )


def record(id: str, *, state: str, pr: int | None, kind: str = "bundle") -> IngestionRecord:
    return IngestionRecord(FORK, id, kind, state, pr, None, "a" * 40, "b" * 40, 3, None)


# ---------------------------------------------------------------- the charts and the page, as text


def test_a_chart_plots_every_known_value_from_zero_and_writes_the_newest_out() -> None:
    points = [(START + dt.timedelta(days=d), v) for d, v in enumerate([3.0, None, 7.5, 1.0])]
    svg = line_chart(Series("Days Behind Upstream", "days", points), chart_id="dbu")
    (coords,) = re.findall(r'<polyline class="series"[^>]* points="([^"]+)"', svg)
    ys = [float(pair.split(",")[1]) for pair in coords.split()]
    assert len(ys) == 3  # the run without a value is left out, not drawn as 0
    assert ys[1] < ys[0] < ys[2]  # SVG's y grows downwards: 7.5 highest, 1.0 lowest
    assert ">10</text>" in svg and ">0</text>" in svg  # the axis runs from 0 to the peak rounded up
    assert "now: 1 day<" in svg and '<title id="dbu-title">Days Behind Upstream</title>' in svg


def test_a_chart_without_data_says_so() -> None:
    svg = line_chart(Series("Backlog Commits", "commits", [(START, None)]), chart_id="bc")
    assert "no ingestion run yet" in svg and "<polyline" not in svg


def test_the_page_escapes_what_it_shows_and_links_open_ingestions() -> None:
    view = ForkView(
        repo=FORK,
        upstream="<script>alert(1)</script>",
        branch="main",
        history=[point(FORK, 0, days_behind=2.0, backlog=4)],
        open_ingestions=[record("bundle-1", state="open", pr=7), record("chain-2", state="blocked", pr=9)],
    )
    page = status_page([view], web_url="https://github.com", now=NOW)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert 'href="https://github.com/meta/triton/pull/7"' in page
    assert 'href="https://github.com/meta/triton/issues/9"' in page  # a blocked one has a tracking issue
    assert '<meta name="viewport"' in page and "<script" not in page  # works without JavaScript
    assert status_page([], web_url="https://github.com", now=NOW).count("No fork is registered yet") == 1


# ---------------------------------------------------------------- the history in the database


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store.open(database_url)
    yield opened
    opened.close()


def test_the_history_keeps_every_point_in_order_and_latest_is_per_fork(store: Store) -> None:
    history = LagHistory(store)
    for day in (2, 0, 1):  # recorded out of order: read back by time
        history.record(point(FORK, day, days_behind=float(day), backlog=day))
    history.record(point(OTHER, 5, days_behind=None, backlog=0))
    assert [p.days_behind for p in history.history(FORK)] == [0.0, 1.0, 2.0]
    assert [p.days_behind for p in history.history(FORK, limit=2)] == [1.0, 2.0]  # the newest two
    latest = history.latest()
    assert set(latest) == {FORK, OTHER} and latest[OTHER].days_behind is None
    assert latest[FORK] == history.history(FORK)[-1]  # the newest by time, as the dashboard reads it
    assert latest[FORK].at.tzinfo is not None
    assert history.since(START + dt.timedelta(days=1)) == 3


def test_an_ingestion_closed_since_the_last_run_leaves_the_open_figure_at_once(store: Store) -> None:
    """A PR merged or closed by a person closes its record at once, with no ingestion run after it (one
    paused, say): the page's figure and `/metrics` count what is open now, as the page's table does."""
    registry = Registry(store)
    registry.register_fork(
        Fork(FORK, 1, "main", "https://github.com/triton-lang/triton", "main", None, None), at=START
    )
    record = IngestionRecord(FORK, "bundle-abc", "bundle", "open", 17, "h" * 40, "a" * 40, "b" * 40, 3, None)
    registry.save_ingestion(record, at=START)
    LagHistory(store).record(
        point(FORK, 0, days_behind=2.0, backlog=0).model_copy(update={"open_ingestions": 1})
    )
    assert registered_figures(store).latest[FORK].open_ingestions == 1
    assert registry.close_pull(FORK, "bundle-abc", 17, at=START + dt.timedelta(hours=1))
    page = status_page(fork_views(store), web_url="https://github.com", now=START + dt.timedelta(hours=2))
    assert "<dt>Open ingestions</dt><dd>0</dd>" in page and "No open ingestion." in page
    assert registered_figures(store).latest[FORK].open_ingestions == 0


def tier_run(
    fork: str, level: Level, attempt: int, *, minutes: int, state: RunState = RunState.COMPLETED, **kw: Any
) -> TierRun:
    at = START + dt.timedelta(hours=attempt)
    done = at + dt.timedelta(minutes=minutes) if state is not RunState.DISPATCHED else None
    return TierRun(fork, 42, "bundle-abc", level, "a" * 40, attempt, state, at, completed_at=done, **kw)


def seeded_tiers(store: Store) -> None:
    """meta/triton's L1 passed 3 of 4 (10+20+30+40 minutes), its L2 failed on infrastructure once; a run
    still dispatched and one timed out count in neither figure; intel's L1 passed once."""
    runs = TierRuns(store)
    verdicts = [Verdict.PASSED, Verdict.FAILED, Verdict.PASSED, Verdict.PASSED]
    for n, verdict in enumerate(verdicts, start=1):
        runs.add(tier_run(FORK, Level.L1, n, minutes=10 * n, verdict=verdict))
    runs.add(tier_run(FORK, Level.L1, 5, minutes=0, state=RunState.DISPATCHED))
    runs.add(tier_run(FORK, Level.L1, 6, minutes=90, state=RunState.TIMED_OUT))
    runs.add(tier_run(FORK, Level.L2, 1, minutes=5, verdict=Verdict.INFRA))
    runs.add(tier_run(OTHER, Level.L1, 1, minutes=3, verdict=Verdict.PASSED))


def test_the_pass_rate_is_of_pr_runs_and_the_runner_minutes_of_every_run(store: Store) -> None:
    """Trunk watch's runs and a bisection's probes (which fail on the culprit by design) take runner time
    but say nothing of how often a PR's tier passes."""
    runs = TierRuns(store)
    runs.add(tier_run(FORK, Level.L2, 1, minutes=10, verdict=Verdict.PASSED))
    probe = tier_run(FORK, Level.L2, 2, minutes=20, verdict=Verdict.FAILED, bisection=3, probe=1)
    trunk = dataclasses.replace(tier_run(FORK, Level.L2, 3, minutes=30, verdict=Verdict.FAILED), pull=0)
    runs.add(probe)
    runs.add(trunk)
    assert runs.stats() == [TierStats(FORK, Level.L2, recent=1, passed=1, runner_minutes=60.0)]
    runs.add(tier_run(FORK, Level.L2, 4, minutes=5, verdict=Verdict.FAILED))
    (newest,) = runs.stats(window=1)  # the PR runs' window: the probe and trunk runs in between not in it
    assert (newest.recent, newest.passed, newest.runner_minutes) == (1, 0, 65.0)


def test_tier_stats_are_per_fork_and_tier_over_completed_runs(store: Store) -> None:
    seeded_tiers(store)
    runs = TierRuns(store)
    assert runs.stats() == [
        TierStats(OTHER, Level.L1, recent=1, passed=1, runner_minutes=3.0),
        TierStats(FORK, Level.L1, recent=4, passed=3, runner_minutes=100.0),
        TierStats(FORK, Level.L2, recent=1, passed=0, runner_minutes=5.0),
    ]
    newest = runs.stats(window=2)[1]  # the window is the newest runs: attempts 4 (passed) and 3 (passed)
    assert (newest.recent, newest.passed, newest.pass_rate, newest.runner_minutes) == (2, 2, 1.0, 100.0)
    assert TierRuns(store).stats(window=1)[2].pass_rate == 0.0


# ---------------------------------------------------------------- served, and seen in Chromium


def seeded(store: Store) -> None:
    registry = Registry(store)
    registry.register_fork(
        Fork(
            FORK, 11, "main", "https://github.com/triton-lang/triton.git", "main", "triton-lang/triton", None
        ),
        at=START,
    )
    registry.save_ingestion(record("bundle-abc", state="open", pr=42), at=START)
    registry.save_ingestion(record("chain-def", state="open", pr=43, kind="chain"), at=START)
    history = LagHistory(store)
    for day, (behind, backlog) in enumerate([(0.5, 0), (1.5, 3), (3.0, 8), (2.0, 5), (0.8, 1)]):
        history.record(point(FORK, day, days_behind=behind, backlog=backlog))


async def served(aiohttp_client: Any, store: Store) -> Any:
    settings = Settings(app_id=1, private_key=SecretStr("pem"), webhook_secret=SecretStr("s"))
    return await aiohttp_client(create_app(settings, store=store, clock=lambda: NOW))


async def test_the_service_serves_the_page_and_the_gauges(aiohttp_client: Any, store: Store) -> None:
    seeded(store)
    client = await served(aiohttp_client, store)
    page = await client.get("/")
    assert page.status == 200 and page.content_type == "text/html"
    html = await page.text()
    assert "Days Behind Upstream" in html and "0.8 days" in html and "triton-lang/triton" in html
    assert html.count("<polyline") == 2
    assert "Lead time (median, p90)</dt><dd>0.4 / 1.1 days" in html
    metrics = await (await client.get("/metrics")).text()
    assert 'sluice_ingestion_lead_time_days{fork="meta/triton",quantile="0.9"} 1.1' in metrics
    assert 'sluice_days_behind_upstream{fork="meta/triton"} 0.8' in metrics
    assert 'sluice_backlog_commits{fork="meta/triton"} 1.0' in metrics
    assert "sluice_tier_pass_rate{" not in metrics  # no tier has completed a run yet
    seeded_tiers(store)
    metrics = await (await client.get("/metrics")).text()
    assert 'fork="intel/triton-xpu"' not in metrics  # its runs are stored, but it is no registered fork
    Registry(store).register_fork(
        Fork(OTHER, 12, "main", "https://github.com/t/t.git", "main", "t/t", None), at=START
    )
    metrics = await (await client.get("/metrics")).text()
    assert 'sluice_tier_pass_rate{fork="meta/triton",tier="L1"} 0.75' in metrics
    assert 'sluice_tier_pass_rate{fork="meta/triton",tier="L2"} 0.0' in metrics
    assert 'sluice_tier_pass_rate_runs{fork="meta/triton",tier="L1"} 4.0' in metrics
    assert 'sluice_tier_runner_minutes{fork="meta/triton",tier="L1"} 100.0' in metrics
    assert 'sluice_tier_runner_minutes{fork="intel/triton-xpu",tier="L1"} 3.0' in metrics
    assert 'tier="L3"' not in metrics  # a tier that never completed a run has no series


async def test_metrics_cover_registered_forks_only(aiohttp_client: Any, store: Store) -> None:
    """A removed fork's lag history stays stored, but its series leave `/metrics`."""
    seeded(store)
    LagHistory(store).record(point(OTHER, 1, days_behind=4.0, backlog=2))  # a fork never registered
    client = await served(aiohttp_client, store)
    metrics = await (await client.get("/metrics")).text()
    assert 'sluice_days_behind_upstream{fork="meta/triton"} 0.8' in metrics
    assert 'fork="intel/triton-xpu"' not in metrics
    seeded_tiers(store)
    metrics = await (await client.get("/metrics")).text()
    assert 'sluice_tier_pass_rate{fork="meta/triton",tier="L1"}' in metrics
    Registry(store).unregister_fork(FORK)
    metrics = await (await client.get("/metrics")).text()
    assert "sluice_days_behind_upstream{" not in metrics and "sluice_backlog_commits{" not in metrics
    assert "sluice_ingestion_lead_time_days{" not in metrics and "sluice_tier_pass_rate{" not in metrics
    assert "sluice_tier_runner_minutes{" not in metrics


def test_the_backlog_gauge_says_what_backlog_commits_are() -> None:
    registry = CollectorRegistry()
    LagGauges(registry).update({FORK: point(FORK, 0, days_behind=1.0, backlog=3)})
    help_line = "# HELP sluice_backlog_commits Backlog Commits: upstream commits older than the ingestion tip"
    assert f"{help_line} that the fork does not have\n" in generate_latest(registry).decode()


@pytest.fixture
def chromium() -> None:
    if chromium_path() is None:
        reason = "Debian's chromium is not installed"
        if running_in_ci():
            pytest.fail(f"{reason}; .ci/run installs it, and CI must run the browser test.", pytrace=False)
        pytest.skip(reason)


async def test_chromium_on_a_phone_shows_both_charts_and_the_figures(
    chromium: None, aiohttp_server: Any, sqlite_url: str, tmp_path: Path
) -> None:
    store = Store.open(sqlite_url)
    try:
        seeded(store)
        settings = Settings(app_id=1, private_key=SecretStr("pem"), webhook_secret=SecretStr("s"))
        server = await aiohttp_server(create_app(settings, store=store, clock=lambda: NOW))
        async with browser(width=1024, height=915) as tab:
            await tab.emulate_phone(width=412, height=915)
            await tab.open(str(server.make_url("/")))
            shown = await tab.evaluate(SHOWN)
            await tab.screenshot(Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "status.png"))
    finally:
        store.close()
    assert shown["title"] == "Sluice status" and shown["width"] == 412
    assert shown["overflow"] <= 0, shown  # nothing wider than the phone: no sideways scrolling
    charts = shown["charts"]
    assert [c["title"] for c in charts] == ["Days Behind Upstream", "Backlog Commits"]
    for chart in charts:
        assert chart["vertices"] == 5 and 300 <= chart["width"] <= 412 and chart["height"] > 80, chart
    assert shown["figures"]["Days Behind Upstream"] == "0.8 days"
    assert shown["figures"]["Backlog Commits"] == "1"
    assert shown["links"] == ["#42", "#43"]


SHOWN = """(() => {
  const charts = [...document.querySelectorAll('svg')].map(svg => {
    const box = svg.getBoundingClientRect();
    const line = svg.querySelector('polyline.series');
    return {title: svg.querySelector('title').textContent, width: box.width, height: box.height,
            vertices: line ? line.points.numberOfItems : 0};
  });
  const figures = Object.fromEntries([...document.querySelectorAll('dl.figures div')].map(
    d => [d.querySelector('dt').textContent, d.querySelector('dd').textContent]));
  return {title: document.title, charts, figures,
          width: window.innerWidth, overflow: document.documentElement.scrollWidth - window.innerWidth,
          links: [...document.querySelectorAll('table a')].map(a => a.textContent)};
})()"""
