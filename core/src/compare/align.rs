//! Lining layers up after `organ layers --drop`: an addition beside Compare v1 §1, which
//! matches tensors by name. A cut model renumbers its kept blocks (`blk.1` of a model cut
//! with `--drop 1,2` was the source's `blk.3`) and says which went in
//! `organ.layers.dropped` ([`crate::surgery::layers`]). When exactly one side carries it,
//! or both with different lists, each side's `blk.N.` is read as the block of the source
//! it was cut from, and the tensors are matched by that name: the cut's `blk.1` meets the
//! base's `blk.3`, and the dropped blocks are names one side only has.

use crate::model::Model;
use crate::surgery::layers::parse_list;
use alloc::borrow::Cow;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The key a cut model names its dropped layers in.
pub const DROPPED_KEY: &str = "organ.layers.dropped";
/// The key a cut model names its source's layer count in.
const SOURCE_COUNT_KEY: &str = "organ.layers.source_block_count";

/// How the layers were lined up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerAlignment {
    /// The key they were lined up by ([`DROPPED_KEY`]).
    pub by: String,
    /// A's dropped layers, in the numbering of the model it was cut from (`None`: A
    /// carries no list, and its numbers are its own).
    pub dropped_a: Option<Vec<u64>>,
    /// B's.
    pub dropped_b: Option<Vec<u64>>,
}

impl LayerAlignment {
    /// `name` as the source's name: `blk.N.rest` with N the source's number of the side's
    /// layer N, given the side's dropped layers; any other name as it is.
    pub fn source_name<'a>(dropped: Option<&[u64]>, name: &'a str) -> Cow<'a, str> {
        let Some(dropped) = dropped else { return Cow::Borrowed(name) };
        let Some((n, rest)) = name.strip_prefix("blk.").and_then(|r| r.split_once('.')) else {
            return Cow::Borrowed(name);
        };
        match n.parse::<u64>() {
            // A number written with a leading zero or a sign is not one organ layers wrote.
            Ok(k) if k.to_string() == n => Cow::Owned(format!("blk.{}.{rest}", source_layer(dropped, k))),
            _ => Cow::Borrowed(name),
        }
    }

    /// A sentence for people: which side was cut and what it left out.
    pub fn line(&self) -> String {
        let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        let side = |tag: &str, d: &Option<Vec<u64>>| d.as_ref().map(|d| format!("{tag} dropped layer(s) {}", list(d)));
        let said: Vec<String> =
            [side("A", &self.dropped_a), side("B", &self.dropped_b)].into_iter().flatten().collect();
        format!(
            "layers lined up by {}: {}; each block is compared with the block it was in the source",
            self.by,
            said.join(", ")
        )
    }
}

/// The source's number of layer `k` of a model cut by dropping `dropped` (ascending,
/// each once): the k-th number not dropped.
fn source_layer(dropped: &[u64], k: u64) -> u64 {
    let mut s = k;
    for &d in dropped {
        if d <= s {
            s = s.saturating_add(1);
        } else {
            break;
        }
    }
    s
}

/// The dropped list a model carries: `Ok(None)` without the key, `Err` with a warning for
/// a value that is not a list of layer numbers.
fn dropped<T>(m: &Model<T>, side: &str) -> Result<Option<Vec<u64>>, String> {
    let Some(v) = m.get(DROPPED_KEY) else { return Ok(None) };
    let bad = |why: String| format!("{side}'s {DROPPED_KEY} {why}: the layers are matched by name");
    let text = v.as_str().ok_or_else(|| bad("is not a UTF-8 string".into()))?;
    let mut list = parse_list(text).map_err(|e| bad(format!("is not a list of layer numbers ({e})")))?;
    list.sort_unstable();
    list.dedup();
    Ok(Some(list))
}

/// How to line up the layers of A and B, and warnings for a reader: `None` when neither
/// carries a dropped list or both carry the same one (their numbers already agree).
pub fn alignment<T, U>(a: &Model<T>, b: &Model<U>) -> (Option<LayerAlignment>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut get = |r: Result<Option<Vec<u64>>, String>| {
        r.unwrap_or_else(|w| {
            warnings.push(w);
            None
        })
    };
    let (da, db) = (get(dropped(a, "A")), get(dropped(b, "B")));
    if da == db {
        return (None, warnings);
    }
    // The side that was cut says how many layers its source had: the other side, when it
    // carries no list, should have as many.
    let (cut, src, other, has) = match (&da, &db) {
        (None, Some(_)) => ("B", source_count(b), "A", block_count(a)),
        (Some(_), None) => ("A", source_count(a), "B", block_count(b)),
        _ => ("", None, "", None),
    };
    if let (Some(s), Some(h)) = (src, has) {
        if s != h {
            warnings.push(format!(
                "{cut} was cut from a model of {s} layers and {other} has {h}: the layers may not line up"
            ));
        }
    }
    (Some(LayerAlignment { by: DROPPED_KEY.into(), dropped_a: da, dropped_b: db }), warnings)
}

/// What a cut model says its source's layer count was.
fn source_count<T>(m: &Model<T>) -> Option<u64> {
    m.get(SOURCE_COUNT_KEY).and_then(|v| v.as_u64())
}

/// `{arch}.block_count`.
fn block_count<T>(m: &Model<T>) -> Option<u64> {
    m.get(&format!("{}.block_count", m.architecture()?)).and_then(|v| v.as_u64())
}
