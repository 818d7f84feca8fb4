"""`python -m runners compare`: noise-aware verdicts on two tier reports' benchmarks (docs/compare.md)."""

# One module per concern: `model` (exit codes, verdicts, metrics, errors), `sides` (reports pooled into the
# two sides), `verdicts` (measuring and deciding each cell), `render` (JSON, the markdown summary), `inputs`
# (reading reports and thresholds), `ab` (interleaved A/B runs), `cli` (the command). The names below are
# the package's API, as `from runners import compare` callers and the tests use it.

from runners.compare.ab import (
    DEFAULT_ROUNDS,
    Arm,
    BenchRunner,
    SubprocessBenchRunner,
    interleaved_order,
    run_interleaved,
)
from runners.compare.cli import main
from runners.compare.inputs import load_performance_section, load_thresholds, read_report
from runners.compare.model import (
    EXIT_BAD_INPUT,
    EXIT_CRITICAL_REGRESSION,
    EXIT_OK,
    EXIT_REFUSED,
    CompareInputError,
    ContextRefused,
    Metric,
    Verdict,
)
from runners.compare.render import SUMMARY_LIMIT, refusal_json, render_markdown, render_refusal, to_json
from runners.compare.sides import BenchmarkSamples, Side, context_differences
from runners.compare.verdicts import (
    LOW_CONFIDENCE_FACTOR,
    MIN_SAMPLES,
    QUANTILES,
    UNDER_TEST,
    CellVerdict,
    Comparison,
    Decision,
    Measurement,
    compare,
    decide,
    exit_code,
)

__all__ = [
    "DEFAULT_ROUNDS",
    "EXIT_BAD_INPUT",
    "EXIT_CRITICAL_REGRESSION",
    "EXIT_OK",
    "EXIT_REFUSED",
    "LOW_CONFIDENCE_FACTOR",
    "MIN_SAMPLES",
    "QUANTILES",
    "SUMMARY_LIMIT",
    "UNDER_TEST",
    "Arm",
    "BenchRunner",
    "BenchmarkSamples",
    "CellVerdict",
    "CompareInputError",
    "Comparison",
    "ContextRefused",
    "Decision",
    "Measurement",
    "Metric",
    "Side",
    "SubprocessBenchRunner",
    "Verdict",
    "compare",
    "context_differences",
    "decide",
    "exit_code",
    "interleaved_order",
    "load_performance_section",
    "load_thresholds",
    "main",
    "read_report",
    "refusal_json",
    "render_markdown",
    "render_refusal",
    "run_interleaved",
    "to_json",
]
