"""Path selection on hand-made commits (pure: no git, no store)."""

from __future__ import annotations

import pytest

from bot.core.analysis import held_dependencies, line_and_symbol_dependencies
from bot.core.config import parse_config
from bot.core.ingestion import units_of
from bot.core.models import (
    CommitInfo,
    Dependency,
    DependencyKind,
    FileChange,
    Hunk,
    Plan,
    PlannedCommit,
    RiskKind,
    RiskLevel,
    RiskReason,
    UpstreamCommit,
)
from bot.core.planner import PriorChain, classify, stream_order
from tests.test_dashboard import status


def commit(
    n: int,
    *,
    risk: RiskLevel = RiskLevel.LOW,
    after: tuple[int, ...] = (),
    files: tuple[str, ...] = (),
    lines: int = 10,
) -> PlannedCommit:
    reasons = () if risk is RiskLevel.LOW else (RiskReason(kind=RiskKind.COMPONENT, level=risk, detail="x"),)
    return PlannedCommit(
        sha=f"{n:040x}",
        subject=f"commit {n}",
        author="dev",
        committer_time=n,
        changed_lines=lines,
        files=files or (f"file{n}.cpp",),
        symbols=(),
        risk=risk,
        reasons=reasons,
        depends_on=tuple(Dependency(sha=f"{a:040x}", kind=DependencyKind.LINES, detail="") for a in after),
    )


H = RiskLevel.HIGH


def numbers(groups: tuple) -> list[list[int]]:
    return [[int(c.sha, 16) for c in g.commits] for g in groups]


@pytest.mark.parametrize(
    ("commits", "bundles", "chains"),
    [
        pytest.param([commit(1), commit(2), commit(3)], [[1, 2, 3]], [], id="independent-one-bundle"),
        pytest.param(
            [commit(1, risk=H), commit(2), commit(3, after=(1,))], [[2]], [[1, 3]], id="dependent-joins"
        ),
        pytest.param(
            [commit(1), commit(2, risk=H, after=(1,)), commit(3, after=(1,))],
            [[1, 3]],
            [[2]],
            id="depending-on-bundled-is-fine",
        ),
        pytest.param(
            [commit(1, risk=H), commit(2, files=("file1.cpp",))], [], [[1, 2]], id="shared-file-joins"
        ),
        pytest.param(
            [commit(1, risk=H), commit(2, risk=H), commit(3, after=(1, 2)), commit(4, after=(2,))],
            [],
            [[1, 2, 3, 4]],
            id="linking-two-chains-merges-them",
        ),
        pytest.param([commit(1, risk=RiskLevel.MEDIUM)], [[1]], [], id="medium-is-bundled"),
        pytest.param([commit(1, risk=RiskLevel.CRITICAL), commit(2)], [[2]], [[1]], id="critical-chains"),
    ],
)
def test_classify(commits: list[PlannedCommit], bundles: list[list[int]], chains: list[list[int]]) -> None:
    got_bundles, got_chains = classify(
        commits, symbol_keys={}, prior=(), ingested=set(), config=parse_config("")
    )
    assert (numbers(got_bundles), numbers(got_chains)) == (bundles, chains)


@pytest.mark.parametrize(
    ("limits", "sizes", "bundles"),
    [
        ("max_commits: 2", [10, 10, 10, 10, 10], [[1, 2], [3, 4], [5]]),
        ("max_changed_lines: 25", [10, 10, 10, 30, 5], [[1, 2], [3], [4], [5]]),
    ],
)
def test_bundle_limits(limits: str, sizes: list[int], bundles: list[list[int]]) -> None:
    config = parse_config(f"bundles:\n  {limits}\n")
    commits = [commit(i, lines=n) for i, n in enumerate(sizes, 1)]
    got, _ = classify(commits, symbol_keys={}, prior=(), ingested=set(), config=config)
    assert numbers(got) == bundles


def spread(c: PlannedCommit) -> PlannedCommit:
    """`c` with its SHA (and those it depends on) as `nn` repeated, `nn` its number in hex."""
    again = lambda sha: f"{int(sha, 16):02x}" * 20  # noqa: E731
    deps = tuple(d.model_copy(update={"sha": again(d.sha)}) for d in c.depends_on)
    return c.model_copy(update={"sha": again(c.sha), "depends_on": deps})


