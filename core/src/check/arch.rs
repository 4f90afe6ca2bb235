//! Shapes against the architecture's metadata, as llama.cpp's loader expects them
//! (llama.cpp 11434: `llama-model.cpp`'s common hparams, `models/{llama,qwen2,gemma3,
//! deepseek2}.cpp`'s `load_arch_hparams` and `load_arch_tensors`): every tensor it
//! creates, with its shape and whether it is required, for each known architecture.
//!
//! Each size that a metadata key gives and a tensor also shows (the embedding width in
//! `token_embd`, the layer count in the `blk.N` names, the FFN width, the expert count) is
//! compared once: when they disagree the key is reported and the tensor's value is used
//! for the other shapes, so one wrong key is one finding, not one per tensor.

use super::{Finding, Kind, Severity};
use crate::model::{Model, OwnedValue, TensorEntry};
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::borrow::Borrow;

/// Every tensor llama.cpp's loader creates for one model: name, shape (ggml order), and
/// when it is required.
struct Spec {
    name: String,
    shape: Vec<u64>,
    need: Need,
}

enum Need {
    Required,
    Optional,
    /// Required unless this other tensor is there (a fused alternative).
    Unless(String),
}

/// What the check reads from the model.
struct Ctx<'a, T> {
    model: &'a Model<T>,
    arch: &'a str,
    out: &'a mut Vec<Finding>,
}

impl<T: Borrow<TensorEntry>> Ctx<'_, T> {
    fn key(&self, k: &str) -> String {
        format!("{}.{k}", self.arch)
    }

    fn tensor(&self, name: &str) -> Option<&TensorEntry> {
        self.model.tensors.iter().map(Borrow::borrow).find(|t| t.name == name)
    }

    /// Dimension `d` of tensor `name` (1 past its last dimension, as ggml pads), if there.
    fn dim(&self, name: &str, d: usize) -> Option<u64> {
        self.tensor(name).map(|t| t.dims.get(d).copied().unwrap_or(1))
    }

    /// An unsigned metadata value: `None` when absent; a finding when of another type.
    fn uint(&mut self, k: &str) -> Option<u64> {
        let key = self.key(k);
        match self.model.get(&key)? {
            OwnedValue::Scalar(v) if v.as_u64().is_some() => v.as_u64(),
            OwnedValue::Array { len, .. } => {
                // Per-layer arrays: the loader takes the first value for the model-wide size.
                let first = self.array_u64(&key).and_then(|a| a.first().copied());
                if first.is_none() {
                    let msg = format!("an array of {len} elements that are not unsigned integers");
                    self.out.push(Finding::new(Severity::Error, Kind::Metadata, &key, msg));
                }
                first
            }
            _ => {
                let msg = "not an unsigned integer".into();
                self.out.push(Finding::new(Severity::Error, Kind::Metadata, &key, msg));
                None
            }
        }
    }

    fn array_u64(&self, key: &str) -> Option<Vec<u64>> {
        let v = self.model.get(key)?.view().ok()?;
        match v {
            crate::MetaValue::Array(a) => a.iter().map(|x| x.as_u64()).collect(),
            _ => None,
        }
    }

    /// A required key: a finding when missing.
    fn need(&mut self, k: &str) -> Option<u64> {
        let v = self.uint(k);
        if v.is_none() && self.model.get(&self.key(k)).is_none() {
            let msg = format!("missing: llama.cpp's {} loader requires it", self.arch);
            let key = self.key(k);
            self.out.push(Finding::new(Severity::Error, Kind::Metadata, &key, msg));
        }
        v
    }

    /// Key `k`'s value checked against dimension `d` of tensor `t`: on disagreement (or
    /// a missing key) a finding on the key, and the tensor's value is used.
    fn anchored(&mut self, k: &str, given: Option<u64>, t: &str, d: usize, what: &str) -> Option<u64> {
        let seen = self.dim(t, d);
        match (given, seen) {
            (Some(g), Some(s)) if g != s => {
                let msg = format!(
                    "says {g}, but {t} has {s} {what} (dimension {d}); the other shapes were checked against {s}"
                );
                let key = self.key(k);
                self.out.push(Finding::new(Severity::Error, Kind::Metadata, &key, msg));
                Some(s)
            }
            (Some(g), _) => Some(g),
            (None, s) => s,
        }
    }
}

