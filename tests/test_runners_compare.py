"""`python -m runners compare`: verdicts on seeded synthetic samples, outputs, exit codes, A/B runs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from bot.core.config import PerformanceConfig
from runners import compare as cmp
from runners.compare import Metric, Verdict
from runners.report import MAX_SAMPLES, Benchmark, Environment, Report, RunInfo
from runners.stats import RatioInterval

REPO = Path(__file__).parent.parent
STARTED = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# The bootstrap and rank test alone: thresholds so small that only the statistics decide.
STATISTICS_ONLY = PerformanceConfig(floor=1e-6, k=1e-6)


# --- builders -----------------------------------------------------------------------------------------------


def environment(
    context_hash: str = "c0ffee", *, gpu_model: str = "NVIDIA H100", triton: str = "3.9.0"
) -> Environment:
    return Environment(
        gpu_model=gpu_model,
        gpu_count=1,
        triton=triton,
        python="3.11.9",
        cpu="x86_64",
        os="Linux",
        interpreter=False,
        context_hash=context_hash,
    )


def benchmark(
    samples: np.ndarray | list[float],
    *,
    kernel: str = "matmul",
    shape: tuple[int, ...] = (1024, 1024),
    comparable: bool = True,
    compile_cold_ms: float | None = None,
    compile_warm_ms: float | None = None,
) -> Benchmark:
    values = tuple(float(x) for x in samples)
    return Benchmark(
        suite="bench",
        kernel=kernel,
        shape=shape,
        dtype="fp16",
        config={"BLOCK_M": 128},
        warmup_iters=5,
        measured_iters=len(values),
        warmup_budget_ms=25.0,
        measure_budget_ms=100.0,
        samples_ms=values,
        median_ms=float(np.median(values)) if values else 0.0,
        p10_ms=0.0,
        p90_ms=0.0,
        p99_ms=0.0,
        iqr_ms=0.0,
        compile_cold_ms=compile_cold_ms,
        compile_warm_ms=compile_warm_ms,
        comparable=comparable,
        note=None if comparable else "interpreter timings",
    )


def report(
    *benchmarks: Benchmark,
    context_hash: str = "c0ffee",
    gpu_model: str = "NVIDIA H100",
    triton: str = "3.9.0",
) -> Report:
    return Report(
        run=RunInfo(tier="l3", head_sha="a1b2c3d4e5f6a7b8", started_at=STARTED, finished_at=STARTED),
        environment=environment(context_hash, gpu_model=gpu_model, triton=triton),
        benchmarks=benchmarks,
    )


def side(*benchmarks: Benchmark) -> cmp.Side:
    return cmp.Side.from_reports([report(*benchmarks)], name="test")


def noisy(seed: int, n: int, *, shift: float = 0.0, noise: float = 0.01, ms: float = 0.25) -> np.ndarray:
    """`n` timings with lognormal noise of relative spread `noise`, slowed by `shift`."""
    return ms * (1 + shift) * np.random.default_rng(seed).lognormal(0.0, noise, n)


def even(n: int, *, shift: float = 0.0, noise: float = 0.01, ms: float = 0.25) -> np.ndarray:
    """`n` timings at the lognormal's quantiles: the same samples every time, no luck involved."""
    return ms * (1 + shift) * np.exp(noise * norm.ppf((np.arange(n) + 0.5) / n))


def median_cell(comparison: cmp.Comparison, benchmark_key: str | None = None) -> cmp.CellVerdict:
    return next(
        c
        for c in comparison.cells
        if c.metric is Metric.MEDIAN and (benchmark_key is None or c.benchmark == benchmark_key)
    )


def write(path: Path, rep: Report) -> Path:
    rep.write(path)
    return path


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cmp.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# --- the proof ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_a_3_percent_slowdown_at_1_percent_noise_with_50_samples_is_regressed(seed: int) -> None:
    base = side(benchmark(noisy(2 * seed, 50)))
    cand = side(benchmark(noisy(2 * seed + 1, 50, shift=0.03)))

    cell = median_cell(cmp.compare(base, cand, PerformanceConfig(), seed=seed))

    assert cell.verdict is Verdict.REGRESSED, cell.decision.reason
    assert cell.measurement is not None and cell.measurement.interval is not None
    assert 1.02 < cell.measurement.ratio < 1.04
    assert cell.measurement.interval.lo > 1


def test_the_threshold_grows_with_the_noise_above_its_floor() -> None:
    config = PerformanceConfig()  # floor 2 %, k 3
    assert config.threshold_for("matmul", 0.001) == pytest.approx(0.02)
    assert config.threshold_for("matmul", 0.05) == pytest.approx(0.15)


