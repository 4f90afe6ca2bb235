//! The compare report (§4): per pair, per expert, the counts, the per-group summary and the
//! most changed tensors. One schema for every face (`docs/report.schema.json`,
//! `"compare": "c1"`).

use super::{Figures, LayerAlignment, MetaDiff, Plan, COMPARE};
use crate::anatomy::{classify, Group, OrganKind};
use crate::model::{Model, TensorEntry};
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::cmp::Ordering;
use serde::{Deserialize, Serialize};

/// How many of the most changed tensors a report names.
pub const MOST_CHANGED: usize = 20;

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// File name (the first shard's for split models; the directory's for organ directories).
    pub model: String,
    /// `general.architecture`.
    pub architecture: Option<String>,
    /// `general.name`.
    pub name: Option<String>,
    /// Total element count.
    pub parameters: u64,
    /// Size of its files in bytes.
    pub file_bytes: u64,
    /// Tensor count.
    pub tensors: u64,
}

impl Side {
    /// The side for model `m`, called `label`, whose files hold `file_bytes` bytes.
    pub fn of<T: Borrow<TensorEntry>>(label: &str, m: &Model<T>, file_bytes: u64) -> Side {
        Side {
            model: label.to_owned(),
            architecture: m.architecture().map(|s| s.into_owned()),
            name: m.name().map(|s| s.into_owned()),
            parameters: m.tensors.iter().map(|t| t.borrow().n_elements).fold(0u64, u64::saturating_add),
            file_bytes,
            tensors: m.tensors.len() as u64,
        }
    }
}

/// Same name, different shapes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeMismatch {
    /// The name.
    pub name: String,
    /// A's shape, ggml order.
    pub a: Vec<u64>,
    /// B's shape.
    pub b: Vec<u64>,
    /// B's name, when the layers were lined up and it differs from A's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_b: Option<String>,
}

/// One expert of an expert tensor pair (§3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpertPair {
    /// Its index e.
    pub expert: u64,
    /// Same type and byte-identical slices.
    pub identical: bool,
    /// cos (§2).
    pub cos: Option<f64>,
    /// rel_l2.
    pub rel_l2: Option<f64>,
    /// max_abs (`None` when not measurable).
    pub max_abs: Option<f64>,
    /// θ(B) − θ(A) over the expert's slice.
    pub d_theta: Option<f64>,
    /// θ(A) of the expert: its per-expert θ (Z-measure v1 §6, sampler name `NAME#e`).
    #[serde(default)]
    pub theta_a: Option<f64>,
    /// θ(B) of the expert.
    #[serde(default)]
    pub theta_b: Option<f64>,
    /// Positions dropped as non-finite.
    pub dropped: u64,
}

impl ExpertPair {
    /// Expert `expert`'s row from what the front end found (`figures`: `None` when a side's
    /// type has no reference dequantizer).
    pub fn new(expert: u64, identical: bool, figures: Option<&Figures>) -> ExpertPair {
        ExpertPair {
            expert,
            identical,
            cos: figures.and_then(|f| f.cos),
            rel_l2: figures.and_then(|f| f.rel_l2),
            max_abs: figures.map(|f| f.max_abs),
            d_theta: figures.map(Figures::d_theta),
            theta_a: figures.map(|f| f.theta_a),
            theta_b: figures.map(|f| f.theta_b),
            dropped: figures.map_or(0, |f| f.dropped),
        }
    }
}

/// One comparable pair's row (§2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairReport {
    /// Tensor name.
    pub name: String,
    /// Anatomy group.
    pub group: Group,
    /// Organ kind, for organs.
    pub organ: Option<OrganKind>,
    /// Layer (`blk.N.`).
    pub layer: Option<u32>,
    /// A's ggml type.
    pub type_a: String,
    /// B's ggml type.
    pub type_b: String,
    /// The shape, ggml order.
    pub shape: Vec<u64>,
    /// Element count.
    pub n_elements: u64,
    /// Same type and byte-identical data.
    pub identical: bool,
    /// Whether both sides could be dequantized (false: figures are null).
    pub measurable: bool,
    /// cos.
    pub cos: Option<f64>,
    /// rel_l2.
    pub rel_l2: Option<f64>,
    /// max_abs.
    pub max_abs: Option<f64>,
    /// θ(B) − θ(A).
    pub d_theta: Option<f64>,
    /// θ(A).
    pub theta_a: Option<f64>,
    /// θ(B).
    pub theta_b: Option<f64>,
    /// Positions read on each side.
    pub sampled: u64,
    /// Positions dropped because either value was non-finite.
    pub dropped: u64,
    /// Per expert, for expert tensors (§3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<Vec<ExpertPair>>,
    /// B's name, when the layers were lined up and it differs from A's (`name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_b: Option<String>,
}

