"""The status page (`GET /`) and the lag gauges of `/metrics`, read from the lag history and the registry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge

from bot.core.bisect_pr import BisectionStats
from bot.core.ingestion import IngestionRecord
from bot.core.lag import LagPoint
from bot.core.status_page import ForkView
from bot.core.tiers import PASS_RATE_WINDOW, TierStats
from bot.db.bisections import Bisections
from bot.db.lag import LagHistory
from bot.db.registry import Registry
from bot.db.store import Store
from bot.db.tier_runs import TierRuns

SHOWN_STATES = ("open", "blocked")  # a blocked ingestion is open work too: its tracking issue says why


def fork_views(store: Store) -> list[ForkView]:
    """Every registered fork with its lag history and open ingestions (blocking: run it on a lane)."""
    registry, history = Registry(store), LagHistory(store)
    views = []
    for fork in sorted(registry.all_forks(), key=lambda f: f.repo):
        records = _open_now(registry, fork.repo)
        views.append(
            ForkView(
                repo=fork.repo,
                upstream=fork.upstream_repo or fork.upstream_url,
                branch=fork.branch,
                history=history.history(fork.repo),
                open_ingestions=sorted(records, key=lambda r: r.id),
            )
        )
    return views


@dataclass(frozen=True)
class Figures:
    """What `/metrics` shows of the registered forks (a removed fork's rows stay stored, but leave it)."""

    latest: dict[str, LagPoint]
    tiers: list[TierStats]
    bisections: list[BisectionStats]


def _open_now(registry: Registry, fork: str) -> list[IngestionRecord]:
    return [r for state in SHOWN_STATES for r in registry.ingestions(fork, state=state)]


def registered_figures(store: Store) -> Figures:
    """Each registered fork's newest lag point, tier records and bisections (blocking: run it on a lane)."""
    registry = Registry(store)
    registered = {fork.repo for fork in registry.all_forks()}
    latest = {fork: point for fork, point in LagHistory(store).latest().items() if fork in registered}
    return Figures(
        # A PR closed since that run left the open ingestions at once: counted now, not as the run saw them.
        latest={
            fork: point.model_copy(update={"open_ingestions": len(_open_now(registry, fork))})
            for fork, point in latest.items()
        },
        tiers=[s for s in TierRuns(store).stats() if s.fork in registered],
        bisections=[s for s in Bisections(store).stats() if s.fork in registered],
    )


class LagGauges:
    """Each fork's metrics (README, Metrics) on `/metrics`, as the newest ingestion run left them."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, ["fork"], registry=registry)

        self.days_behind = gauge("sluice_days_behind_upstream", "Days Behind Upstream (README, Metrics)")
        self.backlog = gauge(
            "sluice_backlog_commits",
            "Backlog Commits: upstream commits older than the ingestion tip that the fork does not have",
        )
        self.pending = gauge("sluice_pending_commits", "Upstream commits the fork does not have yet")
        self.oldest = gauge("sluice_oldest_missing_days", "Age of the oldest missing upstream commit, days")
        self.open = gauge("sluice_open_ingestions", "Open ingestion PRs (and tracking issues)")
        self.lead_time = Gauge(
            "sluice_ingestion_lead_time_days",
            "Ingestion lead time over the most recent picks (upstream commit -> on the fork), days",
            ["fork", "quantile"],
            registry=registry,
        )

    def update(self, latest: Mapping[str, LagPoint]) -> None:
        """Show exactly the forks of `latest`: a fork no longer there loses its series."""
        for gauge in (self.days_behind, self.backlog, self.pending, self.oldest, self.open, self.lead_time):
            gauge.clear()
        for fork, point in latest.items():
            # NaN where a figure is not defined yet (no ingestion tip): Prometheus' "no value".
            self.days_behind.labels(fork=fork).set(_or_nan(point.days_behind))
            self.backlog.labels(fork=fork).set(point.backlog_commits)
            self.pending.labels(fork=fork).set(point.pending_commits)
            self.oldest.labels(fork=fork).set(_or_nan(point.oldest_missing_days))
            self.open.labels(fork=fork).set(point.open_ingestions)
            self.lead_time.labels(fork=fork, quantile="0.5").set(_or_nan(point.lead_time_days_median))
            self.lead_time.labels(fork=fork, quantile="0.9").set(_or_nan(point.lead_time_days_p90))


class TierGauges:
    """Each tier's record per fork on `/metrics`, from the tier runs table (`TierRuns.stats`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, ["fork", "tier"], registry=registry)

        self.pass_rate = gauge(
            "sluice_tier_pass_rate",
            f"Passed share of a tier's newest {PASS_RATE_WINDOW} completed runs on PR heads "
            "(not trunk watch's runs, nor bisection probes)",
        )
        self.runs = gauge("sluice_tier_pass_rate_runs", "Completed runs the pass rate is over")
        self.runner_minutes = gauge(
            "sluice_tier_runner_minutes",
            "Minutes all a tier's completed runs took (trunk watch's and probes too), dispatch to result",
        )

    def update(self, stats: Sequence[TierStats]) -> None:
        """Show exactly the forks and tiers of `stats`: one no longer there loses its series."""
        for gauge in (self.pass_rate, self.runs, self.runner_minutes):
            gauge.clear()
        for s in stats:
            labels = {"fork": s.fork, "tier": s.level.name}
            self.pass_rate.labels(**labels).set(_or_nan(s.pass_rate))
            self.runs.labels(**labels).set(s.recent)
            self.runner_minutes.labels(**labels).set(round(s.runner_minutes, 3))


class BisectGauges:
    """Bisections per fork and tier on `/metrics`, from the bisections table (`Bisections.stats`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, ["fork", "tier"], registry=registry)

        self.bisections = gauge("sluice_bisections", "Bisections of failed ingestions started")
        self.runs = gauge("sluice_bisection_runs", "Tier runs the bisections used (their probes)")
        self.running = gauge("sluice_bisections_running", "Bisections running now")

    def update(self, stats: Sequence[BisectionStats]) -> None:
        """Show exactly the forks and tiers of `stats`: one no longer there loses its series."""
        for gauge in (self.bisections, self.runs, self.running):
            gauge.clear()
        for s in stats:
            labels = {"fork": s.fork, "tier": s.level.name}
            self.bisections.labels(**labels).set(s.bisections)
            self.runs.labels(**labels).set(s.runs)
            self.running.labels(**labels).set(s.running)


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value