def test_a_6_percent_slowdown_of_a_kernel_with_5_percent_noise_is_no_regression() -> None:
    """On a noisy kernel the threshold is 3 × its noise (15 %), not the 2 % floor: a shift the noise explains
    must not fail L3, ask for signoffs and start a bisection."""
    base = side(benchmark(even(200, noise=0.05)))
    cand = side(benchmark(even(200, shift=0.06, noise=0.05)))
    cell = median_cell(cmp.compare(base, cand, PerformanceConfig(), seed=0))
    assert cell.verdict is not Verdict.REGRESSED, cell.decision.reason


@pytest.mark.parametrize(
    "config", [PerformanceConfig(), STATISTICS_ONLY], ids=["configured-thresholds", "statistics-only"]
)
def test_without_a_change_200_trials_false_alarm_at_most_the_configured_rate(
    config: PerformanceConfig,
) -> None:
    verdicts: Counter[Verdict] = Counter()
    for trial in range(200):
        base = side(benchmark(noisy(10_000 + 2 * trial, 50)))
        cand = side(benchmark(noisy(10_001 + 2 * trial, 50)))
        verdicts[median_cell(cmp.compare(base, cand, config, seed=trial)).verdict] += 1

    false_alarms = verdicts[Verdict.REGRESSED] + verdicts[Verdict.IMPROVED]
    rate = false_alarms / 200
    which = "statistics only" if config is STATISTICS_ONLY else "configured thresholds"
    counts = ", ".join(f"{verdict}: {count}" for verdict, count in sorted(verdicts.items()))
    print(f"\nfalse-alarm rate ({which}): {rate:.3f} ({false_alarms}/200, FDR {config.fdr}); {counts}")
    assert rate <= config.fdr
    if config is STATISTICS_ONLY:  # nothing passes a zero threshold band: the rest stays undecided
        assert verdicts[Verdict.INCONCLUSIVE] >= 180
    else:
        assert verdicts[Verdict.SAME] >= 180


@pytest.mark.parametrize("shift", [0.03, 0.0])
def test_5_samples_per_side_are_inconclusive_with_the_samples_still_needed(shift: float) -> None:
    for seed in range(10):
        base = side(benchmark(noisy(2 * seed, 5)))
        cand = side(benchmark(noisy(2 * seed + 1, 5, shift=shift)))

        cell = median_cell(cmp.compare(base, cand, PerformanceConfig(), seed=seed))

        assert cell.verdict is Verdict.INCONCLUSIVE
        assert f"fewer than {cmp.MIN_SAMPLES} samples" in cell.decision.reason
        assert cell.decision.more_samples is not None
        assert cell.decision.more_samples >= cmp.MIN_SAMPLES - 5


def test_the_samples_asked_for_settle_an_inconclusive_cell() -> None:
    """A 1.5 % change against a 2 % threshold: 15 samples cannot tell; the advised count can."""
    base, cand = side(benchmark(even(15))), side(benchmark(even(15, shift=0.015)))
    cell = median_cell(cmp.compare(base, cand, PerformanceConfig()))
    assert cell.verdict is Verdict.INCONCLUSIVE
    more = cell.decision.more_samples
    assert more is not None and more > 0

    n = 15 + more
    settled = median_cell(
        cmp.compare(side(benchmark(even(n))), side(benchmark(even(n, shift=0.015))), PerformanceConfig())
    )
    assert settled.verdict is Verdict.SAME


# --- the decision rules -------------------------------------------------------------------------------------


def measurement(
    ratio: float,
    lo: float,
    hi: float,
    *,
    threshold: float = 0.02,
    n: int = 50,
    metric: Metric = Metric.MEDIAN,
) -> cmp.Measurement:
    return cmp.Measurement(
        benchmark="k[1:fp16]",
        kernel="k",
        metric=metric,
        critical=False,
        n=(n, n),
        baseline_ms=1.0,
        candidate_ms=ratio,
        ratio=ratio,
        interval=RatioInterval(ratio, lo, hi),
        threshold=threshold,
        noise=0.005,
        p_value=0.001,
    )


