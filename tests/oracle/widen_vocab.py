"""Copy a llama-architecture GGUF with N extra tokens: a model llama.cpp loads whose
vocabulary differs from its source's (tests/it/eval.rs: eval refuses such a base).

    python widen_vocab.py IN.gguf N OUT.gguf

The new tokens are `<organ_extra_I>` of type USER_DEFINED; token_embd.weight (and output.weight
when the model has one) gets N more rows, copies of its first rows, so every shape stays
consistent. Everything else is copied as it is.
"""
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter, TokenType
from gguf.constants import GGML_QUANT_SIZES


def main(src, n, dst):
    n = int(n)
    r = GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = f.contents()
        vtype = f.types[0]
        if name == "tokenizer.ggml.tokens":
            value = value + [f"<organ_extra_{i}>" for i in range(n)]
        elif name == "tokenizer.ggml.token_type":
            value = value + [int(TokenType.USER_DEFINED)] * n
        elif name == "tokenizer.ggml.scores":
            value = value + [0.0] * n
        elif name == f"{arch}.vocab_size":
            value = value + n
        if vtype == GGUFValueType.ARRAY:
            sub = f.types[1] if len(f.types) > 1 else None
            w.add_key_value(name, value, vtype, sub_type=sub)
        else:
            w.add_key_value(name, value, vtype)
    for t in r.tensors:
        data = np.asarray(t.data)
        shape = [int(d) for d in t.shape]  # ggml order: ne0 first
        if t.name in ("token_embd.weight", "output.weight"):
            rows = data.reshape(shape[1], -1)
            data = np.concatenate([rows, rows[:n]], axis=0)
            shape[1] += n
        block, type_size = GGML_QUANT_SIZES[t.tensor_type]
        nbytes = shape[0] // block * type_size
        for d in shape[1:]:
            nbytes *= d
        raw = np.frombuffer(data.tobytes(), dtype=np.uint8)
        assert raw.size == nbytes, (t.name, raw.size, nbytes)
        # The writer takes a quantized tensor as bytes shaped (..., row bytes).
        row_bytes = shape[0] // block * type_size
        raw = raw.reshape(list(reversed(shape[1:])) + [row_bytes])
        w.add_tensor(t.name, raw, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