/// Layer indices present in tensor names (`blk.N.`).
fn layers<T: Borrow<TensorEntry>>(m: &Model<T>) -> BTreeSet<u64> {
    m.tensors.iter().filter_map(|t| t.borrow().name.strip_prefix("blk.")?.split('.').next()?.parse().ok()).collect()
}

/// The architectures whose tensors are listed here.
const KNOWN: [&str; 4] = ["llama", "qwen2", "gemma3", "deepseek2"];

/// Checks shapes and required tensors; returns whether the architecture is known.
pub(super) fn check<T: Borrow<TensorEntry>>(m: &Model<T>, out: &mut Vec<Finding>) -> bool {
    let Some(arch) = m.architecture() else {
        let msg = "missing: no architecture, so no shapes to check".into();
        out.push(Finding::new(Severity::Error, Kind::Metadata, "general.architecture", msg));
        return false;
    };
    if !KNOWN.contains(&arch.as_ref()) {
        let msg = format!("{arch:?}: shapes not checked (organ knows {})", KNOWN.join(", "));
        out.push(Finding::new(Severity::Info, Kind::Architecture, "general.architecture", msg));
        return false;
    }
    let arch = arch.into_owned();
    let mut c = Ctx { model: m, arch: &arch, out };
    let Some(specs) = specs(&mut c) else { return true };
    compare(&mut c, &specs);
    true
}

/// The tensors llama.cpp creates for the model, from its metadata (anchored to the
/// tensors); `None` when a size it needs is missing (already reported).
fn specs<T: Borrow<TensorEntry>>(c: &mut Ctx<'_, T>) -> Option<Vec<Spec>> {
    let n_embd = c.need("embedding_length");
    let n_embd = c.anchored("embedding_length", n_embd, "token_embd.weight", 0, "columns")?;
    let Some(n_vocab) = c.dim("token_embd.weight", 1) else {
        let msg = format!("missing: llama.cpp's {} loader requires it, shape [{n_embd}, n_vocab]", c.arch);
        c.out.push(Finding::new(Severity::Error, Kind::MissingTensor, "token_embd.weight", msg));
        return None;
    };
    let n_layer_key = c.need("block_count");
    let present = layers(c.model);
    let n_layer_all = match (n_layer_key, present.last()) {
        (Some(k), Some(&last)) if last + 1 != k && !present.is_empty() => {
            let msg = format!("says {k}, but the tensors have layers blk.0 … blk.{last} ({} layers)", last + 1);
            let key = c.key("block_count");
            c.out.push(Finding::new(Severity::Error, Kind::Metadata, &key, msg));
            last + 1
        }
        (Some(k), _) => k,
        (None, last) => last.map_or(0, |l| l + 1),
    };
    let nextn = c.uint("nextn_predict_layers").unwrap_or(0);
    let n_layer = n_layer_all.saturating_sub(nextn);
    let n_head = c.need("attention.head_count")?;
    if n_head == 0 {
        let key = c.key("attention.head_count");
        c.out.push(Finding::new(Severity::Error, Kind::Metadata, &key, "0: a transformer has heads".into()));
        return None;
    }
    let n_head_kv = c.uint("attention.head_count_kv").unwrap_or(n_head);
    let head_k = c.uint("attention.key_length").unwrap_or(n_embd / n_head);
    let head_v = c.uint("attention.value_length").unwrap_or(n_embd / n_head);
    let n_rot = c.uint("rope.dimension_count").unwrap_or(head_k);
    if c.arch == "llama" && n_rot != head_k {
        let msg = format!("{n_rot}, but llama.cpp requires it equal to the head size {head_k}");
        let key = c.key("rope.dimension_count");
        c.out.push(Finding::new(Severity::Error, Kind::Metadata, &key, msg));
    }
    let n_expert = c.uint("expert_count").unwrap_or(0);
    let h = Hp { n_embd, n_vocab, n_layer, n_head, n_head_kv, head_k, head_v, n_rot, n_expert };
    let mut s = vec![
        req("token_embd.weight", &[n_embd, n_vocab]),
        req("output_norm.weight", &[n_embd]),
        opt("output.weight", &[n_embd, n_vocab]),
    ];
    match c.arch {
        "llama" => llama(c, &h, &mut s),
        "qwen2" => qwen2(c, &h, &mut s),
        "gemma3" => gemma3(c, &h, &mut s),
        _ => deepseek2(c, &h, &mut s)?,
    }
    Some(s)
}

