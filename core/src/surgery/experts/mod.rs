//! Planning expert surgery on a mixture of experts: [`extract`] (expert e of a llama-layout
//! (Mixtral) MoE as a dense llama model) and [`prune`] (keep some experts of any MoE
//! layout). Both are raw byte ranges of the source's tensors, never requantized: a
//! per-expert tensor (dims [.., E], E the `{arch}.expert_count`) holds its experts end to
//! end, expert e being a contiguous byte range (Z-measure v1 §6, Compare v1 §3), whatever
//! its rank: `_exps` weights [d0, d1, E] and their biases [d, E], the router
//! `ffn_gate_inp` [n_embd, E] and its bias [E], `exp_probs_b` [E].
//!
//! The plan says, per output tensor, which byte ranges of which source tensors make it;
//! the front end copies them. Metadata is the source's, with the expert keys updated and
//! the provenance under `organ.experts.*`.

mod counts;

use super::graft::Mismatch;
use crate::gguf::MetaValue;
use crate::model::{Model, OwnedValue, TensorEntry};
use crate::GgmlType;
use alloc::borrow::Borrow;
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use counts::{map_count, max_count};

/// A byte range of a source tensor's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// The source tensor's index in the model.
    pub tensor: usize,
    /// First byte, from the start of that tensor's data.
    pub start: u64,
    /// Bytes.
    pub len: u64,
}

/// One tensor of the output: its name, type and shape, and the source bytes that make
/// it, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutTensor {
    /// Its name in the output.
    pub name: String,
    /// Its type (the source's: nothing is requantized).
    pub ty: GgmlType,
    /// Its shape, ggml order.
    pub dims: Vec<u64>,
    /// The source byte ranges it is made of, consecutive ones merged.
    pub pieces: Vec<Piece>,
}

impl OutTensor {
    /// Bytes of data.
    pub fn n_bytes(&self) -> u64 {
        self.pieces.iter().map(|p| p.len).sum()
    }
}

/// A checked extraction or pruning: the output's metadata and tensors.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpertsPlan {
    /// `extract` or `prune`.
    pub op: &'static str,
    /// The architecture.
    pub architecture: String,
    /// The source's expert count.
    pub expert_count: u64,
    /// The experts kept, ascending (one for `extract`).
    pub kept: Vec<u64>,
    /// The output's metadata.
    pub kvs: Vec<(String, OwnedValue)>,
    /// The output's tensors, in the source's order.
    pub tensors: Vec<OutTensor>,
    /// Source tensors cut along the expert axis (their source names).
    pub sliced: Vec<String>,
    /// Source tensors left out (routers and expert keys of `extract`).
    pub dropped: Vec<String>,
}

/// Where the source came from, for the output's `organ.experts.*` keys.
#[derive(Debug, Clone, Copy)]
pub struct Provenance<'a> {
    /// The source's file name.
    pub source: &'a str,
    /// Its BLAKE3.
    pub blake3: &'a str,
}

/// What a tensor is to expert surgery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Holds one slice per expert along its last dim.
    PerExpert,
    /// Named like an expert tensor, but organ does not know how it divides.
    Unknown,
    /// Anything else (shared experts, attention, the router of a shared expert…).
    Other,
}

/// Whether `name` is a per-expert tensor, by llama.cpp's names (llama-arch.cpp).
fn kind(name: &str) -> Kind {
    let Some(rest) = name.strip_prefix("blk.").and_then(|r| r.split_once('.')).map(|(_, r)| r) else {
        return Kind::Other;
    };
    let stem = rest.rsplit_once('.').map_or(rest, |(s, _)| s);
    if stem.ends_with("_exps") || stem == "ffn_gate_inp" || stem == "exp_probs_b" {
        Kind::PerExpert
    } else if stem.contains("exps") || stem.starts_with("exp_probs") {
        Kind::Unknown
    } else {
        Kind::Other
    }
}

