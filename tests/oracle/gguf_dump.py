#!/usr/bin/env python3
"""Dump what gguf-py 0.19.0 reads from a GGUF, for tests to compare organ against.

Usage: gguf_dump.py MODEL.gguf OUT.json
Metadata (key, gguf-py's type list, value), the data offset and alignment, and per tensor
its type, shape, absolute data offset, byte size and the sha256 of its dequantized f32
values (gguf.quants.dequantize; F64/I* as the typed array cast to float32).
"""
import hashlib, json, sys
import numpy as np
import gguf
from gguf.quants import dequantize

path, out = sys.argv[1], sys.argv[2]
r = gguf.GGUFReader(path)
meta = []
for key, f in r.fields.items():
    if key.startswith("GGUF."):
        continue
    meta.append({"key": key, "types": [t.name for t in f.types], "value": f.contents()})
tensors = []
for t in r.tensors:
    try:
        v = np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        digest = hashlib.sha256(v.tobytes()).hexdigest()
    except NotImplementedError:
        v = np.ascontiguousarray(np.asarray(t.data).astype(np.float32))
        digest = hashlib.sha256(v.tobytes()).hexdigest()
    tensors.append({
        "name": t.name, "type": t.tensor_type.name, "shape": [int(d) for d in t.shape],
        "data_offset": int(t.data_offset), "n_bytes": int(t.n_bytes), "sha256_f32": digest,
    })
json.dump({"data_offset": int(r.data_offset), "alignment": int(r.alignment), "metadata": meta, "tensors": tensors},
          open(out, "w"))