/// The sizes every family shares.
struct Hp {
    n_embd: u64,
    n_vocab: u64,
    n_layer: u64,
    n_head: u64,
    n_head_kv: u64,
    head_k: u64,
    head_v: u64,
    n_rot: u64,
    n_expert: u64,
}

fn spec(name: impl Into<String>, shape: &[u64], need: Need) -> Spec {
    Spec { name: name.into(), shape: shape.to_vec(), need }
}
fn req(name: impl Into<String>, shape: &[u64]) -> Spec {
    spec(name, shape, Need::Required)
}
fn opt(name: impl Into<String>, shape: &[u64]) -> Spec {
    spec(name, shape, Need::Optional)
}

/// `create_tensor_qkv`: a fused `attn_qkv` or separate q, k, v, each with optional biases.
fn qkv(s: &mut Vec<Spec>, i: u64, n_embd: u64, q: u64, k: u64, v: u64) {
    let fused = format!("blk.{i}.attn_qkv.weight");
    s.push(opt(fused.clone(), &[n_embd, q + k + v]));
    s.push(opt(format!("blk.{i}.attn_qkv.bias"), &[q + k + v]));
    for (n, w) in [("q", q), ("k", k), ("v", v)] {
        s.push(spec(format!("blk.{i}.attn_{n}.weight"), &[n_embd, w], Need::Unless(fused.clone())));
        s.push(opt(format!("blk.{i}.attn_{n}.bias"), &[w]));
    }
}

/// The FFN width for layer tensors: the key anchored to the first dense layer's `ffn_up`.
fn n_ff<T: Borrow<TensorEntry>>(c: &mut Ctx<'_, T>, first_dense: u64) -> u64 {
    let k = c.uint("feed_forward_length");
    let t = format!("blk.{first_dense}.ffn_up.weight");
    c.anchored("feed_forward_length", k, &t, 1, "rows").unwrap_or(0)
}

/// The expert count anchored to the first MoE layer's router.
fn experts<T: Borrow<TensorEntry>>(c: &mut Ctx<'_, T>, h: &Hp, first_moe: u64) -> u64 {
    let t = format!("blk.{first_moe}.ffn_gate_inp.weight");
    let given = (h.n_expert > 0).then_some(h.n_expert);
    c.anchored("expert_count", given, &t, 1, "experts").unwrap_or(0)
}

fn llama<T: Borrow<TensorEntry>>(c: &mut Ctx<'_, T>, h: &Hp, s: &mut Vec<Spec>) {
    let (e, ff) = (h.n_embd, if h.n_expert == 0 { n_ff(c, 0) } else { c.uint("feed_forward_length").unwrap_or(0) });
    let ne = if h.n_expert > 0 { experts(c, h, 0) } else { 0 };
    let shexp = c.uint("expert_shared_feed_forward_length").unwrap_or(0);
    s.push(opt("rope_freqs.weight", &[h.n_rot / 2]));
    for i in 0..h.n_layer {
        let b = |n: &str| format!("blk.{i}.{n}");
        s.push(req(b("attn_norm.weight"), &[e]));
        qkv(s, i, e, h.head_k * h.n_head, h.head_k * h.n_head_kv, h.head_v * h.n_head_kv);
        s.push(req(b("attn_output.weight"), &[h.head_k * h.n_head, e]));
        s.push(opt(b("attn_output.bias"), &[e]));
        s.push(req(b("ffn_norm.weight"), &[e]));
        if ne == 0 {
            dense_ffn(s, i, e, ff);
            for (n, w) in [("gate", ff), ("down", e), ("up", ff)] {
                s.push(opt(b(&format!("ffn_{n}.bias")), &[w]));
            }
        } else {
            s.push(req(b("ffn_gate_inp.weight"), &[e, ne]));
            s.push(opt(b("ffn_gate_exps.weight"), &[e, ff, ne]));
            s.push(req(b("ffn_down_exps.weight"), &[ff, e, ne]));
            s.push(req(b("ffn_up_exps.weight"), &[e, ff, ne]));
            if shexp > 0 {
                s.push(req(b("ffn_gate_shexp.weight"), &[e, shexp]));
                s.push(req(b("ffn_up_shexp.weight"), &[e, shexp]));
                s.push(req(b("ffn_down_shexp.weight"), &[shexp, e]));
            }
        }
    }
}

