#!/usr/bin/env python3
"""Write a small mixture of experts (llama layout) for the browser's per-expert θ (§6 of
the Z-measure): 3 layers, each with a router (ffn_gate_inp, F32), gate and up expert
tensors of 8 Q8_0 experts, a down expert tensor (Q8_0; in layer 0 four F16 experts of
131 072 values each, so sampled, by the sampler name NAME#e) and a shared expert
(ffn_up_shexp). Some experts are byte copies of others (duplicate_of) and one per tensor
is drawn from another distribution (an outlier). Deterministic.
Usage: make-moe.py OUT.gguf"""
import random, sys

from tinygguf import F16, F32, Q8_0, f16, f32, q8_0, u32_kv, write

rng = random.Random(18)
def expert(n, k):
    """Expert k's n values: Gaussian of a slightly different spread per expert, but expert
    7 (and 3 of four), mostly zero with rare large values."""
    if k == 7:
        return [rng.gauss(0, 0.5) if rng.random() < 0.05 else 0.0 for _ in range(n)]
    sd = 0.02 * (1 + 0.03 * k)
    return [rng.gauss(0, sd) for _ in range(n)]

def experts(n, count, enc, copies):
    """`count` experts' bytes, expert c a byte copy of expert copies[c]."""
    out = []
    for k in range(count):
        out.append(out[copies[k]] if k in copies else enc(expert(n, k if count == 8 else 2 * k + 1)))
    return b"".join(out)

tensors = [("token_embd.weight", F32, [64, 16], f32([rng.gauss(0, 0.02) for _ in range(64 * 16)]))]
for l in range(3):
    tensors.append((f"blk.{l}.attn_norm.weight", F32, [64], f32([1 + rng.gauss(0, 0.1) for _ in range(64)])))
    tensors.append((f"blk.{l}.ffn_gate_inp.weight", F32, [64, 8], f32([rng.gauss(0, 0.1) for _ in range(64 * 8)])))
    tensors.append((f"blk.{l}.ffn_gate_exps.weight", Q8_0, [64, 32, 8], experts(64 * 32, 8, q8_0, {5: 2})))
    tensors.append((f"blk.{l}.ffn_up_exps.weight", Q8_0, [64, 32, 8], experts(64 * 32, 8, q8_0, {4: 1, 6: 1})))
    if l == 0:
        tensors.append((f"blk.{l}.ffn_down_exps.weight", F16, [256, 512, 4], experts(256 * 512, 4, f16, {2: 0})))
    else:
        tensors.append((f"blk.{l}.ffn_down_exps.weight", Q8_0, [32, 64, 8], experts(32 * 64, 8, q8_0, {})))
    tensors.append((f"blk.{l}.ffn_up_shexp.weight", Q8_0, [64, 32], q8_0([rng.gauss(0, 0.02) for _ in range(64 * 32)])))
write(sys.argv[1], tensors, "browser test MoE", [u32_kv("llama.expert_count", 8), u32_kv("llama.expert_used_count", 2)])
