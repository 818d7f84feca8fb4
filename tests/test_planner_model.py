"""The planner with a calibrated risk model: its decisions on hand-made commits and fixed models (no git)."""

from __future__ import annotations

import math

import pytest

from bot.core.calibrated import LoadedModel, calibrated_selection, chain_levels, with_probability
from bot.core.chain_split import pieces, split_chain
from bot.core.config import ConfigError, parse_config
from bot.core.models import (
    Dependency,
    DependencyKind,
    PlannedCommit,
    RiskKind,
    RiskLevel,
    RiskReason,
    RiskyChain,
)
from bot.core.planner import classify
from bot.core.render import weight_text
from bot.core.risk_cost import (
    NO_CHAIN,
    BundleCaps,
    Candidate,
    bundle_runs,
    choose_threshold,
    expected_runs,
    fill,
)
from bot.core.risk_model import Provenance, RiskModel, commit_features, quantiles_of, subject_tags

INF = float("inf")


def sha(n: int) -> str:
    return f"{n:040x}"


def model(intercept: float = -3.0, **coefficients: float) -> RiskModel:
    """A fixed model: feature names with `_` for `-` and `__` for `:` (size>=500 is `size500`)."""
    names = {
        k.replace("__", ":").replace("_", "-").replace("size500", "size>=500"): v
        for k, v in coefficients.items()
    }
    return RiskModel(intercept=intercept, coefficients=names, provenance=Provenance(source="test"))


def commit(
    n: int,
    *,
    lines: int = 4,
    reasons: tuple[RiskReason, ...] = (),
    after: tuple[tuple[int, DependencyKind], ...] = (),
    files: tuple[str, ...] = (),
) -> PlannedCommit:
    level = max((r.level for r in reasons), key=lambda x: x.rank, default=RiskLevel.LOW)
    return PlannedCommit(
        sha=sha(n),
        subject=f"commit {n}",
        author="dev",
        committer_time=n,
        changed_lines=lines,
        files=files or (f"python/triton/file{n}.py",),
        symbols=(),
        risk=level,
        reasons=reasons,
        depends_on=tuple(Dependency(sha=sha(a), kind=k, detail="") for a, k in after),
    )


def reason(kind: RiskKind, detail: str = "x", level: RiskLevel = RiskLevel.HIGH) -> RiskReason:
    return RiskReason(kind=kind, level=level, detail=detail)


def plan(commits: list[PlannedCommit], fixed: RiskModel, config_text: str = "") -> tuple:
    config = parse_config(config_text)
    scored = [with_probability(c, fixed, config) for c in commits]
    selection = calibrated_selection(scored, config, fixed)
    bundles, chains = classify(
        scored, symbol_keys={}, prior=(), ingested=set(), config=config, selection=selection
    )
    return bundles, chains, selection


def numbers(groups: tuple) -> list[list[int]]:
    return [[int(c.sha, 16) for c in g.commits] for g in groups]


LINES, SYMBOL, ADD_DELETE, REVERTS = (
    DependencyKind.LINES,
    DependencyKind.SYMBOL,
    DependencyKind.ADD_DELETE,
    DependencyKind.REVERTS,
)


# --- the cost model -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("probabilities", "runs"),
    [
        ([], 0.0),
        ([0.3], 1.0),  # a lone commit that fails needs no bisection
        ([0.1, 0.1, 0.1, 0.1], 1.0 + 0.4 * 2),  # 1 + Σp · log2(4)
        ([0.05] * 8, 1.0 + 0.4 * 3),
    ],
)
def test_bundle_runs(probabilities: list[float], runs: float) -> None:
    assert bundle_runs(probabilities) == pytest.approx(runs)


