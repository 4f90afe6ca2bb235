#!/usr/bin/env python3
"""Helpers of bench/quantize-fma.sh, on gguf-py's reader and numpy.

quantize-fma-compare.py compare REF.gguf OTHER.gguf INPUT.gguf [LOG]
  Prints one line: `identical` when the two files are byte-identical, otherwise
  `T/TQ tensors, B/BQ blocks, err +E%`: the quantized tensors whose data differ of all quantized
  tensors, the blocks (type_size bytes of the tensor's type) that differ of all their blocks,
  and on those differing blocks how much larger OTHER's RMS error against INPUT (the F16 both
  were quantized from) is than REF's (negative: OTHER is closer). Unquantized tensors (F32,
  F16) are not counted; if one differs, `+ N unquantized tensors` is added. Each differing
  tensor (name, type, blocks) is appended to LOG when given. Exits 2 if the files do not hold
  the same tensors with the same types and shapes (a different plan, not a different rounding).

quantize-fma-compare.py perturb IN.gguf OUT.gguf SIGMA
  Copies IN (an F16 model) to OUT, adding to every F16 tensor Gaussian noise of SIGMA times the
  tensor's standard deviation (seeded: the same OUT every time), so that its weights no longer
  sit on the grid of the quantized model IN was dequantized from.

quantize-fma-compare.py summary LOG
  For each file of LOG (written by compare) with differing tensors: the blocks that differ of
  all blocks, per tensor type (Q5_K: 51318/55296 ...), over the differing tensors of that type."""
import shutil
import sys

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize


def compare(ref_path, other_path, input_path, log_path=None):
    log = open(log_path, "a") if log_path else None
    a_bytes = np.memmap(ref_path, dtype=np.uint8, mode="r")
    b_bytes = np.memmap(other_path, dtype=np.uint8, mode="r")
    if a_bytes.shape == b_bytes.shape and np.array_equal(a_bytes, b_bytes):
        print("identical")
        return 0
    a, b = GGUFReader(ref_path), GGUFReader(other_path)
    plan = lambda r: [(t.name, int(t.tensor_type), tuple(int(x) for x in t.shape)) for t in r.tensors]
    if plan(a) != plan(b):
        print("different tensors/types/shapes: not comparable block by block")
        return 2
    inputs = {t.name: t for t in GGUFReader(input_path).tensors}
    t_quant = t_diff = blocks = b_diff = unquant_diff = 0
    err_a = err_b = 0.0
    for ta, tb in zip(a.tensors, b.tensors):
        block_size, type_size = GGML_QUANT_SIZES[ta.tensor_type]
        ra = a_bytes[ta.data_offset:ta.data_offset + ta.n_bytes].reshape(-1, type_size)
        rb = b_bytes[tb.data_offset:tb.data_offset + tb.n_bytes].reshape(-1, type_size)
        differs = (ra != rb).any(axis=1)
        d = int(np.count_nonzero(differs))
        if block_size == 1:  # F32, F16, ...: copied, not quantized
            unquant_diff += d > 0
            continue
        t_quant += 1
        blocks += ra.shape[0]
        if not d:
            continue
        t_diff += 1
        b_diff += d
        x = np.asarray(inputs[ta.name].data, dtype=np.float32).reshape(-1, block_size)[differs]
        for r, t in ((ra, ta), (rb, tb)):
            y = dequantize(np.asarray(r), t.tensor_type).reshape(-1, block_size)[differs]
            e = float(np.sum((y.astype(np.float64) - x) ** 2))
            if t is ta:
                err_a += e
            else:
                err_b += e
        if log:
            print(f"{ta.name}\t{ta.tensor_type.name}\t{d}/{ra.shape[0]} blocks", file=log)
    cell = f"{t_diff}/{t_quant} tensors, {b_diff}/{blocks} blocks"
    if b_diff:
        cell += f", err {100 * (np.sqrt(err_b / err_a) - 1):+.2f}%" if err_a else ", err n/a"
    if unquant_diff:
        cell += f" + {unquant_diff} unquantized tensors"
    print(cell)
    return 0


def perturb(in_path, out_path, sigma):
    shutil.copyfile(in_path, out_path)
    rng = np.random.default_rng(0)
    for t in GGUFReader(out_path, "r+").tensors:
        if t.tensor_type != GGMLQuantizationType.F16:
            continue
        x = np.asarray(t.data, dtype=np.float32)
        x += np.float32(sigma * x.std()) * rng.standard_normal(x.shape, dtype=np.float32)
        t.data[...] = x.astype(np.float16)


def summary(log_path):
    rows, head = {}, None
    for line in open(log_path):
        line = line.rstrip("\n")
        if line.startswith("== "):
            head = line[3:]
            continue
        _, ty, blocks = line.split("\t")
        d, n = (int(v) for v in blocks.split()[0].split("/"))
        per = rows.setdefault(head, {}).setdefault(ty, [0, 0, 0])
        per[0] += 1
        per[1] += d
        per[2] += n
    for head, per in rows.items():
        cells = [f"{ty} {d}/{n} ({100 * d / n:.2f}%) in {t} tensors" for ty, (t, d, n) in sorted(per.items())]
        print(f"  {head}  " + ", ".join(cells))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "compare":
        sys.exit(compare(*args))
    if cmd == "perturb":
        perturb(args[0], args[1], float(args[2]))
        sys.exit(0)
    if cmd == "summary":
        summary(args[0])
        sys.exit(0)
    sys.exit(f"unknown command {cmd!r}; see the docstring")
