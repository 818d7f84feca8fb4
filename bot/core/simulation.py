"""What Sluice would have done with a stretch of upstream history: batching, tier runs, bisection (pure).

Time moves in hours: one tier run takes one runner-hour, `runners` run side by side, upstream commits
arrive at their committer times. The tier oracle fails a candidate that holds a known culprit.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from bot.core import bisect
from bot.core.bisect import Bisection, Budget, Outcome, Phase, Probe

HOUR, DAY = 3600, 86400


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Batching(enum.StrEnum):
    SLUICE = "sluice"  # candidates sized by risk, likely culprits alone, k-ary bisection with confirmation
    FIXED = "fixed"  # fixed-size batches, prefix bisection on one runner, no confirmation
    PER_COMMIT = "per-commit"  # every commit its own tier run


class SimCommit(Frozen):
    sha: str
    time: int  # committer time (epoch seconds): when it reaches the bot
    probability: float | None = None  # P(it breaks the fork), from the risk model
    depends_on: tuple[str, ...] = ()  # earlier upstream commits it needs (the planner's edges)


class SimOptions(Frozen):
    strategy: Batching = Batching.SLUICE
    runners: int = 1
    max_commits: int = 20  # the most commits in one candidate (the fixed size for FIXED)
    max_wait_hours: float = 24.0  # a candidate short of its target leaves when its oldest commit waited this
    confirm: bool = True  # Sluice re-runs a suspect once before blaming it (the baselines never do)
    recalibrate: bool = True  # scale the model's probabilities by the culprits found so far
    person_hours: float = 24.0  # how long a person takes to fix a culprit (then it is ingested, in its chain)
    budget: Budget = Budget(max_runs=40)  # per bisection
    start: int | None = None  # the period (epoch seconds) Days Behind is sampled over
    end: int | None = None


class FoundCulprit(Frozen):
    shas: tuple[str, ...]
    dependents: tuple[str, ...]
    runs: int  # bisection runs spent on it
    candidate_size: int
    found_at: int  # epoch seconds


class Sample(Frozen):
    at: int
    days_behind: float


class SimResult(Frozen):
    """The replay's figures: tier runs, culprits found and what they cost, Days Behind over time."""

    strategy: Batching
    runners: int
    commits: int
    candidates: int
    candidate_runs: int
    bisection_runs: int
    found: tuple[FoundCulprit, ...]
    culprits_total: int
    needed_person: tuple[str, ...]  # culprits, and what a spent budget left unsearched
    exhausted: int  # bisections stopped by their budget
    samples: tuple[Sample, ...]

    @property
    def runs(self) -> int:
        return self.candidate_runs + self.bisection_runs

    @property
    def runs_per_commit(self) -> float:
        return self.runs / self.commits if self.commits else 0.0

    @property
    def culprits_found(self) -> int:
        return len({s for c in self.found for s in c.shas})

    @property
    def median_days_behind(self) -> float:
        return statistics.median(s.days_behind for s in self.samples) if self.samples else 0.0

    @property
    def p90_days_behind(self) -> float:
        values = sorted(s.days_behind for s in self.samples)
        return values[min(len(values) - 1, int(0.9 * len(values)))] if values else 0.0


@dataclass
class _Run:
    commits: tuple[str, ...]
    probe: Probe | None = None  # None: a candidate's own run
    search: int = 0  # the bisection it belongs to


