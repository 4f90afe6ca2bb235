#!/usr/bin/env python3
"""Small test models of four families (llama, qwen2, gemma3, deepseek2), with headers and
shapes as llama.cpp 11434's loaders expect them (models/<arch>.cpp, load_arch_hparams and
load_arch_tensors), and broken copies of the llama one, each broken in one known way.

    make-family-models.py TOKENIZER_GGUF OUT_DIR [--f16-256]

The tokenizer metadata (every tokenizer.* key) is copied from TOKENIZER_GGUF (SmolLM2),
so llama.cpp builds a real vocabulary; the weights are random (seeded), matrices Q8_0
and Q4_1, vectors F32. OUT_DIR/families.json lists every file and, for the broken copies,
the findings `organ check` must report (kind, severity, subject): the break defines them.

With --f16-256, the four families alone, every matrix F16 and every row (a matrix's first
dimension) a multiple of 256, so that every K-quant applies and llama-quantize's mixes
decide each tensor's type by their per-architecture rules, not by the fallbacks for rows
that are not whole blocks (tests/it/quantize.rs).
"""

import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGML_QUANT_SIZES, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import quantize

N_EMBD, N_HEAD, N_HEAD_KV, HEAD, N_FF, N_LAYER = 64, 4, 2, 16, 128, 2
# Every matrix in this type instead of the one each is given (--f16-256).
MATRIX_TYPE = None


def tokenizer_kvs(path):
    """Every tokenizer.* key of `path`: (key, value, type, subtype)."""
    r = GGUFReader(path)
    out = []
    for f in r.fields.values():
        if f.name.startswith("tokenizer."):
            sub = f.types[-1] if f.types[0] == GGUFValueType.ARRAY else None
            out.append((f.name, f.contents(), f.types[0], sub))
    return out


