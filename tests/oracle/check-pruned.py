#!/usr/bin/env python3
"""Checks a pruned MoE against its source with gguf-py, independently of organ.

    check-pruned.py SOURCE PRUNED KEPT OUT_JSON

KEPT is the experts kept, comma-separated, ascending. Per-expert tensors are found by
llama.cpp's names (llama-arch.cpp: blk.N.*_exps, ffn_gate_inp, exp_probs_b, weight or
bias); each must have the source's expert count as its last ggml dim, and the pruned
tensor's bytes must be the source's expert slices KEPT, in order (numpy indexing along
the expert axis). Every other tensor must be byte-identical, in the same order. Writes
{"sliced": [names], "expert_count": n, "expert_used_count": k} to OUT_JSON; any
difference is an assertion error.
"""

import json
import re
import sys

import numpy as np
from gguf import GGUFReader

PER_EXPERT = re.compile(r"^blk\.\d+\.(\w+_exps|ffn_gate_inp|exp_probs_b)\.(weight|bias)$")


def raw(t):
    return np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)


def field(r, key):
    f = r.fields.get(key)
    return None if f is None else f.contents()


def main():
    src, out, kept, dest = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",")], sys.argv[4]
    a, b = GGUFReader(src), GGUFReader(out)
    arch = field(a, "general.architecture")
    n_exp = int(field(a, f"{arch}.expert_count"))
    assert [t.name for t in a.tensors] == [t.name for t in b.tensors], "tensor names or order differ"
    sliced = []
    for t, u in zip(a.tensors, b.tensors):
        assert t.tensor_type == u.tensor_type, f"{t.name}: type changed"
        shape, new_shape = [int(x) for x in t.shape], [int(x) for x in u.shape]
        if PER_EXPERT.match(t.name):
            assert shape[-1] == n_exp, f"{t.name}: last dim {shape[-1]}, expert count {n_exp}"
            assert new_shape == shape[:-1] + [len(kept)], f"{t.name}: shape {new_shape}"
            want = raw(t).reshape(n_exp, -1)[kept].reshape(-1)
            assert np.array_equal(raw(u), want), f"{t.name}: bytes are not experts {kept}"
            sliced.append(t.name)
        else:
            assert new_shape == shape, f"{t.name}: shape changed"
            assert np.array_equal(raw(u), raw(t)), f"{t.name}: bytes changed"
    doc = {
        "sliced": sliced,
        "expert_count": int(field(b, f"{arch}.expert_count")),
        "expert_used_count": int(field(b, f"{arch}.expert_used_count")),
    }
    with open(dest, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