@dataclass
class _World:
    """The replay's mutable state, kept inside `simulate` (which stays a function of its inputs)."""

    commits: Sequence[SimCommit]
    culprits: frozenset[str]
    options: SimOptions
    position: dict[str, int]
    arrived: int = 0
    pending: list[str] = field(default_factory=list)
    ingested: set[str] = field(default_factory=set)
    person: list[str] = field(default_factory=list)
    held: dict[str, int] = field(default_factory=dict)  # held by a person until (epoch seconds)
    searches: dict[int, Bisection] = field(default_factory=dict)
    flying: list[_Run] = field(default_factory=list)
    found: list[FoundCulprit] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("cand", "runs", "bis", "exh"), 0))
    tip: int = -1  # stream position of the newest ingested commit
    samples: list[Sample] = field(default_factory=list)
    sizing: bisect.Sizing | None = None  # from the whole stream's probabilities, when a model gave them
    mean: float = 0.0  # the stream's mean probability
    expected: float = 0.0  # summed probability of the commits whose tier runs came back …
    observed: int = 0  # … and the culprits found among them: the model's calibration on this fork so far

    def fails(self, commits: Collection[str]) -> bool:
        return bool(self.culprits.intersection(commits))


def simulate(commits: Sequence[SimCommit], culprits: Collection[str], options: SimOptions) -> SimResult:
    """Replay `commits` (upstream order) hour by hour; `culprits` are the commits the tier oracle fails on."""
    world = _World(commits, frozenset(culprits), options, {c.sha: i for i, c in enumerate(commits)})
    if any(c.probability is not None for c in commits):
        stream = [c.probability or 0.0 for c in commits]
        world.sizing = bisect.sizing(stream, max_commits=options.max_commits)
        world.mean = sum(stream) / len(stream)
    if not commits:
        return _result(world)
    now = commits[0].time - commits[0].time % HOUR
    end = max(options.end or 0, commits[-1].time)
    while world.arrived < len(commits) or world.pending or world.flying or world.searches or world.held:
        _arrive(world, now)
        _release(world, now)
        _dispatch(world, now)
        if now >= (options.start or commits[0].time) and now <= end:
            _sample(world, now)
        now += HOUR
        _complete(world, now)
    return _result(world)


def _result(world: _World) -> SimResult:
    return SimResult(
        strategy=world.options.strategy,
        runners=world.options.runners,
        commits=len(world.commits),
        candidates=world.counts["cand"],
        candidate_runs=world.counts["runs"],
        bisection_runs=world.counts["bis"],
        found=tuple(world.found),
        culprits_total=len(world.culprits & set(world.position)),
        needed_person=tuple(sorted(world.person, key=world.position.__getitem__)),
        exhausted=world.counts["exh"],
        samples=tuple(world.samples),
    )


def _arrive(world: _World, now: int) -> None:
    while world.arrived < len(world.commits) and world.commits[world.arrived].time <= now:
        world.pending.append(world.commits[world.arrived].sha)
        world.arrived += 1


def _sample(world: _World, now: int) -> None:
    """Days Behind Upstream: upstream head's committer time minus the ingestion tip's (README, Metrics)."""
    if world.arrived == 0:
        return
    head = world.commits[world.arrived - 1].time
    tip = world.commits[world.tip].time if world.tip >= 0 else world.commits[0].time
    world.samples.append(Sample(at=now, days_behind=round(max(0, head - tip) / DAY, 4)))


def _ingest(world: _World, shas: Sequence[str]) -> None:
    world.ingested.update(shas)
    for sha in shas:
        world.tip = max(world.tip, world.position[sha])


def _release(world: _World, now: int) -> None:
    """Culprits a person has fixed are ingested (their chain validated after the fix)."""
    fixed = [sha for sha, until in world.held.items() if until <= now]
    for sha in fixed:
        del world.held[sha]
    _ingest(world, fixed)


def _hold(world: _World, shas: Sequence[str], now: int) -> None:
    world.person += shas
    world.held.update(dict.fromkeys(shas, now + int(world.options.person_hours * HOUR)))


def _requeue(world: _World, shas: Sequence[str]) -> None:
    """Commits taken out with a culprit they need go back to wait for it (they join its chain)."""
    world.pending = sorted([*world.pending, *shas], key=world.position.__getitem__)


