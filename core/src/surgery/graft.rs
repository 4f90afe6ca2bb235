//! Planning a graft: which recipient tensors are replaced by which donor tensors, after
//! checking that the result would load (same architecture, every selected tensor present
//! on both sides with the same shape). A dtype difference is allowed: GGUF holds mixed
//! types, and the writer rewrites the tensor infos.

use super::select::Selection;
use crate::model::{Model, TensorEntry};
use alloc::borrow::Cow;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// One tensor that stops a graft, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The tensor (or `general.architecture`).
    pub tensor: String,
    /// What does not fit.
    pub reason: String,
}

/// A checked graft: pairs of (recipient tensor index, donor tensor index), in recipient order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraftPlan {
    /// The shared architecture.
    pub architecture: String,
    /// (recipient index, donor index) for each replaced tensor.
    pub swaps: Vec<(usize, usize)>,
}

/// One side of a graft: its architecture and its tensors' names and shapes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side<'a> {
    /// `general.architecture`.
    pub architecture: Option<Cow<'a, str>>,
    /// (name, shape) per tensor.
    pub tensors: Vec<(&'a str, &'a [u64])>,
}

impl<'a> Side<'a> {
    /// The side of a model (its tensors as the core's entries, or paired with their bytes).
    pub fn of<T: core::borrow::Borrow<TensorEntry>>(m: &'a Model<T>) -> Side<'a> {
        let tensors = m.tensors.iter().map(|t| (t.borrow().name.as_str(), t.borrow().dims.as_slice())).collect();
        Side { architecture: m.architecture(), tensors }
    }
}

/// Plans grafting the tensors `sel` picks from `donor` into `recipient`.
///
/// # Errors
/// Every mismatch found, not only the first, so a user sees the whole problem at once.
pub fn plan(recipient: &Side<'_>, donor: &Side<'_>, sel: &Selection) -> Result<GraftPlan, Vec<Mismatch>> {
    let mut bad = Vec::new();
    let (ra, da) = (recipient.architecture.as_deref(), donor.architecture.as_deref());
    if ra != da || ra.is_none() {
        bad.push(Mismatch {
            tensor: "general.architecture".into(),
            reason: format!("recipient is {}, donor is {}", ra.unwrap_or("unknown"), da.unwrap_or("unknown")),
        });
    }
    // Each side's tensors by name, so that matching them is n log n, not n².
    fn index<'s>(s: &Side<'s>) -> BTreeMap<&'s str, usize> {
        let mut by_name = BTreeMap::new();
        for (i, &(n, _)) in s.tensors.iter().enumerate() {
            by_name.entry(n).or_insert(i);
        }
        by_name
    }
    let (in_recipient, in_donor) = (index(recipient), index(donor));
    let mut swaps = Vec::new();
    for (ri, &(name, shape)) in recipient.tensors.iter().enumerate().filter(|(_, t)| sel.matches(t.0)) {
        match in_donor.get(name).copied() {
            None => bad.push(Mismatch { tensor: name.into(), reason: "not in the donor".into() }),
            Some(di) if donor.tensors[di].1 != shape => bad.push(Mismatch {
                tensor: name.into(),
                reason: format!("shape {:?} in the donor, {:?} in the recipient", donor.tensors[di].1, shape),
            }),
            Some(di) => swaps.push((ri, di)),
        }
    }
    for &(name, _) in donor.tensors.iter().filter(|t| sel.matches(t.0)) {
        if !in_recipient.contains_key(name) {
            bad.push(Mismatch { tensor: name.into(), reason: "selected in the donor but not in the recipient".into() });
        }
    }
    if swaps.is_empty() && bad.is_empty() {
        let reason = sel.none_matched(recipient.tensors.iter().map(|t| t.0));
        bad.push(Mismatch { tensor: "(selection)".into(), reason });
    }
    if bad.is_empty() {
        Ok(GraftPlan { architecture: ra.unwrap_or_default().into(), swaps })
    } else {
        Err(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surgery::select::Layers;

    fn side<'a>(arch: &'a str, t: &[(&'a str, &'a [u64])]) -> Side<'a> {
        Side { architecture: Some(arch.into()), tensors: t.to_vec() }
    }

    #[test]
    fn lists_every_mismatch() {
        let r = side(
            "llama",
            &[("blk.0.ffn_up.weight", &[8, 4]), ("blk.1.ffn_up.weight", &[8, 4]), ("blk.2.ffn_up.weight", &[8, 4])],
        );
        let d = side(
            "qwen2",
            &[("blk.0.ffn_up.weight", &[8, 4]), ("blk.1.ffn_up.weight", &[8, 6]), ("blk.3.ffn_up.weight", &[8, 4])],
        );
        let sel = Selection { layers: Some(Layers::parse("0-3").unwrap()), ..Default::default() };
        let bad = plan(&r, &d, &sel).unwrap_err();
        let names: alloc::vec::Vec<&str> = bad.iter().map(|m| m.tensor.as_str()).collect();
        assert_eq!(
            names,
            ["general.architecture", "blk.1.ffn_up.weight", "blk.2.ffn_up.weight", "blk.3.ffn_up.weight"]
        );
    }

    #[test]
    fn plans_matching_tensors_and_refuses_an_empty_selection() {
        let r = side("llama", &[("blk.0.ffn_up.weight", &[8, 4]), ("blk.0.attn_q.weight", &[8, 8])]);
        let p = plan(&r, &r.clone(), &Selection { layers: Some(Layers::parse("0").unwrap()), ..Default::default() })
            .unwrap();
        assert_eq!(p.swaps, [(0, 0), (1, 1)]);
        let none = Selection { layers: Some(Layers::parse("9").unwrap()), ..Default::default() };
        assert!(plan(&r, &r.clone(), &none).unwrap_err()[0].reason.contains("matches no tensor"));
    }
}
