#!/usr/bin/env bash
# organ purify throughput on SmolLM2's organs (FFN tensors, all layers): MB of tensor data
# per second, per method, best of RUNS. Usage: bench/purify.sh [MODEL.gguf] [RUNS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-3}"
source scripts/lib.sh
bench_setup purify
work=$WORK
bytes=$("$ORGAN" inspect "$MODEL" --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(sum(t['bytes'] for t in d['tensors'] if t['group']=='organ'))")
for method in fractal spectral; do
  best=""
  for _ in $(seq "$RUNS"); do
    rm -f "$work/out.gguf"
    s=$(date +%s.%N); "$ORGAN" purify "$MODEL" --method "$method" --type organ --out "$work/out.gguf" > /dev/null; e=$(date +%s.%N)
    best=$(python3 -c "t=$e-$s; b='$best'; print(t if not b else min(t, float(b)))")
  done
  python3 -c "print(f'purify {\"$method\":<9} {$bytes/1e6:.1f} MB of organ tensors in {$best:.3f} s: {$bytes/1e6/$best:.0f} MB/s')"
done
