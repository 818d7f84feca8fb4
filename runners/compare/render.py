"""The comparison as JSON and as the check run's markdown summary (cut to fit GitHub's limit)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from bot.core.limits import GITHUB_TEXT_MAX_CHARS
from bot.core.markdown import plain
from bot.core.render import plural
from runners.compare.model import ContextRefused, Metric, Verdict, pct
from runners.compare.sides import Side
from runners.compare.verdicts import CellVerdict, Comparison, Measurement

SUMMARY_LIMIT = GITHUB_TEXT_MAX_CHARS - 1  # a check run's summary, in bytes: under GitHub's limit


# --- JSON -------------------------------------------------------------------------------------------------


def to_json(comparison: Comparison) -> dict[str, object]:
    return {
        "verdicts": [_cell_json(cell) for cell in comparison.cells],
        "added": list(comparison.added),
        "removed": list(comparison.removed),
        "baseline": _side_json(comparison.baseline),
        "candidate": _side_json(comparison.candidate),
        "under_test": {k: [str(a), str(b)] for k, (a, b) in comparison.under_test.items()},
        "context_warning": {k: [str(a), str(b)] for k, (a, b) in comparison.forced_differences.items()},
    }


def _cell_json(cell: CellVerdict) -> dict[str, object]:
    m = cell.measurement
    return {
        "benchmark": cell.benchmark,
        "verdict": str(cell.verdict),
        "ratio": m.ratio if m else None,
        "interval": [m.interval.lo, m.interval.hi] if m and m.interval else None,
        "threshold": m.threshold if m else None,
        "metric": str(cell.metric),
        "kernel": cell.kernel,
        "critical": cell.critical,
        "low_confidence": bool(m and m.low_confidence),
        "n": list(m.n) if m else None,
        "baseline_ms": m.baseline_ms if m else None,
        "candidate_ms": m.candidate_ms if m else None,
        "noise": m.noise if m else None,
        "p_value": m.p_value if m else None,
        "q_value": cell.q_value,
        "more_samples": cell.decision.more_samples,
        "reason": cell.decision.reason,
    }


def _side_json(side: Side) -> dict[str, object]:
    return {"context_hash": side.environment.context_hash, "head_sha": side.head_sha, "runs": side.runs}


def refusal_json(refusal: ContextRefused) -> dict[str, object]:
    differences = {k: [str(a), str(b)] for k, (a, b) in refusal.differences.items()}
    return {"refused": {"where": refusal.where, "differences": differences}, "verdicts": []}


# --- markdown ---------------------------------------------------------------------------------------------

_MARK = {
    Verdict.REGRESSED: "🔴 regressed",
    Verdict.IMPROVED: "🟢 improved",
    Verdict.SAME: "⚪ same",
    Verdict.INCONCLUSIVE: "🟡 inconclusive",
    Verdict.NOT_COMPARABLE: "not comparable",
}
_KEY_HEADER = (
    "| benchmark | metric | baseline | candidate | change [interval] | threshold | verdict |\n"
    "|---|---|---:|---:|---|---:|---|"
)
_NOISY_HEADER = (
    "| benchmark | metric | change [interval] | threshold | noise | samples | why | more samples |\n"
    "|---|---|---|---:|---:|---:|---|---:|"
)
_SAME_HEADER = (
    "| benchmark | metric | baseline | candidate | change [interval] | threshold |\n"
    "|---|---|---:|---:|---|---:|"
)


def render_markdown(comparison: Comparison) -> str:
    """The check-run summary, shortened (tables first) to fit GitHub's limit."""
    for max_rows in (None, 400, 200, 100, 50, 20, 10, 5, 0):
        text = _markdown(comparison, max_rows=max_rows)
        if len(text.encode()) <= SUMMARY_LIMIT:
            return text
    note = "\n\n… summary cut at GitHub's size limit; run with `--json` for everything.\n"
    return text.encode()[: SUMMARY_LIMIT - len(note.encode())].decode(errors="ignore") + note