impl PairReport {
    /// The row of the pair (`a`, `b`) from what the front end found.
    pub fn new(
        a: &TensorEntry,
        b: &TensorEntry,
        identical: bool,
        figures: Option<&Figures>,
        experts: Option<Vec<ExpertPair>>,
    ) -> PairReport {
        let anatomy = classify(&a.name);
        PairReport {
            name: a.name.clone(),
            group: anatomy.group,
            organ: anatomy.organ,
            layer: anatomy.layer,
            type_a: a.ty.name().to_owned(),
            type_b: b.ty.name().to_owned(),
            shape: a.dims.clone(),
            n_elements: a.n_elements,
            identical,
            measurable: figures.is_some(),
            cos: figures.and_then(|f| f.cos),
            rel_l2: figures.and_then(|f| f.rel_l2),
            max_abs: figures.map(|f| f.max_abs),
            d_theta: figures.map(Figures::d_theta),
            theta_a: figures.map(|f| f.theta_a),
            theta_b: figures.map(|f| f.theta_b),
            sampled: figures.map_or(0, |f| f.sampled),
            dropped: figures.map_or(0, |f| f.dropped),
            experts,
            name_b: (b.name != a.name).then(|| b.name.clone()),
        }
    }
}

/// The counts (§4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Pairs with the same name and shape.
    pub comparable: u64,
    /// Comparable and byte-identical.
    pub identical: u64,
    /// Comparable and not identical.
    pub changed: u64,
    /// Names only in A.
    pub only_in_a: u64,
    /// Names only in B.
    pub only_in_b: u64,
    /// Same name, different shape.
    pub shape_mismatch: u64,
}

impl Counts {
    /// Each count with its JSON key and its label for people, in the report's order (the
    /// cards of the static page and of the browser).
    pub fn labelled(&self) -> [(&'static str, &'static str, u64); 6] {
        [
            ("comparable", "comparable", self.comparable),
            ("identical", "identical", self.identical),
            ("changed", "changed", self.changed),
            ("only_in_a", "only in A", self.only_in_a),
            ("only_in_b", "only in B", self.only_in_b),
            ("shape_mismatch", "shape mismatch", self.shape_mismatch),
        ]
    }
}

/// One anatomy group's summary (§4; null values stay out of means and minimums).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupDiff {
    /// The group.
    pub group: Group,
    /// Comparable pairs in it.
    pub count: u64,
    /// Identical ones.
    pub identical: u64,
    /// Mean cos.
    pub cos_mean: Option<f64>,
    /// Lowest cos.
    pub cos_min: Option<f64>,
    /// Mean rel_l2.
    pub rel_l2_mean: Option<f64>,
}

/// A whole comparison of A (the base) and B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// Always `"c1"`: the definition used.
    pub compare: String,
    /// What produced the report.
    pub generator: String,
    /// The base.
    pub a: Side,
    /// The other.
    pub b: Side,
    /// The counts.
    pub counts: Counts,
    /// Per anatomy group, in [`Group::ALL`] order, groups without pairs left out.
    pub groups: Vec<GroupDiff>,
    /// The most changed tensors (at most [`MOST_CHANGED`]), most changed first: lowest cos,
    /// then highest rel_l2, then name; those with a null cos last. Identical pairs are not
    /// changed and never listed.
    pub most_changed: Vec<String>,
    /// Things a reader should know: different architectures, no shared tensor name, pairs
    /// that could not be measured.
    pub warnings: Vec<String>,
    /// Every comparable pair, in A's order.
    pub pairs: Vec<PairReport>,
    /// Names only in A, in A's order.
    pub only_in_a: Vec<String>,
    /// Names only in B, in B's order.
    pub only_in_b: Vec<String>,
    /// Same name, different shapes.
    pub shape_mismatch: Vec<ShapeMismatch>,
    /// The metadata compared key by key (an addition beside Compare v1; absent from
    /// reports written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MetaDiff>,
    /// How the layers were lined up, when a side was cut by `organ layers`
    /// (`organ.layers.dropped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<LayerAlignment>,
}

