"""Path selection: pending upstream commits become ordered risky chains and capped low-risk bundles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from bot.core.analysis import (
    held_dependencies,
    keys_for,
    line_and_symbol_dependencies,
    merge_dependencies,
    overall_risk,
    revert_links,
    risk_reasons,
    short,
    symbol_keys,
)
from bot.core.calibrated import (
    REVERT_PAIR,
    LoadedModel,
    Selection,
    calibrated_selection,
    caps_for,
    needs_person,
    rules_selection,
    with_probability,
)
from bot.core.chain_split import part, split_chain
from bot.core.config import SluiceConfig, Strategy
from bot.core.models import (
    Dependency,
    Disposition,
    FileChange,
    LowRiskBundle,
    PatchStackFootprint,
    Plan,
    PlannedCommit,
    RiskKind,
    RiskLevel,
    RiskReason,
    RiskyChain,
    StreamStatus,
    UpstreamCommit,
)
from bot.core.risk_cost import BundleCaps, Candidate, fill

RISKY_FROM = RiskLevel.HIGH


@dataclass(frozen=True)
class PriorChain:
    """A chain from an earlier plan: its members, and what its already-ingested members touched."""

    id: str
    root: str
    members: tuple[str, ...]
    ingested_files: frozenset[str] = frozenset()
    ingested_symbols: frozenset[str] = frozenset()


class ChainRecord(Protocol):
    """An open chain as the store keeps it."""

    @property
    def id(self) -> str: ...
    @property
    def root(self) -> str: ...
    @property
    def members(self) -> tuple[str, ...]: ...


def _planned_keys(commit: PlannedCommit) -> frozenset[str]:
    keys: set[str] = set()
    for symbol in commit.symbols:
        path, _, name = symbol.partition("::")
        keys |= keys_for(path, [name])
    return frozenset(keys)


def prior_chains(
    previous: Plan | None, stored: Sequence[ChainRecord], ingested: set[str]
) -> list[PriorChain]:
    """Stored open chains, seeded with what their ingested members touched (as the last plan saw them)."""
    seeds: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for chain in previous.chains if previous else ():
        seeds[chain.id] = (frozenset(chain.ingested_files), frozenset(chain.ingested_symbols))
        for commit in chain.commits:
            if commit.sha in ingested:
                files, keys = seeds[chain.id]
                seeds[chain.id] = (files | set(commit.files), keys | _planned_keys(commit))
    empty: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
    return [
        PriorChain(
            id=chain.id,
            root=chain.root,
            members=chain.members,
            ingested_files=seeds.get(chain.id, empty)[0],
            ingested_symbols=seeds.get(chain.id, empty)[1],
        )
        for chain in stored
    ]


@dataclass
class _Chain:
    id: str
    root: str
    members: set[str]
    ingested: list[str] = field(default_factory=list)
    commits: list[PlannedCommit] = field(default_factory=list)
    seed_files: frozenset[str] = frozenset()
    seed_symbols: frozenset[str] = frozenset()
    # What members touched: seeded with the already-ingested members of a resumed chain, then grown by
    # each commit that joins in upstream order (never by members not reached yet, so a plan does not
    # depend on how many times the same state was planned before).
    files: set[str] = field(default_factory=set)
    symbols: set[str] = field(default_factory=set)
    # What only the commits that joined in this plan touched (no seeds): a low-risk commit links by these.
    joined_files: set[str] = field(default_factory=set)
    joined_symbols: set[str] = field(default_factory=set)
    why: dict[str, str] = field(default_factory=dict)
    keys_of: dict[str, frozenset[str]] = field(default_factory=dict)  # each member's symbol keys
    was_finished: bool = False  # resumed with every member ingested

    def link(
        self, commit: PlannedCommit, keys: frozenset[str], *, real_only: bool, chosen: str | None
    ) -> str | None:
        """Why the commit belongs to this chain, or None. `real_only`: by dependencies and by what the
        already-ingested members touched, never by a file or symbol pending members merely share. A member
        from an earlier plan keeps the why a first plan gives it (`chosen`), so replanning changes nothing.
        """
        deps = [d for d in commit.depends_on if d.sha in self.members]
        if deps:  # a revert or reland says most about why the commit is here
            return dependency_why(min(deps, key=lambda d: d.kind not in REVERT_PAIR))
        files, symbols = (self.seed_files, self.seed_symbols) if real_only else (self.files, self.symbols)
        if chosen is None:  # not risky itself: never joins by what ingested members touched (see `_resume`)
            files, symbols = (set(), set()) if real_only else (self.joined_files, self.joined_symbols)
        shared = sorted(files.intersection(commit.files)) or sorted(symbols.intersection(keys))
        if shared:
            return f"touches {shared[0]} as {self._toucher(shared[0], seeded=real_only)} did"
        return (chosen or f"a member of {self.id} in an earlier plan") if commit.sha in self.members else None

    def _toucher(self, touched: str, *, seeded: bool) -> str:
        """Who touched a file or symbol first: the member by its short SHA (a chain's id would say nothing
        once a merge plan cuts the chain into units of their own, or a replan renames it), else a member
        ingested before (what those touched is kept as a whole, not per commit)."""
        members = () if seeded else self.commits
        first = next((c for c in members if touched in c.files or touched in self.keys_of[c.sha]), None)
        return short(first.sha) if first is not None else "a member ingested before"

    @property
    def finished(self) -> bool:
        """Resumed with every member ingested, and none joined yet: never merged into another chain by what
        they both touched."""
        return self.was_finished and not self.commits

    def depends(self, commit: PlannedCommit) -> bool:
        return any(d.sha in self.members for d in commit.depends_on)

    def add(self, commit: PlannedCommit, keys: frozenset[str], *, why: str) -> None:
        self.why[commit.sha] = why
        self.keys_of[commit.sha] = keys
        self.commits.append(commit)
        self.members.add(commit.sha)
        self.files.update(commit.files)
        self.symbols.update(keys)
        self.joined_files.update(commit.files)
        self.joined_symbols.update(keys)

    def absorb(self, other: _Chain, position: Mapping[str, int]) -> None:
        self.members |= other.members
        self.ingested += [sha for sha in other.ingested if sha not in self.ingested]
        # in upstream order: a why's first member to touch a file is then the same whichever chain absorbs
        self.commits = sorted([*self.commits, *other.commits], key=lambda c: position[c.sha])
        self.why.update(other.why)
        self.keys_of.update(other.keys_of)
        self.files |= other.files
        self.symbols |= other.symbols
        self.joined_files |= other.joined_files
        self.joined_symbols |= other.joined_symbols
        self.seed_files |= other.seed_files
        self.seed_symbols |= other.seed_symbols

    def freeze(self, position: Mapping[str, int]) -> RiskyChain:
        commits = sorted(self.commits, key=lambda c: position[c.sha])
        risk = max((c.risk for c in commits), key=lambda level: level.rank, default=RiskLevel.LOW)
        return RiskyChain(
            id=self.id,
            root=self.root,
            risk=risk,
            ingested=tuple(self.ingested),
            commits=tuple(commits),
            linked_files=tuple(sorted(self.files)),
            linked_symbols=tuple(sorted(self.symbols)),
            ingested_files=tuple(sorted(self.seed_files)),
            ingested_symbols=tuple(sorted(self.seed_symbols)),
            why={c.sha: self.why[c.sha] for c in commits},
        )


def _resume(prior: Sequence[PriorChain], ingested: set[str]) -> list[_Chain]:
    """Stored open chains. Such a chain takes a commit that depends on a member (a revert, a reland, its
    lines) or a risky one touching what its ingested members touched (a fix-up after an LLVM bump); a
    commit that is not risky itself joins it only through what its pending members touch, never through
    what the ingested ones did: on a fork that ingested a month of chains, that is half the tree (and the
    same plan, recorded and made again, would then sweep in more). When nothing joins it, it is left out
    of the plan and so closed.
    """
    chains = []
    for chain in prior:
        chains.append(
            _Chain(
                id=chain.id,
                root=chain.root,
                members=set(chain.members),
                ingested=[s for s in chain.members if s in ingested],
                files=set(chain.ingested_files),
                symbols=set(chain.ingested_symbols),
                seed_files=chain.ingested_files,
                seed_symbols=chain.ingested_symbols,
                was_finished=set(chain.members) <= ingested,
            )
        )
    return chains


def dependency_why(dep: Dependency) -> str:
    """`reverts <sha>`, `relands <sha>`, `depends on <sha> (lines)`."""
    if dep.kind in REVERT_PAIR:
        return f"{dep.kind} {short(dep.sha)}"
    return f"depends on {short(dep.sha)} ({dep.kind})"


def _bundle(commits: Sequence[PlannedCommit], caps: BundleCaps) -> tuple[LowRiskBundle, ...]:
    """Fill bundles in upstream order up to the commit, line and (with a model) summed-probability caps; a
    commit predicted to need a person ends its bundle."""
    sizes = [Candidate(c.probability or 0.0, c.changed_lines, ends=needs_person(c)) for c in commits]
    groups = [[commits[i] for i in group] for group in fill(sizes, caps)]
    return tuple(LowRiskBundle(id=f"bundle-{short(g[0].sha)}", commits=tuple(g)) for g in groups)


def classify(
    commits: Sequence[PlannedCommit],
    *,
    symbol_keys: Mapping[str, frozenset[str]],
    prior: Sequence[PriorChain],
    ingested: set[str],
    config: SluiceConfig,
    selection: Selection | None = None,
) -> tuple[tuple[LowRiskBundle, ...], tuple[RiskyChain, ...]]:
    """Chains first: a commit linked to a chain (member, dependency; by today's rules also a shared file or
    symbol) joins it, keeping order; a selected commit with no chain starts one (today's rules select the
    risky ones; a model, `calibrated_selection`); everything else is bundled. Commits in upstream order.
    """
    selection = selection or rules_selection(commits, risky_from=RISKY_FROM)
    position = {c.sha: i for i, c in enumerate(commits)}
    chains = _resume(prior, ingested)
    low_risk: list[PlannedCommit] = []
    for commit in commits:
        keys = symbol_keys.get(commit.sha, frozenset())
        chosen = selection.chosen.get(commit.sha)
        linked = [
            (c, why)
            for c in chains
            if (why := c.link(commit, keys, real_only=selection.calibrated, chosen=chosen))
        ]
        if linked:
            # The chain rooted earliest upstream (an ingested root first) keeps its name, as in a first plan,
            # which only grows chains forward (a replan resumes that plan's pieces and merges them again);
            # one whose members were all ingested only when no other is left (its later piece goes on).
            target = min(linked, key=lambda pair: (pair[0].finished, position.get(pair[0].root, -1)))[0]
            for other, _ in linked:
                if other is target or (other.finished and not other.depends(commit)):
                    continue  # a month of ingested chains would merge into one by the files they touched
                target.absorb(other, position)
                chains.remove(other)
            # why, over every chain it merged: the same whichever of them it met first (absorbing only
            # adds members and what they touched, so the target still links the commit)
            why = target.link(commit, keys, real_only=selection.calibrated, chosen=chosen)
            assert why is not None
            target.add(commit, keys, why=why)
        elif commit.sha in selection.chosen:
            chain = _Chain(id=f"chain-{short(commit.sha)}", root=commit.sha, members=set())
            chain.add(commit, keys, why=selection.chosen[commit.sha])
            chains.append(chain)
        else:
            low_risk.append(commit)
    frozen = [chain.freeze(position) for chain in chains if chain.commits]
    frozen.sort(key=lambda c: position[c.commits[0].sha])
    pieces = tuple(p for chain in frozen for p in split_chain(chain, limit=config.risk.max_chain))
    caps = selection.caps or caps_for(config, calibrated=selection.calibrated)
    if config.strategy is Strategy.MERGE:
        return in_stream_order(commits, pieces, caps)
    return _bundle(low_risk, caps), pieces


def in_stream_order(
    commits: Sequence[PlannedCommit], chains: Sequence[RiskyChain], caps: BundleCaps
) -> tuple[tuple[LowRiskBundle, ...], tuple[RiskyChain, ...]]:
    """`strategy: merge`: merging an upstream commit brings every commit before it, so each unit is a run of
    consecutive commits of the stream. A chain is cut where a bundled commit (or another chain's) comes
    between its members, and bundles fill only the runs between chained commits; the plan's `order` is the
    stream's."""
    chain_of = {c.sha: chain.id for chain in chains for c in chain.commits}
    runs: list[list[PlannedCommit]] = []
    for commit in commits:
        if runs and chain_of.get(runs[-1][-1].sha) == chain_of.get(commit.sha):
            runs[-1].append(commit)
        else:
            runs.append([commit])
    by_id = {chain.id: chain for chain in chains}
    bundles: list[LowRiskBundle] = []
    pieces: list[RiskyChain] = []
    for run in runs:
        owner = chain_of.get(run[0].sha)
        if owner is None:
            bundles += _bundle(run, caps)
        else:
            pieces.append(_run_of(by_id[owner], run))
    return tuple(bundles), tuple(pieces)


def _run_of(chain: RiskyChain, run: Sequence[PlannedCommit]) -> RiskyChain:
    """The part of `chain` that is `run`, named after its own first commit (a chain's id may name a root that
    another run holds, as one resumed from an earlier plan and grown backwards does: two units would share
    it); its root where it holds it, else its first commit: never another unit's commit, nor one ingested
    before (a replan would then name the root differently once the plan is recorded)."""
    return part(chain, run, name=f"chain-{short(run[0].sha)}")  # no `after`: what precedes it goes first


def stream_order(
    commits: Sequence[PlannedCommit], bundles: Sequence[LowRiskBundle], chains: Sequence[RiskyChain]
) -> tuple[str, ...]:
    """The ids of the plan's units in the order their first commits come upstream."""
    position = {c.sha: i for i, c in enumerate(commits)}
    firsts = [(b.commits[0].sha, b.id) for b in bundles] + [
        (c.commits[0].sha, c.id) for c in chains if c.commits
    ]
    return tuple(unit for _, unit in sorted((position[sha], unit) for sha, unit in firsts))


def planned_commit(
    commit: UpstreamCommit, *, reasons: Sequence[RiskReason], deps: Sequence[Dependency]
) -> PlannedCommit:
    symbols = sorted({f"{f.path}::{s}" for f in commit.files for s in f.symbols})
    return PlannedCommit(
        sha=commit.sha,
        subject=commit.info.subject,
        author=commit.info.author_name,
        committer_time=commit.info.committer_time,
        changed_lines=commit.changed_lines,
        files=commit.paths,
        symbols=tuple(symbols),
        risk=overall_risk(reasons),
        reasons=tuple(sorted(reasons, key=lambda r: (-r.level.rank, r.kind.value, r.detail))),
        depends_on=tuple(deps),
    )


def _bisected(detail: str | None) -> list[RiskReason]:
    if detail is None:
        return []
    return [RiskReason(kind=RiskKind.BISECTED, level=RiskLevel.CRITICAL, detail=detail)]


def _planned(
    commits: Sequence[UpstreamCommit],
    stream_patches: Sequence[tuple[str, Sequence[FileChange]]],
    footprint: PatchStackFootprint,
    *,
    config: SluiceConfig,
    held: Mapping[str, Disposition],
    blamed: Mapping[str, str],
) -> list[PlannedCommit]:
    """Each commit with its reasons and its dependencies (on lines and symbols, reverts and relands)."""
    line_deps, held_reasons = held_dependencies(
        line_and_symbol_dependencies(stream_patches, commits, held=held.keys()), held
    )
    revert_deps, revert_reasons = revert_links(commits)
    deps = merge_dependencies(line_deps, revert_deps)
    return [
        planned_commit(
            c,
            reasons=[
                *risk_reasons(c, footprint=footprint, config=config),
                *revert_reasons.get(c.sha, []),
                *held_reasons.get(c.sha, []),
                *_bisected(blamed.get(c.sha)),
            ],
            deps=deps.get(c.sha, ()),
        )
        for c in commits
    ]


def make_plan(
    *,
    status: StreamStatus,
    fork_ref: str,
    upstream_ref: str,
    config: SluiceConfig,
    commits: Sequence[UpstreamCommit],
    stream_patches: Sequence[tuple[str, Sequence[FileChange]]],
    footprint: PatchStackFootprint,
    prior: Sequence[PriorChain] = (),
    held: Mapping[str, Disposition] | None = None,
    ingested: set[str] | None = None,
    model: LoadedModel | None = None,
    blamed: Mapping[str, str] | None = None,
) -> Plan:
    """The whole plan for one repository state: deterministic for the same inputs. `blamed`: the commits a
    bisection blamed for a tier failure (what failed): each gets a critical `bisected` reason, so it roots a
    risky chain and its dependents follow it there. `held`: what people deferred or skipped, left out of
    the plan; a commit that depends on one gets a high `held-dependency` reason instead (`stream_patches`
    holds the held commits' patches with their symbols)."""
    held = held or {}
    planned = _planned(commits, stream_patches, footprint, config=config, held=held, blamed=blamed or {})
    selection, decision = None, None
    if model is not None:
        planned = [with_probability(c, model.model, config) for c in planned]
        selection = calibrated_selection(planned, config, model.model)
        decision = model.decision(selection, bundle_culprits=config.risk.bundle_culprits)
    keys = {c.sha: frozenset(k for f in c.files for k in symbol_keys(f)) for c in commits}
    bundles, chains = classify(
        planned, symbol_keys=keys, prior=prior, ingested=ingested or set(), config=config, selection=selection
    )
    return Plan(
        fork_ref=fork_ref,
        fork_head=status.fork_head,
        upstream_ref=upstream_ref,
        upstream_head=status.upstream_head,
        config_digest=config.digest(),
        status=status,
        bundles=bundles,
        chains=chains,
        held=dict(sorted(held.items())),
        risk_decision=decision,
        order=stream_order(planned, bundles, chains) if config.strategy is Strategy.MERGE else (),
    )
