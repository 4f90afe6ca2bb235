//! The sensitivity report (`organ sensitivity --json`, schema `organ_sensitivity: 1`): what
//! was measured, how, and one row per tensor; read back by `organ recipe --from` and by the
//! browser. Its CSV (`report::sensitivity_csv`) is one line per tensor.

use crate::model::TensorEntry;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::fmt;
use serde::{Deserialize, Serialize};

/// The report's schema version.
pub const SCHEMA: u32 = 1;

pub use crate::judge::Estimate;

/// One tensor changed alone, and what llama.cpp measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The tensor's name.
    pub name: String,
    /// `attn_q`, `ffn_down`, `token_embd`… ([`super::kind`]).
    pub kind: String,
    /// Its layer (`blk.N.`), if any.
    pub layer: Option<u32>,
    /// Its type in the model.
    #[serde(rename = "type")]
    pub ty: String,
    /// Its shape, ggml's order (row length first).
    pub dims: Vec<u64>,
    /// Its values.
    pub n_elements: u64,
    /// Its bytes in the model.
    pub bytes: u64,
    /// The type it was written as in the changed model (its own for ablations).
    pub changed_type: String,
    /// Its bytes in the changed model.
    pub changed_bytes: u64,
    /// Mean KL divergence (nats per token) of the changed model from the unchanged one.
    pub kld: Estimate,
    /// Median KL divergence over the scored tokens.
    pub kld_median: f64,
    /// Its 99th percentile.
    pub kld_p99: f64,
    /// The changed model's perplexity on the same tokens.
    pub ppl: Estimate,
    /// Fraction of tokens whose most likely next token is the unchanged model's.
    pub same_top: Estimate,
    /// The same change measured on the second text (`--repeat-text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_kld: Option<Estimate>,
}

/// How the ground truth was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// The text (as given) and its BLAKE3.
    pub text: String,
    /// BLAKE3 of the text's bytes.
    pub text_blake3: String,
    /// Tokens per context and contexts scored.
    pub ctx: u32,
    /// Contexts scored.
    pub chunks: u32,
    /// The unchanged model's perplexity on the text.
    pub base_perplexity: Estimate,
}

/// A sensitivity report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub organ_sensitivity: u32,
    /// The model (as given).
    pub model: String,
    /// BLAKE3 of its bytes.
    pub model_blake3: String,
    /// [`super::Change::label`]: the type each tensor was requantized to, `noise` or `zero`.
    pub change: String,
    /// The measurement on `--text`.
    pub text: Setup,
    /// The same on `--repeat-text`, with Spearman's ρ between the two runs' KLDs: the
    /// ceiling any predictor of this measurement can reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Setup>,
    /// Spearman's ρ between the two texts' KL divergences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_rho: Option<f64>,
    /// The llama-perplexity that measured it.
    pub llama_perplexity: String,
    /// One row per tensor measured, in the model's order.
    pub tensors: Vec<Row>,
}

impl Report {
    /// Spearman's ρ between the two texts' KLDs, over the tensors measured on both.
    pub fn repeat_rho(tensors: &[Row]) -> Option<f64> {
        let (a, b): (Vec<f64>, Vec<f64>) =
            tensors.iter().filter_map(|r| Some((r.kld.value, r.repeat_kld?.value))).unzip();
        super::spearman(&a, &b)
    }
}

/// The largest mean KL divergence a row may hold, in nats per token: far above any real
/// change (a tensor replaced by noise measures a few nats), and small enough that the sum
/// over every tensor of a model stays finite.
pub const MAX_KLD: f64 = 1e6;

/// How far below zero a mean KL divergence may be and still be read (as it is, so that a
/// recipe from a real report is the one it was before the bound): llama.cpp sums
/// each token's `Σ p (log p − log q)` in floating point, so a change that alters nothing
/// can print a tiny negative mean.
pub const KLD_TOLERANCE: f64 = 1e-4;

/// A measured row as read back from a report: what [`check_rows`] checks.
#[derive(Clone, Copy, Debug)]
pub struct MeasuredRow<'a> {
    /// The tensor's name.
    pub name: &'a str,
    /// Its type in the model, as the report gives it.
    pub ty: &'a str,
    /// Its shape, as the report gives it.
    pub dims: &'a [u64],
    /// Its mean KL divergence.
    pub kld: f64,
}

/// A row of a report that does not fit the model: `tensors[INDEX].FIELD (NAME): REASON`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowError {
    /// The row's place in the report's `tensors`.
    pub index: usize,
    /// The tensor it names.
    pub name: String,
    /// The field at fault.
    pub field: &'static str,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tensors[{}].{} ({}): {}", self.index, self.field, self.name, self.reason)
    }
}

