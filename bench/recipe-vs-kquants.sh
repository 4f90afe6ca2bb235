#!/usr/bin/env bash
# organ recipe against llama.cpp's own mixes (issue goal; docs/recipe.md): on SmolLM2's F16
# requant, for each preset (Q4_K_M, Q3_K_M) llama-quantize writes the preset, with and
# without an importance matrix; organ recipe then chooses a type per tensor within that
# file's size, from the importance matrix (--imatrix, also given to llama-quantize) and
# from the weights alone (--data-free). Every output's KL divergence from the F16 is
# measured by llama-perplexity on tests/data/texts/heldout.txt, a text used neither for
# the importance matrix (calibration.txt) nor for the sensitivity runs (sensitivity.txt,
# repeat.txt). Prints each file's size and KLD, and the recipe's KLD over the preset's.
# Goals: <= 0.80x the preset's KLD with an importance matrix, <= 0.90x data-free.
# The F16 is SmolLM2's Q4_1 dequantized, so Q4_1 reproduces it almost exactly: a recipe
# free to choose Q4_1 wins by that alone. Each recipe is therefore made with --types
# leaving Q4_1 out ("no Q4_1"), the figure that says what the choice is worth on a model
# that was not quantized before; the imatrix recipe leaves Q5_1 out too, since Q5_1
# quantized under an importance matrix finds the Q4_1 grid (half its step) and gives the
# F16 back as well (the plain Q5_1 quantizer does not). Its 576-wide rows take no K-quant
# (only ffn_down's 1536).
# Usage: bench/recipe-vs-kquants.sh [MODEL.gguf] [CTX=512]   (57 minutes on 2 cores shared with other builds)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
CTX="${2:-512}"
source scripts/lib.sh
bench_setup recipe-vs-kquants
LLAMA="$(scripts/build-llama.sh)"
F16="$WORK/smollm2-f16.gguf"
IM="$WORK/calibration.imatrix.gguf"
HELDOUT=tests/data/texts/heldout.txt
"$LLAMA/llama-quantize" --allow-requantize "$MODEL" "$F16" F16 >/dev/null 2>&1
"$LLAMA/llama-imatrix" -m "$F16" -f tests/data/texts/calibration.txt -o "$IM" -c 128 --no-ppl >/dev/null 2>&1
kld() { # MODEL -> its mean KLD from the F16 on the held-out text
  "$ORGAN" eval "$1" --base "$F16" --text "$HELDOUT" --ctx "$CTX" --llama-cpp "$LLAMA" --json "$1.eval.json" >/dev/null
  python3 -c 'import json,sys; k=json.load(open(sys.argv[1]))["kl_divergence"]["mean"]; print(k["value"], k["error"])' "$1.eval.json"
}
size() { stat -c %s "$1"; }
row() { # LABEL MODEL [PRESET_KLD]
  read -r k e < <(kld "$2")
  if [ -n "${3:-}" ]; then
    printf '  %-40s %11d bytes  KLD %.5f ± %.5f  %.3fx the preset\n' "$1" "$(size "$2")" "$k" "$e" "$(python3 -c "print($k/$3)")"
  else
    printf '  %-40s %11d bytes  KLD %.5f ± %.5f\n' "$1" "$(size "$2")" "$k" "$e"
  fi
  LAST=$k
}
NO_Q4_1=Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,Q4_0,Q5_0,Q5_1,IQ4_NL,Q8_0
NO_Q4_1_Q5_1=Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,Q4_0,Q5_0,IQ4_NL,Q8_0
for preset in Q4_K_M Q3_K_M; do
  echo "$preset (SmolLM2 F16; KLD on $(basename $HELDOUT), ctx $CTX):"
  "$LLAMA/llama-quantize" "$F16" "$WORK/$preset.gguf" "$preset" >/dev/null 2>&1
  "$LLAMA/llama-quantize" --imatrix "$IM" "$F16" "$WORK/$preset-im.gguf" "$preset" >/dev/null 2>&1
  row "llama-quantize $preset" "$WORK/$preset.gguf"; plain=$LAST
  row "llama-quantize $preset --imatrix" "$WORK/$preset-im.gguf"; with_im=$LAST
  "$ORGAN" recipe "$F16" --target-size "$(size "$WORK/$preset.gguf")" --data-free --types "$NO_Q4_1" \
    --apply "$WORK/$preset-df.gguf" --llama-cpp "$LLAMA" >/dev/null
  row "organ recipe --data-free (no Q4_1)" "$WORK/$preset-df.gguf" "$plain"
  "$ORGAN" recipe "$F16" --target-size "$(size "$WORK/$preset-im.gguf")" --imatrix "$IM" --types "$NO_Q4_1_Q5_1" \
    --apply "$WORK/$preset-im-recipe.gguf" --llama-cpp "$LLAMA" >/dev/null
  row "organ recipe --imatrix (no Q4_1, Q5_1)" "$WORK/$preset-im-recipe.gguf" "$with_im"
done
