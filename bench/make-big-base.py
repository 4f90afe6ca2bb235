#!/usr/bin/env python3
"""A synthetic llama-shaped F16 GGUF of about SIZE_GIB GiB, for benches of commands that
read whole models (bench/merge-memory.sh, bench/quantize-vs-llama.sh, bench/recipe-big.sh):
token_embd and output of 32000 x 2048, then blocks of attention (4 x 2048 x 2048) and
feed-forward (3 x 2048 x 5632) until the size is reached; seeded normal values scaled like
a trained model's (std 0.02). SHAPE `7b` takes Llama-2-7B's widths instead (4096, FFN
11008, 32 heads, at most 32 blocks: SIZE_GIB 12.6 gives all 32) and adds each block's
attn_norm and ffn_norm and the output_norm (F32 gains 1 + 0.1·normal), which the
data-free prediction reads. Written a tensor at a time, so memory stays one tensor's.
Not a model llama.cpp runs (no tokenizer).

    make-big-base.py OUT.gguf [SIZE_GIB=1] [SEED=0] [SHAPE=tinyllama|7b]
"""
import sys

import numpy as np
from gguf import GGUFWriter

out = sys.argv[1]
size = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
rng = np.random.default_rng(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
shape = sys.argv[4] if len(sys.argv) > 4 else "tinyllama"
if shape not in ("tinyllama", "7b"):
    sys.exit(f"SHAPE: tinyllama or 7b, not {shape!r}")
seven = shape == "7b"
E, F, V, HEADS = (4096, 11008, 32000, 32) if seven else (2048, 5632, 32000, 16)
tensors = [("token_embd.weight", (V, E)), ("output.weight", (V, E))]
per_block = 4 * E * E + 3 * E * F
blocks = max(1, int((size * 2**30 / 2 - 2 * V * E) // per_block))
if seven:
    blocks = min(blocks, 32)
    tensors.append(("output_norm.weight", (E,)))
for i in range(blocks):
    for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
        tensors.append((f"blk.{i}.{n}.weight", (E, E)))
    tensors.append((f"blk.{i}.ffn_gate.weight", (F, E)))
    tensors.append((f"blk.{i}.ffn_up.weight", (F, E)))
    tensors.append((f"blk.{i}.ffn_down.weight", (E, F)))
    if seven:
        tensors.append((f"blk.{i}.attn_norm.weight", (E,)))
        tensors.append((f"blk.{i}.ffn_norm.weight", (E,)))
w = GGUFWriter(out, "llama")
w.add_block_count(blocks)
w.add_embedding_length(E)
w.add_feed_forward_length(F)
w.add_head_count(HEADS)
w.add_context_length(2048)
w.add_layer_norm_rms_eps(1e-5)  # llama-quantize reads the hyperparameters (bench/quantize-vs-llama.sh)


def values(shape):
    if len(shape) == 1:  # a norm's gains
        return (1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    return (0.02 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float16)


dtype = {1: np.float32, 2: np.float16}
for name, dims in tensors:
    nbytes = int(np.prod(dims)) * np.dtype(dtype[len(dims)]).itemsize
    w.add_tensor_info(name, dims, np.dtype(dtype[len(dims)]), nbytes)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_ti_data_to_file()
for name, dims in tensors:
    w.write_tensor_data(values(dims))
w.close()
weights = sum(int(np.prod(d)) for _, d in tensors if len(d) == 2)
print(f"{out}: {blocks} blocks, {weights * 2 / 2**30:.2f} GiB of F16")
