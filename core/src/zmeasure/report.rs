//! θ reports: per tensor, per group, per model, and a ranking across models (§4).
//! One schema for every face (CLI `--json`, browser export, HTTP API), documented in
//! `docs/report.schema.json`.

use super::{Measurement, MEASURE};
use crate::anatomy::{classify, Group, OrganKind};
use crate::model::{Model, TensorEntry};
use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// How many lowest-θ tensors a summary lists as wells.
pub const WELLS: usize = 10;

/// Whether and how a tensor was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// θ from the three indicators.
    Measured,
    /// Too few distinct finite values: θ = 0.
    Degenerate,
    /// A type without a reference dequantizer (Q8_1, Q8_K, Q1_0): no θ.
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
        }
    }
}

/// θ statistics of one anatomy group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSummary {
    /// The group.
    pub group: Group,
    /// Tensors in it (measured or degenerate).
    pub count: u64,
    /// Mean θ.
    pub mean: f64,
    /// Lowest θ.
    pub min: f64,
    /// Highest θ.
    pub max: f64,
}

/// A low-θ tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Well {
    /// Tensor name.
    pub name: String,
    /// Its group.
    pub group: Group,
    /// Its θ.
    pub theta: f64,
}

/// A model's summary (§4). Tensors that are not measurable count in `tensors` and
/// `not_measurable` only; degenerate ones count as θ = 0 everywhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// All tensors.
    pub tensors: u64,
    /// Tensors with a θ from the indicators.
    pub measured: u64,
    /// Degenerate tensors (θ = 0).
    pub degenerate: u64,
    /// Tensors of types with no reference dequantizer.
    pub not_measurable: u64,
    /// Plain mean of θ.
    pub theta_mean: f64,
    /// Mean of θ weighted by element count.
    pub theta_weighted: f64,
    /// Mean of sin θ.
    pub signal: f64,
    /// Per group, in [`Group::ALL`] order, groups without tensors left out.
    pub groups: Vec<GroupSummary>,
    /// The lowest-θ tensors, lowest first (ties by name).
    pub wells: Vec<Well>,
}

impl Summary {
    /// The summary of a model's tensor rows.
    pub fn of(rows: &[TensorReport]) -> Summary {
        let with_theta: Vec<(&TensorReport, f64)> = rows.iter().filter_map(|r| r.theta.map(|t| (r, t))).collect();
        let n = with_theta.len();
        let mean = |it: &mut dyn Iterator<Item = f64>| -> f64 {
            let v: Vec<f64> = it.collect();
            if v.is_empty() {
                0.0
            } else {
                super::sum::pairwise_sum(&v) / v.len() as f64
            }
        };
        let theta_mean = mean(&mut with_theta.iter().map(|&(_, t)| t));
        let total_weight: f64 = with_theta.iter().map(|(r, _)| r.n_elements as f64).sum();
        let theta_weighted = if total_weight > 0.0 {
            with_theta.iter().map(|(r, t)| t * r.n_elements as f64).sum::<f64>() / total_weight
        } else {
            0.0
        };
        let signal = mean(&mut with_theta.iter().map(|&(_, t)| libm::sin(t.to_radians())));
        let mut groups = Vec::new();
        for g in Group::ALL {
            let ts: Vec<f64> = with_theta.iter().filter(|(r, _)| r.group == g).map(|&(_, t)| t).collect();
            if ts.is_empty() {
                continue;
            }
            groups.push(GroupSummary {
                group: g,
                count: ts.len() as u64,
                mean: super::sum::pairwise_sum(&ts) / ts.len() as f64,
                min: ts.iter().copied().fold(f64::INFINITY, f64::min),
                max: ts.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            });
        }
        let mut wells: Vec<Well> =
            with_theta.iter().map(|&(r, t)| Well { name: r.name.clone(), group: r.group, theta: t }).collect();
        wells.sort_by(|a, b| a.theta.total_cmp(&b.theta).then_with(|| a.name.cmp(&b.name)));
        wells.truncate(WELLS);
        let degenerate = rows.iter().filter(|r| r.status == Status::Degenerate).count() as u64;
        Summary {
            tensors: rows.len() as u64,
            measured: n as u64 - degenerate,
            degenerate,
            not_measurable: (rows.len() - n) as u64,
            theta_mean,
            theta_weighted,
            signal,
            groups,
            wells,
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
}

/// A whole report: one or more models, ranked by θ_mean (highest first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always `"z1"`: the definition used.
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
        let ranking = order
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
            })
            .collect();
        Report { measure: MEASURE.to_owned(), generator: generator.to_owned(), models, ranking }
    }
}