@pytest.mark.parametrize(
    ("ratio", "lo", "hi", "q_value", "expected"),
    [
        (1.05, 1.03, 1.07, 0.001, Verdict.REGRESSED),  # wholly above the threshold
        (1.03, 1.01, 1.05, 0.001, Verdict.REGRESSED),  # past the threshold, surely slower
        (1.03, 1.01, 1.05, 0.20, Verdict.INCONCLUSIVE),  # the rank test fails after the FDR correction
        (1.03, 0.99, 1.07, 0.001, Verdict.INCONCLUSIVE),  # the interval includes no change
        (1.015, 1.01, 1.03, 0.001, Verdict.INCONCLUSIVE),  # surely slower, maybe past the threshold
        (1.01, 1.005, 1.015, 0.001, Verdict.SAME),  # surely slower, surely not by much
        (1.0, 0.99, 1.01, 0.9, Verdict.SAME),
        (1.0, 0.97, 1.03, 0.9, Verdict.INCONCLUSIVE),  # too wide to tell
        (0.95, 0.93, 0.97, 0.001, Verdict.IMPROVED),
        (0.97, 0.95, 0.99, 0.001, Verdict.IMPROVED),
        (0.97, 0.95, 0.99, 0.30, Verdict.INCONCLUSIVE),
        (0.985, 0.97, 0.99, 0.001, Verdict.INCONCLUSIVE),
    ],
)
def test_decide(ratio: float, lo: float, hi: float, q_value: float, expected: Verdict) -> None:
    decision = cmp.decide(measurement(ratio, lo, hi), q_value=q_value, fdr=0.05)
    assert decision.verdict is expected, decision.reason
    assert (decision.more_samples is not None) <= (expected is Verdict.INCONCLUSIVE)


def test_a_change_sitting_on_the_threshold_asks_for_no_sample_count() -> None:
    decision = cmp.decide(measurement(1.0200001, 1.0, 1.04), q_value=0.001, fdr=0.05)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert decision.more_samples is None


# --- cells: tails, compile time -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_base", "n_cand", "metrics"),
    [
        (39, 60, {"median"}),
        (40, 40, {"median", "p90"}),
        (399, 500, {"median", "p90"}),
        (400, 400, {"median", "p90", "p99"}),
    ],
)
def test_p90_needs_40_and_p99_400_samples_per_side(n_base: int, n_cand: int, metrics: set[str]) -> None:
    comparison = cmp.compare(
        side(benchmark(noisy(1, n_base))), side(benchmark(noisy(2, n_cand))), PerformanceConfig()
    )
    assert {str(c.metric) for c in comparison.cells} == metrics


def test_a_slower_tail_is_a_p90_regression_while_the_median_stays() -> None:
    base = even(400)
    tail = base.copy()
    tail[np.argsort(tail)[-60:]] *= 1.15  # the slowest 15 % of launches got 15 % slower
    comparison = cmp.compare(side(benchmark(base)), side(benchmark(tail)), PerformanceConfig())
    verdicts = {str(c.metric): c.verdict for c in comparison.cells}
    assert verdicts["median"] is Verdict.SAME
    assert verdicts["p90"] is Verdict.REGRESSED


def test_compile_time_from_one_run_is_judged_only_when_it_moves_a_lot() -> None:
    samples = even(50)
    base = side(
        benchmark(samples, kernel="big", compile_cold_ms=900.0, compile_warm_ms=10.0),
        benchmark(samples, kernel="small", compile_cold_ms=900.0, compile_warm_ms=10.0),
    )
    cand = side(
        benchmark(samples, kernel="big", compile_cold_ms=1200.0, compile_warm_ms=10.1),
        benchmark(samples, kernel="small", compile_cold_ms=920.0, compile_warm_ms=10.0),
    )
    config = PerformanceConfig(critical=("big",))
    comparison = cmp.compare(base, cand, config)
    cells = {(c.kernel, str(c.metric)): c for c in comparison.cells}

    big_cold = cells[("big", "compile_cold")]
    assert big_cold.verdict is Verdict.REGRESSED
    assert big_cold.measurement is not None and big_cold.measurement.low_confidence
    assert cells[("small", "compile_cold")].verdict is Verdict.INCONCLUSIVE
    assert cells[("big", "compile_warm")].verdict is Verdict.INCONCLUSIVE
    assert cmp.exit_code(comparison) == cmp.EXIT_OK  # one compile per side never fails the run
    assert "low confidence" in cmp.render_markdown(comparison)


