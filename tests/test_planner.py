"""Path selection on hand-made commits (pure: no git, no store)."""

from __future__ import annotations

import pytest

from bot.core.config import parse_config
from bot.core.models import Dependency, DependencyKind, PlannedCommit, RiskKind, RiskLevel, RiskReason
from bot.core.planner import PriorChain, classify


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


def test_prior_chain_takes_its_pending_member_and_follow_ups() -> None:
    prior = [
        PriorChain(
            id="chain-old",
            root=f"{1:040x}",
            members=(f"{1:040x}", f"{3:040x}"),
            ingested_files=frozenset({"cmake/llvm-hash.txt"}),
        )
    ]
    commits = [commit(2), commit(3), commit(4, files=("cmake/llvm-hash.txt",))]
    bundles, chains = classify(
        commits, symbol_keys={}, prior=prior, ingested={f"{1:040x}"}, config=parse_config("")
    )
    assert numbers(bundles) == [[2]]
    assert numbers(chains) == [[3, 4]]
    assert (chains[0].id, chains[0].ingested) == ("chain-old", (f"{1:040x}",))
