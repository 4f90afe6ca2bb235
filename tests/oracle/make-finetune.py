#!/usr/bin/env python3
"""A seeded stand-in for a finetune of a GGUF: the base with a delta on some tensors, for
`organ merge`'s identities (tests/it/merge.rs).

    make-finetune.py BASE.gguf OUT.gguf SEED SCALE NAME_PART[,NAME_PART...]

Every F32 or F16 tensor whose name contains one of the NAME_PARTs gets
SCALE * std(tensor) * N(0, 1) added (NumPy's default_rng(SEED), tensor by tensor in file
order), and is written in its own type; every other tensor and all metadata are copied as
they are.
"""
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter, GGMLQuantizationType
from gguf.constants import GGML_QUANT_SIZES


def main(src, dst, seed, scale, parts):
    rng = np.random.default_rng(int(seed))
    scale = float(scale)
    parts = parts.split(",")
    r = GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = f.types[0]
        if vtype == GGUFValueType.ARRAY:
            sub = f.types[1] if len(f.types) > 1 else None
            w.add_key_value(name, f.contents(), vtype, sub_type=sub)
        else:
            w.add_key_value(name, f.contents(), vtype)
    for t in r.tensors:
        shape = [int(d) for d in t.shape]
        floats = t.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16)
        if floats and any(p in t.name for p in parts):
            v = np.asarray(t.data).astype(np.float64).reshape(list(reversed(shape)))
            v = v + scale * v.std() * rng.standard_normal(v.shape)
            dtype = np.float32 if t.tensor_type == GGMLQuantizationType.F32 else np.float16
            w.add_tensor(t.name, v.astype(dtype), raw_dtype=t.tensor_type)
            continue
        block, type_size = GGML_QUANT_SIZES[t.tensor_type]
        raw = np.frombuffer(np.asarray(t.data).tobytes(), dtype=np.uint8)
        raw = raw.reshape(list(reversed(shape[1:])) + [shape[0] // block * type_size])
        w.add_tensor(t.name, raw, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
