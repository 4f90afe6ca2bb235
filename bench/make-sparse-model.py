#!/usr/bin/env python3
"""Write a synthetic split GGUF of TOTAL_GB as a sparse file set (only headers use disk):
a MoE-shaped llama model with Q4_K expert tensors, split across SHARDS shards the way
llama-gguf-split lays them out. For proving that `organ measure` stays within bounded
memory and reads only sampled blocks, whatever the model size.

With --seed N, the data is no longer all holes: each tensor gets non-zero blocks drawn
from N, one within the first 64 blocks of each expert (of each tensor that has no experts)
and 8 anywhere in the tensor, so two models made with different seeds differ in every
tensor and every expert, a byte comparison stopping at its first MiB. For `organ diff`
(bench/diff-huge-sparse.sh). Without --seed the output is what it always was.

Usage: make-sparse-model.py OUT_PREFIX [TOTAL_GB=100] [SHARDS=4] [--seed N]
Writes OUT_PREFIX-0000i-of-0000N.gguf and prints their paths.
"""
import random, struct, sys

args = sys.argv[1:]
seed = None
if "--seed" in args:
    i = args.index("--seed")
    seed = int(args[i + 1])
    del args[i:i + 2]
prefix = args[0]
total_gb = float(args[1]) if len(args) > 1 else 100
n_shards = int(args[2]) if len(args) > 2 else 4
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
def infos_offsets(group):
    """Each tensor's offset in its shard's data section, as laid out above."""
    out, off = [], 0
    for _, _, _, nb in group:
        out.append(off)
        off += nb + (-nb % ALIGN)
    return out

def random_block(ty, rng):
    """One block of random content with sane scales: Q4_K (d and dmin f16 in [1/64, 1/32),
    random scales and quants) or 16 F32 values."""
    if ty == F32:
        return struct.pack("<16f", *(rng.uniform(-1, 1) for _ in range(16)))
    half = lambda: struct.pack("<e", rng.uniform(1 / 64, 1 / 32))
    return half() + half() + rng.randbytes(Q4_K_SIZE - 4)

def write_blocks(f, data_start, group, offsets, rng):
    """--seed: non-zero blocks at places drawn from rng (see the module's docstring)."""
    for (name, dims, ty, nb), off in zip(group, offsets):
        size = Q4_K_SIZE if ty == Q4_K else 64
        n_experts = dims[2] if len(dims) == 3 else 1
        per_expert = nb // n_experts // size  # blocks per expert
        places = [e * per_expert + rng.randrange(min(64, per_expert)) for e in range(n_experts)]
        places += [rng.randrange(nb // size) for _ in range(8)]
        for b in places:
            f.seek(data_start + off + b * size)
            f.write(random_block(ty, rng))

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
        if seed is not None:
            write_blocks(f, len(head), g, infos_offsets(g), random.Random(f"{seed}/{i}"))
    paths.append(path)
print("\n".join(paths))