@pytest.mark.parametrize(
    ("probabilities", "caps", "threshold", "runs"),
    [
        pytest.param([0.01] * 6, BundleCaps(30, 3000, INF), NO_CHAIN, 1 + 0.06 * math.log2(6), id="all-safe"),
        pytest.param(
            [0.01] * 4 + [0.9] + [0.01] * 4,
            BundleCaps(30, 3000, INF),
            0.9,
            1 + 1 + 0.08 * 3,
            id="one-likely-culprit-is-chained",
        ),
        pytest.param(
            [0.01] * 4 + [0.9] + [0.01] * 4,
            BundleCaps(30, 3000, 0.5),
            0.5,
            1 + 1 + 0.08 * 3,
            id="at-the-culprit-cap-chained-alone",
        ),
        pytest.param(
            [0.01] * 4 + [0.45] + [0.01] * 4,
            BundleCaps(30, 3000, 0.5),
            0.45,
            1 + 1 + 0.08 * 3,
            id="below-the-cap-chained-when-it-pays",
        ),
        pytest.param(
            [0.3, 0.01, 0.01], BundleCaps(30, 3000, INF), NO_CHAIN, 1 + 0.32 * math.log2(3), id="small-bundle"
        ),
        pytest.param([0.6, 0.6, 0.6, 0.6], BundleCaps(30, 3000, INF), 0.6, 4, id="all-likely-all-chained"),
    ],
)
def test_choose_threshold(
    probabilities: list[float], caps: BundleCaps, threshold: float, runs: float
) -> None:
    candidates = [Candidate(p, 10) for p in probabilities]
    choice = choose_threshold(candidates, caps)
    assert (choice.threshold, choice.expected_runs) == (threshold, pytest.approx(runs))
    assert all(
        expected_runs(candidates, threshold=t, caps=caps) >= choice.expected_runs - 1e-9
        for t in (min(NO_CHAIN, caps.max_culprits), *probabilities, 0.0)
    )


def test_the_plan_chains_above_the_chosen_threshold_with_why() -> None:
    fixed = model(reason__patch_stack_symbol=5.0)
    hot = reason(RiskKind.PATCH_STACK_SYMBOL, "lib/Pipeliner.cpp: pipeline")
    commits = (
        [commit(i) for i in range(1, 5)] + [commit(5, reasons=(hot,))] + [commit(i) for i in range(6, 9)]
    )
    bundles, chains, selection = plan(commits, fixed)
    assert (numbers(bundles), numbers(chains)) == ([[1, 2, 3, 4, 6, 7, 8]], [[5]])
    assert selection.chosen_by == "expected-runs"
    assert (
        chains[0].why[sha(5)] == f"p 0.881 ≥ threshold {selection.threshold:.3f} (fewest expected tier runs)"
    )


def test_probability_and_weights_name_the_reasons_they_come_from() -> None:
    fixed = model(intercept=-4.0, reason__patch_stack_symbol=1.2, size500=0.7)
    hot = reason(RiskKind.PATCH_STACK_SYMBOL, "lib/Pipeliner.cpp: pipeline")
    scored = with_probability(commit(1, lines=612, reasons=(hot,)), fixed, parse_config(""))
    assert scored.probability == pytest.approx(1 / (1 + math.exp(4.0 - 1.9)), abs=1e-6)
    assert [(w.feature, w.detail, w.odds_ratio) for w in scored.weights] == [
        ("patch-stack-symbol", "lib/Pipeliner.cpp: pipeline", round(math.exp(1.2), 3)),
        ("size>=500", "612 lines", round(math.exp(0.7), 3)),
    ]
    assert weight_text(scored).splitlines() == [
        "p 0.109",
        "patch-stack-symbol: lib/Pipeliner.cpp: pipeline ×3.32",
        "size>=500: 612 lines ×2.01",
    ]


def test_the_estimate_keeps_the_strongest_contributions_when_asked_and_the_same_probability() -> None:
    fixed = model(intercept=-3.0, size500=0.7, log2_lines=0.2, reason__patch_stack_file=-1.5)
    features = {"size>=500": 1.0, "log2-lines": 9.0, "reason:patch-stack-file": 1.0, "unknown": 1.0}
    every, two = fixed.estimate(features), fixed.estimate(features, strongest=2)
    assert [c.feature for c in every.contributions] == ["log2-lines", "reason:patch-stack-file", "size>=500"]
    assert two.contributions == every.contributions[:2] and two.probability == every.probability
    assert every.probability == pytest.approx(1 / (1 + math.exp(3.0 - 0.7 - 1.8 + 1.5)))