@pytest.mark.parametrize(
    ("commits", "units"),
    [
        pytest.param(
            [commit(1), commit(2, risk=H), commit(3), commit(4, after=(2,)), commit(5), commit(6)],
            [("bundle", [1]), ("chain", [2]), ("bundle", [3]), ("chain", [4]), ("bundle", [5, 6])],
            id="a-chain-is-cut-where-bundled-commits-come-between",
        ),
        pytest.param(
            [commit(1, risk=H), commit(2, after=(1,)), commit(3), commit(4)],
            [("chain", [1, 2]), ("bundle", [3, 4])],
            id="consecutive-members-stay-one-chain",
        ),
        pytest.param(
            [commit(1, risk=H), commit(2), commit(3, risk=H, after=(1,)), commit(4, risk=H)],
            [("chain", [1]), ("bundle", [2]), ("chain", [3]), ("chain", [4])],
            id="chains-side-by-side-stay-apart",
        ),
    ],
)
def test_with_strategy_merge_each_unit_is_a_run_of_the_stream(
    commits: list[PlannedCommit], units: list[tuple[str, list[int]]]
) -> None:
    """A merge of an upstream commit brings every commit before it: a bundle that held commit 3 while
    commit 2 waited in a chain would bring commit 2 in unwatched. The units go in the stream's order."""
    config = parse_config("strategy: merge\n")
    commits = [spread(c) for c in commits]  # ids from the first ten digits: each its own
    bundles, chains = classify(commits, symbol_keys={}, prior=(), ingested=set(), config=config)
    plan = Plan(
        fork_ref="main",
        fork_head="f" * 40,
        upstream_ref="upstream/main",
        upstream_head="e" * 40,
        config_digest=config.digest(),
        status=status(None),
        bundles=bundles,
        chains=chains,
        order=stream_order(commits, bundles, chains),
    )
    got = [(u.kind.value, [int(c.sha[:2], 16) for c in u.commits]) for u in units_of(plan)]
    assert got == units and len({u.id for u in units_of(plan)}) == len(units)


def test_chain_ids_follow_their_root() -> None:
    _, chains = classify(
        [commit(7, risk=H)], symbol_keys={}, prior=(), ingested=set(), config=parse_config("")
    )
    assert chains[0].id == "chain-" + f"{7:040x}"[:10]


def test_symbol_link_joins_chain() -> None:
    keys = {f"{1:040x}": frozenset({"a.cpp::ns::f"}), f"{2:040x}": frozenset({"a.cpp::ns::f"})}
    _, chains = classify(
        [commit(1, risk=H), commit(2)], symbol_keys=keys, prior=(), ingested=set(), config=parse_config("")
    )
    assert numbers(chains) == [[1, 2]]
    # the member that touched it, by SHA: a chain's id may name no unit once a merge plan cuts the chain
    assert chains[0].why[f"{2:040x}"] == f"touches a.cpp::ns::f as {f'{1:040x}'[:10]} did"


def test_prior_chain_takes_its_pending_member_and_follow_ups() -> None:
    prior = [
        PriorChain(
            id="chain-old",
            root=f"{1:040x}",
            members=(f"{1:040x}", f"{3:040x}"),
            ingested_files=frozenset({"cmake/llvm-hash.txt"}),
        )
    ]
    pin = ("cmake/llvm-hash.txt",)
    commits = [commit(2), commit(3), commit(4, files=pin), commit(5, risk=H, files=pin)]
    bundles, chains = classify(
        commits, symbol_keys={}, prior=prior, ingested={f"{1:040x}"}, config=parse_config("")
    )
    # the risky follow-up joins by what the ingested member touched; a low-risk commit touching only that
    # does not (no pending member touches the pin before it)
    assert numbers(bundles) == [[2, 4]]
    assert numbers(chains) == [[3, 5]]
    assert (chains[0].id, chains[0].ingested) == ("chain-old", (f"{1:040x}",))


