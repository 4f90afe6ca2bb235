#!/usr/bin/env python3
"""Seeded random LoRA adapters for a base GGUF, written as convert_lora_to_gguf.py writes
them (llama.cpp 11434): general.type = adapter, adapter.type = lora, adapter.lora.alpha,
the base's general.architecture, and per adapted weight NAME.weight.lora_a ([n_in, r] in
ggml order) and NAME.weight.lora_b ([r, n_out]); token_embd's pair the other way round
(lora_a [r, n_vocab], lora_b [r, n_embd]). No adapter ships on the registries: the tests
make theirs with this.

    make-lora.py BASE OUT --rank R [--type f32|f16|q8_0] [--seed S] [--alpha A]
                 [--targets attn_q,attn_k,...] [--layers 0,3] [--std X] [--break KIND]

--std is the standard deviation of ΔW's elements (A and B are normal, scaled to give it);
--alpha defaults to 2R (so α/r = 2). --break writes a broken adapter, one way each:
half (a lora_b left out), rank0, no-alpha, arch (another architecture), suffix (a tensor
with a name llama.cpp refuses), model (general.type = model).
"""

import argparse

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFWriter
from gguf.quants import quantize

TYPES = {"f32": Q.F32, "f16": Q.F16, "q8_0": Q.Q8_0}
LINEAR = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]


def encoded(values, qtype):
    """`values` (float32, numpy shape) as `qtype`: (array to write, raw dtype or None)."""
    if qtype == Q.F32:
        return values.astype(np.float32), None
    if qtype == Q.F16:
        return values.astype(np.float16), None
    return quantize(values, qtype), qtype


def main():
    p = argparse.ArgumentParser()
    p.add_argument("base")
    p.add_argument("out")
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--type", default="f32", choices=TYPES)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--alpha", type=float)
    p.add_argument("--targets", default=",".join(LINEAR))
    p.add_argument("--layers", default="all")
    p.add_argument("--std", type=float, default=0.005)
    p.add_argument("--break", dest="broken", choices=["half", "rank0", "no-alpha", "arch", "suffix", "model"])
    a = p.parse_args()

    base = GGUFReader(a.base)
    arch = bytes(base.fields["general.architecture"].parts[-1]).decode()
    shapes = {t.name: [int(d) for d in t.shape] for t in base.tensors}
    targets = a.targets.split(",")
    layers = None if a.layers == "all" else {int(x) for x in a.layers.split(",")}
    rank = a.rank
    alpha = a.alpha if a.alpha is not None else 2.0 * rank
    scale = alpha / rank
    # ΔW = scale · B·A with A, B ~ N(0, σ²): its elements have std scale · √r · σ².
    sigma = np.sqrt(a.std / (scale * np.sqrt(rank)))
    rng = np.random.default_rng(a.seed)
    qtype = TYPES[a.type]

    w = GGUFWriter(a.out, "qwen2" if a.broken == "arch" else arch)
    w.add_type("model" if a.broken == "model" else "adapter")
    w.add_string("adapter.type", "lora")
    if a.broken != "no-alpha":
        w.add_float32("adapter.lora.alpha", alpha)
    first = True
    for name, dims in shapes.items():
        kind = name.split(".")[-2] if name.startswith("blk.") else name.split(".")[0]
        if len(dims) != 2 or kind not in targets:
            continue
        if name.startswith("blk.") and layers is not None and int(name.split(".")[1]) not in layers:
            continue
        n_in, n_out = dims  # ggml order
        r = 0 if (a.broken == "rank0" and first) else rank
        if kind == "token_embd":
            # numpy shapes: lora_a (n_vocab, r), lora_b (n_embd, r); ΔW = lora_a · lora_bᵀ.
            la = (sigma * rng.standard_normal((n_out, r))).astype(np.float32)
            lb = (sigma * rng.standard_normal((n_in, r))).astype(np.float32)
        else:
            # numpy shapes: lora_a (r, n_in), lora_b (n_out, r); ΔW = lora_b · lora_a.
            la = (sigma * rng.standard_normal((r, n_in))).astype(np.float32)
            lb = (sigma * rng.standard_normal((n_out, r))).astype(np.float32)
        # q8_0 needs rows of whole blocks: the rank (token_embd's rows) may not be; such
        # a half is written f16, as the converter falls back for shapes a type cannot hold.
        for half, v in (("lora_a", la), ("lora_b", lb)):
            t = qtype if v.shape[-1] % 32 == 0 or qtype != Q.Q8_0 else Q.F16
            data, raw = encoded(v, t)
            if raw is None:
                w.add_tensor(f"{name}.{half}", data)
            else:
                w.add_tensor(f"{name}.{half}", data, raw_shape=data.shape, raw_dtype=raw)
            if a.broken == "half" and first:
                break
        first = False
    if a.broken == "suffix":
        w.add_tensor("blk.0.attn_q.weight", np.zeros((4, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
