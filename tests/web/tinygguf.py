"""The small GGUF writer the browser tests' model makers share (make-pair.py, make-moe.py):
little-endian GGUF v3, 32-byte alignment, llama architecture, values encoded by hand so
that the files are the same bytes on every machine."""
import struct

ALIGN = 32
F32, F16, Q8_0, Q8_K = 0, 1, 8, 15


def s(x):
    """A GGUF string: u64 length, UTF-8 bytes."""
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def f32(v):
    return struct.pack(f"<{len(v)}f", *v)


def f16(v):
    return struct.pack(f"<{len(v)}e", *v)


def q8_0(v):
    """Q8_0 blocks of v (a multiple of 32 values): an f16 scale, 32 int8s."""
    out = []
    for i in range(0, len(v), 32):
        blk = v[i:i + 32]
        d = max(abs(x) for x in blk) / 127 or 1.0
        d = struct.unpack("<e", struct.pack("<e", d))[0]
        out.append(struct.pack("<e", d) + struct.pack("<32b", *[max(-127, min(127, round(x / d))) for x in blk]))
    return b"".join(out)


def u32_kv(key, value):
    """A metadata pair of type u32."""
    return s(key) + struct.pack("<II", 4, value)


def write(path, tensors, name, kvs=()):
    """Writes tensors, a list of (name, type, dims, data bytes), with general.architecture
    llama, general.name `name` and the encoded metadata pairs `kvs`."""
    kv = s("general.architecture") + struct.pack("<I", 8) + s("llama")
    kv += s("general.name") + struct.pack("<I", 8) + s(name)
    kv += b"".join(kvs)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 2 + len(kvs)) + kv
    off, infos, datas = 0, b"", []
    for tname, ty, dims, data in tensors:
        infos += s(tname) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", ty, off)
        pad = (-len(data)) % ALIGN
        datas.append(data + b"\0" * pad)
        off += len(data) + pad
    head += infos
    head += b"\0" * ((-len(head)) % ALIGN)
    with open(path, "wb") as f:
        f.write(head + b"".join(datas))
