#!/usr/bin/env python3
"""Write small valid GGUF files with gguf-py's GGUFWriter as fuzzing seeds
(core/fuzz/seeds/parse), and one block of every type for the dequant target.

The other targets' seeds are checked in as made: seeds/manifest/*.json are the manifests
of `organ dissect` of the parse seeds, plus special_values.json written by hand (NaN and
infinity bits, hex strings, nested arrays, fields out of order); the API target's
native-cli/fuzz/seeds/api/* are one request each (method line, path line, header lines,
empty line, body) for every route."""
import os, sys
import numpy as np
import gguf

root = sys.argv[1] if len(sys.argv) > 1 else "core/fuzz/seeds"
os.makedirs(f"{root}/parse", exist_ok=True)
os.makedirs(f"{root}/dequant", exist_ok=True)
rng = np.random.default_rng(7)

def write(name, build):
    path = f"{root}/parse/{name}.gguf"
    w = gguf.GGUFWriter(path, "llama")
    build(w)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

def every_value(w):
    w.add_uint8("u8", 7); w.add_int8("i8", -7); w.add_uint16("u16", 700); w.add_int16("i16", -700)
    w.add_uint32("u32", 70000); w.add_int32("i32", -70000); w.add_float32("f32", 0.5)
    w.add_uint64("u64", 2**40); w.add_int64("i64", -2**40); w.add_float64("f64", 0.25)
    w.add_bool("b", True); w.add_string("s", "organ"); w.add_array("arr", ["a", "bc", "def"])
    w.add_array("nums", [1, 2, 3])
    w.add_tensor("blk.0.attn_q.weight", rng.standard_normal((4, 32)).astype(np.float32))
    w.add_tensor("blk.0.ffn_up.weight", rng.standard_normal(64).astype(np.float16))

def quantized(w):
    for qt in (gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q5_1):
        x = rng.standard_normal((2, 64)).astype(np.float32)
        q = gguf.quants.quantize(x, qt)
        w.add_tensor(f"blk.1.ffn_{qt.name.lower()}.weight", q, raw_shape=q.shape, raw_dtype=qt)

write("every_value", every_value)
write("quantized", quantized)
write("empty", lambda w: None)
for qt, (bs, ts) in gguf.GGML_QUANT_SIZES.items():
    if qt.value < 256:
        blk = rng.integers(0, 256, size=2 * ts, dtype=np.uint8)
        open(f"{root}/dequant/{qt.name}", "wb").write(bytes([qt.value]) + blk.tobytes())
print("seeds written to", root)
