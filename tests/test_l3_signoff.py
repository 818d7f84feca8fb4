"""L3's regressed metrics and `/signoff l3` in the gate, as tables: facts in, decision out (no GitHub, git or
database); `tiers.l3.areas` in the config; the regressions and signoffs in the store (SQLite, PostgreSQL)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator

import pytest

from bot.core import dashboard
from bot.core.codeowners import parse_codeowners
from bot.core.config import ConfigError, parse_config
from bot.core.dashboard import SignoffLine
from bot.core.gate import CheckResult, GateInput, MissingKind, decide, l3_area_owners, summary, team_owners
from bot.core.ingestion import CheckName, Links
from bot.core.l3_metrics import UNASSIGNED, L3Metrics, Regression, Signoff, by_area
from bot.core.tiers import Level, RunState, TierRun, Verdict
from bot.db.signoffs import L3Signoffs
from bot.db.store import Store
from bot.db.tier_runs import TierRuns
from handlers.dashboard import signoff_state

HEAD, OLD = "a" * 40, "b" * 40
NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
FORK = "meta/triton"
CODEOWNERS = parse_codeowners(
    "*  @global\n.github/sluice.yml  @meta/leads\npython/triton/ops/  @norm-owner\n"
)
AREAS = """
tiers:
  l3:
    suites: [{name: bench, builtin: bench}]
    areas:
      - {name: gemm, kernels: [matmul, 'matmul_*'], owners: ['@meta/gemm', '@gina']}
      - {name: norms, kernels: [softmax, layer_norm], files: [python/triton/ops/norms.py]}
gate:
  required_tiers: [l1, l2, l3]
