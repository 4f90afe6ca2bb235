#!/usr/bin/env bash
# organ lora merge against llama.cpp's llama-export-lora on the same inputs, in the same
# run: SmolLM2 requantized to F16 (llama-quantize --allow-requantize … F16) and a seeded
# rank-16 F16 adapter on every linear weight (tests/oracle/make-lora.py; 210 pairs), both
# writing F16 merged tensors (organ with --type f16), page cache warm, each tool with its
# default threads. Prints min and median seconds of RUNS runs each, the ratio of the
# medians, and the load average. Target: organ >= 1.0x export-lora's speed.
# Usage: bench/lora-merge.sh [MODEL.gguf] [RUNS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-5}"
source scripts/lib.sh
bin="$(scripts/build-llama.sh)"
PY="$(scripts/setup-oracle.sh)"
bench_setup lora-merge
work=$WORK
"$bin/llama-quantize" --allow-requantize "$MODEL" "$work/base.gguf" F16 > /dev/null 2>&1
"$PY" tests/oracle/make-lora.py "$work/base.gguf" "$work/r16.gguf" --rank 16 --type f16 --seed 1
cat "$work/base.gguf" "$work/r16.gguf" > /dev/null
times() { # seconds of each of RUNS runs of: command "$@" writing to $work/out.gguf
  for _ in $(seq "$RUNS"); do
    rm -f "$work/out.gguf"
    s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N)
    python3 -c "print($e - $s)"
  done
  rm -f "$work/out.gguf"
}
t_export=$(times "$bin/llama-export-lora" -m "$work/base.gguf" --lora "$work/r16.gguf" -o "$work/out.gguf")
t_organ=$(times "$ORGAN" lora merge "$work/base.gguf" --lora "$work/r16.gguf" --type f16 --out "$work/out.gguf")
python3 - "$t_export" "$t_organ" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics, sys
export, organ = ([float(x) for x in a.split()] for a in sys.argv[1:3])
for name, t in (("llama-export-lora", export), ("organ lora merge", organ)):
    print(f"{name:<18} min {min(t):.3f} s  median {statistics.median(t):.3f} s  ({len(t)} runs)")
ratio = statistics.median(export) / statistics.median(organ)
print(f"organ is {ratio:.2f}x export-lora's speed (medians; target >= 1.0x), load average {sys.argv[3]}")
PY