fn dense_ffn(s: &mut Vec<Spec>, i: u64, e: u64, ff: u64) {
    s.push(req(format!("blk.{i}.ffn_gate.weight"), &[e, ff]));
    s.push(req(format!("blk.{i}.ffn_down.weight"), &[ff, e]));
    s.push(req(format!("blk.{i}.ffn_up.weight"), &[e, ff]));
}

fn qwen2<T: Borrow<TensorEntry>>(c: &mut Ctx<'_, T>, h: &Hp, s: &mut Vec<Spec>) {
    let (e, ff) = (h.n_embd, n_ff(c, 0));
    let gqa = h.head_k * h.n_head_kv;
    s.push(opt("output.bias", &[h.n_vocab]));
    for i in 0..h.n_layer {
        s.push(req(format!("blk.{i}.attn_norm.weight"), &[e]));
        qkv(s, i, e, e, gqa, gqa);
        s.push(req(format!("blk.{i}.attn_output.weight"), &[e, e]));
        s.push(req(format!("blk.{i}.ffn_norm.weight"), &[e]));
        dense_ffn(s, i, e, ff);
    }
}

fn gemma3<T: Borrow<TensorEntry>>(c: &mut Ctx<'_, T>, h: &Hp, s: &mut Vec<Spec>) {
    let (e, ff) = (h.n_embd, n_ff(c, 0));
    for i in 0..h.n_layer {
        let b = |n: &str| format!("blk.{i}.{n}");
        s.push(req(b("attn_norm.weight"), &[e]));
        qkv(s, i, e, h.head_k * h.n_head, h.head_k * h.n_head_kv, h.head_v * h.n_head_kv);
        s.push(req(b("attn_output.weight"), &[h.head_k * h.n_head, e]));
        s.push(req(b("post_attention_norm.weight"), &[e]));
        s.push(req(b("attn_k_norm.weight"), &[h.head_k]));
        s.push(req(b("attn_q_norm.weight"), &[h.head_k]));
        s.push(req(b("ffn_norm.weight"), &[e]));
        dense_ffn(s, i, e, ff);
        s.push(req(b("post_ffw_norm.weight"), &[e]));
    }
}

fn deepseek2<T: Borrow<TensorEntry>>(c: &mut Ctx<'_, T>, h: &Hp, s: &mut Vec<Spec>) -> Option<()> {
    let e = h.n_embd;
    let lead = c.uint("leading_dense_block_count").unwrap_or(0);
    if lead > h.n_layer {
        let msg = format!("says {lead} dense layers, but the model has {} layers", h.n_layer);
        let key = c.key("leading_dense_block_count");
        c.out.push(Finding::new(Severity::Error, Kind::Metadata, &key, msg));
    }
    let ff = if lead > 0 { n_ff(c, 0) } else { 0 };
    let moe = lead < h.n_layer;
    let ne = if moe { experts(c, h, lead) } else { 0 };
    if moe && ne == 0 {
        let key = c.key("expert_count");
        c.out.push(Finding::new(Severity::Error, Kind::Experts, &key, "missing or 0: deepseek2 needs experts".into()));
    }
    let ff_exp = if moe { c.need("expert_feed_forward_length")? } else { 0 };
    let ff_exp = if moe {
        let t = format!("blk.{lead}.ffn_down_exps.weight");
        c.anchored("expert_feed_forward_length", Some(ff_exp), &t, 0, "rows")?
    } else {
        0
    };
    let shared = if moe { c.need("expert_shared_count").unwrap_or(0) } else { 0 };
    let q_lora = c.uint("attention.q_lora_rank").unwrap_or(0);
    let kv_lora = c.need("attention.kv_lora_rank")?;
    let (k_mla, v_mla) = match (c.uint("attention.key_length_mla"), c.uint("attention.value_length_mla")) {
        (Some(k), Some(v)) if k > 0 && v > 0 => (k, v),
        _ => (h.head_k, h.head_v),
    };
    let mla = c.model.get(&c.key("attention.key_length_mla")).is_some();
    let rope = h.n_rot;
    let Some(nope) = k_mla.checked_sub(rope).filter(|&n| n >= 1) else {
        let msg = format!("the key head size {k_mla} leaves no room beside the rope dimensions {rope}");
        let key = c.key("rope.dimension_count");
        c.out.push(Finding::new(Severity::Error, Kind::Metadata, &key, msg));
        return None;
    };
    let nh = h.n_head;
    for i in 0..h.n_layer {
        let b = |n: &str| format!("blk.{i}.{n}");
        s.push(req(b("attn_norm.weight"), &[e]));
        if q_lora > 0 {
            s.push(req(b("attn_q_a_norm.weight"), &[q_lora]));
            s.push(req(b("attn_q_a.weight"), &[e, q_lora]));
            s.push(req(b("attn_q_b.weight"), &[q_lora, nh * k_mla]));
        } else {
            s.push(req(b("attn_q.weight"), &[e, nh * k_mla]));
        }
        s.push(req(b("attn_kv_a_norm.weight"), &[kv_lora]));
        s.push(req(b("attn_kv_a_mqa.weight"), &[e, kv_lora + rope]));
        if mla {
            s.push(req(b("attn_k_b.weight"), &[nope, kv_lora, nh]));
            s.push(req(b("attn_v_b.weight"), &[kv_lora, v_mla, nh]));
        } else {
            s.push(req(b("attn_kv_b.weight"), &[kv_lora, nh * (nope + v_mla)]));
        }
        s.push(req(b("attn_output.weight"), &[nh * v_mla, e]));
        s.push(req(b("ffn_norm.weight"), &[e]));
        if i < lead {
            dense_ffn(s, i, e, ff);
        } else {
            s.push(req(b("ffn_gate_inp.weight"), &[e, ne]));
            s.push(opt(b("exp_probs_b.bias"), &[ne]));
            s.push(req(b("ffn_down_exps.weight"), &[ff_exp, e, ne]));
            let fused = b("ffn_gate_up_exps.weight");
            s.push(opt(fused.clone(), &[e, ff_exp * 2, ne]));
            s.push(spec(b("ffn_gate_exps.weight"), &[e, ff_exp, ne], Need::Unless(fused.clone())));
            s.push(spec(b("ffn_up_exps.weight"), &[e, ff_exp, ne], Need::Unless(fused)));
            let sh = ff_exp * shared;
            s.push(req(b("ffn_gate_shexp.weight"), &[e, sh]));
            s.push(req(b("ffn_down_shexp.weight"), &[sh, e]));
            s.push(req(b("ffn_up_shexp.weight"), &[e, sh]));
        }
    }
    Some(())
}

