#!/usr/bin/env bash
# Throughput of `organ moe` of 4 SmolLM2 donors (uniform router: every expert stacked as
# raw blocks, copied in the kernel) against `cp` of a file of the output's size, page
# cache warm, best of RUNS each, in the same run, each run writing a new file (removed after).
# Target: >= 0.5x cp's throughput of the output size; exits 1 below it.
# Usage: bench/moe-vs-cp.sh [MODEL.gguf] [RUNS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-5}"
source scripts/lib.sh
bench_setup bench
work=$WORK
cat "$MODEL" > /dev/null
"$ORGAN" moe --base "$MODEL" --expert "$MODEL" --expert "$MODEL" --expert "$MODEL" --expert "$MODEL" \
  --out "$work/warm.gguf" > /dev/null
# A file of the output's size for cp to copy (the output itself, read once: warm).
cat "$work/warm.gguf" > /dev/null
python3 - "$ORGAN" "$MODEL" "$work" "$RUNS" <<'PY'
import os, subprocess, sys, time
organ, model, work, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
n = 0
def best(make):
    global n
    t_best = float("inf")
    for _ in range(runs):
        n += 1
        out = os.path.join(work, f"out.{n}.gguf")
        t = time.perf_counter()
        subprocess.run(make(out), stdout=subprocess.DEVNULL, check=True)
        t_best = min(t_best, time.perf_counter() - t)
        os.remove(out)
    return t_best
warm = os.path.join(work, "warm.gguf")
c = best(lambda out: ["cp", warm, out])
m = best(lambda out: [organ, "moe", "--base", model] + ["--expert", model] * 4 + ["--out", out])
mb = os.path.getsize(warm) / 1e6
print(f"output         {mb:.0f} MB (4 x SmolLM2's FFN, uniform router), page cache warm, {os.cpu_count()} cores")
print(f"cp             {c:.3f} s  {mb / c:7.0f} MB/s (best of {runs})")
print(f"organ moe      {m:.3f} s  {mb / m:7.0f} MB/s (best of {runs})")
print(f"ratio          {c / m:.2f}x cp's throughput (target >= 0.5x)")
sys.exit(0 if c / m >= 0.5 else 1)
PY