impl CompareReport {
    /// The report of A and B from the plan ([`super::plan`], or a bare pairing) and one
    /// row per comparable pair.
    pub fn new(generator: &str, a: Side, b: Side, plan: impl Into<Plan>, pairs: Vec<PairReport>) -> CompareReport {
        let Plan { pairing, layers, metadata, warnings: planned } = plan.into();
        let identical = pairs.iter().filter(|p| p.identical).count() as u64;
        let counts = Counts {
            comparable: pairs.len() as u64,
            identical,
            changed: pairs.len() as u64 - identical,
            only_in_a: pairing.only_in_a.len() as u64,
            only_in_b: pairing.only_in_b.len() as u64,
            shape_mismatch: pairing.shape_mismatch.len() as u64,
        };
        let mut warnings = Vec::new();
        if let (Some(x), Some(y)) = (&a.architecture, &b.architecture) {
            if x != y {
                warnings.push(format!("the architectures differ: {x} (A) and {y} (B)"));
            }
        }
        if pairs.is_empty() && pairing.shape_mismatch.is_empty() {
            warnings.push("the two models share no tensor name: nothing to compare".to_owned());
        }
        warnings.extend(planned);
        let unmeasured = pairs.iter().filter(|p| !p.measurable).count();
        if unmeasured > 0 {
            warnings.push(format!(
                "{unmeasured} pairs hold a type with no reference dequantizer: compared on their bytes only"
            ));
        }
        CompareReport {
            compare: COMPARE.to_owned(),
            generator: generator.to_owned(),
            a,
            b,
            groups: groups(&pairs),
            most_changed: most_changed(&pairs).into_iter().take(MOST_CHANGED).map(|p| p.name.clone()).collect(),
            counts,
            warnings,
            pairs,
            only_in_a: pairing.only_in_a,
            only_in_b: pairing.only_in_b,
            shape_mismatch: pairing.shape_mismatch,
            metadata,
            layers,
        }
    }

    /// The pairs of [`CompareReport::most_changed`], in its order (a name no pair has, in
    /// a report edited by hand, is left out).
    pub fn most_changed_pairs(&self) -> impl Iterator<Item = &PairReport> {
        (self.most_changed.iter()).filter_map(|n| self.pairs.iter().find(|p| &p.name == n))
    }

    /// Whether anything differs: a changed pair, an unmatched name, a shape mismatch or a
    /// metadata key (`organ diff --fail-on-change`).
    pub fn any_change(&self) -> bool {
        let c = &self.counts;
        c.changed + c.only_in_a + c.only_in_b + c.shape_mismatch > 0
            || self.metadata.as_ref().is_some_and(|m| m.counts.differ() > 0)
    }
}

/// Every changed pair, most changed first (§4's order).
pub fn most_changed(pairs: &[PairReport]) -> Vec<&PairReport> {
    let mut v: Vec<&PairReport> = pairs.iter().filter(|p| !p.identical).collect();
    v.sort_by(|x, y| order(x, y));
    v
}

/// §4's order: lowest cos first, then highest rel_l2, then name; a null cos last.
fn order(x: &PairReport, y: &PairReport) -> Ordering {
    let cos = match (x.cos, y.cos) {
        (Some(a), Some(b)) => a.total_cmp(&b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    };
    let rel = match (x.rel_l2, y.rel_l2) {
        (Some(a), Some(b)) => b.total_cmp(&a),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    };
    cos.then(rel).then_with(|| x.name.cmp(&y.name))
}

fn groups(pairs: &[PairReport]) -> Vec<GroupDiff> {
    let mean = |v: &[f64]| (!v.is_empty()).then(|| crate::zmeasure::pairwise_sum(v) / v.len() as f64);
    Group::ALL
        .iter()
        .filter_map(|&g| {
            let ps: Vec<&PairReport> = pairs.iter().filter(|p| p.group == g).collect();
            if ps.is_empty() {
                return None;
            }
            let cos: Vec<f64> = ps.iter().filter_map(|p| p.cos).collect();
            let rel: Vec<f64> = ps.iter().filter_map(|p| p.rel_l2).collect();
            Some(GroupDiff {
                group: g,
                count: ps.len() as u64,
                identical: ps.iter().filter(|p| p.identical).count() as u64,
                cos_mean: mean(&cos),
                cos_min: cos.iter().copied().reduce(f64::min),
                rel_l2_mean: mean(&rel),
            })
        })
        .collect()
}
