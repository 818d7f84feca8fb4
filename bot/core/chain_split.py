"""`risk.max_chain`: a long risky chain is cut, in upstream order, where the weakest dependencies cross."""

from __future__ import annotations

from collections.abc import Sequence

from bot.core.analysis import short
from bot.core.models import DependencyKind, RiskLevel, RiskyChain

# How hard a dependency is to cut: a revert or reland must travel with its original; lines and symbols
# are real code dependencies; touching a file another commit added or deleted is the weakest.
EDGE_WEIGHT = {
    DependencyKind.REVERTS: 8,
    DependencyKind.RELANDS: 8,
    DependencyKind.LINES: 3,
    DependencyKind.SYMBOL: 2,
    DependencyKind.ADD_DELETE: 1,
}


def edges(chain: RiskyChain) -> list[tuple[int, int, int]]:
    """(earlier index, later index, weight) of the dependencies between the chain's pending members."""
    index = {c.sha: i for i, c in enumerate(chain.commits)}
    found: dict[tuple[int, int], int] = {}
    for later, commit in enumerate(chain.commits):
        for dep in commit.depends_on:
            if dep.sha in index:
                key = (index[dep.sha], later)
                found[key] = max(found.get(key, 0), EDGE_WEIGHT[dep.kind])
    return [(a, b, w) for (a, b), w in sorted(found.items())]


def weakest_cut(size: int, links: Sequence[tuple[int, int, int]]) -> int:
    """Where to cut members [0, size): the position with the least weight crossing it, then the most even."""
    delta = [0] * (size + 1)
    for a, b, w in links:  # an edge a -> b crosses every cut in (a, b]
        delta[a + 1] += w
        delta[b + 1] -= w
    crossing, running = [0] * size, 0
    for cut in range(1, size):
        running += delta[cut]
        crossing[cut] = running
    return min(range(1, size), key=lambda cut: (crossing[cut], abs(2 * cut - size), cut))


def _pieces(size: int, links: Sequence[tuple[int, int, int]], limit: int, start: int = 0) -> list[range]:
    if size <= limit:
        return [range(start, start + size)]
    local = [(a - start, b - start, w) for a, b, w in links if start <= a and b < start + size]
    cut = weakest_cut(size, local)
    return [*_pieces(cut, links, limit, start), *_pieces(size - cut, links, limit, start + cut)]


def split_chain(chain: RiskyChain, *, limit: int | None) -> list[RiskyChain]:
    """The chain itself when it is short enough; else its pieces in order, the first keeping its id."""
    if limit is None or len(chain.commits) <= limit:
        return [chain]
    links = edges(chain)
    ranges = _pieces(len(chain.commits), links, limit)
    owner = {i: n for n, r in enumerate(ranges) for i in r}
    pending = {c.sha for c in chain.commits}
    ids = [chain.id, *(f"chain-{short(chain.commits[r.start].sha)}" for r in ranges[1:])]
    pieces = []
    for n, r in enumerate(ranges):
        commits = chain.commits[r.start : r.stop]
        before = sorted({owner[a] for a, b, _ in links if owner[b] == n and owner[a] != n})
        shas = {c.sha for c in commits}
        first = n == 0
        root_here = chain.root in shas or (first and chain.root not in pending)
        pieces.append(
            chain.model_copy(
                update={
                    "id": ids[n],
                    "root": chain.root if root_here else commits[0].sha,
                    "risk": max(
                        (c.risk for c in commits), key=lambda level: level.rank, default=RiskLevel.LOW
                    ),
                    "ingested": chain.ingested if first else (),
                    "commits": commits,
                    "why": {s: w for s, w in chain.why.items() if s in shas},
                    "after": tuple(ids[i] for i in before),
                    "ingested_files": chain.ingested_files if first else (),
                    "ingested_symbols": chain.ingested_symbols if first else (),
                }
            )
        )
    return pieces
