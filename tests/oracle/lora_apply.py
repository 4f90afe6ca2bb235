"""A "finetune" of a base made with gguf-py alone: the base with an adapter merged in
NumPy, W' = W + (alpha / r) * B.A in float32, the adapted tensors written F32 and every
other tensor and key copied as it is (tests/it/lora_extract.rs extracts the adapter back).

    python lora_apply.py BASE.gguf ADAPTER.gguf OUT.gguf

The adapter is one tests/oracle/make-lora.py writes (alpha present; token_embd's pair the
other way round).
"""
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize


def values(t):
    """A tensor's values as float32, NumPy shape (ne1, ne0)."""
    return dequantize(t.data, t.tensor_type).astype(np.float32).reshape(int(t.shape[1]), int(t.shape[0]))


def deltas(path):
    """{weight name: delta W as float32, NumPy shape (n_out, n_in) as the weight's}."""
    r = GGUFReader(path)
    alpha = float(r.fields["adapter.lora.alpha"].contents())
    halves = {t.name: t for t in r.tensors}
    out = {}
    for name, a in halves.items():
        if not name.endswith(".lora_a"):
            continue
        target = name[: -len(".lora_a")]
        b = halves[target + ".lora_b"]
        la, lb = values(a), values(b)
        if target.startswith("token_embd"):
            # lora_a (n_vocab, r), lora_b (n_embd, r): delta = lora_a . lora_b^T.
            rank = la.shape[1]
            d = la.astype(np.float64) @ lb.astype(np.float64).T
        else:
            # lora_a (r, n_in), lora_b (n_out, r): delta = lora_b . lora_a.
            rank = la.shape[0]
            d = lb.astype(np.float64) @ la.astype(np.float64)
        out[target] = (alpha / rank * d).astype(np.float32)
    return out


def main(base, adapter, dst):
    r = GGUFReader(base)
    delta = deltas(adapter)
    arch = r.fields["general.architecture"].contents()
    w = GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if f.types[0] == GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), f.types[0], sub_type=f.types[1] if len(f.types) > 1 else None)
        else:
            w.add_key_value(name, f.contents(), f.types[0])
    for t in r.tensors:
        if t.name in delta:
            w.add_tensor(t.name, values(t) + delta[t.name])
            continue
        shape = [int(d) for d in t.shape]
        block, type_size = GGML_QUANT_SIZES[t.tensor_type]
        raw = np.frombuffer(np.asarray(t.data).tobytes(), dtype=np.uint8)
        w.add_tensor(t.name, raw.reshape(list(reversed(shape[1:])) + [shape[0] // block * type_size]),
                     raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