def _eligible(world: _World) -> list[str]:
    """Pending commits a candidate may take now: each dependency ingested or taken before it (one that needs
    a commit in flight, or one a person holds, waits for it)."""
    taken: list[str] = []
    chosen: set[str] = set()
    for sha in world.pending:
        deps = world.commits[world.position[sha]].depends_on
        if all(d in world.ingested or d in chosen or d not in world.position for d in deps):
            taken.append(sha)
            chosen.add(sha)
    return taken


def _groups(world: _World, eligible: Sequence[str]) -> list[list[str]]:
    options = world.options
    if options.strategy is Batching.PER_COMMIT:
        return [[sha] for sha in eligible]
    size = options.max_commits
    if options.strategy is Batching.FIXED or world.sizing is None:  # no risk model: fixed-size candidates
        return [list(eligible[i : i + size]) for i in range(0, len(eligible), size)]
    scale = _calibration(world)
    probabilities = [scale * (world.commits[world.position[s]].probability or 0.0) for s in eligible]
    plan = bisect.sizing([world.mean * scale], max_commits=size) if scale != 1.0 else world.sizing
    return [[eligible[i] for i in g] for g in bisect.cut(probabilities, plan)]


PRIOR_CULPRITS = 5.0  # how many culprits' worth of evidence the model's own scale counts as


def _calibration(world: _World) -> float:
    """Observed over expected culprits so far (shrunk towards 1): a model fitted on another fork, or on
    another labelling, over- or under-states this stream's failure rate, and the sizes follow what the
    tier actually found. Only what came back is used: nothing from the future."""
    if not world.options.recalibrate:
        return 1.0
    return (world.observed + PRIOR_CULPRITS) / (world.expected + PRIOR_CULPRITS)


def _ready(world: _World, group: Sequence[str], *, last: bool, now: int) -> bool:
    """A candidate leaves when it is full (a later one began), alone by risk, or waited long enough."""
    if not last or len(group) >= world.options.max_commits or world.options.strategy is Batching.PER_COMMIT:
        return True
    if world.arrived == len(world.commits):  # the period is over: nothing more will join it
        return True
    oldest = world.commits[world.position[group[0]]].time
    return now - oldest >= world.options.max_wait_hours * HOUR


def _dispatch(world: _World, now: int) -> None:
    free = world.options.runners - len(world.flying)
    one = world.options.strategy is not Batching.SLUICE  # the baselines bisect on one runner
    for key, search in sorted(world.searches.items()):
        if free <= 0:
            break
        search, probes = bisect.next_probes(search, free=1 if one else free)
        world.searches[key] = search
        world.flying += [_Run(p.commits, probe=p, search=key) for p in probes]
        free -= len(probes)
        if search.phase is not Phase.SEARCHING:
            _close(world, key, now)
    groups = _groups(world, _eligible(world))
    for index, group in enumerate(groups):
        if free <= 0 or not _ready(world, group, last=index == len(groups) - 1, now=now):
            break
        for sha in group:
            world.pending.remove(sha)
        world.flying.append(_Run(tuple(group)))
        world.counts["cand"] += 1
        free -= 1


def _complete(world: _World, now: int) -> None:
    """Every run dispatched an hour ago reports."""
    done, world.flying = world.flying, []
    for run in done:
        outcome = Outcome.FAIL if world.fails(run.commits) else Outcome.PASS
        if run.probe is None:
            world.counts["runs"] += 1
            _candidate_done(world, run.commits, outcome, now)
            continue
        world.counts["bis"] += 1
        if run.search not in world.searches:  # its search ended meanwhile: the run only counts
            continue
        search = bisect.record(world.searches[run.search], run.probe.id, outcome)
        world.searches[run.search] = search
        if search.phase is not Phase.SEARCHING:
            _close(world, run.search, now)