def _markdown(comparison: Comparison, *, max_rows: int | None) -> str:
    cells = comparison.cells
    key = sorted(
        (c for c in cells if c.verdict in (Verdict.REGRESSED, Verdict.IMPROVED) or _critical_median(c)),
        key=_key_order,
    )
    noisy = [c for c in cells if c.verdict is Verdict.INCONCLUSIVE and c not in key]
    same = [c for c in cells if c.verdict is Verdict.SAME and c not in key]
    unjudged = [c for c in cells if c.verdict is Verdict.NOT_COMPARABLE]
    parts = [_header(comparison)]
    if comparison.forced_differences:
        parts.append(_context_banner(comparison.forced_differences))
    parts.append(_table("Key kernels", _KEY_HEADER, [_key_row(c) for c in key], max_rows, "no changes"))
    if noisy:
        parts.append(_table("Noisy / inconclusive", _NOISY_HEADER, [_noisy_row(c) for c in noisy], max_rows))
    if unjudged:
        lines = [f"- {_code(c.benchmark)}: {_text(c.decision.reason)}" for c in unjudged]
        parts.append(_section("Not comparable", lines, max_rows))
    if comparison.added or comparison.removed:
        lines = [f"- added: {_code(k)}" for k in comparison.added]
        lines += [f"- removed: {_code(k)}" for k in comparison.removed]
        parts.append(_section("Added / removed", lines, max_rows))
    if same:
        table = _table("", _SAME_HEADER, [_same_row(c) for c in same], max_rows)
        parts.append(f"<details><summary>{len(same)} unchanged</summary>\n\n{table}\n\n</details>")
    return "\n\n".join(parts) + "\n"


def _critical_median(cell: CellVerdict) -> bool:
    return cell.critical and cell.metric is Metric.MEDIAN and cell.verdict is not Verdict.NOT_COMPARABLE


def _key_order(cell: CellVerdict) -> tuple[int, int]:
    """Critical kernels first, then regressions, then improvements; the sort keeps report order."""
    return (0 if cell.critical else 1, {Verdict.REGRESSED: 0, Verdict.IMPROVED: 1}.get(cell.verdict, 2))


def _header(c: Comparison) -> str:
    counts = " · ".join(f"{c.count(v)} {v.value.replace('_', ' ')}" for v in Verdict)
    failing = sorted({cell.kernel for cell in c.failing})
    verdict = (
        f"❌ critical kernels regressed: {', '.join(failing)}" if failing else "✅ no critical regression"
    )
    benchmarks = len({cell.benchmark for cell in c.cells})
    cfg, env = c.config, c.candidate.environment
    versions = "".join(f", {name} {a} → {b}" for name, (a, b) in c.under_test.items())
    return (
        f"## Benchmarks: {verdict}\n\n"
        f"{plural(benchmarks, 'benchmark')} in {plural(len(c.cells), 'cell')}: {counts}.\n\n"
        f"Baseline {_side_words(c.baseline)} → candidate {_side_words(c.candidate)} "
        f"on {env.gpu_model or env.cpu}{versions}. A change counts when it passes the kernel's threshold, "
        f"max(floor {pct(cfg.floor)}, {cfg.k:g} × noise), its {pct(cfg.confidence, 0)} bootstrap "
        f"interval excludes no change, and the rank test holds at a false discovery rate of "
        f"{pct(cfg.fdr, 0)}."
    )


def _side_words(side: Side) -> str:
    sha = f"`{side.head_sha[:10]}` " if side.head_sha else ""
    runs = f", {side.runs} runs" if side.runs > 1 else ""
    return f"{sha}(context `{side.environment.context_hash[:12]}`{runs})"


