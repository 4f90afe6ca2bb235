#!/usr/bin/env python3
"""The oracle of `organ merge`: each method from mergekit's published formulas
(merge_methods/linear.py, generalized_task_arithmetic.py with sparsify.py, slerp.py),
in NumPy, on the tensors of GGUF files read by gguf-py.

    merge_ref.py CHECKS.json OUT.json

CHECKS.json is a list of merges, each
    {"method": M, "base": B.gguf or null, "models": [{"path", "weight", "density"}],
     "t": T, "normalize": bool, "rescale": bool, "lambda": L, "seed": N,
     "merged": ORGAN_OUTPUT.gguf}
(parameters as organ resolved them: one value per model, the method's defaults filled
in). Every tensor of the first input is merged here and compared with organ's output,
dequantized; OUT.json gets, per check, the largest relative difference |organ − ref| /
|ref| over all values (a value 0 in both counts 0) and the tensor where it is.
With `--time` instead of OUT.json's checks, each merge is computed, not compared, and
the seconds it took are written.

A check with "slices" is a mergekit `slices:` configuration, resolved here, not by organ:
    {"method": M, "base": B.gguf or null, "slices": [the configuration's slices],
     "parameters": {the configuration's parameters}, "seed": N, "merged": OUTPUT.gguf}
laid out as mergekit's plan.py does: output layer offset + i of a slice of n layers is
layer start + i of each source (layer_range half-open), at t = i / (n - 1) (1 when n is
1), tensors outside the layers from the first slice's sources (the `output*` ones from
the last slice's) at t = 0; a parameter is looked up in the source's own parameters,
then the slice's, then the merge's (mergekit's ConfigReader.parameter, its
evaluate_setting, its filters matched against the Hugging Face name as well); with
tied embeddings (no output.weight) and another last-slice token_embd, that one is the
output projection, output.weight. OUT.json also gets the output's block_count and the
tensor names expected but missing, or present but not expected.

Deltas x − base are float32 (mergekit's float32 tensors); everything after is float64,
rounded to float32 once, as organ does. DARE's drops are not NumPy's random generator:
value i of model k (from 0, the base not counted) of tensor NAME is kept when
    (splitmix64(stream, i) >> 11) * 2^-53 < density,
    stream = mix(mix(seed ^ fnv1a64(NAME)) + k),   mix(s) = splitmix64(s, 0),
splitmix64(s, i) being output i of SplitMix64 seeded with s, organ's own
(core/src/random.rs): the same masks, recomputed, not exported.
"""

import json
import sys
import time