@pytest.mark.parametrize(
    ("subject", "tags"),
    [
        ("[LAYOUTS] [NFC] Kill getSizePerThread (#6044)", ["layouts", "nfc"]),
        ("[AMD][Gluon] Buffer ops (#7001)", ["amd", "gluon"]),
        ("[Warp Specialization] Split partitions", ["warp-specialization"]),
        ("[nfc][NFC] twice", ["nfc"]),
        ('Revert "[LAYOUTS] x"', []),  # a bracket after the start is prose
        ("[<img src=x>] not a tag, [later] neither", []),
        ("[a][b][c][d][e] at most four", ["a", "b", "c", "d"]),
    ],
)
def test_subject_tags(subject: str, tags: list[str]) -> None:
    assert subject_tags(subject) == tags


def test_features_count_the_reasons_given_per_file_and_read_the_subject_tags() -> None:
    on_the_stack = tuple(
        reason(kind, f"lib/f{i}.cpp", RiskLevel.LOW)
        for kind, n in ((RiskKind.PATCH_STACK_FILE, 3), (RiskKind.PATCH_STACK_SYMBOL, 1))
        for i in range(n)
    )
    files = ("lib/f0.cpp", "lib/f1.cpp", "lib/f2.cpp")
    c = commit(1, lines=40, reasons=on_the_stack, files=files)
    c = c.model_copy(update={"subject": "[LAYOUTS] Move order (#6243)"})
    found = commit_features(c, config=parse_config(""))
    assert found["count:patch-stack-file"] == pytest.approx(2.0)  # log2(1 + 3)
    assert found["count:patch-stack-symbol"] == pytest.approx(1.0)
    assert "count:patch-stack-hunk" not in found and "reason:patch-stack-hunk" not in found
    assert found["log2-files"] == pytest.approx(2.0) and found["tag:layouts"] == 1.0
    fixed = model(intercept=-4.0, tag__layouts=1.1, count__patch_stack_file=0.4)
    scored = with_probability(c, fixed, parse_config(""))
    assert [(w.feature, w.detail) for w in scored.weights] == [
        ("tag:layouts", "[layouts] in the subject"),
        ("count:patch-stack-file", "3: lib/f0.cpp, lib/f1.cpp +1 more"),
    ]


@pytest.mark.parametrize(
    ("share", "chained"),
    [(0.0, []), (0.2, [[3], [7]]), (0.5, [[1], [3], [5], [7], [9]]), (1.0, [[n] for n in range(1, 11)])],
)
def test_chain_share_chains_the_most_likely_first(share: float, chained: list[list[int]]) -> None:
    # Probabilities rise with the changed lines; 3 and 7 are the two largest.
    sizes = {1: 40, 2: 2, 3: 900, 4: 1, 5: 30, 6: 3, 7: 800, 8: 2, 9: 20, 10: 1}
    commits = [commit(n, lines=lines) for n, lines in sizes.items()]
    _, chains, selection = plan(commits, model(log2_lines=0.5), f"risk:\n  chain_share: {share}\n")
    assert numbers(chains) == chained
    assert selection.chosen_by == "chain-share"
    if chained:
        assert chains[0].why[chains[0].root].endswith(f"among the {share:.0%} most likely to break")


def with_quantiles(fixed: RiskModel, fitted: list[float]) -> RiskModel:
    return fixed.model_copy(update={"quantiles": quantiles_of(fitted)})


