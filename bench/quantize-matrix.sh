#!/usr/bin/env bash
# The whole byte-identity matrix of organ quantize against llama-quantize (CI runs a
# subset, tests/it/quantize.rs): SmolLM2 F16 (a dequantized Q4_1; rows of 576, so the
# K-quant mixes fall back on every tensor but ffn_down) to every type organ quantizes
# plain and with --pure, --leave-output-tensor, a --tensor-type-file and an importance
# matrix (llama-imatrix on the F16, 8 chunks of 128 tokens of tests/data/texts/calibration.txt);
# each pair of files compared with cmp. Types llama-quantize itself
# refuses on these rows (Q1_0) must be refused by both. Then the same matrix over the
# test-built families (tests/oracle/make-family-models.py --f16-256: llama, qwen2, gemma3
# and deepseek2 with 4 experts, every row a multiple of 256 so that every K-quant applies
# and the mixes' per-architecture rules decide), each with an importance matrix of its own
# (2 chunks); llama.cpp generates a token from every file both wrote. Every identical file
# must pass `organ check --derived-from` its input (with the matrix when one was used).
# Prints one line per case and exits 1 if any differs.
# Usage: [QUANT_TYPES='Q4_K_M …'] bench/quantize-matrix.sh [MODEL.gguf] [THREADS=nproc] [smollm2|families|all=all]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
THREADS="${2:-$(nproc)}"
PART="${3:-all}"
source scripts/lib.sh
# Where ggml aborts (a weights-only i-quant on a tensor without weights, as --pure gives the
# embedding), its backtrace forks a debugger that can hang the run: none.
export GGML_NO_BACKTRACE=1
bin="$(scripts/build-llama.sh)"
bench_setup quantize-matrix
work=$WORK
"$bin/llama-quantize" --allow-requantize "$MODEL" "$work/base.gguf" F16 > /dev/null 2>&1
printf 'attn_v=q8_0 blk\\.1[0-9]\\.ffn_down=q6_k\nffn_up=q5_0\n' > "$work/types.txt"
"$bin/llama-imatrix" -m "$work/base.gguf" -f tests/data/texts/calibration.txt -o "$work/im.gguf" -c 128 --chunks 8 \
  -t "$THREADS" --no-ppl > /dev/null 2>&1
TYPES="${QUANT_TYPES:-Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q2_K_S Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS IQ3_XXS IQ3_XS IQ3_S IQ3_M IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ1_S IQ1_M TQ1_0 TQ2_0 Q2_0 Q1_0 MXFP4_MOE F16 BF16 F32}"
same=0 differ=0
# The matrix over model $1 (named $3 in the lines) with importance matrix $2; with $4 set,
# llama.cpp also generates a token from every file organ wrote.
matrix() {
  local base=$1 im=$2 name=$3 run=${4:-}
  for ty in $TYPES; do
    # The mixes that need an importance matrix (all but the one plain case, which both
    # must refuse) take the other flags with it.
    local with=""
    case $ty in IQ1_* | IQ2_* | IQ3_XXS | IQ3_XS | Q2_K_S) with="--imatrix $im " ;; esac
    for flags in "" "$with--pure" "$with--leave-output-tensor" "$with--tensor-type-file $work/types.txt" "--imatrix $im"; do
      # shellcheck disable=SC2086 # flags are words
      if "$bin/llama-quantize" $flags "$base" "$work/llama.gguf" "$ty" "$THREADS" > /dev/null 2>&1; then
        ll=ok
      else
        ll=refused
      fi
      # shellcheck disable=SC2086
      if "$ORGAN" quantize $flags "$base" "$work/organ.gguf" "$ty" "$THREADS" > /dev/null 2>&1; then
        or=ok
      else
        or=refused
      fi
      if [ "$ll/$or" = ok/ok ] && cmp -s "$work/llama.gguf" "$work/organ.gguf"; then
        verdict="identical"; same=$((same + 1))
        derived=(check "$work/organ.gguf" --derived-from "$base")
        [ "${flags%% *}" != --imatrix ] || derived+=(--imatrix "$im")
        if ! "$ORGAN" "${derived[@]}" > /dev/null 2>&1; then
          verdict="identical, but check --derived-from fails"; differ=$((differ + 1))
        elif [ -n "$run" ] && ! "$bin/llama-completion" -m "$work/organ.gguf" -p Hello -n 1 --temp 0 -no-cnv \
          -t "$THREADS" > /dev/null 2>&1; then
          verdict="identical, but llama.cpp cannot run it"; differ=$((differ + 1))
        fi
      elif [ "$ll/$or" = refused/refused ]; then
        verdict="refused by both"; same=$((same + 1))
      else
        verdict="DIFFERS (llama-quantize $ll, organ $or)"; differ=$((differ + 1))
      fi
      printf '%-10s %-7s %-28s %s\n' "$name" "$ty" "${flags//$work\//}" "$verdict"
      rm -f "$work/llama.gguf" "$work/organ.gguf"
    done
  done
}
[ "$PART" = families ] || matrix "$work/base.gguf" "$work/im.gguf" smollm2
[ "$PART" = smollm2 ] || "$(scripts/setup-oracle.sh)" tests/oracle/make-family-models.py "$MODEL" "$work/families" --f16-256 > /dev/null
for arch in llama qwen2 gemma3 deepseek2; do
  [ "$PART" != smollm2 ] || break
  "$bin/llama-imatrix" -m "$work/families/$arch.gguf" -f tests/data/texts/calibration.txt \
    -o "$work/families/$arch.imatrix.gguf" -c 128 --chunks 2 -t "$THREADS" --no-ppl > /dev/null 2>&1
  matrix "$work/families/$arch.gguf" "$work/families/$arch.imatrix.gguf" "$arch" run
done
echo "quantize matrix: $same cases agree, $differ differ"
[ "$differ" = 0 ]
