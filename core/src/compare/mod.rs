//! Compare v1: two models, tensor by tensor. The definition is `docs/compare.md`; this
//! module follows it to the letter.
//!
//! The work is in three steps, each a plain function, so that every face (CLI, browser,
//! HTTP API) runs the same logic and only decides where bytes come from:
//! 1. [`pair`] matches the two models' tensors by name (§1);
//! 2. per comparable pair, the front end decides `identical` on the bytes (§2; a byte
//!    comparison it streams its own way), draws each side's sampled values with
//!    [`crate::zmeasure::sample_values`] or a [`crate::zmeasure::ReadPlan`] (the same
//!    positions for both: the sampler depends only on the name and the element count), and
//!    hands them to [`figures`]; expert tensors are also cut by [`ExpertLayout`] (§3);
//! 3. [`CompareReport::new`] counts and summarizes (§4).
//!
//! Beside the definition, two additions every face gets from [`plan`]: the metadata
//! compared key by key ([`meta`]), and the layers of a model cut by `organ layers --drop`
//! lined up with its source's ([`align`]) before the tensors are paired.

pub mod align;
pub mod meta;
mod report;

pub use report::most_changed;

/// How expert tensors divide into experts: one definition for the measure (§6 of the
/// Z-measure) and the comparison (§3).
pub use crate::zmeasure::experts::{expert_name, ExpertLayout};

pub use align::{LayerAlignment, DROPPED_KEY};
pub use meta::{diff_metadata, MetaDiff};
pub use report::{CompareReport, Counts, ExpertPair, GroupDiff, PairReport, ShapeMismatch, Side, MOST_CHANGED};

use crate::error::{Error, Result};
use crate::model::{Model, TensorEntry};
use crate::zmeasure::{measure_values, sample_values};
use alloc::borrow::Cow;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::borrow::Borrow;

/// The definition's name in reports.
pub const COMPARE: &str = "c1";

/// How the tensors of A and B match up (§1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pairing {
    /// Comparable pairs as (index in A, index in B), in A's order.
    pub pairs: Vec<(usize, usize)>,
    /// Names only A has, in A's order.
    pub only_in_a: Vec<String>,
    /// Names only B has, in B's order.
    pub only_in_b: Vec<String>,
    /// Same name, different shapes, in A's order.
    pub shape_mismatch: Vec<ShapeMismatch>,
}

/// What a comparison of A and B holds before any tensor byte is read: the tensors
/// paired, the layers lined up (when one side was cut by `organ layers`), the metadata
/// compared, and what a reader should know of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// The tensors paired (§1, after lining up the layers).
    pub pairing: Pairing,
    /// How the layers were lined up, when they were.
    pub layers: Option<LayerAlignment>,
    /// The metadata compared key by key (`None` only for a plan made from a bare pairing).
    pub metadata: Option<MetaDiff>,
    /// Warnings for the report.
    pub warnings: Vec<String>,
}

impl From<Pairing> for Plan {
    fn from(pairing: Pairing) -> Plan {
        Plan { pairing, ..Plan::default() }
    }
}

/// Plans the comparison of `a` and `b`: every face calls this, then compares the pairs of
/// `plan.pairing.pairs` and hands the rows to [`CompareReport::new`].
pub fn plan<T: Borrow<TensorEntry>, U: Borrow<TensorEntry>>(a: &Model<T>, b: &Model<U>) -> Plan {
    let (layers, warnings) = align::alignment(a, b);
    Plan { pairing: pair_by(a, b, layers.as_ref()), metadata: Some(diff_metadata(a, b)), layers, warnings }
}

/// Matches the tensors of `a` and `b` by name (§1). A name that occurs twice in one model
/// (a file that should not exist, but might) is matched once, by its first occurrence.
pub fn pair<T: Borrow<TensorEntry>, U: Borrow<TensorEntry>>(a: &Model<T>, b: &Model<U>) -> Pairing {
    pair_by(a, b, None)
}