def test_a_model_that_knows_its_fitted_probabilities_chains_a_share_of_the_stream() -> None:
    """With quantiles the share is the fork's stream's, one threshold for every plan: a plan of safe commits
    chains none of them, a plan of risky ones chains them all (per plan, each would chain 20 %)."""
    fixed = model(intercept=-6.0, log2_lines=0.5)
    fitted = [1 / (1 + math.exp(6.0 - 0.5 * math.log2(1 + n))) for n in range(1, 1001)]  # sizes 1 … 1000
    stream = with_quantiles(fixed, fitted)
    threshold = stream.share_threshold(0.2)
    assert threshold == pytest.approx(1 / (1 + math.exp(6.0 - 0.5 * math.log2(1 + 800))), abs=1e-5)
    config = "risk:\n  chain_share: 0.2\n"
    small = [commit(n, lines=n) for n in range(1, 11)]
    large = [commit(n, lines=900 + n) for n in range(1, 11)]
    assert numbers(plan(small, stream, config)[1]) == []
    assert numbers(plan(large, stream, config)[1]) == [[n] for n in range(1, 11)]
    assert numbers(plan(small, fixed, config)[1]) == [[9], [10]]  # without quantiles: 20 % of the plan
    assert numbers(plan(large, stream, "risk:\n  chain_share: 0\n")[1]) == []  # none, not the likeliest
    _, chains, selection = plan(large, stream, config)
    assert selection.chosen_by == "chain-share" and selection.threshold == pytest.approx(threshold, abs=1e-6)
    assert chains[0].why[chains[0].root].endswith("among the 20% of the fork's stream most likely to break")


def test_the_stream_share_counts_the_dependents_and_structural_commits() -> None:
    """A model's quantiles are of chain levels: a commit that depends on a likely one is chained at that one's
    threshold and a critical pin at any, so `risk.chain_share` is the share of the stream that is chained."""
    fixed = model(intercept=-6.0, log2_lines=0.5)
    pin = reason(RiskKind.COMPONENT, "llvm-pin: cmake/llvm-hash.txt", RiskLevel.CRITICAL)
    commits = [
        commit(1, lines=900),
        commit(2, lines=1, after=((1, LINES),)),
        commit(3, lines=1),
        commit(4, lines=2, reasons=(pin,), files=("cmake/llvm-hash.txt",)),
        commit(5, lines=1, after=((9, LINES),)),  # 9 is not in the plan: nothing to follow
    ]
    config = "risk:\n  chain_share: 0.6\n"
    scored = [with_probability(c, fixed, parse_config(config)) for c in commits]
    p = [c.probability for c in scored]
    assert chain_levels(scored) == [p[0], p[0], p[2], 1.0, p[4]]
    # Twenty such plans fitted: 60 % of that stream is 1, 2 and 4 of each, so a plan chains just those.
    stream = model(intercept=-6.0, log2_lines=0.5).model_copy(
        update={"quantiles": quantiles_of(chain_levels(scored) * 20)}
    )
    bundles, chains, _ = plan(commits, stream, config)
    assert (numbers(bundles), numbers(chains)) == ([[3, 5]], [[1, 2], [4]])
    _, chains, _ = plan(commits, stream, "risk:\n  chain_share: 0.1\n")
    assert numbers(chains) == [[4]]


def test_quantiles_run_from_the_most_likely_down_and_a_bad_table_is_refused() -> None:
    q = quantiles_of([k / 100 for k in range(101)])
    assert (len(q), q[0], q[25], q[100]) == (101, 1.0, 0.75, 0.0)
    assert list(q) == sorted(q, reverse=True)
    fixed = model().model_copy(update={"quantiles": q})
    assert fixed.share_threshold(0.255) == pytest.approx(0.745)
    assert model().share_threshold(0.25) is None
    assert RiskModel.from_json(fixed.to_json()).quantiles == q
    for bad in ((0.5,) * 7, tuple(reversed(q))):
        text = fixed.model_copy(update={"quantiles": bad}).to_json()
        with pytest.raises(ValueError, match="quantiles"):
            RiskModel.from_json(text)


