#!/usr/bin/env bash
# Wall time of `organ measure ADAPTER` on a rank-16 adapter over every linear weight of
# SmolLM2 (tests/oracle/make-lora.py: attn_q/k/v/output, ffn_gate/up/down, 210 pairs),
# against `organ measure --no-cache` on SmolLM2 Q4_1 itself, in the same run. Target:
# the adapter's θ within 1.5x of the model's. Exits 1 when it is missed.
# Usage: bench/lora-measure.sh [MODEL.gguf] [RUNS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-5}"
PY="$(scripts/setup-oracle.sh)"
source scripts/lib.sh
bench_setup lora-measure-bench
"$PY" tests/oracle/make-lora.py "$MODEL" "$WORK/r16.gguf" --rank 16 --type f16 --seed 16
# Page cache warm for both: one untimed run each first.
"$ORGAN" measure "$WORK/r16.gguf" --summary-only --no-cache >/dev/null
"$ORGAN" measure "$MODEL" --summary-only --no-cache >/dev/null
python3 - "$ORGAN" "$MODEL" "$WORK/r16.gguf" "$RUNS" "$(nproc)" <<'PY'
import os, subprocess, sys, time
organ, model, adapter, runs, cores = sys.argv[1:6]
def best(cmd, n):
    t_best = float("inf")
    for _ in range(int(n)):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t_best = min(t_best, time.perf_counter() - t)
    return t_best
a = best([organ, "measure", adapter, "--summary-only", "--no-cache"], runs)
m = best([organ, "measure", model, "--summary-only", "--no-cache"], runs)
print(f"adapter             rank 16, every linear weight of {os.path.basename(model)} ({os.path.getsize(adapter) >> 20} MiB)")
print(f"cores               {cores}")
print(f"measure ADAPTER     {a:.3f} s (best of {runs})")
print(f"measure MODEL       {m:.3f} s (best of {runs}, --no-cache)")
print(f"adapter / model     {a / m:.2f}x (target <= 1.5x)")
sys.exit(0 if a / m <= 1.5 else 1)
PY
