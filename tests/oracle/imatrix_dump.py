"""gguf-py's reading of an importance matrix (the GGUF llama-imatrix writes), for
tests/it/predict.rs: usage imatrix_dump.py IMATRIX.gguf OUT.json. Per tensor its type,
shape (ggml order) and values as the bits of each f32, so the comparison is exact; and
the imatrix.* metadata."""
import json, sys
import gguf
import numpy as np

r = gguf.GGUFReader(sys.argv[1])
doc = {"kv": {}, "tensors": {}}
for k, f in r.fields.items():
    if k.startswith("imatrix.") or k == "general.type":
        doc["kv"][k] = f.contents()
for t in r.tensors:
    doc["tensors"][t.name] = {
        "type": t.tensor_type.name,
        "shape": [int(d) for d in t.shape],
        "bits": np.asarray(t.data, dtype=np.float32).reshape(-1).view(np.uint32).tolist(),
    }
with open(sys.argv[2], "w") as f:
    json.dump(doc, f)