def test_chain_share_counts_the_dependents_that_join() -> None:
    sizes = {1: 40, 2: 2, 3: 900, 4: 1, 5: 30, 6: 3, 7: 800, 8: 2, 9: 20, 10: 1}
    after = {4: ((3, LINES),), 5: ((4, SYMBOL),)}
    commits = [commit(n, lines=lines, after=after.get(n, ())) for n, lines in sizes.items()]
    # 30 %: 3 commits. 3 is the most likely and brings 4 and 5 along; 7 no longer fits.
    _, chains, _ = plan(commits, model(log2_lines=0.5), "risk:\n  chain_share: 0.3\n")
    assert numbers(chains) == [[3, 4, 5]]
    # 40 %: room for one more, so the next most likely (7) follows.
    _, chains, selection = plan(commits, model(log2_lines=0.5), "risk:\n  chain_share: 0.4\n")
    assert numbers(chains) == [[3, 4, 5], [7]]
    # Only 3 and 7 are chosen for their probability (the threshold is 7's); 4 and 5 follow 3.
    assert set(selection.chosen) == {sha(3), sha(7)}
    assert selection.threshold == pytest.approx(chains[1].commits[0].probability, abs=1e-6)
    assert chains[0].why[sha(4)] == f"depends on {sha(3)[:10]} (lines)"


def test_expected_runs_count_the_dependents_that_join() -> None:
    """A likely culprit that drags many dependents into its chain costs their runs too."""
    hot = reason(RiskKind.PATCH_STACK_SYMBOL)
    commits = [commit(1, reasons=(hot,))] + [commit(n, after=((n - 1, LINES),)) for n in range(2, 9)]
    commits += [commit(n) for n in range(9, 17)]
    _, chains, _ = plan(commits, model(reason__patch_stack_symbol=2.6))  # p(1) ≈ 0.4
    assert numbers(chains) == []  # chaining 1 would chain 2-8 with it: 8 runs instead of a bisection
    _, chains, _ = plan(
        commits[:1] + [commit(n) for n in range(2, 17)], model(reason__patch_stack_symbol=2.6)
    )
    assert numbers(chains) == [[1]]


def test_structural_rules_are_absolute() -> None:
    """A critical pin, a revert pair and whatever depends on a chain member are chained at any probability."""
    pin = reason(RiskKind.COMPONENT, "llvm-pin: cmake/llvm-hash.txt", RiskLevel.CRITICAL)
    commits = [
        commit(1, reasons=(pin,), files=("cmake/llvm-hash.txt",)),
        commit(2, after=((1, LINES),)),
        commit(3, reasons=(reason(RiskKind.REVERT, f"reverted by {sha(5)[:10]}"),)),
        commit(4),
        commit(5, reasons=(reason(RiskKind.REVERT, "reverts commit 3"),), after=((3, REVERTS),)),
        commit(6, after=((2, SYMBOL),)),
    ]
    bundles, chains, _ = plan(commits, model(intercept=-8.0))  # p ≈ 0.0003 for every commit
    assert (numbers(bundles), numbers(chains)) == ([[4]], [[1, 2, 6], [3, 5]])
    assert chains[0].why == {
        sha(1): "critical pin (llvm-pin: cmake/llvm-hash.txt)",
        sha(2): f"depends on {sha(1)[:10]} (lines)",
        sha(6): f"depends on {sha(2)[:10]} (symbol)",
    }
    assert chains[1].why == {sha(3): f"reverted by {sha(5)[:10]}", sha(5): f"reverts {sha(3)[:10]}"}


def test_a_commit_that_depends_on_a_held_one_is_chained_at_any_probability() -> None:
    """A deferred commit is not in the plan: what builds on it is never bundled ahead of it, model or not."""
    held = reason(RiskKind.HELD_DEPENDENCY, f"depends on deferred {sha(9)[:10]} (lines: a.py)")
    commits = [commit(1), commit(2, reasons=(held,)), commit(3, after=((2, LINES),))]
    bundles, chains, _ = plan(commits, model(intercept=-8.0))
    assert (numbers(bundles), numbers(chains)) == ([[1]], [[2, 3]])
    assert chains[0].why[sha(2)] == f"depends on deferred {sha(9)[:10]} (lines: a.py)"