class Model:
    """Tensors in order, each (name, ggml shape, type, bytes as uint8)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.tensors = []

    def add(self, name, shape, qtype=None):
        """A random tensor of ggml shape `shape`: vectors F32 around 1, matrices quantized."""
        np_shape = tuple(reversed(shape))
        if len(shape) == 1 or qtype is None:
            base = 1.0 if len(shape) == 1 else 0.0
            data = (base + 0.05 * self.rng.standard_normal(np_shape)).astype(np.float32)
            self.tensors.append([name, list(shape), Q.F32, data.view(np.uint8).reshape(-1)])
        else:
            qtype = MATRIX_TYPE or qtype
            data = (0.05 * self.rng.standard_normal(np_shape)).astype(np.float32)
            self.tensors.append([name, list(shape), qtype, quantize(data, qtype).view(np.uint8).reshape(-1)])

    def get(self, name):
        return next(t for t in self.tensors if t[0] == name)


def qkv(m, i, q, k, v, bias=False):
    m.add(f"blk.{i}.attn_q.weight", [N_EMBD, q], Q.Q8_0)
    m.add(f"blk.{i}.attn_k.weight", [N_EMBD, k], Q.Q8_0)
    m.add(f"blk.{i}.attn_v.weight", [N_EMBD, v], Q.Q8_0)
    if bias:
        for n, w in (("q", q), ("k", k), ("v", v)):
            m.add(f"blk.{i}.attn_{n}.bias", [w])


def dense_ffn(m, i):
    m.add(f"blk.{i}.ffn_gate.weight", [N_EMBD, N_FF], Q.Q4_1)
    m.add(f"blk.{i}.ffn_up.weight", [N_EMBD, N_FF], Q.Q4_1)
    m.add(f"blk.{i}.ffn_down.weight", [N_FF, N_EMBD], Q.Q4_1)


def build(arch, n_vocab, seed):
    """The tensors and architecture keys of one family."""
    m = Model(seed)
    m.add("token_embd.weight", [N_EMBD, n_vocab], Q.Q8_0)
    m.add("output_norm.weight", [N_EMBD])
    kv = {
        "context_length": (2048, "u32"),
        "embedding_length": (N_EMBD, "u32"),
        "block_count": (N_LAYER, "u32"),
        "feed_forward_length": (N_FF, "u32"),
        "attention.head_count": (N_HEAD, "u32"),
        "attention.head_count_kv": (N_HEAD_KV, "u32"),
        "attention.layer_norm_rms_epsilon": (1e-5, "f32"),
        "rope.freq_base": (10000.0, "f32"),
    }
    for i in range(N_LAYER):
        m.add(f"blk.{i}.attn_norm.weight", [N_EMBD])
        if arch == "deepseek2":
            deepseek2_layer(m, i)
            continue
        qkv(m, i, HEAD * N_HEAD, HEAD * N_HEAD_KV, HEAD * N_HEAD_KV, bias=arch == "qwen2")
        m.add(f"blk.{i}.attn_output.weight", [HEAD * N_HEAD, N_EMBD], Q.Q8_0)
        if arch == "gemma3":
            m.add(f"blk.{i}.post_attention_norm.weight", [N_EMBD])
            m.add(f"blk.{i}.attn_k_norm.weight", [HEAD])
            m.add(f"blk.{i}.attn_q_norm.weight", [HEAD])
        m.add(f"blk.{i}.ffn_norm.weight", [N_EMBD])
        dense_ffn(m, i)
        if arch == "gemma3":
            m.add(f"blk.{i}.post_ffw_norm.weight", [N_EMBD])
    if arch == "gemma3":
        kv["attention.key_length"] = (HEAD, "u32")
        kv["attention.value_length"] = (HEAD, "u32")
    if arch == "deepseek2":
        kv.update({
            "leading_dense_block_count": (1, "u32"),
            "expert_count": (DS_EXPERTS, "u32"),
            "expert_used_count": (2, "u32"),
            "expert_shared_count": (1, "u32"),
            "expert_feed_forward_length": (DS_FF_EXP, "u32"),
            "attention.q_lora_rank": (DS_Q_LORA, "u32"),
            "attention.kv_lora_rank": (DS_KV_LORA, "u32"),
            "attention.key_length": (DS_NOPE + DS_ROPE, "u32"),
            "attention.value_length": (HEAD, "u32"),
            "rope.dimension_count": (DS_ROPE, "u32"),
        })
        kv["attention.head_count_kv"] = (N_HEAD, "u32")
    return m, kv


DS_EXPERTS, DS_FF_EXP, DS_Q_LORA, DS_KV_LORA, DS_NOPE, DS_ROPE = 4, 32, 32, 32, 16, 8


def deepseek2_layer(m, i):
    """Layer i of deepseek2 without MLA keys (attn_kv_b whole), layer 0 dense."""
    k_head = DS_NOPE + DS_ROPE
    m.add(f"blk.{i}.attn_q_a_norm.weight", [DS_Q_LORA])
    m.add(f"blk.{i}.attn_kv_a_norm.weight", [DS_KV_LORA])
    m.add(f"blk.{i}.attn_q_a.weight", [N_EMBD, DS_Q_LORA], Q.Q8_0)
    m.add(f"blk.{i}.attn_q_b.weight", [DS_Q_LORA, N_HEAD * k_head], Q.Q8_0)
    m.add(f"blk.{i}.attn_kv_a_mqa.weight", [N_EMBD, DS_KV_LORA + DS_ROPE], Q.Q8_0)
    m.add(f"blk.{i}.attn_kv_b.weight", [DS_KV_LORA, N_HEAD * (DS_NOPE + HEAD)], Q.Q8_0)
    m.add(f"blk.{i}.attn_output.weight", [N_HEAD * HEAD, N_EMBD], Q.Q8_0)
    m.add(f"blk.{i}.ffn_norm.weight", [N_EMBD])
    if i == 0:
        dense_ffn(m, i)
        return
    m.add(f"blk.{i}.ffn_gate_inp.weight", [N_EMBD, DS_EXPERTS])
    m.add(f"blk.{i}.ffn_down_exps.weight", [DS_FF_EXP, N_EMBD, DS_EXPERTS], Q.Q8_0)
    m.add(f"blk.{i}.ffn_gate_exps.weight", [N_EMBD, DS_FF_EXP, DS_EXPERTS], Q.Q8_0)
    m.add(f"blk.{i}.ffn_up_exps.weight", [N_EMBD, DS_FF_EXP, DS_EXPERTS], Q.Q8_0)
    m.add(f"blk.{i}.ffn_gate_shexp.weight", [N_EMBD, DS_FF_EXP], Q.Q8_0)
    m.add(f"blk.{i}.ffn_down_shexp.weight", [DS_FF_EXP, N_EMBD], Q.Q8_0)
    m.add(f"blk.{i}.ffn_up_shexp.weight", [N_EMBD, DS_FF_EXP], Q.Q8_0)


def write(path, arch, m, kv, tok, file_type=7):
    w = GGUFWriter(str(path), arch)
    w.add_name(f"organ test {arch}")
    w.add_file_type(file_type)  # 7: MOSTLY_Q8_0, 1: MOSTLY_F16
    for k, (v, t) in kv.items():
        (w.add_uint32 if t == "u32" else w.add_float32)(f"{arch}.{k}", v)
    for key, val, vtype, sub in tok:
        w.add_key_value(key, val, vtype, sub_type=sub)
    for name, shape, qtype, data in m.tensors:
        bs, ts = GGML_QUANT_SIZES[qtype]
        byte_shape = list(reversed(shape[1:])) + [shape[0] // bs * ts]
        w.add_tensor(name, data, raw_shape=byte_shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def nan_scale(t, block):
    """Sets block `block`'s d (its first two bytes, an f16) to NaN."""
    size = {Q.Q8_0: 34, Q.Q4_1: 20}[t[2]]
    t[3] = t[3].copy()
    t[3][block * size: block * size + 2] = np.frombuffer(np.float16(np.nan).tobytes(), np.uint8)


