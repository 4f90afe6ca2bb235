#!/usr/bin/env bash
# θ with its error bar (§7 of docs/z-measure.md), what it costs, in one run:
#  - `organ measure --sigma` against a plain `organ measure --no-cache` on SmolLM2
#    (9 samples per tensor instead of 1): target at most 8x, printed; the run fails
#    above 9x, where the draws would share nothing;
#  - `organ measure --exact` (every value) against `zref.py --exact`: target at least 5x
#    faster (zref takes seconds a run: best of ZREF_RUNS, not RUNS);
#  - `organ measure --sigma --stream` on a 100 GiB sparse split model
#    (bench/huge-sparse.sh): peak RSS under 256 MiB (HUGE_GB=0 skips it).
# Exits non-zero when a target is missed (for --sigma: the 9x bound, not the 8x target).
# Usage: bench/sigma.sh [MODEL.gguf] [RUNS=5] [ZREF_RUNS=2] [HUGE_GB=100]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-5}"
ZREF_RUNS="${3:-2}"
HUGE_GB="${4:-100}"
PY="$(scripts/setup-oracle.sh)"
source scripts/lib.sh
bench_organ
ZREF=tests/oracle/zref.py
# Page cache warm for every command: one untimed run first.
"$ORGAN" measure "$MODEL" --no-cache --summary-only >/dev/null
python3 - "$ORGAN" "$PY" "$ZREF" "$MODEL" "$RUNS" "$ZREF_RUNS" "$(nproc)" <<'PY'
import os, subprocess, sys, time
organ, py, zref, model, runs, zruns, cores = sys.argv[1:8]
def run(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t
def best(cmd, n):
    return min(run(cmd) for _ in range(int(n)))
def best_interleaved(cmds, n):
    # Runs alternate (a, b, c, a, b, c, …), so that a slow spell of a shared machine
    # falls on every command of the ratio rather than on whichever ran through it.
    b = [float("inf")] * len(cmds)
    for _ in range(int(n)):
        for i, cmd in enumerate(cmds):
            b[i] = min(b[i], run(cmd))
    return b
measure = [organ, "measure", model, "--no-cache", "--summary-only"]
plain, sigma, exact = best_interleaved([measure, measure + ["--sigma"], measure + ["--exact"]], runs)
ref = best([py, zref, model, "--exact"], zruns)
# The target is 8x. Nine samples' work with nothing shared would be about 9x: above
# that, the run fails (the dequantization shared by the nine picks, or something else,
# was lost). Between the two, the miss is printed and the run goes on: on 2 cores the
# ratio has measured 6.1x to 8.4x from run to run (docs/performance.md).
ok_sigma, ok_exact = sigma / plain <= 8, ref / exact >= 5
shared = sigma / plain <= 9
print(f"model                    {os.path.basename(model)}  ({cores} cores)")
print(f"organ measure            {plain:.3f} s (best of {runs})")
print(f"organ measure --sigma    {sigma:.3f} s (best of {runs})  {sigma / plain:.1f}x plain (target <= 8x){'' if ok_sigma else '  MISSED'}{'' if shared else ', above 9x: nothing shared between the draws'}")
print(f"organ measure --exact    {exact:.3f} s (best of {runs})")
print(f"zref.py --exact          {ref:.3f} s (best of {zruns})  organ {ref / exact:.1f}x faster (target >= 5x){'' if ok_exact else '  MISSED'}")
sys.exit(0 if shared and ok_exact else 1)
PY
if [ "$HUGE_GB" != 0 ]; then
  bench/huge-sparse.sh "$HUGE_GB" --sigma --stream
fi
