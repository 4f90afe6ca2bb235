//! What a surgery that writes a model reports with `--json`: its own facts (what it read,
//! what it kept, changed or wrote), where it wrote, and `--judge`'s verdict (`null`
//! without one). The document's objects have their keys in sorted order at every depth,
//! as the reports always had them.

use crate::judge::Verdict;
use crate::surgery::experts::ExpertsPlan;
use crate::surgery::layers::LayersPlan;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use serde::Serialize;

/// A surgery's report.
#[derive(Debug)]
pub enum Surgery<'a> {
    /// `organ graft`.
    Graft(Graft<'a>),
    /// `organ layers`.
    Layers(Layers<'a>),
    /// `organ experts extract|prune`.
    Experts(Experts<'a>),
    /// `organ moe`.
    Moe(Moe<'a>),
    /// `organ merge`.
    Merge(Merge<'a>),
}

impl Surgery<'_> {
    /// The JSON document.
    ///
    /// # Errors
    /// A figure serde_json cannot hold.
    pub fn document(&self) -> Result<serde_json::Value, serde_json::Error> {
        match self {
            Surgery::Graft(r) => serde_json::to_value(r),
            Surgery::Layers(r) => serde_json::to_value(r),
            Surgery::Experts(r) => serde_json::to_value(r),
            Surgery::Moe(r) => serde_json::to_value(r),
            Surgery::Merge(r) => serde_json::to_value(r),
        }
    }
}

/// `organ graft`'s report.
#[derive(Debug, Serialize)]
pub struct Graft<'a> {
    /// The donor's label.
    pub donor: &'a str,
    /// The recipient's label.
    pub recipient: &'a str,
    /// Where the result was written.
    pub out: &'a str,
    /// The selection, described.
    pub selection: String,
    /// The tensors grafted.
    pub tensors: &'a [String],
    /// `--judge`'s verdict.
    pub judge: Option<&'a Verdict>,
}

/// Where a plan's source is and what was written from it.
#[derive(Debug, Clone, Copy)]
pub struct Written<'a> {
    /// The source model's label.
    pub source: &'a str,
    /// Its BLAKE3.
    pub source_blake3: &'a str,
    /// Where the result was written.
    pub out: &'a str,
    /// `--judge`'s verdict.
    pub judge: Option<&'a Verdict>,
}

/// `organ layers`'s report.
#[derive(Debug, Serialize)]
pub struct Layers<'a> {
    source: &'a str,
    source_blake3: &'a str,
    out: &'a str,
    bytes: u64,
    architecture: &'a str,
    block_count: u64,
    kept: &'a [u64],
    dropped: &'a [u64],
    metadata_changed: BTreeMap<&'a str, &'a str>,
    tensors_removed: &'a [String],
    judge: Option<&'a Verdict>,
}

impl<'a> Layers<'a> {
    /// The report of `plan`, written as `w` says in `bytes` bytes.
    #[must_use]
    pub fn new(plan: &'a LayersPlan, w: Written<'a>, bytes: u64) -> Layers<'a> {
        Layers {
            source: w.source,
            source_blake3: w.source_blake3,
            out: w.out,
            bytes,
            architecture: &plan.architecture,
            block_count: plan.block_count,
            kept: &plan.kept,
            dropped: &plan.dropped,
            // A key changed twice says its last change, as a map keeps it.
            metadata_changed: plan.changed.iter().map(|(k, what)| (k.as_str(), what.as_str())).collect(),
            tensors_removed: &plan.removed,
            judge: w.judge,
        }
    }
}

/// `organ experts extract|prune`'s report.
#[derive(Debug, Serialize)]
pub struct Experts<'a> {
    op: &'static str,
    source: &'a str,
    source_blake3: &'a str,
    out: &'a str,
    architecture: &'a str,
    expert_count: u64,
    kept: &'a [u64],
    sliced: &'a [String],
    dropped: &'a [String],
    judge: Option<&'a Verdict>,
}

impl<'a> Experts<'a> {
    /// The report of `plan`, written as `w` says.
    #[must_use]
    pub fn new(plan: &'a ExpertsPlan, w: Written<'a>) -> Experts<'a> {
        Experts {
            op: plan.op,
            source: w.source,
            source_blake3: w.source_blake3,
            out: w.out,
            architecture: &plan.architecture,
            expert_count: plan.expert_count,
            kept: &plan.kept,
            sliced: &plan.sliced,
            dropped: &plan.dropped,
            judge: w.judge,
        }
    }
}

/// `organ moe`'s report.
#[derive(Debug, Serialize)]
pub struct Moe<'a> {
    /// The base's label.
    pub base: &'a str,
    /// Each expert's donor, in order.
    pub experts: Vec<&'a str>,
    /// Experts used per token.
    pub experts_used: u64,
    /// The router's name.
    pub router: &'static str,
    /// The random router's seed.
    pub seed: Option<u64>,
    /// `--type`, when given.
    #[serde(rename = "type")]
    pub ty: Option<&'static str>,
    /// The tensors requantized to it.
    pub requantized: &'a [String],
    /// Where the result was written.
    pub out: &'a str,
    /// Its size.
    pub bytes: u64,
    /// `--judge`'s verdict.
    pub judge: Option<&'a Verdict>,
}

/// `organ merge`'s report.
#[derive(Debug, Serialize)]
pub struct Merge<'a> {
    /// The method's name.
    pub method: &'static str,
    /// The base's label, for the methods that take one.
    pub base: Option<&'a str>,
    /// The models merged, in order.
    pub models: Vec<&'a str>,
    /// Where the result was written.
    pub out: &'a str,
    /// The seed of the methods that draw.
    pub seed: u64,
    /// Every merged tensor.
    pub tensors: &'a [MergeRow],
    /// Tensors copied from the first model as they are.
    pub copied: usize,
    /// `--judge`'s verdict.
    pub judge: Option<&'a Verdict>,
}

/// One merged tensor of [`Merge`].
#[derive(Debug, Clone, Serialize)]
pub struct MergeRow {
    /// Its name.
    pub name: String,
    /// Each input's type, in the order of the models.
    pub types: Vec<String>,
    /// The type written.
    pub written_as: String,
    /// Why that type: kept (the base's), --type (or dtype), or F16 (organ cannot write
    /// the base's).
    pub why: &'static str,
    /// Each model's weight.
    pub weights: Vec<f64>,
    /// Each model's density.
    pub densities: Vec<f64>,
    /// SLERP's t.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t: Option<f64>,
}
