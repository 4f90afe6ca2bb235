#!/usr/bin/env bash
# `organ lora extract --rank 16` of SmolLM2 against NumPy's np.linalg.svd on the same ΔWs,
# in the same run: the base is SmolLM2 requantized to F16, the finetune that base with a
# seeded rank-16 adapter merged on every linear weight of every layer (tests/oracle/
# make-lora.py, lora_apply.py: 210 weights in F32). organ's time is its whole run (read,
# dequantize, SVD, write), best of RUNS; NumPy's is the time inside np.linalg.svd alone
# (U, S, Vᵀ, full_matrices=False, float32: the factors organ makes), the reading and
# subtracting not counted, run once with OpenBLAS on one thread and once on every core,
# the faster counted (on a loaded 2-core machine its threads, which spin at barriers, made
# it 7-20x slower than one thread). Also organ's peak memory (/usr/bin/time -v maximum
# resident set) against the largest tensor's f32 size.
# Target: >= 5x NumPy; exits 1 below it.
# Usage: bench/lora-extract.sh [MODEL.gguf] [RUNS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-3}"
source scripts/lib.sh
PY="$(scripts/setup-oracle.sh)"
LLAMA="$(scripts/build-llama.sh)"
bench_setup lora-extract
work=$WORK
"$LLAMA/llama-quantize" --allow-requantize "$MODEL" "$work/base.gguf" F16 > /dev/null 2>&1
"$PY" tests/oracle/make-lora.py "$work/base.gguf" "$work/r16.gguf" --rank 16 --type f32 --seed 16
"$PY" tests/oracle/lora_apply.py "$work/base.gguf" "$work/r16.gguf" "$work/tuned.gguf"
python3 - "$ORGAN" "$PY" "$work" "$RUNS" <<'PY'
import json, os, re, subprocess, sys, time
organ, py, work, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
base, tuned = os.path.join(work, "base.gguf"), os.path.join(work, "tuned.gguf")
best, rss = float("inf"), 0
for i in range(runs):
    out = os.path.join(work, f"a{i}.gguf")
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-v", organ, "lora", "extract", "--base", base, "--tuned", tuned,
                        "--rank", "16", "--out", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, check=True)
    best = min(best, time.perf_counter() - t)
    rss = max(rss, int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1)))
    os.remove(out)
numpy, threads = float("inf"), None
for n_threads in ("1", str(os.cpu_count())):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=n_threads, OMP_NUM_THREADS=n_threads)
    o = subprocess.run([py, "tests/oracle/lora_svd.py", base, tuned, "16", "--factors"], capture_output=True,
                       text=True, check=True, env=env)
    d = json.loads(o.stdout)
    if d["seconds"] < numpy:
        numpy, threads = d["seconds"], n_threads
n = len(d["tensors"])
ins = json.loads(subprocess.run([organ, "inspect", base, "--json"], capture_output=True, text=True,
                                check=True).stdout)
largest = max(ins["tensors"], key=lambda t: t["n_elements"])
f32 = 4 * largest["n_elements"]
print(f"SmolLM2 F16 vs a rank-16 finetune: {n} ΔWs, rank 16, {os.cpu_count()} cores")
print(f"np.linalg.svd  {numpy:.2f} s (the SVDs alone, OpenBLAS on {threads} thread(s), the faster)")
print(f"organ          {best:.2f} s (the whole run, best of {runs})")
print(f"ratio          {numpy / best:.1f}x NumPy (target >= 5x)")
print(f"peak memory    {rss / 1024:.0f} MiB max RSS; the largest tensor ({largest['name']}) is {f32 / 2**20:.0f} MiB in f32")
sys.exit(0 if numpy / best >= 5 else 1)
PY
