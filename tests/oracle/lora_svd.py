"""The oracle of `organ lora extract`: per 2-D weight that differs between a base and a
finetune, delta W = T - B materialized (gguf-py's dequantize, float32 as organ computes
it), its exact SVD (np.linalg.svd, float64), and the share of ||delta W||_F^2 that rank R
keeps. Prints JSON: {"rank": R, "tensors": {name: share}, "seconds": time in the SVDs}.

    python lora_svd.py BASE.gguf TUNED.gguf RANK [--name PATTERN]

--name keeps the weights whose name matches the glob (fnmatch's `*`). --factors times the
SVD that gives the factors too (U, S, V^T, full_matrices=False) in float32, as organ does:
the peer of bench/lora-extract.sh. The time is that of np.linalg.svd alone.
"""
import argparse
import fnmatch
import json
import time

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def values(t):
    return dequantize(t.data, t.tensor_type).astype(np.float32).reshape(int(t.shape[1]), int(t.shape[0]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("base")
    p.add_argument("tuned")
    p.add_argument("rank", type=int)
    p.add_argument("--name")
    p.add_argument("--factors", action="store_true")
    a = p.parse_args()
    base = {t.name: t for t in GGUFReader(a.base).tensors}
    shares, seconds = {}, 0.0
    for t in GGUFReader(a.tuned).tensors:
        if len(t.shape) != 2 or (a.name and not fnmatch.fnmatchcase(t.name, a.name)):
            continue
        d = values(t) - values(base[t.name])
        if not d.any():
            continue
        start = time.perf_counter()
        if a.factors:
            s = np.linalg.svd(d, full_matrices=False)[1].astype(np.float64)
        else:
            s = np.linalg.svd(d.astype(np.float64), compute_uv=False)
        seconds += time.perf_counter() - start
        s2 = s * s
        shares[t.name] = float(s2[: a.rank].sum() / s2.sum())
    print(json.dumps({"rank": a.rank, "tensors": shares, "seconds": seconds}))


if __name__ == "__main__":
    main()
