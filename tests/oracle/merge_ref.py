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


def main():
    args = sys.argv[1:]
    timing = "--time" in args
    args = [a for a in args if a != "--time"]
    checks, out = json.load(open(args[0])), args[1]
    results = []
    for c in checks:
        if timing:
            start = time.perf_counter()
            for _ in merge_all(c):
                pass
            results.append({"seconds": time.perf_counter() - start})
            continue
        merged = {t.name: t for t in gguf.GGUFReader(c["merged"]).tensors}
        worst, where, compared = 0.0, None, 0
        for name, ref in merge_all(c):
            got = values(merged[name])
            diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
            scale = np.abs(ref.astype(np.float64))
            rel = np.where(diff == 0, 0.0, diff / np.where(scale == 0, 1e-300, scale))
            r = float(rel.max()) if rel.size else 0.0
            compared += 1
            if r > worst or where is None:
                worst, where = max(worst, r), name
        results.append({"merged": c["merged"], "tensors": compared, "max_rel": worst, "worst": where})
    json.dump(results, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