import numpy as np
import gguf
from gguf.quants import dequantize

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def splitmix64_array(seed, idx):
    """Outputs idx (a uint64 array) of SplitMix64 seeded with seed."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (idx + np.uint64(1)) * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def mix(s):
    z = (s + GAMMA) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def fnv1a64(name):
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def dare_keep(seed, name, k, n, density):
    stream = mix((mix(seed ^ fnv1a64(name)) + k) & M64)
    u = (splitmix64_array(stream, np.arange(n, dtype=np.uint64)) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return u < density


def magnitude_keep(d, density):
    """sparsify.magnitude: the k = int(density * n) largest |d|, ties to the lower index."""
    k = int(density * d.size)
    assert k > 0
    keep = np.zeros(d.size, dtype=bool)
    keep[np.argsort(-np.abs(d), kind="stable")[:k]] = True
    return keep


def sparsified(d, keep, rescale):
    """rescaled_masked_tensor with the L1 norm (eps 1e-7)."""
    masked = np.where(keep, d, np.float32(0))
    if not rescale:
        return masked
    before = np.abs(d).astype(np.float64).sum()
    after = np.abs(masked).astype(np.float64).sum()
    if before < 1e-7 or after < 1e-7:
        return masked
    return (masked.astype(np.float64) * (before / after)).astype(np.float32)


def task_arithmetic(c, name, base, xs):
    method = c["method"]
    deltas = []
    for k, (x, m) in enumerate(zip(xs, c["models"])):
        d = x - base  # float32
        density = m["density"]
        if density < 1 and method == "ties":
            d = sparsified(d, magnitude_keep(d, density), c["rescale"])
        elif density < 1 and method in ("dare_linear", "dare_ties"):
            d = sparsified(d, dare_keep(c["seed"], name, k, d.size, density), c["rescale"])
        deltas.append(d.astype(np.float64))
    weights = np.array([m["weight"] for m in c["models"]], dtype=np.float64)[:, None]
    wd = np.stack(deltas) * weights
    if method in ("ties", "dare_ties"):
        majority = np.where(wd.sum(axis=0) >= 0, 1.0, -1.0)
        mask = np.sign(wd) == majority
        mixed = (wd * mask).sum(axis=0)
        divisor = (weights * mask).sum(axis=0)
        divisor[divisor == 0] = 1
    else:
        mixed = wd.sum(axis=0)
        divisor = weights.sum()
        if abs(divisor) < 1e-8:
            divisor = 1.0
    if c["normalize"]:
        mixed = mixed / divisor
    mixed = mixed * c["lambda"]
    return (base.astype(np.float64) + mixed).astype(np.float32)


def slerp(t, a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    na, nb = np.sqrt((a64 * a64).sum()), np.sqrt((b64 * b64).sum())
    na = na if na > 1e-8 else 1.0
    nb = nb if nb > 1e-8 else 1.0
    dot = ((a64 / na) * (b64 / nb)).sum()
    if abs(dot) > 0.9995:
        s0, s1 = 1 - t, t
    else:
        theta0 = np.arccos(dot)
        sin0 = np.sin(theta0)
        theta_t = theta0 * t
        s0, s1 = np.sin(theta0 - theta_t) / sin0, np.sin(theta_t) / sin0
    return (s0 * a64 + s1 * b64).astype(np.float32)


def linear(c, xs):
    weights = np.array([m["weight"] for m in c["models"]], dtype=np.float64)
    total = sum(w * x.astype(np.float64) for w, x in zip(weights, xs))
    if c["normalize"]:
        total = total / weights.sum()
    return total.astype(np.float32)


def values(t):
    return np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1)


def merge_all(c):
    """Yields (name, reference values) for every tensor of the first input."""
    readers = [gguf.GGUFReader(m["path"]) for m in c["models"]]
    tables = [{t.name: t for t in r.tensors} for r in readers]
    base_table = {t.name: t for t in gguf.GGUFReader(c["base"]).tensors} if c.get("base") else None
    first = base_table if base_table is not None else tables[0]
    for name in first:
        xs = [values(tab[name]) for tab in tables]
        if c["method"] == "linear":
            yield name, linear(c, xs)
        elif c["method"] == "slerp":
            yield name, slerp(c["t"], values(base_table[name]), xs[0])
        else:
            yield name, task_arithmetic(c, name, values(base_table[name]), xs)


HF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
      "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
      "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj",
      "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
HF_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def hf_name(name):
    """convert_hf_to_gguf.py's names, backwards, for the common tensors."""
    stem, _, suffix = name.rpartition(".")
    if stem in HF_TOP:
        return f"{HF_TOP[stem]}.{suffix}"
    parts = stem.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in HF:
        return f"model.layers.{parts[1]}.{HF[parts[2]]}.{suffix}"
    return None


def evaluate(setting, name, t):
    """mergekit's evaluate_setting, a filter matching the GGUF or the HF name."""
    if isinstance(setting, (bool, int, float)):
        return setting
    if isinstance(setting, dict):
        setting = [setting]
    if all(isinstance(e, (int, float)) and not isinstance(e, bool) for e in setting):
        scaled = t * (len(setting) - 1)
        i0 = int(scaled)
        i1 = min(len(setting) - 1, i0 + 1)
        frac = scaled - i0
        return (1 - frac) * setting[i0] + frac * setting[i1]
    hf = hf_name(name) or ""
    for cond in setting:
        f = cond.get("filter")
        if f is None or f == "*" or f in name or f in hf:
            return evaluate(cond["value"], name, t)
    return None


def parameter(c, sl, p, name, t, source=None):
    """ConfigReader.parameter: the source's own, the slice's, the merge's."""
    for scope in ([source.get("parameters")] if source else []) + [sl.get("parameters"), c.get("parameters")]:
        if scope and p in scope:
            v = evaluate(scope[p], name, t)
            if v is not None:
                return v
    return None


DEFAULT_NORMALIZE = {"linear": True, "ties": True}
DEFAULT_RESCALE = {"dare_linear": True, "dare_ties": True}


def recipe(c, sl, out_name, names, t):
    """One output tensor of slice sl: (base (path, name) or None, [(path, name, weight,
    density, scale)], merge-wide settings) from each source's tensor names[j]."""
    method = c["method"]
    base = sl.get("base_model") or c.get("base")
    on_base = method not in ("linear", "passthrough")
    base_in, parts = None, []
    for j, src in enumerate(sl["sources"]):
        if on_base and src["model"] == base:
            base_in = (src["model"], names[j])
            continue
        w = parameter(c, sl, "weight", names[j], t, src)
        d = parameter(c, sl, "density", names[j], t, src)
        s = parameter(c, sl, "scale", names[j], t, src)
        parts.append((src["model"], names[j], 1.0 if w is None else float(w), 1.0 if d is None else float(d), s))
    g = lambda p, default: (lambda v: default if v is None else v)(parameter(c, sl, p, out_name, t))
    settings = {"method": method, "t": float(g("t", 0.0)), "normalize": bool(g("normalize", DEFAULT_NORMALIZE.get(method, False))),
                "rescale": bool(g("rescale", DEFAULT_RESCALE.get(method, False))), "lambda": float(g("lambda", 1.0)),
                "seed": c.get("seed", 0)}
    return base_in, parts, settings