def test_a_chain_ingested_whole_takes_a_revert_of_its_member_not_a_commit_sharing_its_files() -> None:
    """On Intel's fork a month of merged chains touched half the tree: had they taken every later commit
    touching their files, one plan would chain 95 of 101 commits under one old id."""
    prior = [
        PriorChain(
            id="chain-old",
            root=f"{1:040x}",
            members=(f"{1:040x}",),
            ingested_files=frozenset({"lib/Pipeliner.cpp"}),
        )
    ]
    touching = commit(5, files=("lib/Pipeliner.cpp",))
    revert = commit(6, after=(1,)).model_copy(
        update={"depends_on": (Dependency(sha=f"{1:040x}", kind=DependencyKind.REVERTS, detail="r"),)}
    )
    bundles, chains = classify(
        [touching, revert], symbol_keys={}, prior=prior, ingested={f"{1:040x}"}, config=parse_config("")
    )
    assert numbers(bundles) == [[5]]
    assert numbers(chains) == [[6]] and chains[0].id == "chain-old"
    assert chains[0].why == {f"{6:040x}": f"reverts {f'{1:040x}'[:10]}"}


def test_a_risky_follow_up_joins_one_chain_ingested_whole_and_merges_no_other_into_it() -> None:
    """The fix-up after an LLVM bump continues the bump's chain; two ingested chains that touched the same
    file stay apart (one of them closes)."""
    prior = [
        PriorChain(id=f"chain-{n}", root=f"{n:040x}", members=(f"{n:040x}",), ingested_files=frozenset({"f"}))
        for n in (1, 2)
    ]
    fixup = commit(7, risk=H, files=("f",))
    _, chains = classify(
        [fixup], symbol_keys={}, prior=prior, ingested={f"{1:040x}", f"{2:040x}"}, config=parse_config("")
    )
    assert [(c.id, c.ingested) for c in chains] == [("chain-1", (f"{1:040x}",))]
    assert numbers(chains) == [[7]]


def test_a_merge_plans_units_have_ids_of_their_own_after_a_replan() -> None:
    """An earlier plan's chain named after a root later in the stream (it grew backwards): cut by a bundled
    commit, its first run and the run holding that root would both carry its id, and the App, which keys a
    unit's order and branch by it, would merge them out of the stream's order."""
    one, two, three, four = (
        spread(commit(n, risk=H if n in (1, 4) else RiskLevel.LOW)) for n in (1, 2, 3, 4)
    )
    prior = [PriorChain(id=f"chain-{four.sha[:10]}", root=four.sha, members=(one.sha, four.sha))]
    bundles, chains = classify(
        [one, two, three, four],
        symbol_keys={},
        prior=prior,
        ingested=set(),
        config=parse_config("strategy: merge\n"),
    )
    assert [c.id for c in chains] == [f"chain-{one.sha[:10]}", f"chain-{four.sha[:10]}"]
    assert [c.root for c in chains] == [one.sha, four.sha]  # never a commit another unit holds
    assert [[c.sha for c in b.commits] for b in bundles] == [[two.sha, three.sha]]
    assert all(set(c.linked_files) <= {f for m in c.commits for f in m.files} for c in chains)


def replanned(commits: list[PlannedCommit], config_text: str) -> tuple[tuple, tuple, list[tuple]]:
    """The plan, and the plans made again after the store recorded its chains, listed in either order."""
    config = parse_config(config_text)
    first = classify(commits, symbol_keys={}, prior=(), ingested=set(), config=config)
    stored = [PriorChain(id=c.id, root=c.root, members=tuple(m.sha for m in c.commits)) for c in first[1]]
    again = [
        classify(commits, symbol_keys={}, prior=order, ingested=set(), config=config)
        for order in (sorted(stored, key=lambda c: c.id), sorted(stored, key=lambda c: c.id, reverse=True))
    ]
    return first, again[0], again[1:]


