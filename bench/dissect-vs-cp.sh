#!/usr/bin/env bash
# Throughput of organ dissect and organ assemble against cp on the same model, and of
# dissect against llama.cpp's llama-gguf-split --split --split-max-tensors 1 (the peer that
# also writes one file per tensor; scripts/build-llama.sh builds it), in the same run (best
# of RUNS, page cache warm): prints MB/s for each and the ratios, and the load average.
# Targets: dissect and assemble >= 0.5x cp, dissect >= 1.0x llama-gguf-split.
# Usage: bench/dissect-vs-cp.sh [MODEL.gguf] [RUNS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-5}"
source scripts/lib.sh
split_bin="$(scripts/build-llama.sh)/llama-gguf-split"
bench_setup bench
work=$WORK
cat "$MODEL" > /dev/null
"$ORGAN" dissect "$MODEL" --out "$work/warm.organs" > /dev/null
# Each run writes to a new name, and all outputs are removed at the end of the series:
# ext4 without a journal (this disk) skips every inode freed in the last minute when it
# creates a file, so deleting the 272-file output before each run would make the next
# run's creates scan past them, a cost of the loop and not of what is measured.
n=0
best() { # best seconds over RUNS of: command "$@" writing to $work/out (a fresh name each run)
  local b="" s e
  for _ in $(seq "$RUNS"); do
    n=$((n + 1))
    s=$(date +%s.%N); "${@//@OUT@/$work/out.$n}" > /dev/null 2>&1; e=$(date +%s.%N)
    b=$(python3 -c "t=$e-$s; b='$b'; print(t if not b else min(t, float(b)))")
  done
  rm -rf "$work"/out.*
  echo "$b"
}
t_cp=$(best cp "$MODEL" @OUT@)
t_dissect=$(best "$ORGAN" dissect "$MODEL" --out @OUT@)
t_assemble=$(best "$ORGAN" assemble "$work/warm.organs" --out @OUT@)
# The shards go to OUT-00001-of-0000N.gguf …, in the work directory (removed with out.*).
t_split=$(best "$split_bin" --split --split-max-tensors 1 "$MODEL" @OUT@)
python3 - "$(stat -c %s "$MODEL")" "$t_cp" "$t_dissect" "$t_assemble" "$t_split" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import sys
size = int(sys.argv[1]); cp, d, a, s = (float(x) for x in sys.argv[2:6])
mb = size / 1e6
print(f"file             {mb:.1f} MB, load average {sys.argv[6]}")
print(f"cp               {cp:.3f} s  {mb / cp:7.0f} MB/s")
print(f"gguf-split       {s:.3f} s  {mb / s:7.0f} MB/s  (--split --split-max-tensors 1)")
print(f"organ dissect    {d:.3f} s  {mb / d:7.0f} MB/s  ratio {cp / d:.2f}x cp (target >= 0.5x), {s / d:.2f}x gguf-split (target >= 1.0x)")
print(f"organ assemble   {a:.3f} s  {mb / a:7.0f} MB/s  ratio {cp / a:.2f}x cp (target >= 0.5x)")
PY