/// Bytes per expert of `t`, whose last dim must be `e` experts of whole quant blocks.
fn per_expert_bytes(t: &TensorEntry, e: u64) -> Result<u64, Mismatch> {
    let bad = |reason: String| Err(Mismatch { tensor: t.name.clone(), reason });
    if t.dims.last() != Some(&e) {
        return bad(format!("shape {:?}: its last dim is not the expert count {e}", t.dims));
    }
    let bs = t.ty.block_size() as u64;
    let elements = t.n_elements / e;
    if bs == 0 || elements % bs != 0 || (t.dims.len() > 1 && t.dims[0] % bs != 0) {
        return bad(format!("an expert's {elements} elements are not whole {} blocks of {bs}", t.ty.name()));
    }
    let bytes = elements / bs * t.ty.type_size() as u64;
    if bytes.checked_mul(e) != Some(t.n_bytes) {
        return bad(format!("{} bytes are not {e} experts of {bytes} bytes", t.n_bytes));
    }
    Ok(bytes)
}

/// `{arch}.expert_count` of `m`, checked: a mixture of experts has one, 1 or more, with
/// per-expert tensors.
fn expert_count<T: Borrow<TensorEntry>>(m: &Model<T>, arch: &str) -> Result<u64, Vec<Mismatch>> {
    let key = format!("{arch}.expert_count");
    let has_experts = m.tensors.iter().any(|t| kind(&t.borrow().name) == Kind::PerExpert);
    match m.get(&key).map(|v| v.as_u64()) {
        Some(Some(e)) if e > 0 && e <= crate::limits::MAX_EXPERTS && has_experts => Ok(e),
        Some(Some(e)) if e > crate::limits::MAX_EXPERTS => {
            Err(one(&key, format!("{e} experts, more than the limit {}", crate::limits::MAX_EXPERTS)))
        }
        Some(None) => Err(one(&key, "is not an unsigned integer".into())),
        _ => Err(one(
            &key,
            format!(
                "not a mixture of experts: {} and {}",
                if m.get(&key).is_some() { "an expert count of 0" } else { "no expert count" },
                if has_experts { "per-expert tensors" } else { "no per-expert tensors (_exps, ffn_gate_inp)" }
            ),
        )),
    }
}

fn one(tensor: &str, reason: String) -> Vec<Mismatch> {
    vec![Mismatch { tensor: tensor.into(), reason }]
}

/// The architecture of `m`, which must have one.
fn architecture<T>(m: &Model<T>) -> Result<String, Vec<Mismatch>> {
    m.architecture().map(|a| a.into_owned()).ok_or_else(|| one("general.architecture", "missing".into()))
}

/// The source's metadata less `organ.experts.*` (and what `drop` says), with `sets`
/// replacing or adding keys, then the provenance.
fn metadata<T>(
    m: &Model<T>,
    drop: impl Fn(&str) -> bool,
    sets: Vec<(String, OwnedValue)>,
    p: &Provenance<'_>,
    op: &str,
    kept: &[u64],
    count: u64,
) -> Vec<(String, OwnedValue)> {
    let mut kvs: Vec<(String, OwnedValue)> = Vec::with_capacity(m.kvs.len() + 6);
    for (k, v) in &m.kvs {
        if k.starts_with("organ.experts.") || drop(k) {
            continue;
        }
        let v = sets.iter().find(|(s, _)| s == k).map_or(v, |(_, v)| v);
        kvs.push((k.clone(), v.clone()));
    }
    for (k, v) in sets {
        if !kvs.iter().any(|(x, _)| *x == k) {
            kvs.push((k, v));
        }
    }
    let list: Vec<String> = kept.iter().map(|e| e.to_string()).collect();
    kvs.push(("organ.experts.op".into(), OwnedValue::string(op)));
    kvs.push(("organ.experts.source".into(), OwnedValue::string(p.source)));
    kvs.push(("organ.experts.source_blake3".into(), OwnedValue::string(p.blake3)));
    kvs.push(("organ.experts.source_expert_count".into(), OwnedValue::Scalar(MetaValue::U64(count))));
    kvs.push(("organ.experts.kept".into(), OwnedValue::string(&list.join(","))));
    kvs
}

