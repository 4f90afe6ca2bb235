#!/usr/bin/env python3
"""Generate dequantization test vectors with gguf-py 0.19.0 (run with the oracle venv).

For every type gguf-py can dequantize, random block bytes (fixed seed) with the f16 scale
fields replaced by finite random f16 values, and the f32 output of
`gguf.quants.dequantize`. F16 and BF16 get all 65,536 bit patterns. F64 and the integer
types have no `dequantize` in gguf-py 0.19.0; their reference is the typed array
GGUFReader exposes, cast with `astype(np.float32)`.

Writes OUT/<TYPE>.in (raw bytes) and OUT/<TYPE>.out (little-endian f32 bits).
"""
import os, sys
import numpy as np
from gguf import GGMLQuantizationType as T, GGML_QUANT_SIZES
from gguf.quants import dequantize

OUT = sys.argv[1] if len(sys.argv) > 1 else "core/tests/data/dequant"
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(20261121)

# Byte offsets of the f16 scales inside each block.
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.IQ4_NL: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.TQ1_0: [52], T.TQ2_0: [64],
    T.IQ2_XXS: [0], T.IQ2_XS: [0], T.IQ2_S: [0], T.IQ3_XXS: [0], T.IQ3_S: [0], T.IQ1_S: [0],
    T.IQ4_XS: [0],
    T.MXFP4: [], T.NVFP4: [], T.IQ1_M: [],  # no plain f16 field (e8m0 / ue4m3 / split)
}

def finite_f16(n):
    # Magnitudes from subnormal to large, both signs, some exact zeros.
    v = rng.standard_normal(n) * 10.0 ** rng.uniform(-7, 2, n)
    v[rng.random(n) < 0.03] = 0.0
    return v.astype(np.float16)

def write(name, raw, out):
    out = np.ascontiguousarray(out, dtype=np.float32)
    open(os.path.join(OUT, name + ".in"), "wb").write(raw.tobytes())
    open(os.path.join(OUT, name + ".out"), "wb").write(out.view(np.uint32).astype("<u4").tobytes())

n_blocks = 64
for qt, fields in F16_FIELDS.items():
    bs, ts = GGML_QUANT_SIZES[qt]
    blocks = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)
    for off in fields:
        blocks[:, off:off + 2] = finite_f16(n_blocks).view(np.uint8).reshape(n_blocks, 2)
    if qt == T.IQ1_M:
        # The f16 d lives in the top nibble of each of the four u16 scales.
        d = finite_f16(n_blocks).view(np.uint16)
        sc = blocks[:, 48:56].copy().view(np.uint16).reshape(n_blocks, 4) & np.uint16(0x0FFF)
        for k in range(4):
            sc[:, k] |= ((d >> np.uint16(4 * k)) & np.uint16(0xF)) << np.uint16(12)
        blocks[:, 48:56] = sc.view(np.uint8).reshape(n_blocks, 8)
    raw = blocks.reshape(4, -1)  # four rows, to exercise gguf-py's row grouping
    out = dequantize(raw, qt).reshape(-1)
    assert out.dtype == np.float32 and out.size == n_blocks * bs, qt.name
    write(qt.name, blocks, out)

# Every bit pattern of the 16-bit floats (NaN payloads, infinities, subnormals).
all16 = np.arange(65536, dtype=np.uint32).astype("<u2")
write("F16", all16, dequantize(all16.view(np.uint8), T.F16))
write("BF16", all16, dequantize(all16.view(np.uint8), T.BF16))
f32 = rng.integers(0, 2**32, size=4096, dtype=np.uint64).astype("<u4")
write("F32", f32, dequantize(f32.view(np.uint8), T.F32))

# Types gguf-py's dequantize() does not handle: the reader's typed view, astype(float32).
f64 = rng.standard_normal(4096) * 10.0 ** rng.uniform(-300, 300, 4096)
f64[:8] = [0.0, -0.0, 1.0, -1.5, 3.4028235e38, 3.5e38, 1e-46, np.float32(1.17e-38)]
write("F64", f64.astype("<f8"), f64.astype(np.float32))
for name, dt in (("I8", "<i1"), ("I16", "<i2"), ("I32", "<i4"), ("I64", "<i8")):
    info = np.iinfo(np.dtype(dt))
    v = rng.integers(info.min, info.max, size=4096, dtype=np.dtype(dt), endpoint=True)
    v[:4] = [info.min, info.max, 0, -1]
    write(name, v, v.astype(np.float32))
print("wrote", len(os.listdir(OUT)) // 2, "types to", OUT)