def rows_of_256():
    """Every row a multiple of 256, every matrix F16 (--f16-256)."""
    global N_EMBD, HEAD, N_FF, MATRIX_TYPE, DS_FF_EXP, DS_Q_LORA, DS_KV_LORA, DS_NOPE, DS_ROPE
    N_EMBD, HEAD, N_FF, MATRIX_TYPE = 256, 64, 512, Q.F16
    DS_FF_EXP, DS_Q_LORA, DS_KV_LORA, DS_NOPE, DS_ROPE = 256, 256, 256, 64, 32


def main():
    tok_src, out = sys.argv[1], Path(sys.argv[2])
    f16_256 = "--f16-256" in sys.argv[3:]
    if f16_256:
        rows_of_256()
    out.mkdir(parents=True, exist_ok=True)
    tok = tokenizer_kvs(tok_src)
    n_vocab = len(next(v for k, v, _, _ in tok if k == "tokenizer.ggml.tokens"))
    files = []
    for seed, arch in enumerate(["llama", "qwen2", "gemma3", "deepseek2"]):
        m, kv = build(arch, n_vocab, seed)
        write(out / f"{arch}.gguf", arch, m, kv, tok, 1 if f16_256 else 7)
        files.append({"file": f"{arch}.gguf", "arch": arch, "expect": []})
    if f16_256:
        (out / "families.json").write_text(json.dumps(files, indent=1) + "\n")
        return

    def broken(name, change, expect):
        m, kv = build("llama", n_vocab, 0)
        t = [list(x) for x in tok]
        change(m, kv, t)
        write(out / f"llama-{name}.gguf", "llama", m, kv, [tuple(x) for x in t])
        files.append({"file": f"llama-{name}.gguf", "arch": "llama", "expect": expect})

    def err(kind, subject):
        return {"kind": kind, "severity": "error", "subject": subject}

    broken("nan-q4_1", lambda m, kv, t: nan_scale(m.get("blk.0.ffn_up.weight"), 3),
           [err("non_finite_scale", "blk.0.ffn_up.weight")])
    broken("nan-q8_0", lambda m, kv, t: nan_scale(m.get("blk.1.attn_q.weight"), 5),
           [err("non_finite_scale", "blk.1.attn_q.weight")])

    def zero(m, kv, t):
        x = m.get("blk.1.ffn_down.weight")
        x[3] = np.zeros_like(x[3])
    broken("zeroed", zero, [err("all_zero", "blk.1.ffn_down.weight")])

    def dup(m, kv, t):
        for x in m.tensors:
            if x[0].startswith("blk.1."):
                x[3] = m.get("blk.0." + x[0][len("blk.1."):])[3].copy()
    m0, _ = build("llama", n_vocab, 0)
    dup_expect = [{"kind": "duplicate", "severity": "warning" if len(x[1]) > 1 else "info", "subject": x[0]}
                  for x in m0.tensors if x[0].startswith("blk.1.")]
    broken("dup-layer", dup, dup_expect)

    def embd(m, kv, t):
        kv["embedding_length"] = (2 * N_EMBD, "u32")
    broken("wrong-embd", embd, [err("metadata", "llama.embedding_length")])

    broken("missing", lambda m, kv, t: m.tensors.remove(m.get("blk.1.attn_k.weight")),
           [err("missing_tensor", "blk.1.attn_k.weight")])

    def tokens(m, kv, t):
        for x in t:
            if x[0] == "tokenizer.ggml.tokens":
                x[1] = x[1] + ["<organ-extra>"]
            elif x[0] in ("tokenizer.ggml.token_type", "tokenizer.ggml.scores") and isinstance(x[1], list):
                x[1] = x[1] + [x[1][-1]]
    broken("tokens", tokens, [err("tokenizer", "tokenizer.ggml.tokens")])

    (out / "families.json").write_text(json.dumps(files, indent=1) + "\n")


if __name__ == "__main__":
    main()