/// Plans `organ experts extract`: expert `e` of a llama-layout (Mixtral) MoE as a dense
/// llama model. Per layer, `ffn_{gate,up,down}.weight` is slice `e` of
/// `ffn_{gate,up,down}_exps.weight`; routers and the `llama.expert_*` keys (and
/// `organ.moe.*`) are dropped; `llama.feed_forward_length` is the experts' width.
///
/// # Errors
/// Every problem found: another architecture (named), no experts, `e` out of range, a
/// per-expert tensor a dense llama has no place for (biases, `exp_probs_b`, a fused
/// gate-up), a shared expert, a layer missing one of the three, a name taken.
pub fn extract<T: Borrow<TensorEntry>>(m: &Model<T>, e: u64, p: &Provenance<'_>) -> Result<ExpertsPlan, Vec<Mismatch>> {
    let arch = architecture(m)?;
    if arch != "llama" {
        return Err(one(
            "general.architecture",
            format!("{arch}: extract writes a dense llama from a llama-layout (Mixtral) MoE; {arch} is not one"),
        ));
    }
    let count = expert_count(m, &arch)?;
    if e >= count {
        return Err(one(
            "--expert",
            format!("expert {e} is out of range: the model has {count} experts (0-{})", count - 1),
        ));
    }
    let mut bad = Vec::new();
    let mut tensors = Vec::new();
    let (mut sliced, mut dropped) = (Vec::new(), Vec::new());
    let mut widths: Vec<u64> = Vec::new();
    let names: BTreeSet<&str> = m.tensors.iter().map(|t| t.borrow().name.as_str()).collect();
    for (i, t) in m.tensors.iter().map(Borrow::borrow).enumerate() {
        let mismatch = |reason: &str| Mismatch { tensor: t.name.clone(), reason: reason.into() };
        match (kind(&t.name), t.name.rsplit_once('.').map(|(s, x)| (s.rsplit_once('.').map_or(s, |r| r.1), x))) {
            (Kind::PerExpert, Some(("ffn_gate_inp", _))) => dropped.push(t.name.clone()),
            (Kind::PerExpert, Some((stem @ ("ffn_gate_exps" | "ffn_up_exps" | "ffn_down_exps"), "weight"))) => {
                let bytes = match per_expert_bytes(t, count) {
                    Ok(b) => b,
                    Err(x) => {
                        bad.push(x);
                        continue;
                    }
                };
                // "blk.N." (kind() saw it there).
                let prefix = &t.name[..t.name.len() - stem.len() - ".weight".len()];
                let dense = format!("{prefix}{}.weight", stem.trim_end_matches("_exps"));
                if names.contains(&dense.as_str()) {
                    bad.push(mismatch(&format!("{dense} is in the model too: the dense name is taken")));
                }
                if t.dims.len() != 3 {
                    bad.push(mismatch(&format!("shape {:?}: not [d0, d1, experts]", t.dims)));
                    continue;
                }
                if stem == "ffn_up_exps" {
                    widths.push(t.dims[1]);
                }
                for other in ["ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"] {
                    let want = format!("{prefix}{other}.weight");
                    if !names.contains(&want.as_str()) {
                        bad.push(Mismatch { tensor: want, reason: format!("missing, but {} is there", t.name) });
                    }
                }
                let piece = Piece { tensor: i, start: e * bytes, len: bytes };
                tensors.push(OutTensor { name: dense, ty: t.ty, dims: t.dims[..2].to_vec(), pieces: vec![piece] });
                sliced.push(t.name.clone());
            }
            (Kind::PerExpert | Kind::Unknown, _) => {
                bad.push(mismatch("a per-expert tensor a dense llama has no place for (only ffn_{gate,up,down}_exps.weight and the router are)"));
            }
            _ if t.name.contains("_shexp") => {
                bad.push(mismatch(
                    "a shared expert: a dense llama has no place for it, and leaving it out would change the model",
                ));
            }
            _ => tensors.push(whole(i, t)),
        }
    }
    bad.dedup();
    if !bad.is_empty() {
        return Err(bad);
    }
    widths.sort_unstable();
    widths.dedup();
    let mut sets = Vec::new();
    if let [w] = widths[..] {
        let key = "llama.feed_forward_length".to_string();
        let v = m.get(&key).and_then(|v| map_count(v, |_| w)).unwrap_or(OwnedValue::Scalar(MetaValue::U64(w)));
        sets.push((key, v));
    } else if widths.len() > 1 {
        return Err(one("llama.feed_forward_length", format!("the experts' widths differ by layer: {widths:?}")));
    }
    let drop = |k: &str| k.starts_with("llama.expert_") || k.starts_with("organ.moe.");
    let kvs = metadata(m, drop, sets, p, "extract", &[e], count);
    Ok(ExpertsPlan {
        op: "extract",
        architecture: arch,
        expert_count: count,
        kept: vec![e],
        kvs,
        tensors,
        sliced,
        dropped,
    })
}

