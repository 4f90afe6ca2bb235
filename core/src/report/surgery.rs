//! What a surgery that writes a model reports with `--json`: its own facts (what it read,
//! what it kept, changed or wrote), where it wrote, and `--judge`'s verdict (`null`
//! without one). Most documents have their objects' keys in sorted order at every depth,
//! as the reports always had them; `lora extract`'s and `meta`'s keep their fields' order.

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
    /// `organ lora merge`.
    LoraMerge(LoraMerge<'a>),
    /// `organ lora extract`.
    LoraExtract(LoraExtract<'a>),
    /// `organ meta`.
    Meta(Meta<'a>),
    /// `organ purify`.
    Purify(Purify<'a>),
}

impl Serialize for Surgery<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        // Through serde_json's map, which sorts the keys at every depth.
        let sorted = |v: Result<serde_json::Value, serde_json::Error>| v.map_err(S::Error::custom);
        match self {
            Surgery::Graft(r) => sorted(serde_json::to_value(r))?.serialize(s),
            Surgery::Layers(r) => sorted(serde_json::to_value(r))?.serialize(s),
            Surgery::Experts(r) => sorted(serde_json::to_value(r))?.serialize(s),
            Surgery::Moe(r) => sorted(serde_json::to_value(r))?.serialize(s),
            Surgery::Merge(r) => sorted(serde_json::to_value(r))?.serialize(s),
            Surgery::LoraMerge(r) => sorted(serde_json::to_value(r))?.serialize(s),
            Surgery::Purify(r) => sorted(serde_json::to_value(r))?.serialize(s),
            Surgery::LoraExtract(r) => r.serialize(s),
            Surgery::Meta(r) => r.serialize(s),
        }
    }
}

/// `organ purify`'s report: the method, and what happened to each selected tensor.
#[derive(Debug, Serialize)]
pub struct Purify<'a> {
    /// `fractal` or `spectral`.
    pub method: &'a str,
    /// Its parameters (`strength=…`, `keep=…`).
    pub parameters: &'a str,
    /// The model's label.
    pub model: &'a str,
    /// Each selected tensor.
    pub tensors: Vec<&'a PurifyRow>,
    /// `--judge`'s verdict (no key without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge: Option<&'a Verdict>,
}

/// What happened to one tensor `organ purify` selected.
#[derive(Serialize, Debug, Clone)]
pub struct PurifyRow {
    /// The tensor.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: String,
    /// The type it was written in.
    pub written_as: String,
    /// Its θ before.
    pub theta_before: Option<f64>,
    /// Its θ after, as stored.
    pub theta_after: Option<f64>,
    /// ‖stored − original‖ / ‖original‖.
    pub relative_l2: Option<f64>,
    /// purified, kept (not improved, with --only-if-improves), or untouched (why).
    pub status: String,
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
    /// Tensors copied from an input as they are.
    pub copied: usize,
    /// `slices:` only: the merged model's layer count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_count: Option<u64>,
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

/// `organ lora merge`'s report.
#[derive(Debug, Serialize)]
pub struct LoraMerge<'a> {
    /// The base's path.
    pub base: &'a str,
    /// Where the result was written.
    pub out: &'a str,
    /// Each adapter merged, in order.
    pub adapters: &'a [LoraAdapterRow],
    /// Every tensor an adapter changed.
    pub tensors: &'a [LoraTensorRow],
    /// Tensors copied as they are.
    pub copied: usize,
    /// `--judge`'s verdict.
    pub judge: Option<&'a Verdict>,
}

/// One adapter of [`LoraMerge`].
#[derive(Debug, Clone, Serialize)]
pub struct LoraAdapterRow {
    /// Its path.
    pub file: String,
    /// The scale it was merged at.
    pub scale: f32,
    /// Its α.
    pub alpha: Option<f32>,
    /// Its ranks.
    pub ranks: Vec<u64>,
    /// Its pairs.
    pub pairs: usize,
}

/// A merged tensor of [`LoraMerge`].
#[derive(Debug, Clone, Serialize)]
pub struct LoraTensorRow {
    /// Its name.
    pub name: String,
    /// The base's type.
    #[serde(rename = "type")]
    pub from: String,
    /// The type written.
    pub written_as: String,
    /// Why that type: kept (the base's), --type, or F16 (organ cannot write the base's).
    pub why: &'static str,
    /// The adapters (indices in `adapters`) whose pairs were added.
    pub adapters: Vec<usize>,
}

/// `organ lora extract`'s report.
#[derive(Debug, Serialize)]
pub struct LoraExtract<'a> {
    /// The base's label.
    pub base: &'a str,
    /// The fine-tune's label.
    pub tuned: &'a str,
    /// The rank asked for.
    pub rank: usize,
    /// The α written.
    pub alpha: f32,
    /// The halves' type.
    #[serde(rename = "type")]
    pub ty: &'a str,
    /// Selected 2-D weights whose values are the same in both models.
    pub unchanged: usize,
    /// Weights that differ but were not extracted: `token_embd.weight` on a base that ties
    /// its output to it, where llama.cpp aborts on the pair.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub left_out: &'a [String],
    /// Every pair written.
    pub tensors: &'a [ExtractRow],
    /// `--judge`'s verdict: `BASE --lora OUT` against TUNED.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge: Option<&'a Verdict>,
}

/// One pair of [`LoraExtract`]: a weight's update, factored.
#[derive(Serialize, Debug, Clone)]
pub struct ExtractRow {
    /// The weight's name in the base (`blk.0.attn_q.weight`).
    pub tensor: String,
    /// Its shape in ggml order.
    pub shape: [u64; 2],
    /// The rank kept.
    pub rank: usize,
    /// ‖ΔW‖_F.
    pub delta_norm: f64,
    /// The share of ‖ΔW‖²_F the kept rank holds (Σ σᵢ² / ‖ΔW‖²_F).
    pub retained: f64,
    /// The type the A half is written in.
    pub lora_a: String,
    /// The type the B half is written in.
    pub lora_b: String,
}

/// `organ meta`'s report.
#[derive(Debug, Serialize)]
pub struct Meta<'a> {
    /// The model's path.
    pub model: String,
    /// Where the edited file was written.
    pub out: String,
    /// Whether the file was edited in place.
    pub in_place: bool,
    /// Shards of the model (1: one file); a split model's first shard is the one edited.
    pub shards: usize,
    /// The header's size before.
    pub header_bytes_before: u64,
    /// … and after.
    pub header_bytes_after: u64,
    /// The edited file's size.
    pub file_bytes: u64,
    /// Every change of the metadata.
    pub changes: &'a [crate::surgery::meta::Change],
    /// Every tensor renamed, removed or retyped.
    pub tensor_changes: &'a [crate::surgery::meta::TensorChange],
    /// The check's errors and warnings the edited model has and the input had not
    /// (`surgery::meta::new_findings`): what the edits broke.
    pub findings: &'a [crate::check::Finding],
}
