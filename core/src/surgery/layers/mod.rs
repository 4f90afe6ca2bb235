//! Planning `organ layers`: remove whole blocks of a model and renumber the rest. The
//! kept `blk.N.*` tensors (attention, FFN, MoE experts, shared experts, routers: all that
//! a block holds) are renamed `blk.M.*`, M their rank among the kept layers, and copied
//! whole: their bytes are the source's. The metadata follows, as llama.cpp 11434 reads it
//! (`src/llama-model.cpp`, `load_hparams`):
//!
//! - `{arch}.block_count` is the number of layers kept;
//! - every `{arch}.*` array of one element per layer (`feed_forward_length`,
//!   `attention.head_count(_kv)`, `expert_used_count`, `expert_feed_forward_length`,
//!   `attention.sliding_window_pattern`… read by `get_key_or_arr` or `get_arr` over
//!   `n_layer_all`) keeps the kept layers' elements;
//! - `{arch}.leading_dense_block_count` (deepseek2's dense first layers) and
//!   `{arch}.nextn_predict_layers` (the last layers, multi-token prediction) count the
//!   kept layers among theirs;
//! - an architecture whose sliding-window layers llama.cpp derives from a period
//!   (`load_swa_pattern`: Gemma's 5 local, 1 global) gets the period written out as a
//!   per-layer array, so every kept layer keeps its kind of attention;
//! - keys that place layers by position in another way (`moe_every_n_layers`…) are
//!   refused: organ does not know how to move them.
//!
//! Keeping every layer is the identity: the plan is the source, metadata and all.

use super::experts::{OutTensor, Piece, Provenance};
use super::graft::Mismatch;
use super::list::{self, NumbersError};
use crate::gguf::{MetaValue, ValueType};
use crate::model::{Model, OwnedValue, TensorEntry};
use alloc::borrow::Borrow;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

