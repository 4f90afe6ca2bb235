#!/usr/bin/env python3
"""Write a > 4 GiB GGUF as a sparse file: a 4.56 GB all-zero Q8_0 tensor, then a small F16
tensor of random values stored past the 4 GiB mark. A reader that wraps offsets at 32 bits
reads zeros for the second tensor and gets a different θ. Usage: make-big.py OUT.gguf"""
import random, struct, sys

def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b

ALIGN = 32
Q8_0, F16 = 8, 1
tensors = [("blk.0.ffn_up.weight", Q8_0, [4096, 1 << 20], 4096 * (1 << 20) // 32 * 34),
           ("blk.0.attn_q.weight", F16, [1024, 1024], 1024 * 1024 * 2)]
kv = s("general.architecture") + struct.pack("<I", 8) + s("llama")
kv += s("general.name") + struct.pack("<I", 8) + s("big sparse test model")
head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 2) + kv
off = 0
infos = b""
for name, ty, dims, n in tensors:
    infos += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
    infos += struct.pack("<IQ", ty, off)
    off += -(-n // ALIGN) * ALIGN
head += infos
data_start = -(-len(head) // ALIGN) * ALIGN
rng = random.Random(7)
second = tensors[0][3] + (-tensors[0][3]) % ALIGN
with open(sys.argv[1], "wb") as f:
    f.write(head + b"\0" * (data_start - len(head)))
    f.seek(data_start + second)
    vals = [rng.gauss(0, 0.02) for _ in range(1024 * 1024)]
    f.write(struct.pack(f"<{len(vals)}e", *vals))
print(sys.argv[1])
