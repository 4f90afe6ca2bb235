#!/usr/bin/env python3
"""Generate quantization test vectors with gguf-py 0.19.0 (run with the oracle venv).

For each type gguf-py can quantize and organ ports (F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
Q5_1): finite f32 inputs (OUT/<TYPE>.in, little-endian f32) and the bytes of
`gguf.quants.quantize` (OUT/<TYPE>.out). Inputs mix distributions, zero and constant
blocks, exact ties, tiny and huge magnitudes. Also OUT/f16_bits.in/.out and
OUT/bf16_bits.in/.out: f32 bit patterns, NaN and infinities included, through
astype(float16) and BF16 quantization. OUT/Q4_K.in, Q5_K.in, Q6_K.in: inputs for
scripts/gen-ggml-quant-vectors.sh.
"""
import os, sys
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

OUT = sys.argv[1] if len(sys.argv) > 1 else "core/tests/data/quantize"
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(20261122)

def blocks(n_blocks, bs=32):
    parts = []
    per = n_blocks // 8
    parts.append(rng.standard_normal(per * bs))
    parts.append(rng.uniform(-1, 1, per * bs))
    parts.append(rng.standard_cauchy(per * bs))
    parts.append(rng.standard_normal(per * bs) * 10.0 ** rng.uniform(-8, 4, per * bs))
    parts.append(np.zeros(bs * per // 2))
    parts.append(np.repeat(rng.standard_normal(per // 2), bs))           # constant blocks
    parts.append(np.round(rng.uniform(-8, 8, per * bs) * 2) / 2)          # halves: rounding ties
    parts.append(rng.integers(-127, 128, per * bs).astype(np.float64))    # exact integers
    x = np.concatenate(parts).astype(np.float32)
    x = x[: len(x) // 256 * 256]
    return x

def write(name, inp, out):
    open(os.path.join(OUT, name + ".in"), "wb").write(np.ascontiguousarray(inp).tobytes())
    open(os.path.join(OUT, name + ".out"), "wb").write(np.ascontiguousarray(out).tobytes())

for qt in (T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
    x = blocks(512)
    q = quantize(x.reshape(-1, 256), qt)
    write(qt.name, x.astype("<f4"), np.asarray(q).view(np.uint8))

bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x477FE000,
                    0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001, 0x387FC000, 0x38800000, 0x00000001], dtype=np.uint32)
bits = np.concatenate([special, bits]).astype("<u4")
f = bits.view(np.float32)
with np.errstate(over="ignore", invalid="ignore"):
    write("f16_bits", bits, f.astype(np.float16).view("<u2"))
write("bf16_bits", bits, np.asarray(quantize(f, T.BF16)).view("<u2"))
# Inputs only for Q4_K, Q5_K, Q6_K: gguf-py cannot quantize them, so their .out comes
# from ggml's C reference (scripts/gen-ggml-quant-vectors.sh). Besides blocks(): super-blocks
# with one all-zero or constant sub-block, values so small or so large that the f16
# super-scale underflows or overflows, and one-hot sub-blocks.
def k_blocks():
    x = blocks(1024).reshape(-1, 256)
    special = []
    for scale in (1e-9, 1e-6, 1.0, 3e4, 1e6):
        b = rng.standard_normal(256) * scale
        b[32:64] = 0.0
        b[96:128] = b[96]
        special.append(b)
        c = np.zeros(256)
        c[rng.integers(0, 256, 8)] = rng.standard_normal(8) * scale
        special.append(c)
        special.append(np.abs(rng.standard_normal(256)) * scale + scale)  # all positive
        special.append(-np.abs(rng.standard_normal(256)) * scale)        # all negative
    return np.concatenate([x, np.array(special)]).astype(np.float32)

for name in ("Q4_K", "Q5_K", "Q6_K"):
    open(os.path.join(OUT, name + ".in"), "wb").write(k_blocks().astype("<f4").tobytes())
print("quantize vectors written to", OUT)
