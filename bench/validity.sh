#!/usr/bin/env bash
# What θ predicts, measured (docs/validity.md): the ground truth by organ sensitivity on
# SmolLM2 (the 77 tensors of the z2 study: layers 0,2,5,8,…,29 × the 7 linear kinds), then
# Spearman's ρ of each weights-only statistic with it:
#  - each tensor alone requantized to Q2_0 (from the Q4_1 model), and
#  - each tensor alone replaced by noise of its own mean and std (in the F16 requant);
#  - each measured twice, on tests/data/texts/sensitivity.txt and repeat.txt: the
#    measurement's own ρ between texts is the ceiling of any predictor.
# Statistics: θ (organ measure), tensor size, and the data-free prediction when organ has
# one (organ sensitivity --predict --data-free). Figures only; long (about 10 minutes on
# 2 cores with warm caches). Usage: bench/validity.sh [MODEL.gguf] [JOBS=nproc] [CHUNKS=9]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
JOBS="${2:-$(nproc)}"
CHUNKS="${3:-9}"
source scripts/lib.sh
bench_setup validity
LLAMA="$(scripts/build-llama.sh)"
TEXT=tests/data/texts/sensitivity.txt
REPEAT=tests/data/texts/repeat.txt
LAYERS=0,2,5,8,11,14,17,20,23,26,29
NAMES=()
for k in attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down; do NAMES+=(--name "blk.*.$k.weight"); done
F16="$WORK/smollm2-f16.gguf"
"$LLAMA/llama-quantize" --allow-requantize "$MODEL" "$F16" F16 >/dev/null 2>&1
sens() { # MODEL OUT CHANGE...
  local m=$1 out=$2; shift 2
  "$ORGAN" sensitivity "$m" --text "$TEXT" --repeat-text "$REPEAT" --ctx 128 --chunks "$CHUNKS" \
    --jobs "$JOBS" --layers "$LAYERS" "${NAMES[@]}" --llama-cpp "$LLAMA" --json "$out" "$@" >/dev/null
}
t0=$SECONDS
sens "$MODEL" "$WORK/q2_0.json" --to q2_0
t1=$SECONDS
sens "$F16" "$WORK/noise.json" --ablate noise
t2=$SECONDS
"$ORGAN" measure "$MODEL" --no-cache --json "$WORK/theta-q4_1.json" >/dev/null
"$ORGAN" measure "$F16" --no-cache --json "$WORK/theta-f16.json" >/dev/null
echo "sensitivity to Q2_0: $((t1 - t0)) s; noise ablation: $((t2 - t1)) s (77 tensors x 2 texts, $JOBS jobs)"
python3 bench/validity.py "$WORK/q2_0.json" "$WORK/theta-q4_1.json" "$WORK/noise.json" "$WORK/theta-f16.json"
