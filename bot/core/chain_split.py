"""`risk.max_chain`: a long risky chain, cut in upstream order into the fewest pieces at its weakest links."""

from __future__ import annotations

from collections.abc import Sequence

from bot.core.analysis import short
from bot.core.models import DependencyKind, PlannedCommit, RiskLevel, RiskyChain

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


def crossing(size: int, links: Sequence[tuple[int, int, int]]) -> list[int]:
    """The weight of the dependencies a cut before member `cut` would sever, for each cut in [1, size)."""
    delta = [0] * (size + 1)
    for a, b, w in links:  # an edge a -> b crosses every cut in (a, b]
        delta[a + 1] += w
        delta[b + 1] -= w
    weights, running = [0] * size, 0
    for cut in range(1, size):
        running += delta[cut]
        weights[cut] = running
    return weights


def pieces(size: int, links: Sequence[tuple[int, int, int]], limit: int) -> list[range]:
    """Members [0, size) in the fewest runs of at most `limit`; of those cuts, the ones severing the least
    weight, then the most even (not a piece at every cut that happens to sever nothing: a chain of 74 with
    a limit of 30 is three pieces)."""
    severed = crossing(size, links)
    # best[i]: (pieces, weight severed, sum of squared sizes) of members [0, i) cut at i, and that cut's start
    best: list[tuple[tuple[int, int, int], int]] = [((0, 0, 0), 0)]
    for end in range(1, size + 1):
        here = severed[end] if end < size else 0
        options = []
        for start in range(max(0, end - limit), end):
            count, weight, squares = best[start][0]
            options.append(((count + 1, weight + here, squares + (end - start) ** 2), start))
        best.append(min(options))  # ties: the earliest start
    runs, end = [], size
    while end:
        start = best[end][1]
        runs.append(range(start, end))
        end = start
    return runs[::-1]


def split_chain(chain: RiskyChain, *, limit: int | None) -> list[RiskyChain]:
    """The chain itself when it is short enough; else its pieces in order, each named after its first commit
    (so no two share a name, whichever chain a replan merged them into), but for the first piece of a chain
    whose root was ingested, which keeps the chain's id."""
    if limit is None or len(chain.commits) <= limit:
        return [chain]
    links = edges(chain)
    ranges = pieces(len(chain.commits), links, limit)
    owner = {i: n for n, r in enumerate(ranges) for i in r}
    resumed = all(c.sha != chain.root for c in chain.commits)  # its root was ingested
    ids = [f"chain-{short(chain.commits[r.start].sha)}" for r in ranges]
    if resumed:  # its first piece goes on under its name
        ids[0] = chain.id
    return [
        part(
            chain,
            chain.commits[r.start : r.stop],
            name=ids[n],
            after=tuple(ids[i] for i in sorted({owner[a] for a, b, _ in links if owner[b] == n != owner[a]})),
            carries_on=resumed and n == 0,
        )
        for n, r in enumerate(ranges)
    ]


def part(
    chain: RiskyChain,
    commits: Sequence[PlannedCommit],
    *,
    name: str,
    after: tuple[str, ...] = (),
    carries_on: bool = False,
) -> RiskyChain:
    """The part of `chain` that is `commits` (a `risk.max_chain` piece, a merge plan's unit), called `name`:
    rooted at the chain's root where it holds it, or where it `carries_on` a chain whose root was ingested,
    else at its own first commit; linked by what its own commits touch; the first part keeps what the chain
    carried from before."""
    first = commits[0].sha == chain.commits[0].sha
    shas = {c.sha for c in commits}
    keeps_root = chain.root in shas or carries_on
    files = {f for c in commits for f in c.files}
    symbols = {s for c in commits for s in c.symbols}  # `path::name`; a C++ key is `cxx:ns::name`
    names = {s.split("::", 1)[1] for s in symbols}
    return chain.model_copy(
        update={
            "id": name,
            "root": chain.root if keeps_root else commits[0].sha,
            "risk": max((c.risk for c in commits), key=lambda level: level.rank, default=RiskLevel.LOW),
            "ingested": chain.ingested if first else (),
            "commits": tuple(commits),
            "linked_files": tuple(f for f in chain.linked_files if f in files),
            "linked_symbols": tuple(
                s for s in chain.linked_symbols if s in symbols or s.removeprefix("cxx:") in names
            ),
            "why": {s: w for s, w in chain.why.items() if s in shas},
            "after": after,
            "ingested_files": chain.ingested_files if first else (),
            "ingested_symbols": chain.ingested_symbols if first else (),
        }
    )