def test_chains_link_by_dependencies_not_by_a_shared_file() -> None:
    hot = reason(RiskKind.PATCH_STACK_SYMBOL)
    busy = ("lib/Conversion/TritonGPUToLLVM/Utility.cpp",)
    commits = [commit(1, reasons=(hot,), files=busy), commit(2, files=busy), commit(3, files=busy)]
    bundles, chains, _ = plan(commits, model(reason__patch_stack_symbol=6.0))
    assert (numbers(bundles), numbers(chains)) == ([[2, 3]], [[1]])
    # Today's rules (no model) chain the whole busy file.
    config = parse_config("")
    rules_bundles, rules_chains = classify(commits, symbol_keys={}, prior=(), ingested=set(), config=config)
    assert (numbers(rules_bundles), numbers(rules_chains)) == ([], [[1, 2, 3]])


@pytest.mark.parametrize(
    ("config_text", "bundles"),
    [
        ("", [[1, 2], [3, 4], [5, 6]]),  # each p ≈ 0.2: two commits reach the 0.5 cap's neighbourhood
        ("risk:\n  bundle_culprits: 1.0\n", [[1, 2, 3, 4, 5], [6]]),
        ("bundles:\n  max_commits: 2\nrisk:\n  bundle_culprits: 5\n", [[1, 2], [3, 4], [5, 6]]),
    ],
)
def test_bundle_size_follows_the_summed_probability(config_text: str, bundles: list[list[int]]) -> None:
    intercept = math.log(0.2 / 0.8)
    commits = [commit(n) for n in range(1, 7)]
    got, chains, selection = plan(commits, model(intercept=intercept), config_text)
    assert (numbers(got), numbers(chains)) == (bundles, [])
    assert selection.threshold == min(NO_CHAIN, selection.caps.max_culprits if selection.caps else 0)


def test_a_bundled_commit_that_needs_a_person_ends_its_bundle() -> None:
    # Commit 3 is predicted to conflict with fork trunk where no rule resolves it, but the model still bundles
    # it: the picking stops there, so nothing of its bundle comes after it. A mechanical conflict does not.
    conflict = reason(RiskKind.PREDICTED_CONFLICT, "needs a human against fork trunk in lib/a.cpp")
    mechanical = reason(RiskKind.MECHANICAL_CONFLICT, "resolved by a mechanical rule: a.txt", RiskLevel.LOW)
    commits = [
        commit(1),
        commit(2, reasons=(mechanical,)),
        commit(3, reasons=(conflict,)),
        commit(4),
        commit(5, reasons=(conflict,)),
    ]
    got, chains, selection = plan(commits, model(intercept=-8.0), "risk:\n  bundle_culprits: 5\n")
    assert (numbers(got), numbers(chains), selection.chosen) == ([[1, 2, 3], [4, 5]], [], {})
    fill_caps = BundleCaps(30, 3000, INF)
    assert fill([Candidate(0.01, 1, ends=n in (0, 1)) for n in range(4)], fill_caps) == [[0], [1], [2, 3]]


@pytest.mark.parametrize(
    ("size", "links", "limit", "cuts"),
    [
        (4, [], 2, [2]),  # nothing crosses anywhere: the most even cut
        (6, [(0, 1, 3), (1, 2, 3), (2, 3, 1), (3, 4, 3), (4, 5, 3)], 3, [3]),
        (6, [(0, 1, 1), (1, 2, 3), (2, 3, 3), (3, 4, 3), (0, 5, 1)], 5, [5]),  # only the long weak edge
        (5, [(0, 4, 8), (1, 2, 3), (2, 3, 3)], 4, [1]),  # a revert edge crosses every cut: the lines decide
        # Free cuts only near the ends: three pieces of at most four, not one commit at a time off the ends.
        (10, [(i, i + 1, 3) for i in range(2, 7)], 4, [2, 6]),
        (7, [], 7, []),
    ],
)
def test_pieces(size: int, links: list[tuple[int, int, int]], limit: int, cuts: list[int]) -> None:
    got = pieces(size, links, limit)
    assert [r.start for r in got[1:]] == cuts
    assert [i for r in got for i in r] == list(range(size)) and all(len(r) <= limit for r in got)


