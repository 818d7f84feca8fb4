#!/usr/bin/env bash
# Runs the three tiers' built-in suites on a GPU machine and prints a summary; not run in CI.
#
#   runners/device_check.sh            # reports in $OUT (default: ./device-check)
#
# Installs nothing unless Triton or torch is missing, then only `pip install -e .[runners]`.
# Exit code: 0 when every tier passed on a GPU, 1 otherwise.
set -uo pipefail

cd "$(dirname "$0")/.."
OUT="${OUT:-device-check}"
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
mkdir -p "$OUT"

if ! "$PYTHON" -c 'import triton, torch' 2>/dev/null; then
    "$PYTHON" -m pip install --quiet -e '.[runners]' || exit 1
fi
unset TRITON_INTERPRET  # the runner decides: the GPU when torch sees one

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
"$PYTHON" -c 'import torch; print("torch sees", torch.cuda.device_count(), "GPU(s); CUDA", torch.version.cuda)'

status=0
for tier in l1 l2 l3; do
    start=$(date +%s)
    "$PYTHON" -m runners run --tier "$tier" --out "$OUT/$tier.json" >"$OUT/$tier.log" 2>&1
    code=$?
    echo "tier $tier: exit $code in $(( $(date +%s) - start )) s (log: $OUT/$tier.log)"
    [ "$code" -eq 0 ] || status=1
done

"$PYTHON" - "$OUT" <<'EOF' || status=1
import sys
from pathlib import Path

from runners.report import Report

failed = False
for tier in ("l1", "l2", "l3"):
    path = Path(sys.argv[1]) / f"{tier}.json"
    if not path.exists():
        print(f"{tier}: no report")
        failed = True
        continue
    report = Report.read(path)
    env = report.environment
    if tier == "l1":
        print(f"environment: {env.gpu_model} x{env.gpu_count}, driver {env.driver}, CUDA {env.cuda}, "
              f"clocks {env.clocks}, triton {env.triton}, torch {env.torch}, interpreter {env.interpreter}")
    failed |= env.interpreter  # a GPU machine must not fall back to the interpreter
    for suite in report.suites:
        print(f"{tier} {suite.name}: {suite.outcome.value}, {suite.executed} tests in {suite.duration_s:.1f} s")
        failed |= suite.outcome.value != "passed"
        for line in (*suite.problems, *suite.notes):
            print(f"    {line}")
    for t in report.tests:
        if t.outcome.value in ("failed", "error"):
            print(f"    {t.outcome.value}: {t.message}")
    for b in report.benchmarks:
        facts = b.facts.model_dump() if b.facts else None
        print(f"  {b.key}: median {b.median_ms:.4f} ms (p10 {b.p10_ms:.4f}, p90 {b.p90_ms:.4f}, "
              f"n={b.measured_iters}, warmup {b.warmup_iters}), err {b.correctness_error}, "
              f"compile {b.compile_cold_ms} / {b.compile_warm_ms} ms, facts {facts}, comparable {b.comparable}"
              + (f", note: {b.note}" if b.note else ""))
sys.exit(1 if failed else 0)
EOF
exit $status
