#!/usr/bin/env python3
"""Reference figures of a LoRA adapter's updates, with ΔW materialized whole: the oracle
of `organ measure ADAPTER` (which never materializes it).

    lora_ref.py ADAPTER.gguf [--base BASE.gguf] [--scale S] [--sigma] OUT.json

For each pair NAME.lora_a / NAME.lora_b: ΔW = s · (α / r) · B·A (s · B·A when α is absent
or 0, llama.cpp's rule) in float64, rounded to float32 once; then Z-measure v1 θ of ΔW as
a tensor named NAME.lora (zref.py beside this file), σ_θ over its draws with --sigma,
‖ΔW‖_F (of the float32 values, in float64) and, with --base, ‖W‖_F of the base's weight.
token_embd's pair is stored transposed: ΔW = lora_a · lora_bᵀ in numpy's shapes.
"""

import json
import os
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zref  # noqa: E402


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def values(t):
    """A tensor's values, float64, in numpy's shape (ggml's reversed)."""
    v = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
    return v.reshape([int(d) for d in reversed(t.shape)]).astype(np.float64)


def main():
    args = sys.argv[1:]
    out = args.pop()
    sigma = "--sigma" in args
    base = args[args.index("--base") + 1] if "--base" in args else None
    scale = float(args[args.index("--scale") + 1]) if "--scale" in args else 1.0
    r = gguf.GGUFReader(args[0])
    alpha = field(r, "adapter.lora.alpha")
    tensors = {t.name: t for t in r.tensors}
    base_tensors = {t.name: t for t in gguf.GGUFReader(base).tensors} if base else {}
    rows = []
    for name, ta in tensors.items():
        if not name.endswith(".lora_a"):
            continue
        target = name[: -len(".lora_a")]
        a, b = values(ta), values(tensors[target + ".lora_b"])
        if target.endswith("token_embd.weight"):
            rank = a.shape[1]
            delta = a @ b.T
        else:
            rank = a.shape[0]
            delta = b @ a
        factor = scale * alpha / rank if alpha else scale
        delta = (factor * delta).astype(np.float32)
        m = zref.measure_values(target + ".lora", delta)
        if sigma:
            d = zref.draws(target + ".lora", delta)
            m["draws"] = d
            m["sigma"] = float(np.std(d)) if d else 0.0
        m.update(name=target + ".lora", rank=int(rank), scale=factor,
                 frobenius=float(np.sqrt((delta.astype(np.float64) ** 2).sum())))
        if target in base_tensors:
            w = values(base_tensors[target]).astype(np.float32).astype(np.float64)
            m["base_frobenius"] = float(np.sqrt((w ** 2).sum()))
        rows.append(m)
    json.dump(dict(tensors=rows), open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
