#!/usr/bin/env bash
# Q4_K / Q5_K / Q6_K quantization vectors from ggml's own C reference quantizers
# (quantize_row_q*_K_ref in the llama.cpp that scripts/build-llama.sh builds): gguf-py
# has no quantizer for them. The inputs (TYPE.in) come from scripts/gen-quantize-vectors.py.
#   scripts/gen-kquant-vectors.sh          write core/tests/data/quantize/TYPE.out
#   scripts/gen-kquant-vectors.sh --check  ggml's output must equal the checked-in .out
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
DATA=core/tests/data/quantize
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ggml_harness tests/oracle/ggml_kquant.c "$work/ggml_kquant"
for ty in Q4_K Q5_K Q6_K; do
  "$work/ggml_kquant" "$ty" "$DATA/$ty.in" "$work/$ty.out"
  keep_or_check "${1:-}" "$work/$ty.out" "$DATA/$ty.out" "$ty: ggml's reference quantizer gives the checked-in vectors ($(($(stat -c %s "$DATA/$ty.in") / 1024)) blocks)"
done