def _candidate_done(world: _World, commits: tuple[str, ...], outcome: Outcome, now: int) -> None:
    world.expected += sum(world.commits[world.position[s]].probability or 0.0 for s in commits)
    if outcome is Outcome.PASS:
        _ingest(world, commits)
        return
    search = bisect.start(
        f"candidate-{commits[0][:10]}",
        commits,
        tier="L2",
        depends_on={s: world.commits[world.position[s]].depends_on for s in commits},
        budget=world.options.budget,
        confirm=world.options.strategy is Batching.SLUICE and world.options.confirm,
        weights=_weights(world, commits) if world.options.strategy is Batching.SLUICE else None,
    )
    key = max(world.searches, default=0) + 1
    world.searches[key] = search
    if search.phase is not Phase.SEARCHING:
        _close(world, key, now)


def _weights(world: _World, commits: Sequence[str]) -> dict[str, float]:
    found = ((s, world.commits[world.position[s]].probability) for s in commits)
    return {s: p for s, p in found if p is not None}


def _close(world: _World, key: int, now: int) -> None:
    """A finished search: the rest is ingested; culprits, their dependents and any unsearched rest wait."""
    search = world.searches.pop(key)
    size = len(search.commits)
    world.observed += len(search.culprits)
    for culprit in search.culprits:
        world.found.append(
            FoundCulprit(
                shas=culprit.shas,
                dependents=culprit.dependents,
                runs=culprit.runs,
                candidate_size=size,
                found_at=now,
            )
        )
        _hold(world, culprit.shas, now)
        _requeue(world, culprit.dependents)
    rest = search.remaining
    good = rest if search.phase is Phase.DONE else rest[: search.lo]
    _ingest(world, good)
    if search.phase is Phase.EXHAUSTED:
        world.counts["exh"] += 1
        _hold(world, rest[search.lo :], now)


# -- what no replay can beat ---------------------------------------------------------------------------------


def information_bound(flags: Sequence[bool], *, size: int) -> float:
    """Tier runs that batches of `size` (upstream order) need at the least: one each, and for one holding
    k culprits the log2 C(n, k) answers that tell which they are."""
    runs = 0.0
    for i in range(0, len(flags), size):
        batch = flags[i : i + size]
        k = sum(batch)
        runs += 1 + (math.log2(math.comb(len(batch), k)) if k else 0.0)
    return runs


class EntropyBound(Frozen):
    """Bits per commit that any strategy's pass/fail answers must carry to name the culprits (one tier run
    answers one bit at the most), given what it knows of each commit beforehand."""

    rate: float  # knowing only the stream's culprit rate: H(rate)
    model: float  # trusting the model's probabilities and being right on average: mean H(p)
    labels: float  # the culprits as they are, coded with the model's probabilities: mean −log2 q(label)
    calibrated_labels: float  # the same after scaling the probabilities to the stream's real rate


def _bits(p: float) -> float:
    return 0.0 if p <= 0.0 or p >= 1.0 else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def _cost(p: float, culprit: bool) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return -math.log2(p if culprit else 1 - p)


def entropy_bound(probabilities: Sequence[float], flags: Sequence[bool]) -> EntropyBound:
    """How few tier runs per commit a model with these `probabilities` could buy on this stream (`flags`:
    which commits are culprits), confirmation re-runs not counted. A strategy that beats these figures on
    average does not exist: the goal of a run count below them needs a sharper model, not a better search."""
    if len(probabilities) != len(flags):
        raise ValueError("one probability per commit")
    n = len(flags)
    if n == 0:
        return EntropyBound(rate=0.0, model=0.0, labels=0.0, calibrated_labels=0.0)
    rate, mean = sum(flags) / n, sum(probabilities) / n
    scale = rate / mean if mean > 0 else 1.0
    return EntropyBound(
        rate=_bits(rate),
        model=sum(_bits(p) for p in probabilities) / n,
        labels=sum(_cost(p, f) for p, f in zip(probabilities, flags, strict=True)) / n,
        calibrated_labels=sum(_cost(p * scale, f) for p, f in zip(probabilities, flags, strict=True)) / n,
    )