/// [`pair`], each side's `blk.N.` names read as its source's when `layers` says so.
pub fn pair_by<T: Borrow<TensorEntry>, U: Borrow<TensorEntry>>(
    a: &Model<T>,
    b: &Model<U>,
    layers: Option<&LayerAlignment>,
) -> Pairing {
    fn key<'n>(dropped: Option<&Vec<u64>>, name: &'n str) -> Cow<'n, str> {
        LayerAlignment::source_name(dropped.map(Vec::as_slice), name)
    }
    let (da, db) = (layers.and_then(|l| l.dropped_a.as_ref()), layers.and_then(|l| l.dropped_b.as_ref()));
    let mut in_b: BTreeMap<Cow<'_, str>, usize> = BTreeMap::new();
    for (i, t) in b.tensors.iter().enumerate() {
        in_b.entry(key(db, &t.borrow().name)).or_insert(i);
    }
    let mut seen_a: BTreeMap<Cow<'_, str>, ()> = BTreeMap::new();
    let mut out = Pairing::default();
    for (i, t) in a.tensors.iter().enumerate() {
        let t = t.borrow();
        let k = key(da, &t.name);
        match in_b.get(&k) {
            _ if seen_a.contains_key(&k) => continue,
            None => out.only_in_a.push(t.name.clone()),
            Some(&j) => {
                let u = b.tensors[j].borrow();
                if t.dims == u.dims {
                    out.pairs.push((i, j));
                } else {
                    out.shape_mismatch.push(ShapeMismatch {
                        name: t.name.clone(),
                        a: t.dims.clone(),
                        b: u.dims.clone(),
                        name_b: (u.name != t.name).then(|| u.name.clone()),
                    });
                }
            }
        }
        seen_a.insert(k, ());
    }
    // B's names A has not, in B's order.
    let mut only_b: Vec<usize> = in_b.iter().filter(|(n, _)| !seen_a.contains_key(*n)).map(|(_, &j)| j).collect();
    only_b.sort_unstable();
    out.only_in_b = only_b.into_iter().map(|j| b.tensors[j].borrow().name.clone()).collect();
    out
}

/// The figures of one comparable pair, or of one expert of it (§2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// Σab / √(Σa² · Σb²); `None` when either side's sum of squares is 0.
    pub cos: Option<f64>,
    /// √Σ(b − a)² / √Σa²; `None` when Σa² = 0.
    pub rel_l2: Option<f64>,
    /// max |b − a| (0 when no position is left).
    pub max_abs: f64,
    /// θ(A), Z-measure v1 (0 when degenerate).
    pub theta_a: f64,
    /// θ(B).
    pub theta_b: f64,
    /// Positions read on each side.
    pub sampled: u64,
    /// Positions dropped because either value was non-finite.
    pub dropped: u64,
}

impl Figures {
    /// θ(B) − θ(A).
    pub fn d_theta(&self) -> f64 {
        self.theta_b - self.theta_a
    }
}

/// The figures of a pair from the values each side holds at the same positions (§2): the
/// sampled values as [`crate::zmeasure::sample_values`] draws them, non-finite ones
/// included (they are dropped here, as the spec says).
///
/// # Errors
/// [`Error::CountMismatch`] when the two sides hold different numbers of values.
pub fn figures(a: Vec<f32>, b: Vec<f32>) -> Result<Figures> {
    if a.len() != b.len() {
        return Err(Error::CountMismatch {
            what: "values at the same positions",
            expected: a.len() as u64,
            got: b.len() as u64,
        });
    }
    let f = sums(&a, &b);
    // Each θ over its own side's values (Z-measure v1 drops its own non-finite ones).
    Ok(Figures { theta_a: measure_values(a).theta, theta_b: measure_values(b).theta, ..f })
}