@pytest.mark.parametrize(
    ("commits", "config_text", "ids"),
    [
        pytest.param(
            # 3 depends on 9; the bundled 5 between them cuts the chain into two units, stored as two chains
            [spread(commit(9, risk=H)), spread(commit(5)), spread(commit(3, risk=H, after=(9,)))],
            "strategy: merge\n",
            [9, 3],
            id="merge-units",
        ),
        pytest.param(
            [
                spread(commit(n, risk=H if n == 9 else RiskLevel.LOW, after=a))
                for n, a in ((9, ()), (3, (9,)), (7, (3,)), (1, (7,)))
            ],
            "risk:\n  max_chain: 2\n",
            [9, 7],
            id="max-chain-pieces",
        ),
    ],
)
def test_a_replan_of_the_same_state_is_the_same_plan(
    commits: list[PlannedCommit], config_text: str, ids: list[int]
) -> None:
    """A chain the first plan cut (into a merge plan's units, or `risk.max_chain` pieces) is stored as
    several; the replan merges them again, and must give each commit the same why and each piece the same
    name, unique, whatever order the store lists them in."""
    first, again, others = replanned(commits, config_text)
    assert [c.id for c in first[1]] == [f"chain-{n:02x}{n:02x}{n:02x}{n:02x}{n:02x}" for n in ids]
    assert again == first
    assert all(other == first for other in others)
    assert first[1][-1].why[commits[-1].sha].startswith("depends on")


def test_the_piece_left_when_the_first_was_ingested_keeps_its_name() -> None:
    """`risk.max_chain` cut a chain in two; the first piece reached the fork. The second, which depends on
    it, goes on under its own name (its PR stays open), carrying what the first ingested."""
    one, two, three, four = (spread(commit(n, after=(n - 1,) if n > 1 else ())) for n in (1, 2, 3, 4))
    prior = [
        PriorChain(id=f"chain-{one.sha[:10]}", root=one.sha, members=(one.sha, two.sha)),
        PriorChain(id=f"chain-{three.sha[:10]}", root=three.sha, members=(three.sha, four.sha)),
    ]
    _, chains = classify(
        [three, four],
        symbol_keys={},
        prior=prior,
        ingested={one.sha, two.sha},
        config=parse_config("risk:\n  max_chain: 2\n"),
    )
    assert [(c.id, c.root, c.ingested) for c in chains] == [
        (f"chain-{three.sha[:10]}", three.sha, (one.sha, two.sha))
    ]
    assert numbers(chains) == [[int(three.sha, 16), int(four.sha, 16)]]


def edit(n: int, line: int, *, symbol: str = "") -> tuple[str, tuple[FileChange, ...]]:
    """Upstream commit `n` rewrites one line of lib/x.cpp (in `symbol`, when given)."""
    hunk = Hunk(old_start=line, old_count=1, new_start=line, new_count=1, removed=("old",), added=("new",))
    change = FileChange(path="lib/x.cpp", status="M", hunks=(hunk,), symbols=(symbol,) if symbol else ())
    return f"{n:040x}", (change,)


def upstream_commit(position: int, stream: list[tuple[str, tuple[FileChange, ...]]]) -> UpstreamCommit:
    sha, files = stream[position]
    info = CommitInfo(
        sha=sha,
        parents=(),
        author_name="a",
        author_email="a@b",
        author_time=0,
        committer_time=0,
        message=f"commit {position}",
    )
    return UpstreamCommit(info=info, position=position, files=files)


def test_a_held_commit_owns_its_lines_until_a_pending_one_rewrites_them() -> None:
    """Deferred 0 and skipped 1 are held out of the plan, but the fork lacks their lines all the same."""
    stream = [
        edit(0, 10),
        edit(1, 30, symbol="ns::f"),
        edit(2, 10),
        edit(3, 11),
        edit(4, 20),
        edit(5, 40, symbol="ns::f"),
    ]
    pending = [upstream_commit(i, stream) for i in (2, 3, 4, 5)]
    held = {stream[0][0]: "deferred", stream[1][0]: "skipped"}

    deps, reasons = held_dependencies(line_and_symbol_dependencies(stream, pending, held=held.keys()), held)
    assert {int(sha, 16): [int(d.sha, 16) for d in found] for sha, found in deps.items()} == {
        2: [],  # it depends on deferred 0 (a reason, below), and takes its line over
        3: [2],  # borders line 10, which 2 wrote last
        4: [],
        5: [],
    }
    assert {int(sha, 16): [r.detail for r in found] for sha, found in reasons.items() if found} == {
        2: [f"depends on deferred {stream[0][0][:10]} (lines: lib/x.cpp)"],
        5: [f"depends on skipped {stream[1][0][:10]} (symbol: lib/x.cpp: ns::f)"],
    }
