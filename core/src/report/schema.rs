//! The report's rows: per tensor, per model, and a ranking across models (§4). One
//! schema for every face (CLI `--json`, browser export, HTTP API), documented in
//! `docs/report.schema.json`.

use super::Summary;
use crate::anatomy::{classify, Group, OrganKind};
use crate::model::{Model, TensorEntry};
use crate::zmeasure::{population_std, Draws, Measurement, Mode, MEASURE};
use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// Whether and how a tensor was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// θ from the three indicators.
    Measured,
    /// Too few distinct finite values: θ = 0.
    Degenerate,
    /// A type without a reference dequantizer (Q8_1, Q8_K): no θ.
    NotMeasurable,
}

/// One tensor's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorReport {
    /// Tensor name.
    pub name: String,
    /// Anatomy group.
    pub group: Group,
    /// Organ kind, for organs.
    pub organ: Option<OrganKind>,
    /// Layer (`blk.N.`).
    pub layer: Option<u32>,
    /// ggml type name.
    #[serde(rename = "type")]
    pub ty: String,
    /// Shape, ggml order.
    pub shape: Vec<u64>,
    /// Element count.
    pub n_elements: u64,
    /// Bytes of data.
    pub bytes: u64,
    /// Measured, degenerate or not measurable.
    pub status: Status,
    /// θ in degrees (`None` when not measurable; 0 when degenerate).
    pub theta: Option<f64>,
    /// Entropy H.
    pub entropy: Option<f64>,
    /// Excess kurtosis K.
    pub kurtosis: Option<f64>,
    /// Scale coherence C.
    pub cv: Option<f64>,
    /// Values read.
    pub sampled: u64,
    /// Non-finite values dropped.
    pub dropped: u64,
    /// σ_θ: the spread of θ over the alternate draws (§7), when asked for (`--sigma`); 0
    /// for tensors measured on every value. Absent otherwise, and when not measurable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
    /// θ of each alternate draw k = 1..8 (§7), for sampled tensors when σ was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draws: Option<Vec<f64>>,
}

impl TensorReport {
    /// The row for tensor `t` with its measurement (`None`: not measurable).
    pub fn new(t: &TensorEntry, m: Option<&Measurement>) -> TensorReport {
        Self::from_parts(&t.name, t.ty, &t.dims, t.n_bytes, m)
    }

    /// The row for a tensor given by its parts.
    pub fn from_parts(
        name: &str,
        ty: crate::GgmlType,
        shape: &[u64],
        bytes: u64,
        m: Option<&Measurement>,
    ) -> TensorReport {
        let a = classify(name);
        let status = match m {
            None => Status::NotMeasurable,
            Some(m) if m.degenerate => Status::Degenerate,
            Some(_) => Status::Measured,
        };
        TensorReport {
            name: name.to_owned(),
            group: a.group,
            organ: a.organ,
            layer: a.layer,
            ty: ty.name().to_owned(),
            shape: shape.to_vec(),
            n_elements: shape.iter().product(),
            bytes,
            status,
            theta: m.map(|m| m.theta),
            entropy: m.and_then(|m| m.entropy),
            kurtosis: m.and_then(|m| m.kurtosis),
            cv: m.and_then(|m| m.cv),
            sampled: m.map_or(0, |m| m.sampled),
            dropped: m.map_or(0, |m| m.dropped),
            sigma: None,
            draws: None,
        }
    }

    /// The row with its uncertainty (§7): σ_θ of `draws` (the tensor's alternate draws;
    /// `None` for a tensor measured on every value, whose σ_θ is 0). A tensor that is not
    /// measurable keeps no σ.
    pub fn with_draws(mut self, draws: Option<&Draws>) -> TensorReport {
        if self.theta.is_some() {
            self.sigma = Some(draws.map_or(0.0, |d| population_std(d)));
            self.draws = draws.map(|d| d.to_vec());
        }
        self
    }

    /// The row as measured in `mode`: with its uncertainty ([`TensorReport::with_draws`])
    /// unless plainly sampled, where reports carry no σ.
    pub fn in_mode(self, mode: Mode, draws: Option<&Draws>) -> TensorReport {
        if mode == Mode::Sampled {
            self
        } else {
            self.with_draws(draws)
        }
    }
}

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
            })
            .collect();
        for i in 1..ranking.len() {
            ranking[i - 1].distinguishable_from_next = ranking[i - 1].distinguishable_from(&ranking[i]);
        }
        Report { measure: MEASURE.to_owned(), generator: generator.to_owned(), models, ranking }
    }
}
