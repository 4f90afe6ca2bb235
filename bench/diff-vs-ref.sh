#!/usr/bin/env bash
# Wall time of `organ diff` on SmolLM2 Q4_1 against its Q8_0 requant (llama-quantize
# --allow-requantize), against `organ measure --no-cache` on the Q4_1 alone and against the
# reference compare_ref.py (NumPy + gguf-py), in the same run. Targets on 2 cores: diff
# within 2.5x of measure, and >= 15x faster than compare_ref.py. Exits 1 when one is missed.
# Usage: bench/diff-vs-ref.sh [MODEL.gguf] [RUNS=5] [REF_RUNS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-5}"
REF_RUNS="${3:-2}"
PY="$(scripts/setup-oracle.sh)"
LLAMA="$(scripts/build-llama.sh)"
source scripts/lib.sh
bench_setup diff-bench
REF=tests/oracle/compare_ref.py
dir=$WORK
"$LLAMA/llama-quantize" --allow-requantize "$MODEL" "$dir/q8_0.gguf" Q8_0 >/dev/null 2>&1
# Page cache warm for all three: one untimed run each first.
"$ORGAN" diff "$MODEL" "$dir/q8_0.gguf" >/dev/null
"$ORGAN" measure "$MODEL" --summary-only --no-cache >/dev/null
"$PY" "$REF" "$MODEL" "$dir/q8_0.gguf" >/dev/null
# All timed the same way, in one Python process (perf_counter around subprocess.run).
# compare_ref.py takes seconds a run and varies little: best of REF_RUNS is enough.
python3 - "$ORGAN" "$PY" "$REF" "$MODEL" "$dir/q8_0.gguf" "$RUNS" "$REF_RUNS" "$(nproc)" <<'PY'
import os, subprocess, sys, time
organ, py, ref, a, b, runs, ref_runs, cores = sys.argv[1:9]
def best(cmd, n):
    t_best = float("inf")
    for _ in range(int(n)):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t_best = min(t_best, time.perf_counter() - t)
    return t_best
d = best([organ, "diff", a, b], runs)
m = best([organ, "measure", a, "--summary-only", "--no-cache"], runs)
r = best([py, ref, a, b], ref_runs)
print(f"models              {os.path.basename(a)} vs its Q8_0 ({os.path.getsize(a) >> 20} + {os.path.getsize(b) >> 20} MiB)")
print(f"cores               {cores}")
print(f"organ diff          {d:.3f} s (best of {runs})")
print(f"organ measure A     {m:.3f} s (best of {runs}, --no-cache)")
print(f"compare_ref.py      {r:.3f} s (best of {ref_runs})")
print(f"diff / measure      {d / m:.2f}x (target <= 2.5x)")
print(f"compare_ref / diff  {r / d:.1f}x faster (target >= 15x)")
sys.exit(0 if d / m <= 2.5 and r / d >= 15 else 1)
PY
