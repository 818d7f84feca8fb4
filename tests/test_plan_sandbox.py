"""`sluice plan` on the generated Triton-shaped sandbox, checked against the generator's ground truth."""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter

import pytest

from bot.app.cli import main
from bot.core.risk_model import Provenance, RiskModel
from bot.demo import DEMO, SLUICE_YML, Sandbox, build_sandbox
from bot.flows.risk_files import DEFAULT_MODEL_PATH
from tests.support.scenarios import patch_stack_history

# A fixed model for the sandbox: commits that touch what the patch stack changed are likely to break, the
# rest are not (the sandbox marks its independent commits low-risk and its overlaps dependent on the stack).
TEST_MODEL = RiskModel(
    intercept=-4.0,
    coefficients={
        "reason:patch-stack-symbol": 4.5,
        "reason:patch-stack-hunk": 3.0,
        "reason:predicted-conflict": 4.5,
        "reason:mechanical-conflict": 3.0,
        "reason:extension-interface": 2.0,
        "size>=500": 2.0,
        "log2-lines": 0.1,
    },
    provenance=Provenance(source="tests/test_plan_sandbox.py (fixed)"),
)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    return build_sandbox(tmp_path_factory.mktemp("sandbox") / "s", DEMO)


def config_with(tmp_path_factory: pytest.TempPathFactory, risk: str) -> str:
    """The sandbox's own configuration, with `risk:` settings added."""
    path = tmp_path_factory.mktemp("config") / "sluice.yml"
    path.write_text(SLUICE_YML + "risk:\n" + risk)
    return str(path)