def test_a_key_a_report_repeats_is_pooled_within_the_cap_of_one_benchmark() -> None:
    """Forty copies of one key, 10,000 samples each, would be a bootstrap over 400,000 in the bot's worker
    (minutes): the run's samples of a key are thinned to MAX_SAMPLES, evenly, so every copy keeps its say;
    the rounds of an A/B run each keep theirs."""
    copies = [benchmark([1.0 + i] * MAX_SAMPLES, compile_cold_ms=900.0 + i) for i in range(40)]
    pooled = cmp.Side.from_reports([report(*copies)], name="this head").benchmarks[copies[0].key]
    assert len(pooled.latency_ms) == MAX_SAMPLES and len(pooled.compile_cold_ms) == 40
    assert Counter(pooled.latency_ms) == {1.0 + i: MAX_SAMPLES // 40 for i in range(40)}
    rounds = cmp.Side.from_reports([report(*copies[:2]), report(*copies[2:4])], name="A")
    assert len(rounds.benchmarks[copies[0].key].latency_ms) == 2 * MAX_SAMPLES


def test_compile_time_from_many_runs_is_judged_like_latency() -> None:
    rng = np.random.default_rng(7)
    rounds = 12
    base = cmp.Side.from_reports(
        [report(benchmark(even(20), compile_cold_ms=float(c))) for c in rng.normal(1000, 10, rounds)],
        name="baseline",
    )
    cand = cmp.Side.from_reports(
        [report(benchmark(even(20), compile_cold_ms=float(c))) for c in rng.normal(1100, 10, rounds)],
        name="candidate",
    )
    comparison = cmp.compare(base, cand, PerformanceConfig(critical=("matmul",)))

    cold = next(c for c in comparison.cells if c.metric is Metric.COMPILE_COLD)
    assert cold.verdict is Verdict.REGRESSED
    assert cold.measurement is not None and not cold.measurement.low_confidence
    assert cold.measurement.n == (rounds, rounds)
    assert median_cell(comparison).measurement.n == (20 * rounds, 20 * rounds)  # type: ignore[union-attr]
    assert cmp.exit_code(comparison) == cmp.EXIT_CRITICAL_REGRESSION


# --- the false discovery rate -------------------------------------------------------------------------------


def test_a_small_change_alone_is_significant_but_not_among_many_unchanged_cells() -> None:
    shifted = benchmark(even(30, shift=0.008), kernel="shifted")
    alone = cmp.compare(side(benchmark(even(30), kernel="shifted")), side(shifted), STATISTICS_ONLY)
    assert median_cell(alone).verdict is Verdict.REGRESSED

    unchanged = [benchmark(even(30), kernel=f"other{i}") for i in range(40)]
    many = cmp.compare(
        side(benchmark(even(30), kernel="shifted"), *unchanged), side(shifted, *unchanged), STATISTICS_ONLY
    )
    cell = median_cell(many, shifted.key)
    assert cell.verdict is Verdict.INCONCLUSIVE
    assert cell.q_value is not None and cell.q_value > STATISTICS_ONLY.fdr
    assert cell.measurement is not None and cell.measurement.p_value is not None
    assert cell.measurement.p_value < STATISTICS_ONLY.fdr  # significant before the correction
    assert "FDR" in cell.decision.reason


def test_real_changes_survive_the_correction_across_many_cells() -> None:
    base = [benchmark(noisy(i, 60), kernel=f"k{i}") for i in range(30)]
    cand = [benchmark(noisy(100 + i, 60, shift=0.05 if i < 3 else 0.0), kernel=f"k{i}") for i in range(30)]
    comparison = cmp.compare(side(*base), side(*cand), PerformanceConfig())
    regressed = {c.kernel for c in comparison.cells if c.verdict is Verdict.REGRESSED}
    assert regressed == {"k0", "k1", "k2"}


# --- the command: outputs and exit codes --------------------------------------------------------------------


@pytest.fixture
def reports(tmp_path: Path) -> tuple[Path, Path]:
    """gemm regressed 5 %, softmax unchanged, layernorm 5 % faster, an interpreter-only benchmark, churn."""
    base = report(
        benchmark(noisy(1, 50), kernel="gemm"),
        benchmark(noisy(2, 50), kernel="softmax"),
        benchmark(noisy(3, 50), kernel="layernorm"),
        benchmark(noisy(4, 50), kernel="interp", comparable=False),
        benchmark(noisy(5, 50), kernel="retired"),
    )
    cand = report(
        benchmark(noisy(11, 50, shift=0.05), kernel="gemm"),
        benchmark(noisy(12, 50), kernel="softmax"),
        benchmark(noisy(13, 50, shift=-0.05), kernel="layernorm"),
        benchmark(noisy(14, 50), kernel="interp", comparable=False),
        benchmark(noisy(15, 50), kernel="fresh"),
    )
    return write(tmp_path / "base.json", base), write(tmp_path / "cand.json", cand)


def thresholds(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "thresholds.yml"
    path.write_text(textwrap.dedent(text))
    return path


def test_json_output_has_the_specified_shape(
    reports: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main([str(reports[0]), str(reports[1]), "--json"], capsys)
    doc = json.loads(out)

    assert code == cmp.EXIT_OK
    assert {"benchmark", "verdict", "ratio", "interval", "threshold"} <= set(doc["verdicts"][0])
    by_kernel = {(v["kernel"], v["metric"]): v for v in doc["verdicts"]}
    gemm = by_kernel[("gemm", "median")]
    assert gemm["benchmark"] == "gemm[1024x1024:fp16:BLOCK_M=128]"
    assert gemm["verdict"] == "regressed"
    assert gemm["ratio"] == pytest.approx(1.05, abs=0.01)
    lo, hi = gemm["interval"]
    assert lo < gemm["ratio"] < hi
    assert gemm["threshold"] == pytest.approx(0.02, abs=0.005)
    assert by_kernel[("softmax", "median")]["verdict"] == "same"
    assert by_kernel[("layernorm", "median")]["verdict"] == "improved"
    interp = by_kernel[("interp", "median")]
    assert (interp["verdict"], interp["ratio"], interp["interval"], interp["threshold"]) == (
        "not_comparable",
        None,
        None,
        None,
    )
    assert {v["verdict"] for v in doc["verdicts"]} <= {str(v) for v in Verdict}
    assert doc["added"] == ["fresh[1024x1024:fp16:BLOCK_M=128]"]
    assert doc["removed"] == ["retired[1024x1024:fp16:BLOCK_M=128]"]


def test_markdown_summary_has_the_key_kernels_and_separate_sections(
    reports: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main([str(reports[0]), str(reports[1])], capsys)

    assert code == cmp.EXIT_OK  # gemm regressed, but it is not critical
    key_table = out.split("### Key kernels")[1].split("###")[0]
    rows = [line for line in key_table.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1].split("[")[0] for row in rows[:2]] == ["gemm", "gemm"]  # regressions first
    assert "🔴 regressed" in rows[0] and "+5." in rows[0] and "±2.0 %" in rows[0]
    assert any("layernorm" in row and "🟢 improved" in row for row in rows)
    assert (
        "### Not comparable\n\n- `interp[1024x1024:fp16:BLOCK_M=128]`: both sides: interpreter timings" in out
    )
    assert "- added: `fresh" in out and "- removed: `retired" in out
    assert "unchanged</summary>" in out and "softmax" in out.split("unchanged</summary>")[1]
    assert "context `c0ffee`" in out


def test_a_critical_kernel_regression_exits_1(
    reports: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = thresholds(tmp_path, "critical: [gemm]\n")
    code, out, _ = run_main([str(reports[0]), str(reports[1]), "--thresholds", str(path)], capsys)
    assert code == cmp.EXIT_CRITICAL_REGRESSION
    assert "## Benchmarks: ❌ critical kernels regressed: gemm\n" in out
    assert "🔴 regressed (critical)" in out


def test_thresholds_per_kernel_and_from_the_repo_config(
    reports: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A per-kernel floor of 10 % makes gemm's 5 % slowdown unimportant; sluice.yml's section works alike."""
    sluice_yml = tmp_path / "sluice.yml"
    sluice_yml.write_text("performance:\n  critical: [gemm]\n  kernels:\n    gemm: {floor: 0.1}\n")
    code, out, _ = run_main([str(reports[0]), str(reports[1]), "--config", str(sluice_yml), "--json"], capsys)
    gemm = next(v for v in json.loads(out)["verdicts"] if v["kernel"] == "gemm" and v["metric"] == "median")
    assert code == cmp.EXIT_OK
    assert gemm["threshold"] == pytest.approx(0.1)
    assert gemm["verdict"] == "same"

    wrapped = thresholds(tmp_path, "performance:\n  critical: [gemm]\n")
    code, _, _ = run_main([str(reports[0]), str(reports[1]), "--thresholds", str(wrapped)], capsys)
    assert code == cmp.EXIT_CRITICAL_REGRESSION


def test_different_contexts_are_refused_naming_the_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write(tmp_path / "a.json", report(benchmark(noisy(1, 50)), context_hash="aaa", gpu_model="H100"))
    cand = write(tmp_path / "b.json", report(benchmark(noisy(2, 50)), context_hash="bbb", gpu_model="A100"))

    code, out, err = run_main([str(base), str(cand)], capsys)
    assert code == cmp.EXIT_REFUSED
    assert "refused" in out and "| gpu_model | H100 | A100 |" in out
    assert "regressed" not in out and "Key kernels" not in out
    assert "gpu_model" in err

    code, out, _ = run_main([str(base), str(cand), "--json"], capsys)
    assert code == cmp.EXIT_REFUSED
    assert json.loads(out) == {
        "refused": {
            "where": "the baseline and the candidate",
            "differences": {"gpu_model": ["H100", "A100"]},
        },
        "verdicts": [],
    }

    code, out, _ = run_main([str(base), str(cand), "--force-context"], capsys)
    assert code == cmp.EXIT_OK
    assert "> [!WARNING]" in out and "gpu_model (H100 → A100)" in out
    assert "### Key kernels" in out


def test_a_different_triton_build_is_what_is_compared_not_a_different_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write(
        tmp_path / "a.json", report(benchmark(noisy(1, 50)), context_hash="aaa", triton="3.9.0+git1")
    )
    cand = write(
        tmp_path / "b.json", report(benchmark(noisy(2, 50)), context_hash="bbb", triton="3.9.0+git2")
    )

    code, out, _ = run_main([str(base), str(cand)], capsys)
    assert code == cmp.EXIT_OK
    assert "triton 3.9.0+git1 → 3.9.0+git2" in out
    assert "[!WARNING]" not in out

    code, out, _ = run_main([str(base), str(cand), "--json"], capsys)
    assert json.loads(out)["under_test"] == {"triton": ["3.9.0+git1", "3.9.0+git2"]}


def test_a_context_hash_that_differs_alone_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write(tmp_path / "a.json", report(benchmark(noisy(1, 50)), context_hash="aaa"))
    cand = write(tmp_path / "b.json", report(benchmark(noisy(2, 50)), context_hash="bbb"))
    code, out, _ = run_main([str(base), str(cand)], capsys)
    assert code == cmp.EXIT_REFUSED
    assert "| context_hash | aaa | bbb |" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("{not json", "not a valid tier report"),
        ('{"schema": "sluice.tier-report/9"}', "not a valid tier report"),
        (b"\xff\xfe", "cannot read it"),
    ],
    ids=["missing", "invalid-json", "wrong-schema", "not-utf8"],
)
def test_a_bad_report_exits_2_naming_the_file(
    content: str | bytes | None,
    message: str,
    reports: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = tmp_path / "broken.json"
    if isinstance(content, bytes):
        bad.write_bytes(content)
    elif content is not None:
        bad.write_text(content)

    code, out, err = run_main([str(reports[0]), str(bad)], capsys)
    assert code == cmp.EXIT_BAD_INPUT
    assert out == ""
    assert f"candidate report {bad}" in err and message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("floor: 2\n", "performance.floor"),
        ("critcal: [gemm]\n", "performance.critcal"),
        ("- a list\n", "must be a mapping"),
        ("floor: [\n", "invalid YAML"),
    ],
)
def test_a_bad_thresholds_file_exits_2(
    text: str, message: str, reports: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = thresholds(tmp_path, text)
    code, out, err = run_main([str(reports[0]), str(reports[1]), "--thresholds", str(path)], capsys)
    assert (code, out) == (cmp.EXIT_BAD_INPUT, "")
    assert str(path) in err and message in err


def test_usage_errors_exit_2(reports: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert cmp.main([str(reports[0])]) == cmp.EXIT_BAD_INPUT
    assert cmp.main([str(reports[0]), str(reports[1]), "--ab", "py1", "py2"]) == cmp.EXIT_BAD_INPUT
    assert cmp.main(["--help"]) == 0
    assert "--ab BASELINE_PYTHON CANDIDATE_PYTHON" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("samples_ms", 0.0, "greater than 0"),
        ("samples_ms", -1.5, "greater than 0"),
        ("samples_ms", "NaN", "finite number"),
        ("compile_cold_ms", 0.0, "greater than 0"),
        ("compile_warm_ms", "Infinity", "finite number"),
    ],
)
def test_a_benchmark_with_a_non_positive_or_non_finite_timing_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: float | str, says: str
) -> None:
    good = write(
        tmp_path / "a.json", report(benchmark(noisy(1, 20), compile_cold_ms=9.0, compile_warm_ms=1.0))
    )
    data = json.loads(good.read_text())
    bench = data["benchmarks"][0]
    if field == "samples_ms":
        bench[field][-1] = 12345.678
    else:
        bench[field] = 12345.678
    bad = tmp_path / "b.json"  # written as a broken runner would (JSON spells NaN and Infinity so too)
    bad.write_text(json.dumps(data).replace("12345.678", str(value)))
    code, _, err = run_main([str(good), str(bad)], capsys)
    assert code == cmp.EXIT_BAD_INPUT
    assert "is not a valid tier report" in err and f"benchmarks.0.{field}" in err and says in err


def test_the_summary_stays_under_githubs_limit() -> None:
    decision = cmp.Decision(Verdict.INCONCLUSIVE, "the interval reaches past ±2.0 %", 120)
    cells = tuple(
        cmp.CellVerdict(
            f"kernel_{i}[{i}x4096:fp16]",
            f"kernel_{i}",
            Metric.MEDIAN,
            False,
            decision,
            measurement(1.01, 0.98, 1.04),
        )
        for i in range(3000)
    )
    comparison = cmp.Comparison(side(), side(), PerformanceConfig(), cells)

    text = cmp.render_markdown(comparison)
    assert len(text.encode()) <= cmp.SUMMARY_LIMIT
    assert "### Noisy / inconclusive" in text
    assert "more (see `--json`)" in text


# --- interleaved A/B runs -----------------------------------------------------------------------------------

FAKE_INTERPRETER = """\
#!{python}
# Stands in for `<python> -m runners run --tier l3 --only bench --out FILE`: logs the call, writes a report.
import sys
import zlib
from datetime import datetime, timezone
from pathlib import Path
sys.path.insert(0, {repo!r})
import numpy as np
from runners.report import Benchmark, Environment, Report, RunInfo

argv = sys.argv[1:]
assert argv[:7] == ["-m", "runners", "run", "--tier", "l3", "--only", "bench"], argv
out = Path(argv[argv.index("--out") + 1])
with open({log!r}, "a") as log:
    log.write({arm!r} + "\\n")
rng = np.random.default_rng(zlib.crc32(out.name.encode()))  # hash() varies by process
samples = 0.25 * {slowdown} * rng.lognormal(0.0, 0.01, 30)
now = datetime(2026, 3, 1, tzinfo=timezone.utc)
Report(
    run=RunInfo(tier="l3", head_sha={arm!r} * 4, started_at=now, finished_at=now),
    environment=Environment(
        python="3.11", cpu="x86_64", os="Linux", interpreter=False, context_hash="same-machine"
    ),
    benchmarks=(
        Benchmark(
            suite="bench", kernel="gemm", shape=(64, 64), dtype="fp16", warmup_iters=1,
            measured_iters=30, warmup_budget_ms=1.0, measure_budget_ms=1.0,
            samples_ms=tuple(float(x) for x in samples), median_ms=float(np.median(samples)),
            p10_ms=0.0, p90_ms=0.0, p99_ms=0.0, iqr_ms=0.0,
            compile_cold_ms=float(500 * {compile_slowdown} * rng.lognormal(0.0, 0.01)),
            compile_warm_ms=float(5 * rng.lognormal(0.0, 0.01)),
            comparable=True,
        ),
    ),
).write(out)
"""


def fake_interpreter(tmp_path: Path, arm: str, *, slowdown: float, compile_slowdown: float = 1.0) -> Path:
    path = tmp_path / f"python-{arm}"
    log = tmp_path / "calls.log"
    path.write_text(
        FAKE_INTERPRETER.format(
            python=sys.executable,
            repo=str(REPO),
            log=str(log),
            arm=arm,
            slowdown=slowdown,
            compile_slowdown=compile_slowdown,
        )
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_interleaved_order_alternates_which_arm_goes_first() -> None:
    letters = {cmp.Arm.BASELINE: "A", cmp.Arm.CANDIDATE: "B"}
    order = cmp.interleaved_order(4)
    assert "".join(letters[arm] for _, arm in order) == "ABBAABBA"
    assert [round_ for round_, _ in order] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_ab_runs_the_two_interpreters_interleaved_and_pools_their_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = fake_interpreter(tmp_path, "A", slowdown=1.0)
    candidate = fake_interpreter(tmp_path, "B", slowdown=1.05, compile_slowdown=1.2)
    rounds_dir = tmp_path / "rounds"

    code, out, err = run_main(
        ["--ab", str(baseline), str(candidate), "--rounds", "4", "--out-dir", str(rounds_dir), "--json"],
        capsys,
    )

    assert code == cmp.EXIT_OK, err
    assert (tmp_path / "calls.log").read_text().split() == list("ABBAABBA")
    assert len(list(rounds_dir.glob("round-*-baseline.json"))) == 4
    doc = json.loads(out)
    cells = {v["metric"]: v for v in doc["verdicts"]}
    assert cells["median"]["n"] == [120, 120]  # 30 samples x 4 rounds per arm
    assert cells["median"]["verdict"] == "regressed"
    assert cells["p90"]["n"] == [120, 120]
    assert cells["compile_cold"]["n"] == [4, 4]  # one compile per round
    # four compiles per side, 20 % slower: past 2 x the floor, a verdict, but one that never fails the run
    assert (cells["compile_cold"]["verdict"], cells["compile_cold"]["low_confidence"]) == ("regressed", True)
    assert cells["compile_warm"]["verdict"] == "inconclusive"
    assert doc["baseline"]["runs"] == doc["candidate"]["runs"] == 4
    assert "round 4/4: candidate" in err


def test_ab_pools_compile_times_into_a_sample_set_judged_like_latency(tmp_path: Path) -> None:
    class InProcess:
        """A runner in this process (the protocol lets the CI wrap its own): compiles 10 % slower in B."""

        def __call__(self, python: str, out: Path, *, config: Path | None) -> None:
            seed = len(list(tmp_path.glob("*.json")))
            slowdown = 1.1 if python == "B" else 1.0
            compile_ms = float(1000 * slowdown * np.random.default_rng(seed).lognormal(0.0, 0.01))
            write(out, report(benchmark(noisy(seed, 20), compile_cold_ms=compile_ms)))

    sides = cmp.run_interleaved(
        {cmp.Arm.BASELINE: "A", cmp.Arm.CANDIDATE: "B"},
        rounds=10,
        out_dir=tmp_path,
        runner=InProcess(),
        log=lambda line: None,
    )
    comparison = cmp.compare(sides[cmp.Arm.BASELINE], sides[cmp.Arm.CANDIDATE], PerformanceConfig())

    cold = next(c for c in comparison.cells if c.metric is Metric.COMPILE_COLD)
    assert cold.measurement is not None and cold.measurement.n == (10, 10)
    assert not cold.measurement.low_confidence
    assert cold.verdict is Verdict.REGRESSED
    assert cold.measurement.ratio == pytest.approx(1.1, abs=0.02)
    assert median_cell(comparison).verdict is Verdict.SAME


def test_ab_stops_with_exit_2_when_a_run_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failing = tmp_path / "python-broken"
    failing.write_text(
        f"#!{sys.executable}\nimport sys\nprint('no GPU found', file=sys.stderr)\nsys.exit(4)\n"
    )
    failing.chmod(failing.stat().st_mode | stat.S_IXUSR)

    rounds_dir = tmp_path / "rounds"
    rounds_dir.mkdir()
    write(rounds_dir / "round-01-baseline.json", report(benchmark(noisy(1, 20))))  # left from an earlier run

    code, out, err = run_main(
        ["--ab", str(failing), str(failing), "--rounds", "2", "--out-dir", str(rounds_dir)], capsys
    )
    assert (code, out) == (cmp.EXIT_BAD_INPUT, "")
    assert "exit code 4" in err and "no GPU found" in err


def test_ab_refuses_when_the_machine_changes_between_rounds(tmp_path: Path) -> None:
    class Drifting:
        """Writes reports whose context changes from the second baseline run on (a runner swap)."""

        calls = 0

        def __call__(self, python: str, out: Path, *, config: Path | None) -> None:
            self.calls += 1
            gpu = "H100" if self.calls < 3 else "A100"
            write(out, report(benchmark(noisy(self.calls, 20)), context_hash=f"ctx-{gpu}", gpu_model=gpu))

    with pytest.raises(cmp.ContextRefused) as refused:
        cmp.run_interleaved(
            {cmp.Arm.BASELINE: "a", cmp.Arm.CANDIDATE: "b"},
            rounds=2,
            out_dir=tmp_path,
            runner=Drifting(),
            log=lambda line: None,
        )
    assert refused.value.differences == {"gpu_model": ("H100", "A100")}
    assert "| field | run 1 | run 2 |" in cmp.render_refusal(refused.value)


def test_what_a_report_carries_stays_in_its_table_cell_and_pings_nobody() -> None:
    """Environment values come from the runner's report: a `|` must not split a row, an @name not ping."""
    refusal = cmp.ContextRefused({"gpu_model": ("H100 | PCIe", "@someone <b>x</b>")}, where="the two sides")
    row = next(line for line in cmp.render_refusal(refusal).splitlines() if line.startswith("| gpu_model"))
    assert row == "| gpu_model | H100 \\| PCIe | @&#8203;someone &lt;b&gt;x&lt;/b&gt; |"


# --- through `python -m runners` ----------------------------------------------------------------------------


def test_python_m_runners_compare(reports: tuple[Path, Path]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "runners", "compare", str(reports[0]), str(reports[1]), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert proc.returncode == cmp.EXIT_OK, proc.stderr
    assert {v["verdict"] for v in json.loads(proc.stdout)["verdicts"]} >= {"regressed", "same"}


TINY_BENCH = """\
bench:
  interpreter_iters: 3
  interpreter_cases:
    - {kernel: vector_add, shape: [256], dtype: float32}
  cases:
    - {kernel: vector_add, shape: [4096], dtype: float32}
"""


def test_python_m_runners_compare_ab_runs_the_real_bench_suite(tmp_path: Path) -> None:
    """Both arms are this interpreter: on a machine without a GPU the timings are the interpreter's."""
    config = tmp_path / "sluice.yml"
    config.write_text(TINY_BENCH)
    rounds_dir = tmp_path / "rounds"
    argv = ["--ab", sys.executable, sys.executable, "--rounds", "2", "--config", str(config)]
    proc = subprocess.run(
        [sys.executable, "-m", "runners", "compare", *argv, "--out-dir", str(rounds_dir), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )

    assert proc.returncode == cmp.EXIT_OK, proc.stderr
    assert sorted(p.name for p in rounds_dir.iterdir()) == [
        "round-01-baseline.json",
        "round-01-candidate.json",
        "round-02-baseline.json",
        "round-02-candidate.json",
    ]
    doc = json.loads(proc.stdout)
    assert doc["baseline"]["runs"] == doc["candidate"]["runs"] == 2
    verdicts = {(v["kernel"], v["verdict"]) for v in doc["verdicts"]}
    interpreted = Report.read(rounds_dir / "round-01-baseline.json").environment.interpreter
    if interpreted:
        assert verdicts == {("vector_add", "not_comparable")}
    else:  # the same build against itself on a GPU
        assert ("vector_add", "regressed") not in verdicts