def sliced_layout(c, readers):
    """[(output name, recipe)] in mergekit's order: the first slice's ends, the layers,
    the last slice's ends."""
    slices = c["slices"]
    ref = readers[c.get("base") or slices[0]["sources"][0]["model"]]
    ref_names = [t.name for t in ref.tensors]
    outside = [n for n in ref_names if not n.startswith("blk.")]
    rests = [n[len("blk.0."):] for n in ref_names if n.startswith("blk.0.")]
    out = []
    for n in outside:
        if not n.startswith("output"):
            out.append((n, recipe(c, slices[0], n, [n] * len(slices[0]["sources"]), 0.0)))
    layer = 0
    for sl in slices:
        start = [s["layer_range"][0] for s in sl["sources"]]
        count = sl["sources"][0]["layer_range"][1] - start[0]
        for i in range(count):
            t = i / (count - 1) if count > 1 else 1.0
            for rest in rests:
                name = f"blk.{layer}.{rest}"
                out.append((name, recipe(c, sl, name, [f"blk.{s + i}.{rest}" for s in start], t)))
            layer += 1
    for n in outside:
        if n.startswith("output"):
            out.append((n, recipe(c, slices[-1], n, [n] * len(slices[-1]["sources"]), 0.0)))
    if "token_embd.weight" in ref_names and "output.weight" not in ref_names:
        e = "token_embd.weight"
        first = recipe(c, slices[0], e, [e] * len(slices[0]["sources"]), 0.0)
        last = recipe(c, slices[-1], e, [e] * len(slices[-1]["sources"]), 0.0)
        if first != last:
            out.append(("output.weight", last))
    return out, layer


def merge_sliced(c):
    """Yields (name, reference values) for every tensor the slices make; then the layer
    count, as ("", count)."""
    paths = {s["model"] for sl in c["slices"] for s in sl["sources"]} | ({c["base"]} if c.get("base") else set())
    readers = {p: gguf.GGUFReader(p) for p in paths}
    tables = {p: {t.name: t for t in r.tensors} for p, r in readers.items()}
    layout, layers = sliced_layout(c, readers)
    for out_name, (base_in, parts, st) in layout:
        xs = [values(tables[p][n]) for p, n, *_ in parts]
        mc = dict(st, models=[{"weight": w, "density": d} for _, _, w, d, _ in parts])
        if st["method"] == "passthrough":
            scale = parts[0][4]
            x = xs[0]
            yield out_name, x if scale is None else (x.astype(np.float64) * scale).astype(np.float32)
        elif st["method"] == "linear":
            yield out_name, linear(mc, xs)
        elif st["method"] == "slerp":
            yield out_name, slerp(st["t"], values(tables[base_in[0]][base_in[1]]), xs[0])
        else:
            yield out_name, task_arithmetic(mc, out_name, values(tables[base_in[0]][base_in[1]]), xs)
    yield "", layers


def main():
    args = sys.argv[1:]
    timing = "--time" in args
    args = [a for a in args if a != "--time"]
    checks, out = json.load(open(args[0])), args[1]
    results = []
    for c in checks:
        if timing:
            start = time.perf_counter()
            for _ in merge_sliced(c) if "slices" in c else merge_all(c):
                pass
            results.append({"seconds": time.perf_counter() - start})
            continue
        reader = gguf.GGUFReader(c["merged"])
        merged = {t.name: t for t in reader.tensors}
        worst, where, compared, expected, layers = 0.0, None, 0, [], None
        for name, ref in merge_sliced(c) if "slices" in c else merge_all(c):
            if name == "":
                layers = ref
                continue
            expected.append(name)
            if name not in merged:
                continue
            got = values(merged[name])
            diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
            scale = np.abs(ref.astype(np.float64))
            rel = np.where(diff == 0, 0.0, diff / np.where(scale == 0, 1e-300, scale))
            r = float(rel.max()) if rel.size else 0.0
            compared += 1
            if r > worst or where is None:
                worst, where = max(worst, r), name
        r = {"merged": c["merged"], "tensors": compared, "max_rel": worst, "worst": where}
        if "slices" in c:
            arch = bytes(reader.get_field("general.architecture").parts[-1]).decode()
            field = reader.get_field(f"{arch}.block_count")
            r["block_count"] = int(field.parts[-1][0])
            r["layers"] = layers
            r["missing"] = [n for n in expected if n not in merged]
            r["unexpected"] = [n for n in merged if n not in expected]
        results.append(r)
    json.dump(results, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
