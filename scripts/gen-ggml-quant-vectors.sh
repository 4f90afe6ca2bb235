#!/usr/bin/env bash
# Quantization vectors from ggml's own C quantizers (tests/oracle/ggml_quant.c, linked
# against the llama.cpp that scripts/build-llama.sh builds), for the types gguf-py cannot
# quantize: the reference quantizers quantize_row_TYPE_ref of Q2_K … Q6_K, Q1_0, Q2_0,
# TQ1_0, TQ2_0, MXFP4 and NVFP4 (what quantize_mxfp4 and _nvfp4 call, with an imatrix or
# without), and quantize_iq4_nl, quantize_iq4_xs, quantize_iq3_xxs, quantize_iq3_s,
# quantize_iq2_s and quantize_iq1_m without an imatrix (what llama-quantize writes).
# Inputs (TYPE.in, little-endian f32): Q4_K, Q5_K, Q6_K's from scripts/gen-quantize-vectors.py;
# the others' made here from a seed per type: blocks of every magnitude, heavy tails, and
# blocks that hit the edge cases (all zero, constant, one huge outlier, negative only,
# subnormal and f16-overflowing scales, rounding ties, zero halves and sub-blocks).
#   scripts/gen-ggml-quant-vectors.sh          write core/tests/data/quantize/TYPE.{in,out}
#   scripts/gen-ggml-quant-vectors.sh --check  ggml's output for the checked-in .in must
#                                              equal the checked-in .out
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
DATA=core/tests/data/quantize
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ggml_harness tests/oracle/ggml_quant.c "$work/ggml_quant"
for spec in Q4_K:256 Q5_K:256 Q6_K:256 Q2_K:256 Q3_K:256 TQ1_0:256 TQ2_0:256 Q1_0:128 Q2_0:64 IQ4_NL:32 IQ4_XS:256 MXFP4:32 NVFP4:64 IQ3_XXS:256 IQ3_S:256 IQ2_S:256 IQ1_M:256; do
  ty=${spec%:*} bs=${spec#*:}
  case $ty in Q4_K | Q5_K | Q6_K) ours=false ;; *) ours=true ;; esac
  if [ "${1:-}" != --check ] && $ours; then
    python3 - "$ty" "$bs" "$DATA/$ty.in" <<'PY'
import random, struct, sys
ty, bs, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random("organ-quant-" + ty)
g = lambda s: rng.gauss(0, 1) * s
blocks = []
def add(f):
    blocks.append([f(j) for j in range(bs)])
