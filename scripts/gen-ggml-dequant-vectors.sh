#!/usr/bin/env bash
# Q1_0 / Q2_0 dequantization vectors from ggml's own C dequantizers (dequantize_row_q1_0,
# dequantize_row_q2_0 in the llama.cpp that scripts/build-llama.sh builds): gguf-py 0.19.0
# knows neither type. The inputs are 64 blocks of seeded random bytes whose f16 scale
# (bytes 0..2) is a finite random value from subnormal to large, some zeros, both signs.
#   scripts/gen-ggml-dequant-vectors.sh          write core/tests/data/dequant/TYPE.{in,out}
#   scripts/gen-ggml-dequant-vectors.sh --check  ggml's output for the checked-in .in must
#                                                equal the checked-in .out
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
DATA=core/tests/data/dequant
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ggml_harness tests/oracle/ggml_dequant.c "$work/ggml_dequant"
for ty in Q1_0 Q2_0; do
  if [ "${1:-}" != --check ]; then
    python3 - "$ty" "$DATA/$ty.in" <<'PY'
import random, struct, sys
ty, path = sys.argv[1], sys.argv[2]
rng = random.Random("organ-" + ty)
out = bytearray()
for _ in range(64):
    v = 0.0 if rng.random() < 0.03 else rng.gauss(0, 1) * 10 ** rng.uniform(-7, 2)
    out += struct.pack("<e", v) + bytes(rng.randrange(256) for _ in range(16))
open(path, "wb").write(out)
PY
  fi
  "$work/ggml_dequant" "$ty" "$DATA/$ty.in" "$work/$ty.out"
  keep_or_check "${1:-}" "$work/$ty.out" "$DATA/$ty.out" "$ty: ggml's dequantizer gives the checked-in vectors ($(($(stat -c %s "$DATA/$ty.in") / 18)) blocks)"
done