/// Which layers a removal names, in the source's numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice<'a> {
    /// `--drop`: these go.
    Drop(&'a [u64]),
    /// `--keep`: only these stay.
    Keep(&'a [u64]),
}

/// A checked removal: the output's metadata and tensors.
#[derive(Debug, Clone, PartialEq)]
pub struct LayersPlan {
    /// The architecture.
    pub architecture: String,
    /// The source's layer count.
    pub block_count: u64,
    /// The source layers kept, ascending: kept\[M\] is the output's layer M.
    pub kept: Vec<u64>,
    /// The source layers removed, ascending.
    pub dropped: Vec<u64>,
    /// The output's metadata.
    pub kvs: Vec<(String, OwnedValue)>,
    /// The output's tensors, in the source's order, each one source tensor whole.
    pub tensors: Vec<OutTensor>,
    /// The metadata keys whose value changed (arrays cut, counts renumbered, patterns
    /// written out), with what was done.
    pub changed: Vec<(String, String)>,
    /// Source tensors left out (those of the removed layers).
    pub removed: Vec<String>,
}

/// Architectures whose sliding-window layers llama.cpp 11434 derives from a period when
/// no per-layer array is given (`load_swa_pattern(ml, n, dense_first)` in
/// `src/models/<arch>.cpp`): the period and whether the dense layer comes first.
const SWA_PERIODS: &[(&str, u64, bool)] = &[
    ("gemma2", 2, false),
    ("gemma3", 6, false),
    ("gemma3n", 5, false),
    ("gemma-embedding", 6, false),
    ("exaone4", 4, false),
    ("exaone-moe", 4, false),
    ("olmo2", 4, false),
    ("plamo3", 8, false),
    ("llama4", 4, false),
    ("muse-glimmer", 4, false),
    ("gpt-oss", 2, false),
    ("cohere2", 4, false),
    ("cohere2moe", 4, true),
    ("afmoe", 4, false),
    ("laguna", 4, true),
    ("mellum", 4, false),
    ("smallthinker", 4, true),
    ("modern-bert", 3, true),
];

/// Keys (after `{arch}.`) that place layers by position other than as a per-layer array:
/// a period, a count of last layers, a list of layer numbers. Removing layers would move
/// what they say, so a model with one (non-zero) is refused.
pub(crate) const POSITIONAL: &[&str] = &[
    "moe_every_n_layers",
    "rescale_every_n_layers",
    "interleave_moe_layer_step",
    "full_attention_interval",
    "attention.shared_kv_layers",
    "n_deepstack_layers",
    "target_layers",
];

/// Arrays under `{arch}.` that are not per layer even when their length happens to be
/// the layer count.
pub(crate) const NOT_PER_LAYER: &[&str] = &["rope.dimension_sections", "classifier.output_labels"];

fn one(key: &str, reason: String) -> Vec<Mismatch> {
    vec![Mismatch { tensor: key.into(), reason }]
}

/// The layer of a `blk.N.rest` name and its rest.
fn layer_of(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix("blk.")?.split_once('.')
}

/// Plans the removal `choice` from `m`.
///
/// # Errors
/// Every problem found: no architecture or layer count; an empty list; a layer given
/// twice or out of range; every layer removed, or every layer but the multi-token
/// prediction ones; a `blk.` tensor outside the layers; a per-layer array of the wrong
/// length or of strings; a key that places layers by position.
pub fn plan<T: Borrow<TensorEntry>>(
    m: &Model<T>,
    choice: Choice<'_>,
    p: &Provenance<'_>,
) -> Result<LayersPlan, Vec<Mismatch>> {
    let arch = m.architecture().map(|a| a.into_owned()).ok_or_else(|| one("general.architecture", "missing".into()))?;
    let count_key = format!("{arch}.block_count");
    let n = match m.get(&count_key).map(OwnedValue::as_u64) {
        Some(Some(n)) if n > 0 && n <= crate::limits::MAX_LAYERS => n,
        Some(Some(n)) => {
            return Err(one(&count_key, format!("{n}: not a layer count (1 to {})", crate::limits::MAX_LAYERS)))
        }
        Some(None) => return Err(one(&count_key, "is not an unsigned integer".into())),
        None => return Err(one(&count_key, "missing: organ needs the layer count".into())),
    };
    let (flag, given) = match choice {
        Choice::Drop(l) => ("--drop", l),
        Choice::Keep(l) => ("--keep", l),
    };
    let mut sorted = given.to_vec();
    sorted.sort_unstable();
    let mut bad = Vec::new();
    if sorted.is_empty() {
        bad.push(Mismatch { tensor: flag.into(), reason: "no layer given".into() });
    }
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        bad.push(Mismatch { tensor: flag.into(), reason: format!("layer {} is given twice", w[0]) });
    }
    if let Some(&l) = sorted.iter().find(|&&l| l >= n) {
        bad.push(Mismatch {
            tensor: flag.into(),
            reason: format!("layer {l} is out of range: the model has {n} layers (0-{})", n - 1),
        });
    }
    if !bad.is_empty() {
        return Err(bad);
    }
    let named = |l: &u64| sorted.binary_search(l).is_ok();
    let (kept, dropped): (Vec<u64>, Vec<u64>) = match choice {
        Choice::Drop(_) => (0..n).partition(|l| !named(l)),
        Choice::Keep(_) => (0..n).partition(named),
    };
    if kept.is_empty() {
        return Err(one(flag, format!("removes all {n} layers: keep at least one")));
    }
    // Tensors: every blk.N. must be a layer of the model, whatever is removed.
    let mut tensors = Vec::with_capacity(m.tensors.len());
    let mut removed = Vec::new();
    for (i, t) in m.tensors.iter().map(Borrow::borrow).enumerate() {
        let whole = |name: String| OutTensor {
            name,
            ty: t.ty,
            dims: t.dims.clone(),
            pieces: vec![Piece { tensor: i, start: 0, len: t.n_bytes }],
        };
        let Some((num, rest)) = layer_of(&t.name) else {
            tensors.push(whole(t.name.clone()));
            continue;
        };
        let Some(l) = num.parse::<u64>().ok().filter(|&l| l < n && num == l.to_string()) else {
            bad.push(Mismatch {
                tensor: t.name.clone(),
                reason: format!("{num:?} is not a layer of the model ({count_key} is {n})"),
            });
            continue;
        };
        match kept.binary_search(&l) {
            Ok(new) => tensors.push(whole(format!("blk.{new}.{rest}"))),
            Err(_) => removed.push(t.name.clone()),
        }
    }
    if !bad.is_empty() {
        return Err(bad);
    }
    if dropped.is_empty() {
        let kvs = m.kvs.clone();
        return Ok(LayersPlan {
            architecture: arch,
            block_count: n,
            kept,
            dropped,
            kvs,
            tensors,
            changed: vec![],
            removed,
        });
    }
    let (kvs, changed) = metadata(m, &arch, n, &kept, &dropped, p)?;
    Ok(LayersPlan { architecture: arch, block_count: n, kept, dropped, kvs, tensors, changed, removed })
}

