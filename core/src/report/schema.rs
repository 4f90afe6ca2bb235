//! The report's rows per model and the ranking across models (§4), over the tensors' rows
//! ([`super::TensorReport`]). One schema for every face (CLI `--json`, browser export, HTTP
//! API), documented in `docs/report.schema.json`.

use super::{Summary, TensorReport};
use crate::model::Model;
use crate::zmeasure::MEASURE;
use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// One model's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelReport {
    /// The model's file name (the first shard's, for split models).
    pub model: String,
    /// `general.architecture`.
    pub architecture: Option<String>,
    /// `general.name`.
    pub name: Option<String>,
    /// Total element count.
    pub parameters: u64,
    /// File size in bytes.
    pub file_bytes: u64,
    /// Tensor count per ggml type.
    pub types: BTreeMap<String, u64>,
    /// The summary.
    pub summary: Summary,
    /// Every tensor, in file order.
    pub tensors: Vec<TensorReport>,
    /// For an adapter (its rows are the updates of its pairs): α, ranks, pairs, base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<crate::report::adapter::Facts>,
}

impl ModelReport {
    /// A model's report: its label, the model (for architecture and name), its files' size,
    /// and one row per tensor (in file order).
    pub fn new<T>(model: &str, m: &Model<T>, file_bytes: u64, tensors: Vec<TensorReport>) -> ModelReport {
        Self::from_parts(model, m.architecture().as_deref(), m.name().as_deref(), file_bytes, tensors)
    }

    /// A model's report from its parts (for models read from several files).
    pub fn from_parts(
        model: &str,
        architecture: Option<&str>,
        name: Option<&str>,
        file_bytes: u64,
        tensors: Vec<TensorReport>,
    ) -> ModelReport {
        let mut types = BTreeMap::new();
        for t in &tensors {
            *types.entry(t.ty.clone()).or_insert(0) += 1;
        }
        ModelReport {
            model: model.to_owned(),
            architecture: architecture.map(str::to_owned),
            name: name.map(str::to_owned),
            parameters: tensors.iter().map(|t| t.n_elements).fold(0u64, u64::saturating_add),
            file_bytes,
            types,
            summary: Summary::of(&tensors),
            tensors,
            adapter: None,
        }
    }
}

/// What the ranking's figures are and are not, printed under every ranking (text, page):
/// a fleet once ranked first the copy `organ eval` graded degraded.
pub const RANKING_NOTE: &str = "θ_mean: the mean θ of the model's tensors, a data-free statistic of their values, from 0° \
(noise) to 90° (structure); signal: the mean of sin θ, from 0 to 1. Neither measures quality: θ ranked SmolLM2's tensors \
by measured damage with ρ = +0.12 (docs/validity.md). What running a model says is organ eval --base PARENT; give its \
--json with --verdict to show it here.";

/// A measured verdict on a ranked model, read from the JSON of `organ eval --base` (or of a
/// surgery's `--judge`): what running the model said, beside what θ_mean says of its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// `close`, `changed`, `degraded` or `broken` (docs/judge.md).
    pub verdict: String,
    /// PPL(model) / PPL(parent) over the same tokens; `None` when not finite.
    pub ppl_ratio: Option<f64>,
    /// The file it was read from.
    pub source: String,
}

impl Measured {
    /// The verdict and the perplexity ratio: `degraded ×1.320`.
    pub fn short(&self) -> String {
        match self.ppl_ratio {
            Some(r) => alloc::format!("{} ×{r:.3}", self.verdict),
            None => self.verdict.clone(),
        }
    }
}

/// A row of the ranking across models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankRow {
    /// 1 = highest θ_mean.
    pub rank: u64,
    /// The model's file name.
    pub model: String,
    /// Total element count.
    pub parameters: u64,
    /// Plain mean θ.
    pub theta_mean: f64,
    /// Element-weighted mean θ.
    pub theta_weighted: f64,
    /// Mean sin θ.
    pub signal: f64,
    /// Tensor count.
    pub tensors: u64,
    /// σ of θ_mean (§7), when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theta_mean_sigma: Option<f64>,
    /// `false` when this model's θ_mean and the next one's differ by less than twice the
    /// larger of their σ (§7): the two are not distinguishable. Absent for the last model
    /// and when neither has a σ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinguishable_from_next: Option<bool>,
    /// The model's measured verdict, when one was given (`--verdict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
}

impl RankRow {
    /// Whether this row and `next` are told apart (§7): θ_mean differs by at least twice
    /// the larger σ; `None` when neither has a σ.
    fn distinguishable_from(&self, next: &RankRow) -> Option<bool> {
        let sigma = match (self.theta_mean_sigma, next.theta_mean_sigma) {
            (None, None) => return None,
            (a, b) => a.unwrap_or(0.0).max(b.unwrap_or(0.0)),
        };
        Some((self.theta_mean - next.theta_mean).abs() >= 2.0 * sigma)
    }
}

/// A whole report: one or more models, ranked by θ_mean (highest first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The definition used: `"z1"`, or `"z1-exact"` for θ over every value (§7).
    pub measure: String,
    /// What produced the report (`organ 0.1.0`).
    pub generator: String,
    /// The models, in the order given.
    pub models: Vec<ModelReport>,
    /// The ranking.
    pub ranking: Vec<RankRow>,
}

impl Report {
    /// A report over `models`, ranked.
    pub fn new(generator: &str, models: Vec<ModelReport>) -> Report {
        let mut order: Vec<&ModelReport> = models.iter().collect();
        order.sort_by(|a, b| b.summary.theta_mean.total_cmp(&a.summary.theta_mean).then_with(|| a.model.cmp(&b.model)));
        let mut ranking: Vec<RankRow> = order
            .iter()
            .enumerate()
            .map(|(i, m)| RankRow {
                rank: i as u64 + 1,
                model: m.model.clone(),
                parameters: m.parameters,
                theta_mean: m.summary.theta_mean,
                theta_weighted: m.summary.theta_weighted,
                signal: m.summary.signal,
                tensors: m.summary.tensors,
                theta_mean_sigma: m.summary.theta_mean_sigma,
                distinguishable_from_next: None,
                measured: None,
            })
            .collect();
        for i in 1..ranking.len() {
            ranking[i - 1].distinguishable_from_next = ranking[i - 1].distinguishable_from(&ranking[i]);
        }
        Report { measure: MEASURE.to_owned(), generator: generator.to_owned(), models, ranking }
    }
}
