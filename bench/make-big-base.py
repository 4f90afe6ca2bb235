#!/usr/bin/env python3
"""A synthetic llama-shaped F16 GGUF of about SIZE_GIB GiB, for memory benches of
commands that read whole models (bench/merge-memory.sh): token_embd and output of
32000 x 2048, then blocks of attention (4 x 2048 x 2048) and feed-forward
(3 x 2048 x 5632) until the size is reached; seeded normal values scaled like a trained
model's (std 0.02). Not a model llama.cpp runs (no tokenizer).

    make-big-base.py OUT.gguf [SIZE_GIB=1] [SEED=0]
"""
import sys

import numpy as np
from gguf import GGUFWriter

out = sys.argv[1]
size = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
rng = np.random.default_rng(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
E, F, V = 2048, 5632, 32000
tensors = [("token_embd.weight", (V, E)), ("output.weight", (V, E))]
per_block = 4 * E * E + 3 * E * F
blocks = max(1, int((size * 2**30 / 2 - 2 * V * E) // per_block))
for i in range(blocks):
    for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
        tensors.append((f"blk.{i}.{n}.weight", (E, E)))
    tensors.append((f"blk.{i}.ffn_gate.weight", (F, E)))
    tensors.append((f"blk.{i}.ffn_up.weight", (F, E)))
    tensors.append((f"blk.{i}.ffn_down.weight", (E, F)))
w = GGUFWriter(out, "llama")
w.add_block_count(blocks)
w.add_embedding_length(E)
w.add_feed_forward_length(F)
w.add_head_count(16)
w.add_context_length(2048)
w.add_layer_norm_rms_eps(1e-5)  # llama-quantize reads the hyperparameters (bench/quantize-vs-llama.sh)
for name, shape in tensors:
    w.add_tensor(name, (0.02 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float16))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"{out}: {blocks} blocks, {sum(a * b for _, (a, b) in tensors) * 2 / 2**30:.2f} GiB of F16")
