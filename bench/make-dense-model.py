#!/usr/bin/env python3
"""Write a dense GGUF of at least SIZE_MB megabytes of non-zero tensor data, for
throughput benches that must read every byte (bench/check-vs-cat.sh): 64 MiB tensors,
three Q8_0 (random finite f16 scales, random int8 codes) for every F16 (random normal
values), each tensor different. Usage: make-dense-model.py OUT.gguf [SIZE_MB=1100]
"""
import struct, sys
import numpy as np

out = sys.argv[1]
size_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 1100
F16, Q8_0 = 1, 8
TENSOR = 64 << 20
ALIGN = 32
rng = np.random.default_rng(17)

def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b

n = -(-size_mb * 10**6 // TENSOR)
tensors = []  # (name, dims, type, bytes)
for i in range(n):
    if i % 4 == 3:
        tensors.append((f"dense.{i}.weight", [4096, TENSOR // 2 // 4096], F16, TENSOR))
    else:
        blocks = TENSOR // 34
        tensors.append((f"dense.{i}.weight", [4096, blocks * 32 // 4096], Q8_0, blocks * 32 // 4096 * 4096 // 32 * 34))
kvs = [s("general.architecture") + struct.pack("<I", 8) + s("bench"),
       s("general.name") + struct.pack("<I", 8) + s("dense bench model"),
       s("general.alignment") + struct.pack("<II", 4, ALIGN)]
head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
off = 0
for name, dims, ty, nbytes in tensors:
    head += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
    head += struct.pack("<IQ", ty, off)
    off += -(-nbytes // ALIGN) * ALIGN
with open(out, "wb") as f:
    f.write(head + b"\0" * (-len(head) % ALIGN))
    for name, dims, ty, nbytes in tensors:
        if ty == F16:
            data = rng.standard_normal(nbytes // 2, dtype=np.float32).astype(np.float16).tobytes()
        else:
            blocks = nbytes // 34
            b = np.empty((blocks, 34), np.uint8)
            d = (rng.random(blocks, dtype=np.float32) * 0.01 + 1e-4).astype(np.float16)
            b[:, :2] = d.view(np.uint8).reshape(blocks, 2)
            b[:, 2:] = rng.integers(-127, 128, (blocks, 32), dtype=np.int8).view(np.uint8)
            data = b.tobytes()
        f.write(data + b"\0" * (-len(data) % ALIGN))
print(out)