/// Every spec against the tensors: wrong shapes, missing required tensors, and tensors
/// no spec names (llama.cpp refuses a file with tensors it did not create).
fn compare<T: Borrow<TensorEntry>>(c: &mut Ctx<'_, T>, specs: &[Spec]) {
    let arch = c.arch;
    for s in specs {
        match c.tensor(&s.name) {
            Some(t) => {
                let mut want = s.shape.clone();
                while want.len() > 1 && want.last() == Some(&1) && want.len() > t.dims.len() {
                    want.pop();
                }
                let mut got = t.dims.clone();
                while got.len() > want.len() && got.last() == Some(&1) {
                    got.pop();
                }
                if got != want {
                    let msg = format!("shape {:?}, but {arch}'s metadata implies {:?}", t.dims, s.shape);
                    c.out.push(Finding::new(Severity::Error, Kind::Shape, &s.name, msg));
                }
            }
            None => {
                let missing = match &s.need {
                    Need::Required => true,
                    Need::Optional => false,
                    Need::Unless(other) => c.tensor(other).is_none(),
                };
                if missing {
                    let msg = format!("missing: llama.cpp's {arch} loader requires it, shape {:?}", s.shape);
                    c.out.push(Finding::new(Severity::Error, Kind::MissingTensor, &s.name, msg));
                }
            }
        }
    }
    let known: BTreeSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    // Next-token-prediction layers (past the trunk) are not listed here: their tensors
    // are not reported as unknown. (Read quietly: the keys' types were reported before.)
    let quiet = |k: &str| c.model.get(&c.key(k)).and_then(OwnedValue::as_u64);
    let nextn = quiet("nextn_predict_layers").filter(|&n| n > 0);
    let trunk = nextn.map(|n| quiet("block_count").unwrap_or(0).saturating_sub(n));
    for t in c.model.tensors.iter().map(Borrow::borrow) {
        let layer: Option<u64> = t.name.strip_prefix("blk.").and_then(|r| r.split('.').next()?.parse().ok());
        if known.contains(t.name.as_str()) || layer.zip(trunk).is_some_and(|(l, trunk)| l >= trunk) {
            continue;
        }
        let msg = format!("not a tensor llama.cpp's {arch} loader creates (it refuses files with extra tensors)");
        c.out.push(Finding::new(Severity::Warning, Kind::UnknownTensor, &t.name, msg));
    }
}