/// Each measured row's KL divergence, checked against the model's `tensors`: every row
/// names a tensor the model has, in its type and shape, once, with a figure from
/// −[`KLD_TOLERANCE`] to [`MAX_KLD`]. What
/// `organ recipe --from` and the browser app read.
///
/// # Errors
/// The first row that breaks one of these, with the field named.
pub fn check_rows<'a, T: Borrow<TensorEntry>>(
    rows: impl IntoIterator<Item = MeasuredRow<'a>>,
    tensors: &[T],
) -> Result<Vec<(String, f64)>, RowError> {
    let by_name: BTreeMap<&str, &TensorEntry> =
        tensors.iter().map(|t| (t.borrow().name.as_str(), t.borrow())).collect();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for (index, e) in rows.into_iter().enumerate() {
        let err = |field, reason| RowError { index, name: e.name.into(), field, reason };
        let Some(t) = by_name.get(e.name) else {
            return Err(err("name", "the model has no such tensor".into()));
        };
        if !e.ty.eq_ignore_ascii_case(t.ty.name()) || e.dims != t.dims.as_slice() {
            let reason = format!("{} {:?} in the report, {} {:?} in the model", e.ty, e.dims, t.ty, t.dims);
            return Err(err("type", reason));
        }
        if !e.kld.is_finite() {
            return Err(err("kld.value", format!("{} is not a number", e.kld)));
        }
        if !(-KLD_TOLERANCE..=MAX_KLD).contains(&e.kld) {
            let reason = format!(
                "{:e}: a mean KL divergence is ≥ 0 (−{KLD_TOLERANCE:e} tolerated) and at most {MAX_KLD:e}",
                e.kld
            );
            return Err(err("kld.value", reason));
        }
        if !seen.insert(t.name.as_str()) {
            return Err(err("name", "listed twice".into()));
        }
        out.push((e.name.into(), e.kld));
    }
    Ok(out)
}

/// The largest sensitivity report read back, by `organ recipe --from` and the browser
/// alike (a row is ~400 bytes: 1,100 tensors make 450 kB).
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// Why a report was not read back ([`ReadBack::read_checked`]); each face puts the file's
/// name before it.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadError {
    /// Not JSON of this schema: serde's reason.
    NotAReport(String),
    /// Another schema version.
    Version(u32),
    /// `model_blake3` is not the model's.
    OtherModel {
        /// The report's.
        report: String,
        /// The model's.
        model: String,
    },
    /// A row does not fit the model.
    Row(RowError),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotAReport(e) => write!(f, "not an organ sensitivity report (organ sensitivity --json): {e}"),
            ReadError::Version(v) => write!(f, "organ_sensitivity: version {v}; organ reads version {SCHEMA}"),
            ReadError::OtherModel { report, model } => {
                write!(f, "model_blake3: {report} is not the model's ({model}): a report of another model")
            }
            ReadError::Row(e) => write!(f, "{e}"),
        }
    }
}

/// A report as it is read back (`organ recipe --from`, the browser beside θ): the fields
/// they use, every other field ignored.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ReadBack {
    /// [`SCHEMA`].
    pub organ_sensitivity: u32,
    /// BLAKE3 of the model measured.
    pub model_blake3: String,
    /// [`super::Change::label`].
    pub change: String,
    /// The rows.
    pub tensors: Vec<ReadRow>,
}

/// A row as it is read back ([`Row`]'s fields that a recipe and the browser use).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ReadRow {
    /// The tensor's name.
    pub name: String,
    /// Its type in the model.
    #[serde(rename = "type")]
    pub ty: String,
    /// Its shape.
    pub dims: Vec<u64>,
    /// The type it was written as in the changed model.
    pub changed_type: String,
    /// Its bytes in the changed model.
    pub changed_bytes: u64,
    /// Its mean KL divergence (the figure only).
    pub kld: ReadKld,
}

/// A row's mean KL divergence, as read back.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
pub struct ReadKld {
    /// The figure.
    pub value: f64,
}

impl ReadBack {
    /// A report read from `text` and checked against the model's `tensors`: its schema,
    /// its model's BLAKE3 when the model's (`blake3`) is known, and every row
    /// ([`check_rows`]); with each row's KL divergence.
    ///
    /// # Errors
    /// The first of these that fails.
    pub fn read_checked<T: Borrow<TensorEntry>>(
        text: &str,
        tensors: &[T],
        blake3: Option<&str>,
    ) -> Result<(ReadBack, Vec<(String, f64)>), ReadError> {
        let r: ReadBack = serde_json::from_str(text).map_err(|e| ReadError::NotAReport(format!("{e}")))?;
        if r.organ_sensitivity != SCHEMA {
            return Err(ReadError::Version(r.organ_sensitivity));
        }
        if let Some(model) = blake3.filter(|b| !r.model_blake3.eq_ignore_ascii_case(b)) {
            return Err(ReadError::OtherModel { report: r.model_blake3.clone(), model: model.into() });
        }
        let rows = r.tensors.iter().map(|e| MeasuredRow { name: &e.name, ty: &e.ty, dims: &e.dims, kld: e.kld.value });
        let klds = check_rows(rows, tensors).map_err(ReadError::Row)?;
        Ok((r, klds))
    }
}
