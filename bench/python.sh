#!/usr/bin/env bash
# organ's Python module against the CLI and against gguf-py, in one run, on SmolLM2:
#  - organ.measure(model), timed inside Python, against `organ measure --no-cache
#    --summary-only` as a process: target at most 1.1x the CLI's time;
#  - organ.tensor() for every tensor against gguf-py 0.19.0's GGUFReader + dequantize for
#    every tensor (the reader opened once): target at least 5x faster.
# Runs alternate between the two sides of each ratio, best of RUNS each. The module is
# the wheel scripts/build-python.sh builds and installs. Exits non-zero on a missed target.
# Usage: bench/python.sh [MODEL.gguf] [RUNS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-5}"
source scripts/lib.sh
bench_organ
PY=$(scripts/build-python.sh)
# Page cache warm for both: one untimed run first.
"$ORGAN" measure "$MODEL" --no-cache --summary-only >/dev/null
"$PY" - "$ORGAN" "$MODEL" "$RUNS" "$(nproc)" <<'PY'
import os, subprocess, sys, time
import numpy as np
import organ
from gguf import GGUFReader
from gguf.quants import dequantize

cli, model, runs, cores = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t

def best_interleaved(fs, n):
    # a, b, a, b…: a slow spell of the shared machine falls on both sides of the ratio.
    b = [float("inf")] * len(fs)
    for _ in range(n):
        for i, f in enumerate(fs):
            b[i] = min(b[i], timed(f))
    return b

def cli_measure():
    subprocess.run([cli, "measure", model, "--no-cache", "--summary-only"], check=True, stdout=subprocess.DEVNULL)

def every_tensor_organ():
    for name in names:
        organ.tensor(model, name)

def every_tensor_gguf_py():
    for t in GGUFReader(model).tensors:
        dequantize(t.data, t.tensor_type)

names = [t["name"] for t in organ.inspect(model).tensors]
py_measure, cli_time = best_interleaved([lambda: organ.measure(model), cli_measure], runs)
ours, theirs = best_interleaved([every_tensor_organ, every_tensor_gguf_py], runs)
ok_measure, ok_tensor = py_measure / cli_time <= 1.1, theirs / ours >= 5
print(f"model                          {os.path.basename(model)}  ({cores} cores)")
print(f"organ measure (CLI process)    {cli_time:.3f} s (best of {runs})")
print(f"organ.measure (Python)         {py_measure:.3f} s (best of {runs})  {py_measure / cli_time:.2f}x the CLI (target <= 1.1x){'' if ok_measure else '  MISSED'}")
print(f"gguf-py, every tensor          {theirs:.3f} s (best of {runs})")
print(f"organ.tensor, every tensor     {ours:.3f} s (best of {runs})  {theirs / ours:.1f}x faster (target >= 5x){'' if ok_tensor else '  MISSED'}")
sys.exit(0 if ok_measure and ok_tensor else 1)
PY
