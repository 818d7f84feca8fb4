"""The two sides of a comparison: each side's benchmarks pooled over its runs, and their contexts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from runners.compare.model import ContextRefused, Metric
from runners.environment import context_fields
from runners.report import MAX_SAMPLES, Benchmark, Environment, Report


@dataclass(frozen=True)
class BenchmarkSamples:
    """Everything measured for one benchmark key on one side, pooled over runs (A/B rounds)."""

    key: str
    kernel: str
    latency_ms: tuple[float, ...]
    compile_cold_ms: tuple[float, ...]
    compile_warm_ms: tuple[float, ...]
    comparable: bool
    note: str | None = None

    @classmethod
    def of(cls, benches: Sequence[Benchmark]) -> BenchmarkSamples:
        """One run's benchmarks of one key, pooled: at most MAX_SAMPLES of each metric, the cap of one
        benchmark, however often the report repeats the key (each copy adds its 10,000 to a bootstrap)."""
        first = benches[0]
        return cls(
            key=first.key,
            kernel=first.kernel,
            latency_ms=_thinned([t for b in benches for t in b.samples_ms]),
            compile_cold_ms=_thinned([b.compile_cold_ms for b in benches if b.compile_cold_ms is not None]),
            compile_warm_ms=_thinned([b.compile_warm_ms for b in benches if b.compile_warm_ms is not None]),
            comparable=all(b.comparable for b in benches),
            note=next((b.note for b in benches if b.note), None),
        )

    def pooled(self, other: BenchmarkSamples) -> BenchmarkSamples:
        return replace(
            self,
            latency_ms=self.latency_ms + other.latency_ms,
            compile_cold_ms=self.compile_cold_ms + other.compile_cold_ms,
            compile_warm_ms=self.compile_warm_ms + other.compile_warm_ms,
            comparable=self.comparable and other.comparable,
            note=self.note or other.note,
        )

    def samples(self, metric: Metric) -> tuple[float, ...]:
        if metric is Metric.COMPILE_COLD:
            return self.compile_cold_ms
        if metric is Metric.COMPILE_WARM:
            return self.compile_warm_ms
        return self.latency_ms


@dataclass(frozen=True)
class Side:
    """One side of a comparison: its environment and its benchmarks by key, from one or more runs."""

    environment: Environment
    head_sha: str | None
    benchmarks: Mapping[str, BenchmarkSamples]
    runs: int = 1

    @classmethod
    def from_reports(cls, reports: Sequence[Report], *, name: str) -> Side:
        """Pool the reports' samples per key; refuses when the runs' contexts differ."""
        first = reports[0]
        benchmarks: dict[str, BenchmarkSamples] = {}
        for index, report in enumerate(reports):
            differences = context_differences(first.environment, report.environment)
            if differences:
                where = f"the {name} runs 1 and {index + 1}"
                raise ContextRefused(differences, where=where, labels=("run 1", f"run {index + 1}"))
            by_key: dict[str, list[Benchmark]] = defaultdict(list)
            for bench in report.benchmarks:  # each timing positive and finite: the report's model says so
                by_key[bench.key].append(bench)
            for key, benches in by_key.items():
                samples = BenchmarkSamples.of(benches)
                known = benchmarks.get(key)
                benchmarks[key] = known.pooled(samples) if known else samples
        return cls(first.environment, first.run.head_sha, benchmarks, runs=len(reports))


def _thinned(samples: Sequence[float]) -> tuple[float, ...]:
    """At most MAX_SAMPLES of the samples, evenly spaced through them: every copy of a key keeps its say."""
    n = len(samples)
    if n <= MAX_SAMPLES:
        return tuple(samples)
    return tuple(samples[i * n // MAX_SAMPLES] for i in range(MAX_SAMPLES))


def context_differences(baseline: Environment, candidate: Environment) -> dict[str, tuple[object, object]]:
    """The environment fields that differ when the context hashes do (empty when they are equal)."""
    if baseline.context_hash == candidate.context_hash:
        return {}
    a, b = _fingerprint(baseline), _fingerprint(candidate)
    names = [*a, *(name for name in b if name not in a)]
    differing = {name: (a.get(name), b.get(name)) for name in names if a.get(name) != b.get(name)}
    return differing or {"context_hash": (baseline.context_hash, candidate.context_hash)}


def _fingerprint(environment: Environment) -> dict[str, object]:
    """The fields the context hash covers (`context_fields`), clocks one by one."""
    fields: dict[str, object] = context_fields(environment.model_dump())
    clocks = fields.pop("clocks")
    assert isinstance(clocks, dict)
    return fields | {f"clocks.{k}": v for k, v in clocks.items()}
