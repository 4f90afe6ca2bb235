#!/usr/bin/env bash
# organ quantize against llama-quantize on the same input, same type, same thread count, in
# the same run: SmolLM2 requantized to F16 (llama-quantize --allow-requantize … F16; a
# dequantized Q4_1, rows of 576 so only ffn_down takes K-quants) to each TYPE, page cache
# warm, without and with an importance matrix (llama-imatrix on the F16, 8 chunks of
# tests/data/texts/calibration.txt). Checks the two files are byte-identical, then prints min and median seconds of
# RUNS runs each, the ratio of the medians, organ's peak RSS (/usr/bin/time -v, or
# /proc's VmHWM through python when absent) and the load average.
# Target: organ >= 1.0x llama-quantize's speed everywhere, 1.5x the goal; exits 1 below 1.0x.
# MODEL `big` (or `big:GIB`) is bench/make-big-base.py's synthetic llama-shaped F16 of 1 GiB
# (or GIB): rows of 2048 and 5632, so every K-quant applies; it has no tokenizer, so its
# importance matrix is a synthetic one in llama-imatrix's format (seeded mean squares over
# 4 decades, 512 tokens, with the metadata llama-quantize asks for).
# A mix llama-quantize refuses without a matrix (its low-bit tensors need one: IQ2_XXS,
# IQ1_S, …) must be refused by organ too, and is timed with the matrix only.
# Usage: bench/quantize-vs-llama.sh [MODEL.gguf|big[:GIB]] [RUNS=3] [THREADS=nproc] [TYPES="Q4_K_M IQ4_XS Q8_0"]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-3}"
THREADS="${3:-$(nproc)}"
TYPES="${4:-Q4_K_M IQ4_XS Q8_0}"
source scripts/lib.sh
bin="$(scripts/build-llama.sh)"
bench_setup quantize
work=$WORK
case $MODEL in
  big | big:*)
    py="$(scripts/setup-oracle.sh)" gib=1
    [ "$MODEL" = big ] || gib=${MODEL#big:}
    "$py" bench/make-big-base.py "$work/base.gguf" "$gib"
    "$py" bench/make-synthetic-imatrix.py "$work/base.gguf" "$work/im.gguf"
    ;;
  *)
    "$bin/llama-quantize" --allow-requantize "$MODEL" "$work/base.gguf" F16 > /dev/null 2>&1
    "$bin/llama-imatrix" -m "$work/base.gguf" -f tests/data/texts/calibration.txt -o "$work/im.gguf" -c 128 --chunks 8 \
      -t "$THREADS" --no-ppl > /dev/null 2>&1
    ;;
esac
cat "$work/base.gguf" > /dev/null
times() { # seconds of each of RUNS runs of: command "$@"
  for _ in $(seq "$RUNS"); do
    rm -f "$work/out.gguf"
    s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N)
    python3 -c "print($e - $s)"
  done
}
peak_kib() { # organ's peak resident set, KiB
  python3 - "$@" <<'PY'
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
status=0
for ty in $TYPES; do
  for im in "" "--imatrix $work/im.gguf"; do
    label=$ty${im:+ +imatrix}
    l_rc=0 o_rc=0
    "$bin/llama-quantize" $im "$work/base.gguf" "$work/llama.gguf" "$ty" "$THREADS" > /dev/null 2>&1 || l_rc=$?
    "$ORGAN" quantize $im "$work/base.gguf" "$work/organ.gguf" "$ty" "$THREADS" > /dev/null 2>&1 || o_rc=$?
    if [ -z "$im" ] && [ "$l_rc" != 0 ] && [ "$o_rc" != 0 ]; then
      # A mix whose low-bit tensors need a matrix (IQ2_XXS, IQ1_S, …): timed with one only.
      echo "$label: refused without an importance matrix by both"
      rm -f "$work/llama.gguf" "$work/organ.gguf"
      continue
    fi
    [ "$l_rc$o_rc" = 00 ] || { echo "$label: llama-quantize exited $l_rc, organ $o_rc"; exit 1; }
    cmp -s "$work/llama.gguf" "$work/organ.gguf" || { echo "$label: organ's file differs from llama-quantize's"; exit 1; }
    rm -f "$work/llama.gguf" "$work/organ.gguf"
    # shellcheck disable=SC2086 # $im is words
    t_llama=$(times "$bin/llama-quantize" $im "$work/base.gguf" "$work/out.gguf" "$ty" "$THREADS")
    t_organ=$(times "$ORGAN" quantize $im --force "$work/base.gguf" "$work/out.gguf" "$ty" "$THREADS")
    rss=$(peak_kib "$ORGAN" quantize $im --force "$work/base.gguf" "$work/out.gguf" "$ty" "$THREADS")
    python3 - "$label" "$t_llama" "$t_organ" "$rss" "$THREADS" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY' || status=1
import statistics, sys
ty, rss, threads, load = sys.argv[1], int(sys.argv[4]), sys.argv[5], sys.argv[6]
llama, organ = ([float(x) for x in a.split()] for a in sys.argv[2:4])
for name, t in (("llama-quantize", llama), ("organ quantize", organ)):
    print(f"{ty:<16} {name:<15} min {min(t):.3f} s  median {statistics.median(t):.3f} s  ({len(t)} runs, {threads} threads)")
ratio = statistics.median(llama) / statistics.median(organ)
print(f"{ty:<16} identical bytes; organ is {ratio:.2f}x llama-quantize's speed (medians; target >= 1.0x, goal 1.5x), "
      f"organ's peak RSS {rss / 1024:.0f} MiB, load average {load}")
sys.exit(0 if ratio >= 1.0 else 1)
PY
  done
done
exit $status