@pytest.fixture(scope="module")
def plan_text(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> str:
    # Today's rules, which these ground-truth checks are about (whether or not a default model is installed).
    db = tmp_path_factory.mktemp("db") / "sluice.db"
    config = config_with(tmp_path_factory, "  model: none\n")
    return run_json([*plan_args(sandbox), "--config", config, "--database", f"sqlite:///{db}"])


def plan_args(sandbox: Sandbox) -> list[str]:
    return [
        "plan",
        "--repo",
        str(sandbox.fork),
        "--fork",
        sandbox.fork_ref,
        "--upstream",
        sandbox.upstream_ref,
    ]


def run_json(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--json"]) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def plan(plan_text: str) -> dict:
    return json.loads(plan_text)


def placement(plan: dict) -> dict[str, str]:
    """Upstream SHA -> the bundle or chain id it landed in."""
    where = {}
    for group in [*plan["bundles"], *plan["chains"]]:
        for commit in group["commits"]:
            where[commit["sha"]] = group["id"]
    return where


def commits(plan: dict) -> dict[str, dict]:
    return {c["sha"]: c for g in [*plan["bundles"], *plan["chains"]] for c in g["commits"]}


def test_metrics_match_the_ground_truth(sandbox: Sandbox, plan: dict) -> None:
    m, status = sandbox.manifest, plan["status"]
    assert status["ingestion_tip"] == m.ingestion_tip
    assert status["backlog_commits"] == len(m.backlog)
    assert status["pending_commits"] == len(m.pending)
    assert status["emergency_commits"] == len(m.emergency)
    assert status["patch_stack_commits"] == len(m.patch_stack)
    by_method = dict(Counter(m.ingested.values()))
    assert {k: v for k, v in status["recognised_by"].items() if k != "ancestry"} == by_method


def test_every_pending_commit_is_planned_once_in_upstream_order(sandbox: Sandbox, plan: dict) -> None:
    where = placement(plan)
    assert sorted(where) == sorted(sandbox.manifest.pending)
    order = {sha: i for i, sha in enumerate(sandbox.manifest.pending)}
    for group in [*plan["bundles"], *plan["chains"]]:
        positions = [order[c["sha"]] for c in group["commits"]]
        assert positions == sorted(positions), group["id"]


def test_independent_commits_are_bundled(sandbox: Sandbox, plan: dict) -> None:
    bundled = {c["sha"] for b in plan["bundles"] for c in b["commits"]}
    assert set(sandbox.manifest.independent) <= bundled
    assert all(len(b["commits"]) <= 30 for b in plan["bundles"])


def test_the_planted_culprit_is_bundled_without_a_reason(sandbox: Sandbox, plan: dict) -> None:
    """Nothing static gives it away: only a tier run shows that it breaks the fork (test_sandbox_tiers)."""
    (culprit,) = sandbox.manifest.culprits
    (bundle,) = [b for b in plan["bundles"] if culprit in {c["sha"] for c in b["commits"]}]
    assert len(bundle["commits"]) > 1  # a bisection has something to do
    assert commits(plan)[culprit]["reasons"] == []


def test_risky_commits_are_chained_with_their_reasons(sandbox: Sandbox, plan: dict) -> None:
    m, where, planned = sandbox.manifest, placement(plan), commits(plan)
    chained = {c["sha"] for ch in plan["chains"] for c in ch["commits"]}
    kinds = {sha: {r["kind"] for r in c["reasons"]} for sha, c in planned.items()}
    for sha in m.llvm_bumps:
        assert planned[sha]["risk"] == "critical" and sha in chained
    for sha in m.large:
        assert "large" in kinds[sha] and sha in chained
    for sha in m.conflicting:  # textual conflicts: a human's, or one a mechanical rule resolves
        assert kinds[sha] & {"predicted-conflict", "mechanical-conflict"} and sha in chained
    for sha in m.interface_changes:
        assert "extension-interface" in kinds[sha] and sha in chained
    for sha in m.patch_stack_symbol_overlaps:
        detail = [r["detail"] for r in planned[sha]["reasons"] if r["kind"] == "patch-stack-symbol"]
        assert detail and m.overlap_symbols[sha] in detail[0], sha
    assert where  # and nothing above was vacuous:
    assert (
        m.llvm_bumps and m.large and m.conflicting and m.interface_changes and m.patch_stack_symbol_overlaps
    )


def test_reverts_and_relands_share_the_original_chain(sandbox: Sandbox, plan: dict) -> None:
    where = placement(plan)
    assert sandbox.manifest.reverts and sandbox.manifest.relands
    for revert, original in sandbox.manifest.reverts.items():
        assert where[revert] == where[original]
        assert where[revert].startswith("chain-")
    for reland, original in sandbox.manifest.relands.items():
        assert where[reland] == where[original]


def test_line_dependencies_are_found_and_respected(sandbox: Sandbox, plan: dict) -> None:
    """Every true dependency is either recorded or implied by an ordered group; none points backwards."""
    where, planned = placement(plan), commits(plan)
    order = {sha: i for i, sha in enumerate(sandbox.manifest.pending)}
    bundles = [b["id"] for b in plan["bundles"]]
    assert sandbox.manifest.line_dependencies
    for later, earlier in sandbox.manifest.line_dependencies:
        recorded = {d["sha"] for d in planned[later]["depends_on"]}
        assert earlier in recorded, (later, earlier)
        if where[later].startswith("bundle-"):  # a bundled commit only depends on earlier bundles
            assert where[earlier] in bundles[: bundles.index(where[later]) + 1]
    for sha, commit in planned.items():
        assert all(order[d["sha"]] < order[sha] for d in commit["depends_on"])


def test_no_bundle_depends_on_a_chain(plan: dict) -> None:
    chained = {c["sha"] for ch in plan["chains"] for c in ch["commits"]}
    for bundle in plan["bundles"]:
        for commit in bundle["commits"]:
            assert not {d["sha"] for d in commit["depends_on"]} & chained, commit["sha"]


def test_replanning_the_same_state_is_byte_identical(
    sandbox: Sandbox, plan_text: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    config = config_with(tmp_path_factory, "  model: none\n")
    assert run_json([*plan_args(sandbox), "--config", config, "--no-record"]) == plan_text


@pytest.fixture(scope="module")
def model_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("model") / "risk-model.json"
    path.write_text(TEST_MODEL.to_json())
    return config_with(tmp_path_factory, f"  model: {path}\n")


@pytest.fixture(scope="module")
def model_plan_text(sandbox: Sandbox, model_config: str) -> str:
    return run_json([*plan_args(sandbox), "--config", model_config, "--no-record"])


def check_model_plan(sandbox: Sandbox, plan: dict) -> None:
    """Independent low-risk commits bundled; the ones that depend on the patch stack chained, with why."""
    m = sandbox.manifest
    bundled = {c["sha"] for b in plan["bundles"] for c in b["commits"]}
    why = {sha: w for ch in plan["chains"] for sha, w in ch["why"].items()}
    assert set(m.independent) <= bundled
    on_the_stack = [*m.patch_stack_symbol_overlaps, *m.conflicting]
    assert on_the_stack and set(on_the_stack) <= set(why)
    for sha in m.llvm_bumps:
        assert why[sha].startswith("critical pin")
    for revert, original in m.reverts.items():
        assert why[revert].startswith(("reverts", "depends on")) and original in why


def test_a_model_bundles_the_independent_and_chains_what_the_patch_stack_touches(
    sandbox: Sandbox, model_plan_text: str, plan: dict
) -> None:
    planned = json.loads(model_plan_text)
    check_model_plan(sandbox, planned)
    commits = [c for g in [*planned["bundles"], *planned["chains"]] for c in g["commits"]]
    assert all(0 < c["probability"] < 1 and c["weights"] is not None for c in commits)
    assert planned["risk_decision"]["model"].endswith("risk-model.json")
    chained = sum(len(ch["commits"]) for ch in planned["chains"])
    assert chained < sum(len(ch["commits"]) for ch in plan["chains"])  # fewer than today's rules chain


def test_a_model_a_fork_calibrated_on_its_own_history_bundles_the_independent_and_chains_the_stack(
    sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory, plan: dict
) -> None:
    """The loop a fork runs: `sluice calibrate` on its ingestions (a generated fork whose breakages were
    the commits that changed what its patch stack changed), then `sluice plan` with the model it wrote."""
    history, _ = patch_stack_history(tmp_path_factory.mktemp("history"))
    model = tmp_path_factory.mktemp("calibrated") / "risk-model.json"
    assert main(["calibrate", *history.repo_args(), "--out", str(model), "--source", "generated"]) == 0
    config = config_with(tmp_path_factory, f"  model: {model}\n")
    planned = json.loads(run_json([*plan_args(sandbox), "--config", config, "--no-record"]))
    assert planned["risk_decision"]["source"].startswith("generated ")
    check_model_plan(sandbox, planned)
    chained = sum(len(ch["commits"]) for ch in planned["chains"])
    assert chained < sum(len(ch["commits"]) for ch in plan["chains"])  # fewer than today's rules chain


def run_json_rules(sandbox: Sandbox) -> str:
    return run_json([*plan_args(sandbox), "--no-record"])  # the sandbox's own config: no model named


def test_a_model_plan_is_deterministic(sandbox: Sandbox, model_plan_text: str, model_config: str) -> None:
    assert run_json([*plan_args(sandbox), "--config", model_config, "--no-record"]) == model_plan_text


@pytest.mark.skipif(not DEFAULT_MODEL_PATH.is_file(), reason="no default risk model installed")
@pytest.mark.xfail(
    strict=True,
    reason="issue 12 is open: the shipped model, fitted on Intel's fork, gives the sandbox's commits that "
    "sit on the patch stack p 0.018-0.036 (2-line changes, which broke Intel's fork about 1 % of the time), "
    "among its independent test-only commits (up to 0.029): it bundles them, which is why `risk.model` "
    "defaults to `none`",
)
def test_the_default_model_on_the_sandbox(
    sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory, plan: dict
) -> None:
    """The shipped model, opted into with `risk.model: default` (the rules stay the default for now)."""
    assert not json.loads(run_json_rules(sandbox)).get("risk_decision")  # no model unless one is named
    config = config_with(tmp_path_factory, "  model: default\n")
    planned = json.loads(run_json([*plan_args(sandbox), "--config", config, "--no-record"]))
    assert planned["risk_decision"]["model"] == "default"
    check_model_plan(sandbox, planned)