/// A source tensor as it is.
fn whole(i: usize, t: &TensorEntry) -> OutTensor {
    OutTensor {
        name: t.name.clone(),
        ty: t.ty,
        dims: t.dims.clone(),
        pieces: vec![Piece { tensor: i, start: 0, len: t.n_bytes }],
    }
}

/// Plans `organ experts prune`: keep the experts `keep` (any order, no repeats) of an MoE
/// of any layout, in their order. Every per-expert tensor is cut along its last dim;
/// `{arch}.expert_count` becomes the kept count and `{arch}.expert_used_count` (each
/// layer's, for a per-layer array) `used` if given, else the smaller of its own and the
/// kept count.
///
/// # Errors
/// Every problem found: no experts, an empty keep list, an expert out of range or
/// repeated, `used` 0 or above the kept count, a per-expert tensor whose last dim is not
/// the expert count, a tensor named like one that organ cannot divide, and expert groups
/// (`{arch}.expert_group_count`) the kept experts would break: llama.cpp takes groups as
/// equal runs of consecutive experts and scores each by its top two, so every group must
/// keep the same number of experts, at least two.
pub fn prune<T: Borrow<TensorEntry>>(
    m: &Model<T>,
    keep: &[u64],
    used: Option<u64>,
    p: &Provenance<'_>,
) -> Result<ExpertsPlan, Vec<Mismatch>> {
    let arch = architecture(m)?;
    let count = expert_count(m, &arch)?;
    let mut kept = keep.to_vec();
    kept.sort_unstable();
    let mut bad = Vec::new();
    if kept.is_empty() {
        bad.push(Mismatch { tensor: "--keep".into(), reason: "no expert given: keep at least one".into() });
    }
    if let Some(w) = kept.windows(2).find(|w| w[0] == w[1]) {
        bad.push(Mismatch { tensor: "--keep".into(), reason: format!("expert {} is given twice", w[0]) });
    }
    if let Some(&e) = kept.iter().find(|&&e| e >= count) {
        bad.push(Mismatch {
            tensor: "--keep".into(),
            reason: format!("expert {e} is out of range: the model has {count} experts (0-{})", count - 1),
        });
    }
    if !bad.is_empty() {
        return Err(bad);
    }
    let n = kept.len() as u64;
    let used_key = format!("{arch}.expert_used_count");
    let used_val = match (m.get(&used_key), used) {
        (_, Some(k)) if k == 0 || k > n => {
            return Err(one("--experts-used", format!("{k}: give 1 to the {n} experts kept")));
        }
        (Some(v), Some(k)) => map_count(v, |_| k),
        (None, Some(k)) => Some(OwnedValue::Scalar(MetaValue::U32(k as u32))),
        (Some(v), None) => map_count(v, |u| u.min(n)),
        (None, None) => return Err(one(&used_key, "missing: an MoE says how many experts each token uses".into())),
    };
    let Some(used_val) = used_val else { return Err(one(&used_key, "is not an unsigned integer".into())) };
    if max_count(&used_val) == Some(0) {
        bad.push(Mismatch { tensor: used_key.clone(), reason: "0: llama.cpp needs at least one expert used".into() });
    }
    groups(m, &arch, count, &kept, &mut bad);
    let mut tensors = Vec::new();
    let mut sliced = Vec::new();
    for (i, t) in m.tensors.iter().map(Borrow::borrow).enumerate() {
        match kind(&t.name) {
            Kind::PerExpert => match per_expert_bytes(t, count) {
                Ok(bytes) => {
                    let mut pieces: Vec<Piece> = Vec::new();
                    for &e in &kept {
                        match pieces.last_mut() {
                            Some(last) if last.start + last.len == e * bytes => last.len += bytes,
                            _ => pieces.push(Piece { tensor: i, start: e * bytes, len: bytes }),
                        }
                    }
                    let mut dims = t.dims.clone();
                    *dims.last_mut().unwrap_or(&mut 0) = n;
                    tensors.push(OutTensor { name: t.name.clone(), ty: t.ty, dims, pieces });
                    sliced.push(t.name.clone());
                }
                Err(x) => bad.push(x),
            },
            Kind::Unknown => bad.push(Mismatch {
                tensor: t.name.clone(),
                reason: "named like a per-expert tensor, but not one organ knows how to divide".into(),
            }),
            Kind::Other => tensors.push(whole(i, t)),
        }
    }
    if !bad.is_empty() {
        return Err(bad);
    }
    let count_key = format!("{arch}.expert_count");
    let count_val = m
        .get(&count_key)
        .and_then(|v| map_count(v, |_| n))
        .ok_or_else(|| one(&count_key, "cannot hold the new count".into()))?;
    let sets = vec![(count_key, count_val), (used_key, used_val)];
    let kvs = metadata(m, |_| false, sets, p, "prune", &kept, count);
    Ok(ExpertsPlan {
        op: "prune",
        architecture: arch,
        expert_count: count,
        kept,
        kvs,
        tensors,
        sliced,
        dropped: Vec::new(),
    })
}