/// [`figures`] of a pair known to hold the same values (byte-identical, same type): the
/// same formulas with b = a, and θ measured once.
pub fn figures_of_same(a: Vec<f32>) -> Figures {
    let f = sums(&a, &a);
    let theta = measure_values(a).theta;
    Figures { theta_a: theta, theta_b: theta, ..f }
}

/// The figures but θ (left 0), from values at the same positions (same length).
fn sums(a: &[f32], b: &[f32]) -> Figures {
    let (mut saa, mut sbb, mut sab, mut sdd, mut max_abs) = (0f64, 0f64, 0f64, 0f64, 0f64);
    let mut dropped = 0u64;
    for (&x, &y) in a.iter().zip(b) {
        if !(x.is_finite() && y.is_finite()) {
            dropped += 1;
            continue;
        }
        let (x, y) = (f64::from(x), f64::from(y));
        saa += x * x;
        sbb += y * y;
        sab += x * y;
        let d = y - x;
        sdd += d * d;
        max_abs = max_abs.max(d.abs());
    }
    let cos = (saa > 0.0 && sbb > 0.0).then(|| sab / libm::sqrt(saa * sbb));
    let rel_l2 = (saa > 0.0).then(|| libm::sqrt(sdd) / libm::sqrt(saa));
    Figures { cos, rel_l2, max_abs, theta_a: 0.0, theta_b: 0.0, sampled: a.len() as u64, dropped }
}

#[cfg(test)]
mod tests;

/// One comparable pair whose bytes are both at hand (a memory map, a browser buffer of a
/// whole tensor): `identical` on the bytes, the figures from the sampled values, and per
/// expert for expert tensors. Front ends that read bytes piecemeal use [`figures`] and
/// [`ExpertLayout`] directly, with the same result.
///
/// # Errors
/// [`Error::SizeMismatch`] when a side's bytes are not its tensor's size, or an expert
/// tensor does not divide into equal experts.
pub fn compare_slices(a: &TensorEntry, a_bytes: &[u8], b: &TensorEntry, b_bytes: &[u8]) -> Result<PairReport> {
    let same_type = a.ty == b.ty;
    let measurable = a.ty.can_dequantize() && b.ty.can_dequantize();
    // Identical bytes hold identical values: drawn and measured once.
    let fig = |name: &str, n: u64, x: &[u8], y: &[u8], same: bool| -> Result<Figures> {
        if same {
            return Ok(figures_of_same(sample_values(name, a.ty, n, x)?));
        }
        figures(sample_values(name, a.ty, n, x)?, sample_values(name, b.ty, n, y)?)
    };
    let experts = match (ExpertLayout::of(a)?, ExpertLayout::of(b)?) {
        (Some(la), Some(lb)) => {
            let mut rows = Vec::new();
            for e in 0..la.count {
                fn slice<'a>(bytes: &'a [u8], l: &ExpertLayout, e: u64) -> Result<&'a [u8]> {
                    let r = l.range(e);
                    bytes.get(r.start as usize..r.end as usize).ok_or(Error::SizeMismatch {
                        what: "expert tensor bytes",
                        expected: r.end,
                        got: bytes.len() as u64,
                    })
                }
                let (x, y) = (slice(a_bytes, &la, e)?, slice(b_bytes, &lb, e)?);
                let same = same_type && x == y;
                let f = if measurable { Some(fig(&expert_name(&a.name, e), la.elements, x, y, same)?) } else { None };
                rows.push(ExpertPair::new(e, same, f.as_ref()));
            }
            Some(rows)
        }
        _ => None,
    };
    // The experts cover the whole tensor (`ExpertLayout::of` checks it): when they were
    // compared, the tensor's bytes need no second comparison.
    let identical = same_type
        && match &experts {
            Some(rows) => rows.iter().all(|e| e.identical),
            None => a_bytes == b_bytes,
        };
    let f = if measurable { Some(fig(&a.name, a.n_elements, a_bytes, b_bytes, identical)?) } else { None };
    Ok(PairReport::new(a, b, identical, f.as_ref(), experts))
}
