#!/usr/bin/env python3
"""An adapter's twin in F32: the same metadata and tensors, each tensor's values as
stored (dequantized by gguf-py). llama-export-lora refuses quantized adapters, so the
merge tests give it this twin of a Q8_0 adapter to merge the same values organ merges.

    dequantize-lora.py IN OUT
"""

import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter
from gguf.quants import dequantize


def main():
    src, out = sys.argv[1], sys.argv[2]
    r = GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = GGUFWriter(out, arch)
    w.add_type(bytes(r.fields["general.type"].parts[-1]).decode())
    w.add_string("adapter.type", bytes(r.fields["adapter.type"].parts[-1]).decode())
    w.add_float32("adapter.lora.alpha", float(r.fields["adapter.lora.alpha"].parts[-1][0]))
    for t in r.tensors:
        # numpy shape: ggml dims reversed.
        shape = tuple(int(d) for d in reversed(t.shape))
        values = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        w.add_tensor(t.name, values)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