/// The source's metadata for the kept layers, with the provenance under `organ.layers.*`,
/// and what changed.
#[allow(clippy::type_complexity)]
fn metadata<T>(
    m: &Model<T>,
    arch: &str,
    n: u64,
    kept: &[u64],
    dropped: &[u64],
    p: &Provenance<'_>,
) -> Result<(Vec<(String, OwnedValue)>, Vec<(String, String)>), Vec<Mismatch>> {
    let mut bad = Vec::new();
    let prefix = format!("{arch}.");
    let count = |pred: &dyn Fn(u64) -> bool| kept.iter().filter(|&&l| pred(l)).count() as u64;
    let scalar = |k: &str| m.get(&format!("{prefix}{k}")).and_then(OwnedValue::as_u64);
    let nextn = scalar("nextn_predict_layers").unwrap_or(0);
    if nextn >= n && nextn > 0 {
        bad.push(Mismatch {
            tensor: format!("{prefix}nextn_predict_layers"),
            reason: format!("{nextn}: not fewer than the {n} layers"),
        });
    } else if nextn > 0 && count(&|l| l < n.saturating_sub(nextn)) == 0 {
        bad.push(Mismatch {
            tensor: "layers".into(),
            reason: format!("keeps only multi-token prediction layers (the last {nextn}): keep a layer of the trunk"),
        });
    }
    let mut kvs = Vec::with_capacity(m.kvs.len() + 5);
    let mut changed = Vec::new();
    for (k, v) in &m.kvs {
        if k.starts_with("organ.layers.") {
            continue;
        }
        let Some(key) = k.strip_prefix(&prefix) else {
            kvs.push((k.clone(), v.clone()));
            continue;
        };
        let counted = |c: u64, what: String| (set_count(v, c), what);
        let (new, what) = match key {
            "block_count" => counted(kept.len() as u64, format!("{n} → {}", kept.len())),
            "leading_dense_block_count" => match v.as_u64() {
                Some(d) if d <= n => {
                    let c = count(&|l| l < d);
                    counted(c, format!("{d} → {c} (the dense first layers kept)"))
                }
                _ => (None, "is not a count of at most the layer count".into()),
            },
            "nextn_predict_layers" => {
                let c = count(&|l| l >= n.saturating_sub(nextn));
                counted(c, format!("{nextn} → {c} (the last layers kept)"))
            }
            _ if POSITIONAL.contains(&key) && !matches!(v.as_u64(), Some(0)) => {
                bad.push(Mismatch {
                    tensor: k.clone(),
                    reason: "places layers by position: removing layers would move what it says, and organ does not \
                             know how to renumber it"
                        .into(),
                });
                continue;
            }
            _ => match v {
                OwnedValue::Array { len, .. } if *len == n && !NOT_PER_LAYER.contains(&key) => {
                    (cut(v, kept), format!("per-layer array cut from {n} to {} elements", kept.len()))
                }
                OwnedValue::Array { len, .. } if key == "attention.sliding_window_pattern" => {
                    (None, format!("a per-layer array of {len} elements, but the model has {n} layers"))
                }
                _ => {
                    kvs.push((k.clone(), v.clone()));
                    continue;
                }
            },
        };
        match new {
            Some(new) => {
                changed.push((k.clone(), what));
                kvs.push((k.clone(), new));
            }
            None => bad.push(Mismatch { tensor: k.clone(), reason: what }),
        }
    }
    if let Some(pattern) = swa_layers(m, arch, n, nextn) {
        let key = format!("{prefix}attention.sliding_window_pattern");
        let raw: Vec<u8> = kept.iter().map(|&l| u8::from(pattern[l as usize])).collect();
        let v = OwnedValue::Array { elem_type: ValueType::Bool, len: raw.len() as u64, raw: raw.into() };
        let what = format!("llama.cpp's period for {arch} written out for the kept layers (true: sliding window)");
        match kvs.iter_mut().find(|(x, _)| *x == key) {
            Some(slot) => slot.1 = v,
            None => kvs.push((key.clone(), v)),
        }
        changed.push((key, what));
    }
    if !bad.is_empty() {
        return Err(bad);
    }
    let list = |ls: &[u64]| ls.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    kvs.push(("organ.layers.source".into(), OwnedValue::string(p.source)));
    kvs.push(("organ.layers.source_blake3".into(), OwnedValue::string(p.blake3)));
    kvs.push(("organ.layers.source_block_count".into(), OwnedValue::Scalar(MetaValue::U64(n))));
    kvs.push(("organ.layers.dropped".into(), OwnedValue::string(&list(dropped))));
    Ok((kvs, changed))
}

