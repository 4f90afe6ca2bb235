#!/usr/bin/env bash
# organ recipe against llama.cpp's own mixes (issue 49, point 6; docs/recipe.md): on
# SmolLM2's F16 requant, for each preset of PRESETS (default Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K)
# llama-quantize writes the preset, with and without an importance matrix; organ recipe
# then chooses a type per tensor within that file's size from four inputs, each one more
# pass of compute:
#   - data-free: the weights alone (--data-free), against the preset;
#   - imatrix: an importance matrix of tests/data/texts/calibration.txt (--imatrix, also
#     given to llama-quantize), against the preset made with it; imatrix-q5_1 (not in
#     the default INPUTS) the same with Q5_1 allowed, as the preset allows it;
#   - measured at one type: one sensitivity sweep at ONE_TYPE (default Q4_0) anchoring the
#     data-free prediction (--from SWEEP --data-free: each tensor's predicted curve scaled
#     by its measured over predicted KLD there), against the preset;
#   - measured at every type: a sweep at each candidate type (--from each), against the
#     preset.
# The sweeps (organ sensitivity --to TYPE, tests/data/texts/sensitivity.txt, ctx 128, its
# default chunks, plain llama-quantize donors) are kept in SWEEPS (default: the temp
# directory) and reused when there; a sweep at a K-quant measures ffn_down only (the other
# rows, 576 wide, take none). Every output's KL divergence from the F16 is measured by
# llama-perplexity on tests/data/texts/heldout.txt, used for none of the inputs, the F16's
# logits computed once (organ's logits cache). Prints each file's size and KLD, and each
# recipe's KLD over its preset's.
# Goals: imatrix <= 0.80x at every size and <= 0.70x at Q4_K_M's; data-free <= 0.90x.
# SmolLM2's F16 is its Q4_1 dequantized, so Q4_1 reproduces it almost exactly: every recipe
# leaves Q4_1 out ("no Q4_1"), and the imatrix recipe Q5_1 too, since Q5_1 quantized under
# an importance matrix finds the Q4_1 grid (half its step) and gives the F16 back as well
# (the plain Q5_1 quantizer does not). Its 576-wide rows take no K-quant (only ffn_down's
# 1536 do).
# Usage: bench/recipe-vs-kquants.sh [MODEL.gguf] [CTX=512]
#   env PRESETS="Q4_K_M Q3_K_M", INPUTS="data-free imatrix imatrix-q5_1 one every",
#   ONE_TYPE=Q4_0, SWEEPS=DIR
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
CTX="${2:-512}"
PRESETS="${PRESETS:-Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K}"
INPUTS="${INPUTS:-data-free imatrix one every}"
ONE_TYPE="${ONE_TYPE:-Q4_0}"
source scripts/lib.sh
bench_setup recipe-vs-kquants
SWEEPS="${SWEEPS:-$WORK/sweeps}"
mkdir -p "$SWEEPS"
LLAMA="$(scripts/build-llama.sh)"
F16="$WORK/smollm2-f16.gguf"
IM="$WORK/calibration.imatrix.gguf"
HELDOUT=tests/data/texts/heldout.txt
NO_Q4_1=Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,Q4_0,Q5_0,Q5_1,IQ4_NL,Q8_0
NO_Q4_1_Q5_1=Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,Q4_0,Q5_0,IQ4_NL,Q8_0
"$LLAMA/llama-quantize" --allow-requantize "$MODEL" "$F16" F16 >/dev/null 2>&1
"$LLAMA/llama-imatrix" -m "$F16" -f tests/data/texts/calibration.txt -o "$IM" -c 128 --no-ppl >/dev/null 2>&1
sweep() { # TYPE -> the path of its sensitivity report, measured unless kept
  local out="$SWEEPS/sweep-$1.json"
  if [ ! -f "$out" ]; then
    local s; s=$(date +%s)
    "$ORGAN" sensitivity "$F16" --to "$1" --text tests/data/texts/sensitivity.txt --ctx 128 \
      --llama-cpp "$LLAMA" --cache "$WORK/sens-cache" --json "$out.partial" >/dev/null
    mv "$out.partial" "$out"
    echo "  (sweep at $1: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["tensors"]))' "$out") tensors, $(($(date +%s) - s)) s)" >&2
  fi
  echo "$out"
}
kld() { # MODEL -> its mean KLD from the F16 on the held-out text
  ORGAN_CACHE="$WORK/cache" "$ORGAN" eval "$1" --base "$F16" --text "$HELDOUT" --ctx "$CTX" --llama-cpp "$LLAMA" \
    --logits-cache-max 4G --json "$1.eval.json" >/dev/null
  python3 -c 'import json,sys; k=json.load(open(sys.argv[1]))["kl_divergence"]["mean"]; print(k["value"], k["error"])' "$1.eval.json"
}
size() { stat -c %s "$1"; }
TABLE="$WORK/table.tsv"
row() { # PRESET LABEL MODEL [PRESET_KLD]
  local k e ratio=""
  read -r k e < <(kld "$3")
  if [ -n "${4:-}" ]; then
    ratio=$(python3 -c "print(f'{$k/$4:.3f}')")
    printf '  %-44s %11d bytes  KLD %.5f ± %.5f  %sx the preset\n' "$2" "$(size "$3")" "$k" "$e" "$ratio"
  else
    printf '  %-44s %11d bytes  KLD %.5f ± %.5f\n' "$2" "$(size "$3")" "$k" "$e"
  fi
  printf '%s\t%s\t%s\n' "$1" "$2" "$ratio" >>"$TABLE"
  LAST=$k
}
recipe() { # OUT TARGET_SIZE ARGS...: organ recipe within the size, applied
  local out=$1 target=$2; shift 2
  "$ORGAN" recipe "$F16" --target-size "$target" "$@" --apply "$out" --llama-cpp "$LLAMA" >/dev/null
}
has() { [[ " $INPUTS " == *" $1 "* ]]; }
one=()
every=()
if has one; then one=(--from "$(sweep "$ONE_TYPE")"); fi
if has every; then
  for t in ${NO_Q4_1//,/ }; do every+=(--from "$(sweep "$t")"); done
fi
for preset in $PRESETS; do
  echo "$preset (SmolLM2 F16, a dequantized Q4_1; KLD on $(basename $HELDOUT), ctx $CTX):"
  "$LLAMA/llama-quantize" "$F16" "$WORK/$preset.gguf" "$preset" >/dev/null 2>&1
  row "$preset" "llama-quantize $preset" "$WORK/$preset.gguf"
  plain=$LAST
  target=$(size "$WORK/$preset.gguf")
  if has imatrix || has imatrix-q5_1; then
    "$LLAMA/llama-quantize" --imatrix "$IM" "$F16" "$WORK/$preset-im.gguf" "$preset" >/dev/null 2>&1
    row "$preset" "llama-quantize $preset --imatrix" "$WORK/$preset-im.gguf"
    with_im=$LAST
  fi
  if has data-free; then
    recipe "$WORK/$preset-df.gguf" "$target" --data-free --types "$NO_Q4_1"
    row "$preset" "organ recipe --data-free" "$WORK/$preset-df.gguf" "$plain"
  fi
  if has imatrix; then
    recipe "$WORK/$preset-imr.gguf" "$(size "$WORK/$preset-im.gguf")" --imatrix "$IM" --types "$NO_Q4_1_Q5_1"
    row "$preset" "organ recipe --imatrix (no Q5_1)" "$WORK/$preset-imr.gguf" "$with_im"
  fi
  if has imatrix-q5_1; then
    recipe "$WORK/$preset-imr51.gguf" "$(size "$WORK/$preset-im.gguf")" --imatrix "$IM" --types "$NO_Q4_1"
    row "$preset" "organ recipe --imatrix (with Q5_1)" "$WORK/$preset-imr51.gguf" "$with_im"
  fi
  if has one; then
    recipe "$WORK/$preset-one.gguf" "$target" "${one[@]}" --data-free --types "$NO_Q4_1"
    row "$preset" "organ recipe measured at $ONE_TYPE" "$WORK/$preset-one.gguf" "$plain"
  fi
  if has every; then
    recipe "$WORK/$preset-every.gguf" "$target" "${every[@]}"
    row "$preset" "organ recipe measured at every type" "$WORK/$preset-every.gguf" "$plain"
  fi
done
echo
echo "recipe's KLD over the preset's (rows: the input; columns: the preset's size):"
python3 - "$TABLE" "$PRESETS" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
presets = sys.argv[2].split()
labels = [l for l in dict.fromkeys(r[1] for r in rows if r[2])]
cell = {(r[0], r[1]): r[2] for r in rows}
print("| input | " + " | ".join(presets) + " |")
print("|---" * (len(presets) + 1) + "|")
for label in labels:
    print(f"| {label.replace('organ recipe ', '')} | " + " | ".join(cell.get((p, label), "") + ("×" if cell.get((p, label)) else "") for p in presets) + " |")
EOF
