#!/usr/bin/env python3
"""A synthetic importance matrix in llama-imatrix's GGUF format for a model llama.cpp
cannot run (bench/make-big-base.py's, which has no tokenizer): for every block weight,
seeded mean squares over 4 decades as if from 512 tokens, with the metadata
llama-quantize asks for (bench/quantize-vs-llama.sh, bench/recipe-big.sh).

    make-synthetic-imatrix.py MODEL.gguf OUT.imatrix.gguf
"""
import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter

rng = np.random.default_rng(0)
w = GGUFWriter(sys.argv[2], "")
w.add_type("imatrix")
w.add_array("imatrix.datasets", ["synthetic"])
w.add_uint32("imatrix.chunk_count", 4)
w.add_uint32("imatrix.chunk_size", 128)
for t in GGUFReader(sys.argv[1]).tensors:
    if t.name.startswith("blk.") and len(t.shape) == 2:
        n_in = int(t.shape[0])
        w.add_tensor(t.name + ".in_sum2", (512 * 10 ** rng.uniform(-4, 0, n_in)).astype(np.float32).reshape(1, n_in))
        w.add_tensor(t.name + ".counts", np.full((1, 1), 512, dtype=np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