/// `v`, an unsigned integer scalar, set to `c` in its own type.
pub(crate) fn set_count(v: &OwnedValue, c: u64) -> Option<OwnedValue> {
    let OwnedValue::Scalar(s) = v else { return None };
    s.as_u64()?;
    Some(OwnedValue::Scalar(match s {
        MetaValue::U8(_) => MetaValue::U8(c.try_into().ok()?),
        MetaValue::U16(_) => MetaValue::U16(c.try_into().ok()?),
        MetaValue::U32(_) => MetaValue::U32(c.try_into().ok()?),
        MetaValue::U64(_) => MetaValue::U64(c),
        MetaValue::I8(_) => MetaValue::I8(c.try_into().ok()?),
        MetaValue::I16(_) => MetaValue::I16(c.try_into().ok()?),
        MetaValue::I32(_) => MetaValue::I32(c.try_into().ok()?),
        MetaValue::I64(_) => MetaValue::I64(c.try_into().ok()?),
        _ => return None,
    }))
}

/// The per-layer array `v` (of fixed-size elements) cut to the layers `kept`.
pub(crate) fn cut(v: &OwnedValue, kept: &[u64]) -> Option<OwnedValue> {
    let OwnedValue::Array { elem_type, len, raw } = v else { return None };
    let size = usize::try_from(elem_type.fixed_size()?).ok()?;
    if (raw.len() as u64) != len.checked_mul(size as u64)? {
        return None;
    }
    let mut out = Vec::with_capacity(kept.len() * size);
    for &l in kept {
        let start = usize::try_from(l).ok()?.checked_mul(size)?;
        out.extend_from_slice(raw.get(start..start.checked_add(size)?)?);
    }
    Some(OwnedValue::Array { elem_type: *elem_type, len: kept.len() as u64, raw: out.into() })
}

/// Which source layers use a sliding window, when llama.cpp derives it from a period
/// (`llama_hparams::set_swa_pattern`) for `arch` and `m` has a sliding window: the
/// period is `{arch}.attention.sliding_window_pattern` as a number, else the
/// architecture's; the last `nextn` layers never slide. None when the model has a
/// per-layer array already (cut as any other), or no window.
pub(crate) fn swa_layers<T>(m: &Model<T>, arch: &str, n: u64, nextn: u64) -> Option<Vec<bool>> {
    let &(_, period, dense_first) = SWA_PERIODS.iter().find(|(a, _, _)| *a == arch)?;
    m.get(&format!("{arch}.attention.sliding_window"))?;
    let period = match m.get(&format!("{arch}.attention.sliding_window_pattern")) {
        None => period,
        Some(v) => v.as_u64()?,
    };
    let trunk = n.saturating_sub(nextn);
    Some(
        (0..n)
            .map(|il| {
                il < trunk && (period == 0 || if dense_first { il % period != 0 } else { il % period < period - 1 })
            })
            .collect(),
    )
}

/// Parses a list of layer numbers and ranges, comma-separated (`10-12,15`).
///
/// # Errors
/// An empty list, a part that is not a number or an ascending range, or more than
/// [`crate::limits::MAX_LAYERS`] layers in all.
pub fn parse_list(s: &str) -> Result<Vec<u64>, NumbersError> {
    if s.trim().is_empty() {
        return Err(NumbersError { list: s.into(), what: "layer", fault: list::Fault::Empty });
    }
    list::numbers("layer", s, crate::limits::MAX_LAYERS)
}

#[cfg(test)]
mod tests;