/// Expert groups (`{arch}.expert_group_count` G > 1): llama.cpp splits the experts into G
/// runs of E/G consecutive ones and ranks each run by the sum of its top two scores, so a
/// pruned model must keep the same number k ≥ 2 from every group (k = 1 leaves no second
/// score; uneven counts move experts between groups).
fn groups<T>(m: &Model<T>, arch: &str, count: u64, kept: &[u64], bad: &mut Vec<Mismatch>) {
    let key = format!("{arch}.expert_group_count");
    let Some(g) = m.get(&key).map(|v| v.as_u64()) else { return };
    let Some(g) = g else {
        bad.push(Mismatch { tensor: key, reason: "is not an unsigned integer".into() });
        return;
    };
    if g <= 1 {
        return;
    }
    if count % g != 0 {
        bad.push(Mismatch { tensor: key, reason: format!("{g} groups do not divide the {count} experts") });
        return;
    }
    let size = count / g;
    let per: Vec<u64> = (0..g).map(|i| kept.iter().filter(|&&e| e / size == i).count() as u64).collect();
    if per.iter().any(|&k| k != per[0]) || per[0] < 2 {
        bad.push(Mismatch {
            tensor: key,
            reason: format!(
                "{g} groups of {size} consecutive experts: the experts kept per group are {per:?}, but llama.cpp \
                 needs every group to keep the same number, at least 2"
            ),
        });
    }
}

/// Parses `--keep`: expert numbers and ranges, comma-separated (`0,2,5`, `0-3,6`).
///
/// # Errors
/// A part that is not a number or an ascending range, or more than
/// [`crate::limits::MAX_EXPERTS`] experts in all.
pub fn parse_keep(s: &str) -> Result<Vec<u64>, super::list::NumbersError> {
    super::list::numbers("expert", s, crate::limits::MAX_EXPERTS)
}

#[cfg(test)]
mod tests;