"""
CONFIG = parse_config(AREAS)


def regression(kernel: str, metric: str = "median", ratio: float = 1.05) -> Regression:
    return Regression(f"{kernel}[4096x4096:float16]", kernel, metric, False, ratio, 0.02)


MATMUL, SOFTMAX, SUM = regression("matmul"), regression("softmax", ratio=1.08), regression("sum", "p90")


def green(head: str = HEAD) -> dict[str, CheckResult]:
    return {
        t.value: CheckResult(t.value, head, "completed", "success")
        for t in (CheckName.L1, CheckName.L2, CheckName.L3)
    }


def facts(*regressions: Regression, signoffs: tuple[Signoff, ...] = (), **changes: object) -> GateInput:
    base = GateInput(
        head_sha=HEAD,
        checks=green(),
        codeowners=CODEOWNERS,
        l3=L3Metrics(HEAD, regressions),
        signoffs=signoffs,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def signed(login: str, head: str = HEAD) -> Signoff:
    return Signoff(login, head, NOW)


# ------------------------------------------------------------------ the gate


def test_l3_passing_its_tests_with_a_regressed_metric_does_not_pass_the_gate_by_itself() -> None:
    decision = decide(facts(MATMUL), config=CONFIG, now=NOW)
    assert not decision.passed and decision.conclusion is None  # waiting for a person, nothing failed
    (missing,) = decision.missing
    assert missing.kind is MissingKind.SIGNOFF and missing.who == ("@meta/gemm", "@gina")
    assert "area `gemm`" in missing.what and "`matmul[4096x4096:float16]` median +5.0 %" in missing.what
    assert f"`/signoff l3` on the head `{HEAD[:10]}`" in missing.how
    assert "sluice/L3 succeeded" in decision.met


def test_without_regressions_or_with_l3_not_required_no_signoff_is_needed() -> None:
    assert decide(facts(), config=CONFIG, now=NOW).passed
    assert decide(facts(l3=None), config=CONFIG, now=NOW).passed  # no L3 result stored: the check decides
    not_required = parse_config(AREAS.replace("[l1, l2, l3]", "[l1, l2]"))
    assert decide(facts(MATMUL), config=not_required, now=NOW).passed
    other_head = facts(MATMUL, l3=L3Metrics(OLD, (MATMUL,)))  # an older head's regressions say nothing
    assert decide(other_head, config=CONFIG, now=NOW).passed


def test_each_regressed_area_needs_a_signoff_by_one_of_its_owners_on_the_head() -> None:
    regressed = (MATMUL, SOFTMAX, SUM)
    decision = decide(facts(*regressed), config=CONFIG, now=NOW)
    who = [(m.what.split("in area ")[1].split(" (")[0], m.who) for m in decision.missing]
    assert who == [
        ("`gemm`", ("@meta/gemm", "@gina")),
        ("`norms`", ("@norm-owner",)),  # CODEOWNERS of the area's file
        ("of no `tiers.l3.areas` entry", ("@meta/leads",)),  # the config's code owners: no tiers.l3.owner
    ]
    # gina signs gemm off; a non-owner's signoff counts for nothing
    partial = decide(facts(*regressed, signoffs=(signed("gina"), signed("mallory"))), config=CONFIG, now=NOW)
    assert len(partial.missing) == 2 and [s.login for s in partial.signoffs] == ["gina"]
    assert any("area `gemm`" in m and "signed off by @gina" in m for m in partial.met)
    # a team owner counts through the team's membership, as GitHub reports it
    teams = {"@meta/leads": frozenset({"lee"})}
    every = (signed("gina"), signed("Norm-Owner"), signed("lee"))
    done = decide(facts(*regressed, signoffs=every, teams=teams), config=CONFIG, now=NOW)
    assert done.passed and done.conclusion == "success"
    assert {s.login for s in done.signoffs} == {"gina", "Norm-Owner", "lee"}


def test_a_signoff_on_an_older_head_no_longer_counts_and_the_summary_says_so() -> None:
    decision = decide(facts(MATMUL, signoffs=(signed("gina", head=OLD),)), config=CONFIG, now=NOW)
    (missing,) = decision.missing
    assert "the signoffs by @gina were given on an older head and no longer count" in missing.how
    text = summary(decision)
    assert "| an area owner's signoff of L3's regressed metrics in area `gemm`" in text
    assert "@meta/gemm, @gina" in text


def test_l3s_owner_signs_off_the_kernels_no_area_covers_and_an_area_without_owners_says_how() -> None:
    owned = parse_config(AREAS.replace("    areas:", "    owner: '@meta/perf'\n    areas:"))
    (missing,) = decide(facts(SUM), config=owned, now=NOW).missing
    assert missing.who == ("@meta/perf",)
    nobody = parse_config("gate:\n  required_tiers: [l1, l2, l3]\n")
    (missing,) = decide(facts(SUM, codeowners=parse_codeowners("")), config=nobody, now=NOW).missing
    assert missing.who == () and "name the area's `owners` in `tiers.l3.areas`" in missing.how


def test_a_failed_l3_is_a_failure_whatever_its_metrics_and_a_signoff_is_no_waiver() -> None:
    failed = green() | {CheckName.L3.value: CheckResult(CheckName.L3.value, HEAD, "completed", "failure")}
    decision = decide(facts(MATMUL, signoffs=(signed("gina"),), checks=failed), config=CONFIG, now=NOW)
    assert decision.conclusion == "failure" and decision.failed == (CheckName.L3,)


def test_the_teams_among_the_regressed_areas_owners_are_asked_of_github() -> None:
    l3 = L3Metrics(HEAD, (MATMUL, SUM))
    assert team_owners((), CODEOWNERS, CONFIG, l3=l3) == {"@meta/gemm", "@meta/leads"}
    assert team_owners((), CODEOWNERS, CONFIG) == set()


def test_regressions_group_by_the_first_area_covering_their_kernel() -> None:
    wild = regression("matmul_persistent")
    assert list(by_area((SUM, wild, SOFTMAX, MATMUL), CONFIG).items()) == [
        ("gemm", (wild, MATMUL)),
        ("norms", (SOFTMAX,)),
        (UNASSIGNED, (SUM,)),
    ]
    assert l3_area_owners("norms", CODEOWNERS, CONFIG) == ("@norm-owner",)


# ------------------------------------------------------------------ the config


@pytest.mark.parametrize(
    ("areas", "problem"),
    [
        ("[{name: a, kernels: [matmul]}]", "names neither `owners` nor `files`"),
        ("[{name: a, kernels: [], owners: ['@x']}]", "must not be empty"),
        ("[{name: a, kernels: ['mat mul'], owners: ['@x']}]", "should match pattern"),
        ("[{name: a, kernels: [matmul], owners: [x]}]", "expected '@login' or '@org/team'"),
        ("[{name: a, kernels: [matmul], files: ['ops/*.py']}]", "`files` names paths, not globs"),
        (
            "[{name: a, kernels: [matmul], owners: ['@x']}, {name: a, kernels: [sum], owners: ['@y']}]",
            "duplicate area name 'a'",
        ),
        ("[{name: a, kernels: [matmul], owners: ['@x'], paths: [x]}]", "paths"),
    ],
)
def test_bad_areas_are_refused_with_the_field_named(areas: str, problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(f"tiers:\n  l3:\n    suites: [{{name: bench, builtin: bench}}]\n    areas: {areas}\n")
    assert problem in refused.value.message and "tiers.l3.areas" in refused.value.message


# ------------------------------------------------------------------ the store


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store.open(database_url)
    yield opened
    opened.close()


def l3_run(runs: TierRuns, *, head: str = HEAD, attempt: int = 1, pull: int = 7) -> TierRun:
    added = runs.add(TierRun(FORK, pull, "bundle-1", Level.L3, head, attempt, RunState.DISPATCHED, NOW))
    assert added is not None
    return added


def completed(runs: TierRuns, run: TierRun) -> None:
    runs.save(dataclasses.replace(run, state=RunState.COMPLETED, verdict=Verdict.PASSED, completed_at=NOW))


def test_the_regressions_of_the_newest_completed_l3_attempt_on_the_head_are_its_metrics(store: Store) -> None:
    runs, l3 = TierRuns(store), L3Signoffs(store)
    assert l3.l3_metrics(FORK, 7, head_sha=HEAD) is None  # L3 never ran
    first = l3_run(runs)
    assert first.id is not None
    runs.record_regressions(first.id, (MATMUL, SUM))
    assert l3.l3_metrics(FORK, 7, head_sha=HEAD) is None  # recorded before the run completes: not yet counted
    runs.record_regressions(first.id, (MATMUL, SUM))  # the result delivered again: replaced, not doubled
    completed(runs, first)
    assert l3.l3_metrics(FORK, 7, head_sha=HEAD) == L3Metrics(HEAD, (MATMUL, SUM))
    assert runs.regressions(first.id) == (MATMUL, SUM)  # floats and the critical flag read back as written
    again = l3_run(runs, attempt=2)  # a re-run: until it completes, the last result's metrics stand
    assert l3.l3_metrics(FORK, 7, head_sha=HEAD) == L3Metrics(HEAD, (MATMUL, SUM))
    assert again.id is not None
    runs.record_regressions(again.id, ())
    completed(runs, again)
    assert l3.l3_metrics(FORK, 7, head_sha=HEAD) == L3Metrics(HEAD, ())
    assert l3.l3_metrics(FORK, 7, head_sha=OLD) is None and l3.l3_metrics(FORK, 8, head_sha=HEAD) is None


def test_a_stale_attempt_does_not_hide_the_completed_one(store: Store) -> None:
    runs, l3 = TierRuns(store), L3Signoffs(store)
    first = l3_run(runs)
    assert first.id is not None
    runs.record_regressions(first.id, (SOFTMAX,))
    completed(runs, first)
    stale = l3_run(runs, attempt=2)
    runs.save(dataclasses.replace(stale, state=RunState.STALE))
    assert l3.l3_metrics(FORK, 7, head_sha=HEAD) == L3Metrics(HEAD, (SOFTMAX,))


def test_signoffs_keep_the_head_they_were_given_on_and_the_first_of_each_stays(store: Store) -> None:
    l3 = L3Signoffs(store)
    later = NOW + dt.timedelta(hours=1)
    assert l3.record_signoff(FORK, 7, login="gina", head_sha=OLD, at=NOW) is True
    assert l3.record_signoff(FORK, 7, login="gina", head_sha=OLD, at=later) is False
    assert l3.record_signoff(FORK, 7, login="gina", head_sha=HEAD, at=later) is True
    assert l3.signoffs(FORK, 7) == [Signoff("gina", OLD, NOW), Signoff("gina", HEAD, later)]
    assert l3.signoffs(FORK, 8) == [] and l3.signoffs("meta/other", 7) == []


# ------------------------------------------------------------------ the dashboard


def test_the_dashboard_lists_each_pr_whose_l3_regressed_with_the_signoffs_on_its_head(store: Store) -> None:
    runs, l3 = TierRuns(store), L3Signoffs(store)
    for pull, regressions in ((7, (MATMUL, SUM)), (8, (SOFTMAX,)), (9, ())):
        run = l3_run(runs, pull=pull)
        assert run.id is not None
        runs.record_regressions(run.id, regressions)
        completed(runs, run)
    l3.record_signoff(FORK, 7, login="gina", head_sha=HEAD, at=NOW)
    l3.record_signoff(FORK, 8, login="nora", head_sha=OLD, at=NOW)  # an older head's: not shown
    heads = [(7, HEAD), (8, HEAD), (9, HEAD), (10, HEAD)]
    lines = signoff_state(l3, FORK, heads, config=CONFIG)
    assert lines == (
        SignoffLine(7, HEAD, 2, ("gemm", UNASSIGNED), ("gina",)),
        SignoffLine(8, HEAD, 1, ("norms",), ()),
    )
    body = dashboard.render(
        dashboard.DashboardModel(
            FORK, NOW, history=(), links=Links(None, "https://x/f.git", "main"), signoffs=lines
        )
    )
    section = body[body.index("## L3 signoffs") :]
    assert (
        f"- #7 (head `{HEAD[:10]}`): 2 regressed metrics in `gemm`, `(unassigned)`; signed off by @gina"
        in section
    )
    assert "- #8 (head `aaaaaaaaaa`): 1 regressed metric in `norms`; no signoff yet (`/signoff l3`" in section
    empty = dashboard.render(
        dashboard.DashboardModel(FORK, NOW, history=(), links=Links(None, "https://x/f.git", "main"))
    )
    assert "## L3 signoffs\n\nnone\n" in empty