def _context_banner(differences: Mapping[str, tuple[object, object]]) -> str:
    fields = ", ".join(f"{k} ({a} → {b})" for k, (a, b) in differences.items())
    return (
        f"> [!WARNING]\n> Compared with `--force-context` although the environments differ: {fields}. "
        "The verdicts may reflect the environment rather than the change."
    )


def _table(title: str, header: str, rows: list[str], max_rows: int | None, empty: str = "") -> str:
    heading = f"### {title}\n\n" if title else ""
    if not rows:
        return f"{heading}{empty}".rstrip()
    shown = rows if max_rows is None else rows[:max_rows]
    more = f"\n\n… and {len(rows) - len(shown)} more (see `--json`)" if len(shown) < len(rows) else ""
    return heading + "\n".join([header, *shown]) + more


def _section(title: str, lines: list[str], max_rows: int | None) -> str:
    shown = lines if max_rows is None else lines[:max_rows]
    more = [f"- … and {len(lines) - len(shown)} more (see `--json`)"] if len(shown) < len(lines) else []
    return f"### {title}\n\n" + "\n".join(shown + more)


def _key_row(cell: CellVerdict) -> str:
    m = cell.measurement
    assert m is not None  # key rows are judged cells
    tags = ["critical"] if cell.critical else []
    tags += ["low confidence"] if m.low_confidence and cell.verdict is not Verdict.INCONCLUSIVE else []
    verdict = _MARK[cell.verdict] + (f" ({', '.join(tags)})" if tags else "")
    return (
        f"| {_code(cell.benchmark)} | {cell.metric} | {_ms(m.baseline_ms)} | {_ms(m.candidate_ms)} "
        f"| {_change(m)} | ±{pct(m.threshold)} | {verdict} |"
    )


def _noisy_row(cell: CellVerdict) -> str:
    m = cell.measurement
    assert m is not None
    noise = "–" if m.noise is None else pct(m.noise)
    more = "?" if cell.decision.more_samples is None else f"~{cell.decision.more_samples}"
    return (
        f"| {_code(cell.benchmark)} | {cell.metric} | {_change(m)} | ±{pct(m.threshold)} | {noise} "
        f"| {m.n[0]} / {m.n[1]} | {_text(cell.decision.reason)} | {more} |"
    )


def _same_row(cell: CellVerdict) -> str:
    m = cell.measurement
    assert m is not None
    return (
        f"| {_code(cell.benchmark)} | {cell.metric} | {_ms(m.baseline_ms)} | {_ms(m.candidate_ms)} "
        f"| {_change(m)} | ±{pct(m.threshold)} |"
    )


def _change(m: Measurement) -> str:
    change = f"{(m.ratio - 1) * 100:+.1f} %"
    if m.interval is None:
        return change
    return f"{change} [{(m.interval.lo - 1) * 100:+.1f}, {(m.interval.hi - 1) * 100:+.1f}]"


def _ms(value: float) -> str:
    """Four significant digits or so, in the unit that suits: 12.34 µs, 2.101 ms, 812.0 ms, 1.03 s."""
    if value < 1:
        return f"{value * 1000:.1f} µs"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.{3 - min(2, int(math.log10(value)))}f} ms"


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _text(text: str) -> str:
    """Text a tier report carries (a benchmark's note, an environment value) inert, and in one table cell."""
    return plain(text).replace("|", "\\|")


def render_refusal(refusal: ContextRefused) -> str:
    rows = "\n".join(
        f"| {_text(name)} | {_text(str(a))} | {_text(str(b))} |"
        for name, (a, b) in refusal.differences.items()
    )
    return (
        "## Benchmark comparison refused: the environments differ\n\n"
        f"The timings of {refusal.where} come from different contexts, so no verdict is given.\n\n"
        f"| field | {refusal.labels[0]} | {refusal.labels[1]} |\n|---|---|---|\n{rows}\n\n"
        "Run both on the same machine and software stack (`--ab` runs them interleaved), or pass "
        "`--force-context` to compare anyway under a warning.\n"
    )