for _ in range(max(24, 4096 // bs)):                    # every magnitude (never all zero)
    s = 10 ** rng.uniform(-6, 4)
    add(lambda j: g(s))
for _ in range(4):
    add(lambda j: rng.uniform(-1, 1))
for _ in range(4):                                       # heavy tails
    add(lambda j: g(1) / max(abs(g(1)), 1e-3))
add(lambda j: 0.0)                                       # all zero
c = g(1)
add(lambda j: c)                                         # constant
add(lambda j: 1e4 if j == bs // 3 else g(1e-2))          # one huge outlier
add(lambda j: -1e4 if j == bs - 1 else g(1e-2))          # a negative one, last
add(lambda j: -abs(g(1)))                                # negative only
add(lambda j: abs(g(1)) + 0.5)                           # positive only, away from zero
for s in (1e-40, 1e-39, 1e-30, 1e-9, 1e-6):              # tiny: 1 / amax infinite or not, below f16
    add(lambda j: g(s))
add(lambda j: 0.0 if j % 2 else g(1e-40))               # zeros too: 0 * (1 / amax) is NaN
for s in (7e4, 1e6):                                     # the f16 scale overflows
    add(lambda j: g(s))
add(lambda j: rng.randint(-16, 16) / 2)                  # halves: rounding ties
add(lambda j: rng.randint(-16, 16) / 2 * 3e-3)
add(lambda j: float(rng.randint(-127, 127)))             # integers
add(lambda j: 0.0 if j < bs // 2 else g(1))              # a zero half
add(lambda j: 0.0 if j % 2 else g(1))                    # every other value zero
add(lambda j: g(1e3) if j % 16 == 5 else g(1))           # one large value per 16
add(lambda j: 0.0 if j // 16 % 4 == 1 else g(10 ** (j // 16 % 7 - 3)))  # sub-blocks: zero, every scale
if ty.startswith("IQ3"):                                 # the i-quants' blocks of 32 and groups of 8
    add(lambda j: 0.0 if j // 32 in (1, 4, 5) else g(1))  # whole zero blocks among others
    add(lambda j: g(1e-9) if j // 32 == 2 else g(1))      # a block below IQ3_XXS's 1e-8
    add(lambda j: -abs(g(1)) if j % 8 == 3 else abs(g(1)))  # one negative per 8: odd sign parity
    add(lambda j: 1.0 if j % 32 < 31 else 3.0)            # equal magnitudes: ties in the searches
    for _ in range(4):                                   # sparse: mostly zero
        add(lambda j: g(1) if rng.random() < 0.1 else 0.0)
open(path, "wb").write(b"".join(struct.pack("<%df" % bs, *b) for b in blocks))
PY
  fi
  "$work/ggml_quant" "$ty" "$DATA/$ty.in" "$work/$ty.out"
  keep_or_check "${1:-}" "$work/$ty.out" "$DATA/$ty.out" "$ty: ggml's quantizer gives the checked-in vectors ($(($(stat -c %s "$DATA/$ty.in") / 4 / bs)) blocks)"
done

# With an importance matrix (llama-quantize --imatrix): ggml_quantize_chunk with quant
# weights (which IQ2_XXS, IQ2_XS and IQ1_S need), rows of 512 (sigma² is the row's for the legacy types, the super-block's for
# the others). One input for every type: the blocks above, 256 values each, two to a row;
# the weights one row of them, as one matrix's imatrix entry is: mean squares over
# decades, zeros (a column no token reached), ties, a zero sub-block.
ROW=512
ggml_harness tests/oracle/ggml_quant_weighted.c "$work/ggml_quant_weighted"
if [ "${1:-}" != --check ]; then
  python3 - "$DATA/weighted.in" "$DATA/weighted.qw" <<'PY'
import random, struct, sys
rng = random.Random("organ-quant-weighted")
g = lambda s: rng.gauss(0, 1) * s
rows = []
for s in [10 ** rng.uniform(-4, 2) for _ in range(24)] + [1e-9, 1e-40, 7e4]:
    rows.append([g(s) for _ in range(512)])
rows.append([0.0] * 512)
rows.append([0.0 if j < 256 else g(1) for j in range(512)])
rows.append([g(1e3) if j % 37 == 5 else g(1e-2) for j in range(512)])
rows.append([rng.randint(-16, 16) / 2 for _ in range(512)])
rows.append([-abs(g(1)) for _ in range(512)])
rows.append([abs(g(1)) + 0.5 for _ in range(512)])
rows.append([0.0 if j // 16 % 4 == 1 else g(10 ** (j // 16 % 7 - 3)) for j in range(512)])
qw = [10 ** rng.uniform(-5, 3) for _ in range(512)]
for j in range(0, 512, 41):
    qw[j] = 0.0
for j in range(64, 80):
    qw[j] = 0.0                                          # a zero sub-block
for j in range(300, 332):
    qw[j] = 0.25                                         # a block of equal weights
open(sys.argv[1], "wb").write(b"".join(struct.pack("<512f", *r) for r in rows))
open(sys.argv[2], "wb").write(struct.pack("<512f", *qw))
PY
fi
for ty in Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS IQ3_XXS IQ3_S IQ2_XXS IQ2_XS IQ2_S IQ1_S IQ1_M; do
  "$work/ggml_quant_weighted" "$ty" $ROW "$DATA/weighted.in" "$DATA/weighted.qw" "$work/$ty.weighted.out"
  keep_or_check "${1:-}" "$work/$ty.weighted.out" "$DATA/$ty.weighted.out" \
    "$ty with an importance matrix: ggml gives the checked-in vectors ($(($(stat -c %s "$DATA/weighted.in") / 4 / ROW)) rows of $ROW)"
done
