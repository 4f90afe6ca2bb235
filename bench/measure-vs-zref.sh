#!/usr/bin/env bash
# Wall time of `organ measure` against the reference `zref.py` (NumPy + gguf-py) on the
# same model in the same run; prints both and the ratio. Target: >= 20x on 2 cores.
# Usage: bench/measure-vs-zref.sh [MODEL.gguf] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-5}"
PY="$(scripts/setup-oracle.sh)"
source scripts/lib.sh
bench_organ
ZREF=tests/oracle/zref.py
# Best of RUNS for each (page cache warm for both: one untimed run each first).
"$ORGAN" measure "$MODEL" --summary-only >/dev/null
"$PY" "$ZREF" "$MODEL" >/dev/null
# Both timed the same way, in one Python process (perf_counter around subprocess.run), so
# neither pays for the shell forks around it.
python3 - "$ORGAN" "$PY" "$ZREF" "$MODEL" "$RUNS" "$(nproc)" <<'PY'
import os, subprocess, sys, time
organ, py, zref, model, runs, cores = sys.argv[1:7]
def best(cmd):
    b = float("inf")
    for _ in range(int(runs)):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        b = min(b, time.perf_counter() - t)
    return b
o = best([organ, "measure", model, "--summary-only"])
z = best([py, zref, model])
print(f"model            {os.path.basename(model)}")
print(f"cores            {cores}")
print(f"organ measure    {o:.3f} s (best of {runs})")
print(f"zref.py (numpy)  {z:.3f} s (best of {runs})")
print(f"ratio            {z / o:.1f}x faster (target >= 20x)")
PY
