#!/usr/bin/env python3
"""Write a synthetic split GGUF of TOTAL_GB as a sparse file set (only headers use disk):
a MoE-shaped llama model with Q4_K expert tensors, split across SHARDS shards the way
llama-gguf-split lays them out. For proving that `organ measure` stays within bounded
memory and reads only sampled blocks, whatever the model size.

Usage: make-sparse-model.py OUT_PREFIX [TOTAL_GB=100] [SHARDS=4]
Writes OUT_PREFIX-0000i-of-0000N.gguf and prints their paths.
"""
import struct, sys

prefix = sys.argv[1]
total_gb = float(sys.argv[2]) if len(sys.argv) > 2 else 100
n_shards = int(sys.argv[3]) if len(sys.argv) > 3 else 4
Q4_K, F32 = 12, 0
QK_K, Q4_K_SIZE = 256, 144
EMBD, FF, EXPERTS = 4096, 14336, 64
ALIGN = 32

def s(x: str) -> bytes:
    b = x.encode()
    return struct.pack("<Q", len(b)) + b

def kv_str(k, v): return s(k) + struct.pack("<I", 8) + s(v)
def kv_u32(k, v): return s(k) + struct.pack("<II", 4, v)
def kv_u16(k, v): return s(k) + struct.pack("<IH", 2, v)
def kv_i32(k, v): return s(k) + struct.pack("<Ii", 5, v)

expert_bytes = EMBD * FF * EXPERTS // QK_K * Q4_K_SIZE
n_layers = max(1, -(-int(total_gb * (1 << 30)) // (3 * expert_bytes)))  # rounded up: at least TOTAL_GB GiB
tensors = []  # (name, dims, type, bytes)
for l in range(n_layers):
    tensors.append((f"blk.{l}.attn_norm.weight", [EMBD], F32, EMBD * 4))
    for w, dims in (("gate", [EMBD, FF, EXPERTS]), ("up", [EMBD, FF, EXPERTS]), ("down", [FF, EMBD, EXPERTS])):
        tensors.append((f"blk.{l}.ffn_{w}_exps.weight", dims, Q4_K, expert_bytes))
per = -(-len(tensors) // n_shards)
groups = [tensors[i:i + per] for i in range(0, len(tensors), per)]
n = len(groups)
paths = []
for i, g in enumerate(groups):
    kvs = []
    if i == 0:
        kvs += [kv_str("general.architecture", "llama"), kv_str("general.name", "sparse-moe-synthetic"),
                kv_u32("llama.block_count", n_layers), kv_u32("llama.expert_count", EXPERTS)]
    kvs += [kv_u16("split.no", i), kv_u16("split.count", n), kv_i32("split.tensors.count", len(tensors))]
    infos, off = [], 0
    for name, dims, ty, nb in g:
        infos.append(s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
                     + struct.pack("<IQ", ty, off))
        off += nb + (-nb % ALIGN)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(g), len(kvs)) + b"".join(kvs) + b"".join(infos)
    head += b"\0" * (-len(head) % ALIGN)
    path = f"{prefix}-{i + 1:05d}-of-{n:05d}.gguf"
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(len(head) + off)   # the data is a hole: zeros that take no disk
    paths.append(path)
print("\n".join(paths))
