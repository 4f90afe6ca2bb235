#!/usr/bin/env bash
# Throughput of `organ check` (a full scan and BLAKE3 of every tensor byte) against
# `cat MODEL > /dev/null` on a dense, non-zero test-built model of SIZE_MB (>= 1 GB),
# page cache warm, best of RUNS each, in the same run. Target: >= 0.5x cat's throughput.
# The model is built in a temp directory and removed after.
# Usage: bench/check-vs-cat.sh [SIZE_MB=1100] [RUNS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MB="${1:-1100}"
RUNS="${2:-5}"
source scripts/lib.sh
bench_setup bench
PY="$(scripts/setup-oracle.sh)"
work=$WORK
MODEL="$work/dense.gguf"
"$PY" bench/make-dense-model.py "$MODEL" "$SIZE_MB" > /dev/null
cat "$MODEL" > /dev/null
cat "$MODEL" > /dev/null
"$PY" - "$ORGAN" "$MODEL" "$RUNS" <<'PY'
import os, subprocess, sys, time
organ, model, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def best(cmd):
    t_best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t_best = min(t_best, time.perf_counter() - t)
        # check exits 1 for "broken": this model has no tokenizer, which is an error.
        assert r.returncode in (0, 1), f"{cmd}: exit {r.returncode}"
    return t_best
c = best(["sh", "-c", f"cat '{model}' > /dev/null"])
k = best([organ, "check", model])
mb = os.path.getsize(model) / 1e6
print(f"model          {mb:.0f} MB dense (Q8_0 and F16), page cache warm, {os.cpu_count()} cores")
print(f"cat            {c:.3f} s  {mb / c:7.0f} MB/s (best of {runs})")
print(f"organ check    {k:.3f} s  {mb / k:7.0f} MB/s (best of {runs})")
print(f"ratio          {c / k:.2f}x cat's throughput (target >= 0.5x)")
sys.exit(0 if c / k >= 0.5 else 1)
PY
