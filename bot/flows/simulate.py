"""`sluice simulate`: replay a period of the upstream stream through the planner, batching and bisection."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence

from bot.core import days_chart
from bot.core.analysis import line_and_symbol_dependencies, merge_dependencies, revert_links, risk_reasons
from bot.core.calibrated import with_probability
from bot.core.config import SluiceConfig
from bot.core.errors import SluiceError
from bot.core.models import FileChange, UpstreamCommit
from bot.core.planner import planned_commit
from bot.core.risk_model import RiskModel
from bot.core.simulation import SimCommit, SimResult
from bot.flows.engine import footprint_of
from bot.git.facts import CommitFacts
from bot.ports import Repository

Progress = Callable[[str], None]
SHA_LINE = re.compile(r"^[0-9a-f]{40}\Z")


def _quiet(_: str) -> None:
    pass


class Period:
    """The stream from the period's first replayed commit to its last (`walked`), what is replayed, and the
    stream commit before it (None at upstream's root)."""

    def __init__(self, stream: Sequence[tuple[str, int]], inside: Sequence[int]) -> None:
        self.walked = list(stream[inside[0] : inside[-1] + 1])
        self.chosen = [stream[i] for i in inside]
        self.before = stream[inside[0] - 1][0] if inside[0] > 0 else None


def period(
    repo: Repository,
    *,
    upstream: str,
    since: int | None,
    until: int | None,
    only: Collection[str] | None = None,
) -> Period:
    stream = repo.first_parent_times(repo.resolve(upstream))
    inside = [
        i
        for i, (sha, ts) in enumerate(stream)
        if (since is None or ts >= since) and (until is None or ts < until) and (only is None or sha in only)
    ]
    if not inside:
        raise SluiceError(
            "no upstream first-parent commit in the period", "widen --from/--until, or check --upstream"
        )
    return Period(stream, inside)


def upstream_commits(
    repo: Repository, facts: CommitFacts, span: Period
) -> tuple[list[UpstreamCommit], list[tuple[str, tuple[FileChange, ...]]]]:
    """The replayed commits with their files and symbols, and every walked commit's patch (dependencies
    are traced through all of them, as the planner traces them through the stream)."""
    exclude = ["--not", span.before] if span.before else []
    infos = {c.sha: c for c in repo.commits(span.walked[-1][0], *exclude, first_parent=True)}
    patches = facts.patches([sha for sha, _ in span.walked])
    own = facts.with_symbols({sha: patches[sha] for sha, _ in span.chosen})
    position = {sha: i for i, (sha, _) in enumerate(span.walked)}
    commits = [
        UpstreamCommit(
            info=infos[sha], position=position[sha], files=own[sha], unreadable=facts.unreadable.get(sha)
        )
        for sha, _ in span.chosen
    ]
    return commits, [(sha, patches[sha]) for sha, _ in span.walked]


def sim_commits(
    repo: Repository,
    config: SluiceConfig,
    *,
    fork: str,
    upstream: str,
    since: int | None,
    until: int | None,
    model: RiskModel | None,
    only: Collection[str] | None = None,
    progress: Progress = _quiet,
) -> list[SimCommit]:
    """The period's upstream commits as the planner sees them against fork trunk's patch stack: their
    dependency edges and, with a model, P(breaks the fork). Conflicts are not predicted (no merge-tree)."""
    facts = CommitFacts(repo)
    span = period(repo, upstream=upstream, since=since, until=until, only=only)
    progress(f"reading {len(span.walked)} upstream commits ({len(span.chosen)} replayed)")
    commits, patches = upstream_commits(repo, facts, span)
    progress("dependencies and risk against the patch stack")
    revert_deps, revert_reasons = revert_links(commits)
    deps = merge_dependencies(line_and_symbol_dependencies(patches, commits), revert_deps)
    stack = [c.sha for c in repo.commits(repo.resolve(fork), "--not", repo.resolve(upstream), no_merges=True)]
    footprint = footprint_of(facts, stack, {f.path for c in commits for f in c.files})
    found = []
    for commit in commits:
        reasons = [
            *risk_reasons(commit, footprint=footprint, config=config),
            *revert_reasons.get(commit.sha, []),
        ]
        planned = planned_commit(commit, reasons=reasons, deps=deps.get(commit.sha, ()))
        p = with_probability(planned, model, config).probability if model else None
        found.append(
            SimCommit(
                sha=commit.sha,
                time=commit.info.committer_time,
                probability=p,
                depends_on=tuple(sorted({d.sha for d in planned.depends_on})),
            )
        )
    return found


def headline(result: SimResult) -> str:
    return (
        f"{result.strategy}, {result.runners} runners: {result.runs_per_commit:.3f} tier runs per commit, "
        f"median {result.median_days_behind:.2f} days behind"
    )


def report(result: SimResult) -> list[str]:
    cost = [c.runs for c in result.found]
    mean = sum(cost) / len(cost) if cost else 0.0
    lines = [
        f"simulate: {headline(result)}",
        f"simulate: {result.commits} upstream commits replayed in {result.candidates} candidates: "
        f"{result.runs} tier runs ({result.candidate_runs} of candidates, {result.bisection_runs} bisecting)",
        f"simulate: tier runs per ingested commit: {result.runs_per_commit:.3f}",
        f"simulate: culprits found: {result.culprits_found} of {result.culprits_total}, "
        f"{mean:.1f} bisection runs each on average",
        f"simulate: commits that needed a person: {len(result.needed_person)} "
        f"(the culprits, and what {result.exhausted} bisections left unsearched when their budget ran out)",
        f"simulate: Days Behind Upstream: median {result.median_days_behind:.2f}, "
        f"90th percentile {result.p90_days_behind:.2f}, "
        f"max {max((s.days_behind for s in result.samples), default=0.0):.2f}",
    ]
    lines += [
        f"  {c.runs:3d} runs  {'+'.join(s[:10] for s in c.shas)} (in a candidate of {c.candidate_size})"
        for c in result.found
    ]
    return lines + days_chart.terminal_chart(result.samples)


def as_json(result: SimResult) -> dict[str, object]:
    data = result.model_dump(mode="json", exclude={"samples"})
    data |= {
        "runs": result.runs,
        "runs_per_commit": round(result.runs_per_commit, 4),
        "culprits_found": result.culprits_found,
        "median_days_behind": round(result.median_days_behind, 4),
        "p90_days_behind": round(result.p90_days_behind, 4),
        "days_behind": [[s.at, s.days_behind] for s in result.samples[:: max(1, len(result.samples) // 500)]],
    }
    return data
