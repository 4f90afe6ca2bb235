#!/usr/bin/env bash
# organ recipe on a 7B-shaped model (issue 49, point 6: under 10 minutes on 2 cores, with a
# progress bar; docs/recipe.md, A 7B-shaped model): bench/make-big-base.py's `7b` shape
# (Llama-2-7B's widths, 32 blocks, 6.5 G weights in F16, seeded normal values and norm
# gains: the figures are a shape's, not a trained model's; llama.cpp cannot run it) and a
# synthetic importance matrix for it (bench/make-synthetic-imatrix.py). Times, in the same
# run and on the same file, page cache warm:
#   - organ recipe --target-bpw BPW --data-free, and --imatrix (the prediction: every block
#     weight round-tripped through 11 types, large ones on an even sample of their rows);
#   - llama-quantize writing Q4_K_M from it, the peer: one quantization of the model;
# each as wall and CPU seconds (user + sys) and peak RSS, and each recipe's wall over the
# peer's. The model (13.5 GB) is made in a temp directory unless BIG.gguf is given.
# Usage: bench/recipe-big.sh [BPW=4.5] [BIG.gguf] [THREADS=nproc]
set -euo pipefail
cd "$(dirname "$0")/.."
BPW="${1:-4.5}"
BIG="${2:-}"
THREADS="${3:-$(nproc)}"
source scripts/lib.sh
LLAMA="$(scripts/build-llama.sh)"
bench_setup recipe-big
PY="$(scripts/setup-oracle.sh)"
if [ -z "$BIG" ]; then
  BIG="$WORK/big-7b.gguf"
  "$PY" bench/make-big-base.py "$BIG" 12.6 0 7b
fi
"$PY" bench/make-synthetic-imatrix.py "$BIG" "$WORK/big.imatrix.gguf"
cat "$BIG" > /dev/null
timed() { # LABEL COMMAND...: prints its wall, CPU and peak RSS; sets WALL
  local label=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" "$@" > "$WORK/out.txt" 2> "$WORK/err.txt" \
    || { cat "$WORK/err.txt" >&2; exit 1; }
  read -r WALL user sys rss < "$WORK/time"
  printf '  %-44s wall %7.1f s  CPU %7.1f s  peak RSS %6d MiB\n' "$label" "$WALL" \
    "$(python3 -c "print($user + $sys)")" "$((rss / 1024))"
}
echo "$(basename "$BIG"): $(stat -c %s "$BIG") bytes; $THREADS threads; load average $(cut -d' ' -f1-3 /proc/loadavg)"
timed "llama-quantize Q4_K_M (the peer)" "$LLAMA/llama-quantize" "$BIG" "$WORK/q4_k_m.gguf" Q4_K_M "$THREADS"
peer=$WALL
rm -f "$WORK/q4_k_m.gguf"
for source in data-free imatrix; do
  case $source in
    data-free) args=(--data-free) ;;
    imatrix) args=(--imatrix "$WORK/big.imatrix.gguf") ;;
  esac
  RAYON_NUM_THREADS=$THREADS timed "organ recipe --target-bpw $BPW --$source" \
    "$ORGAN" --progress jsonl recipe "$BIG" --target-bpw "$BPW" "${args[@]}" --json "$WORK/$source.json"
  python3 - "$WORK/$source.json" "$WORK/err.txt" "$WALL" "$peer" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
events = sum(1 for line in open(sys.argv[2]) if '"event"' in line)
wall, peer = float(sys.argv[3]), float(sys.argv[4])
print(f"    {r['bpw']:.4f} bpw; {events} progress events; {wall / peer:.2f}x the peer's wall"
      f"; {'under' if wall < 600 else 'OVER'} 10 minutes")
EOF
done