def test_a_long_chain_is_split_at_its_weakest_link() -> None:
    pin = reason(RiskKind.COMPONENT, "llvm-pin: cmake/llvm-hash.txt", RiskLevel.CRITICAL)
    kinds = {2: LINES, 3: LINES, 4: ADD_DELETE, 5: LINES, 6: LINES}
    commits = [commit(1, reasons=(pin,))] + [commit(n, after=((n - 1, k),)) for n, k in kinds.items()]
    _, chains, _ = plan(commits, model(intercept=-8.0), "risk:\n  max_chain: 3\n")
    assert numbers(chains) == [[1, 2, 3], [4, 5, 6]]
    first, second = chains
    assert (first.id, first.root, first.after) == (f"chain-{sha(1)[:10]}", sha(1), ())
    assert (second.id, second.root, second.after) == (f"chain-{sha(4)[:10]}", sha(4), (first.id,))
    assert second.why[sha(4)] == f"depends on {sha(3)[:10]} (add-delete)"


def test_the_pieces_of_a_resumed_chain() -> None:
    """A chain whose root was ingested goes on under its name in its first piece; the others are named after
    their first commits, never after a commit another piece holds."""
    n = [int(f"{k:02x}" * 20, 16) for k in range(1, 5)]
    members = tuple(commit(x, after=((n[i - 1], LINES),) if i else ()) for i, x in enumerate(n))
    resumed = RiskyChain(
        id="chain-old",
        root=sha(0xFF),
        risk=RiskLevel.HIGH,
        ingested=(sha(0xFF),),
        commits=members,
        linked_files=tuple(sorted(f for c in members for f in c.files)),
    )
    first, second = split_chain(resumed, limit=2)
    for piece in (first, second):  # each piece is linked by what its own commits touch
        assert piece.linked_files == tuple(sorted(f for c in piece.commits for f in c.files))
    assert (first.id, first.root, first.ingested) == ("chain-old", sha(0xFF), (sha(0xFF),))
    assert (second.id, second.root, second.after) == ("chain-0303030303", sha(n[2]), ("chain-old",))
    # grown backwards (a replan merged a piece that comes before its root): no piece takes the root's name
    grown = resumed.model_copy(update={"id": "chain-0303030303", "root": sha(n[2]), "ingested": ()})
    assert [p.id for p in split_chain(grown, limit=2)] == ["chain-0101010101", "chain-0303030303"]


def test_the_plan_is_deterministic() -> None:
    fixed = model(log2_lines=0.4, reason__patch_stack_symbol=2.0)
    hot = reason(RiskKind.PATCH_STACK_SYMBOL)
    commits = [commit(n, lines=n * 37 % 500, reasons=(hot,) if n % 7 == 0 else ()) for n in range(1, 80)]
    first, second = (
        plan(commits, fixed, "risk:\n  max_chain: 4\n"),
        plan(commits, fixed, "risk:\n  max_chain: 4\n"),
    )
    assert first == second
    assert numbers(first[1])  # not vacuous: something was chained


def test_the_decision_says_which_model_and_threshold() -> None:
    loaded = LoadedModel("default", model())
    _, _, selection = plan([commit(1)], model())
    decision = loaded.decision(selection, bundle_culprits=0.5)
    # One unlikely commit: chaining it saves nothing, so the threshold stays at the bundle cap.
    assert (decision.model, decision.chosen_by, decision.threshold) == ("default", "expected-runs", 0.5)
    assert decision.source == "test, 0 commits, 0 broke the fork"


@pytest.mark.parametrize(
    "text",
    [
        "risk:\n  chain_share: 1.5\n",
        "risk:\n  max_chain: 0\n",
        "risk:\n  model: ''\n",
        "risk:\n  bundle_culprits: 0\n",
    ],
)
def test_bad_risk_settings_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_config(text)
