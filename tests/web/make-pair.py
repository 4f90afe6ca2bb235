#!/usr/bin/env python3
"""Write two small GGUFs, A and B, that exercise every case of Compare v1 (docs/compare.md)
that SmolLM2 against its graft does not: a name only in A, one only in B, a shape
mismatch, F32 against F16, a non-finite value (dropped), a type with no reference
dequantizer (compared on its bytes only), and expert tensors (name with _exps, 3 dims)
whose experts are partly identical, one of them sampled (over 100 000 elements per
expert, so by the sampler name NAME#e). Deterministic.
Usage: make-pair.py A.gguf B.gguf"""
import random, sys

from tinygguf import F16, F32, Q8_0, Q8_K, f16, f32, q8_0, write

rng = random.Random(16)
g = lambda n, sd=0.02: [rng.gauss(0, sd) for _ in range(n)]
embd = g(64 * 8)
q = g(64 * 64)
norm = [1.0 + x for x in g(64, 0.1)]
norm_b = list(norm)
norm_b[5] = float("nan")
# Four small experts: 0 and 2 identical, 1 nudged, 3 replaced.
exps = [g(64 * 16) for _ in range(4)]
exps_b = [exps[0], [x * 1.001 for x in exps[1]], exps[2], g(64 * 16)]
# Two sampled experts (256 × 512 = 131 072 elements each, F16): 0 identical, 1 nudged.
big = [g(256 * 512) for _ in range(2)]
big_b = [big[0], [x + 1e-4 for x in big[1]]]
outw = g(256 * 8)
outw_b = list(outw)
outw_b[40] += 0.05
k = g(64 * 32)
q8k = bytes(rng.randrange(256) for _ in range(2 * 292))

a = [
    ("token_embd.weight", F32, [64, 8], f32(embd)),
    ("blk.0.attn_norm.weight", F32, [64], f32(norm)),
    ("blk.0.attn_q.weight", F32, [64, 64], f32(q)),
    ("blk.0.ffn_gate.weight", Q8_K, [256, 2], q8k),
    ("blk.0.ffn_up_exps.weight", F32, [64, 16, 4], b"".join(f32(e) for e in exps)),
    ("blk.1.attn_k.weight", F32, [64, 32], f32(k)),
    ("blk.1.attn_output.weight", Q8_0, [256, 8], q8_0(outw)),
    ("blk.1.ffn_down_exps.weight", F16, [256, 512, 2], b"".join(f16(e) for e in big)),
    ("only_in_a.weight", F32, [8], f32(g(8))),
]
b = [
    ("token_embd.weight", F32, [64, 8], f32(embd)),
    ("blk.0.attn_norm.weight", F32, [64], f32(norm_b)),
    ("blk.0.attn_q.weight", F16, [64, 64], f16(q)),
    ("blk.0.ffn_gate.weight", Q8_K, [256, 2], q8k),
    ("blk.0.ffn_up_exps.weight", F32, [64, 16, 4], b"".join(f32(e) for e in exps_b)),
    ("blk.1.attn_k.weight", F32, [32, 64], f32(k)),
    ("blk.1.attn_output.weight", Q8_0, [256, 8], q8_0(outw_b)),
    ("blk.1.ffn_down_exps.weight", F16, [256, 512, 2], b"".join(f16(e) for e in big_b)),
    ("only_in_b.weight", F32, [8], f32(g(8))),
]
write(sys.argv[1], a, "compare pair " + sys.argv[1].rsplit("/", 1)[-1])
write(sys.argv[2], b, "compare pair " + sys.argv[2].rsplit("/", 1)[-1])
