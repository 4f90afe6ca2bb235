//! Check k1: a data-free health check of a model. Every front end (CLI, browser, API)
//! calls these functions; they only choose where the bytes come from.
//!
//! Two halves:
//! - per tensor, a full scan of its bytes ([`Scanner`], fed in chunks of whole blocks so
//!   memory stays bounded, callable per tensor so callers parallelise): non-finite values
//!   or block scales, all-zero, constant; and a digest of its bytes that the front end
//!   computes by the rule of [`digest`] (which tensors, BLAKE3), compared here to find
//!   byte-identical tensors;
//! - over the model, its metadata and shapes against what llama.cpp's loader expects for
//!   the architecture (llama, qwen2, gemma3, deepseek2: `arch.rs`), tokenizer and chat
//!   template metadata, expert and split counts (`meta.rs`).
//!
//! [`check_model`] joins both into a [`CheckReport`] of findings graded error, warning
//! and info, each naming the tensor or metadata key and what was expected.

pub mod adapter;
mod arch;
pub mod digest;
mod meta;
mod scan;
pub mod template;

pub use scan::{scan_tensor, Scanner, TensorScan};

use crate::model::{Model, TensorEntry};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::borrow::Borrow;
use serde::{Deserialize, Serialize};

/// The version of the check, in every report.
pub const CHECK_VERSION: &str = "k1";

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The model is broken: llama.cpp refuses it, or it computes garbage.
    Error,
    /// Likely a mistake, though a model could mean it.
    Warning,
    /// Worth knowing.
    Info,
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// NaN or infinite values.
    NonFinite,
    /// NaN or infinite block scales of a quantized tensor.
    NonFiniteScale,
    /// Every value zero.
    AllZero,
    /// Every value the same.
    Constant,
    /// Byte-identical to another tensor of the model.
    Duplicate,
    /// A shape other than the architecture's metadata implies.
    Shape,
    /// A tensor the architecture needs that the file lacks.
    MissingTensor,
    /// A tensor llama.cpp's loader for the architecture does not know.
    UnknownTensor,
    /// A metadata key that is missing, of the wrong type, or disagrees with the tensors.
    Metadata,
    /// Tokenizer metadata missing or inconsistent.
    Tokenizer,
    /// Chat-template metadata missing or inconsistent.
    ChatTemplate,
    /// Expert counts inconsistent.
    Experts,
    /// Split metadata inconsistent.
    Split,
    /// An architecture whose shapes organ does not know (only the generic checks ran).
    Architecture,
    /// A tensor whose bytes could not be scanned.
    Unscanned,
    /// A LoRA adapter's metadata or pairs, alone or against its base.
    Adapter,
    /// A file cut short (a partial download): tensors' bytes past its end.
    Incomplete,
    /// Whether the model is another quantized by llama-quantize (`--derived-from`): the
    /// verdict, each tensor or key that differs.
    Derivation,
}

/// One thing the check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// What it is about.
    pub kind: Kind,
    /// The tensor name or metadata key it concerns (empty for the model as a whole).
    pub subject: String,
    /// What was found and what was expected.
    pub message: String,
}

impl Finding {
    pub(crate) fn new(severity: Severity, kind: Kind, subject: &str, message: String) -> Finding {
        Finding { severity, kind, subject: subject.into(), message }
    }
}

/// Why a tensor's bytes could not be scanned, as the front end that read them says it
/// (a read that failed, a file cut short): the message of its [`Kind::Unscanned`] finding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ScanError {
    /// What went wrong.
    pub reason: String,
}

/// One tensor's row in a report: its scan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorRow {
    /// The tensor's name.
    pub name: String,
    /// Its type's name.
    #[serde(rename = "type")]
    pub ty: String,
    /// Its scan, or `None` when it could not be read.
    #[serde(flatten)]
    pub scan: Option<TensorScan>,
}

/// Findings counted by severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Errors.
    pub error: usize,
    /// Warnings.
    pub warning: usize,
    /// Infos.
    pub info: usize,
}

/// A model's check: every finding (errors first, then warnings, then infos; within each,
/// model order) and every tensor's scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    /// [`CHECK_VERSION`].
    pub check: String,
    /// The program that made it.
    pub generator: String,
    /// The model's file or directory name.
    pub model: String,
    /// `general.architecture`, if any.
    pub architecture: Option<String>,
    /// Whether the architecture's shapes were checked (one organ knows).
    pub shapes_checked: bool,
    /// How many tensors.
    pub tensors: usize,
    /// Bytes of tensor data scanned.
    pub bytes_scanned: u64,
    /// Findings by severity.
    pub counts: Counts,
    /// Every finding.
    pub findings: Vec<Finding>,
    /// Every tensor's scan, in model order.
    pub scans: Vec<TensorRow>,
}

impl CheckReport {
    /// Whether any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.counts.error > 0
    }
}

/// The findings of one tensor's scan.
pub fn scan_findings(t: &TensorEntry, s: &TensorScan) -> Vec<Finding> {
    let mut out = Vec::new();
    let name = t.name.as_str();
    let matrix = t.dims.iter().filter(|&&d| d > 1).count() >= 2;
    if s.non_finite > 0 {
        let (kind, what) = if s.scanned.starts_with("block scales") {
            (Kind::NonFiniteScale, "blocks have a NaN or infinite scale")
        } else {
            (Kind::NonFinite, "values are NaN or infinite")
        };
        let msg = format!("{} of {} {what} (scanned: {}); expected all finite", s.non_finite, s.count, s.scanned);
        out.push(Finding::new(Severity::Error, kind, name, msg));
    }
    if s.all_zero {
        let (sev, why) = if matrix {
            (Severity::Error, "a weight matrix of zeros passes nothing on")
        } else {
            (Severity::Info, "a zero vector (often a bias)")
        };
        let msg = format!("every one of its {} values is 0: {why}", t.n_elements);
        out.push(Finding::new(sev, Kind::AllZero, name, msg));
    } else if s.constant && t.n_elements > 1 {
        let sev = if matrix { Severity::Warning } else { Severity::Info };
        let msg = format!("all {} values are equal: trained weights vary", t.n_elements);
        out.push(Finding::new(sev, Kind::Constant, name, msg));
    }
    out
}

/// The duplicate findings among tensors whose byte digests are `digests` (same order as
/// `tensors`, `None` for tensors not hashed): each tensor byte-identical (same type, shape
/// and digest) to an earlier one is named with that one.
pub fn duplicate_findings<T: Borrow<TensorEntry>>(tensors: &[T], digests: &[Option<[u8; 32]>]) -> Vec<Finding> {
    let mut seen: BTreeMap<(&[u8; 32], &[u64], u32), &str> = BTreeMap::new();
    let mut out = Vec::new();
    for (t, d) in tensors.iter().zip(digests) {
        let t = t.borrow();
        let Some(d) = d else { continue };
        if t.n_bytes == 0 || t.n_elements <= 1 {
            continue;
        }
        match seen.get(&(d, t.dims.as_slice(), t.ty as u32)) {
            Some(first) => {
                let matrix = t.dims.iter().filter(|&&x| x > 1).count() >= 2;
                let sev = if matrix { Severity::Warning } else { Severity::Info };
                let msg = format!("byte-identical to {first:?} ({} bytes): a copy, not a trained tensor", t.n_bytes);
                out.push(Finding::new(sev, Kind::Duplicate, &t.name, msg));
            }
            None => {
                seen.insert((d, t.dims.as_slice(), t.ty as u32), &t.name);
            }
        }
    }
    out
}

/// The findings of a model's metadata and shapes (no tensor bytes needed), and whether
/// the architecture's shapes were checked.
pub fn model_findings<T: Borrow<TensorEntry>>(model: &Model<T>) -> (Vec<Finding>, bool) {
    let mut out = Vec::new();
    if crate::lora::is_adapter(model) {
        adapter::check(model, &mut out);
        return (out, true);
    }
    let shapes = arch::check(model, &mut out);
    meta::check(model, &mut out);
    (out, shapes)
}

/// The whole check of `model`: its metadata and shapes, and its tensors' scans (`scans[i]`
/// is tensor `i`'s, or why it could not be read) and digests.
pub fn check_model<T: Borrow<TensorEntry>>(
    generator: &str,
    label: &str,
    model: &Model<T>,
    scans: Vec<core::result::Result<TensorScan, ScanError>>,
    digests: &[Option<[u8; 32]>],
) -> CheckReport {
    let (mut findings, shapes_checked) = model_findings(model);
    let mut rows = Vec::with_capacity(scans.len());
    let mut bytes_scanned = 0;
    for (t, s) in model.tensors.iter().zip(scans) {
        let t = t.borrow();
        match s {
            Ok(s) => {
                findings.extend(scan_findings(t, &s));
                bytes_scanned += t.n_bytes;
                rows.push(TensorRow { name: t.name.clone(), ty: t.ty.name().into(), scan: Some(s) });
            }
            Err(e) => {
                findings.push(Finding::new(Severity::Error, Kind::Unscanned, &t.name, e.reason));
                rows.push(TensorRow { name: t.name.clone(), ty: t.ty.name().into(), scan: None });
            }
        }
    }
    findings.extend(duplicate_findings(&model.tensors, digests));
    let mut r = CheckReport {
        check: CHECK_VERSION.into(),
        generator: generator.into(),
        model: label.into(),
        architecture: model.architecture().map(|a| a.into_owned()),
        shapes_checked,
        tensors: model.tensors.len(),
        bytes_scanned,
        counts: Counts::default(),
        findings: Vec::new(),
        scans: rows,
    };
    r.add(findings);
    r
}

impl CheckReport {
    /// Adds `more` findings (a check against another model: an adapter's base), kept in
    /// order of severity and counted.
    pub fn add(&mut self, more: Vec<Finding>) {
        self.findings.extend(more);
        // Stable: within a severity, the order the checks found them in.
        self.findings.sort_by_key(|f| f.severity);
        let mut counts = Counts::default();
        for f in &self.findings {
            match f.severity {
                Severity::Error => counts.error += 1,
                Severity::Warning => counts.warning += 1,
                Severity::Info => counts.info += 1,
            }
        }
        self.counts = counts;
    }

    /// The report of a file cut short, its header checked whole and the tensors it holds
    /// whole scanned: the tensors the cut took are not reported unscanned one by one but
    /// in one error saying what the file lacks.
    pub fn cut_short(&mut self, file: &str, cut: &crate::gguf::cut::Cut) {
        let gone = |name: &str| cut.absent.iter().any(|a| a == name) || cut.cut.as_ref().is_some_and(|c| c.0 == name);
        self.findings.retain(|f| !(f.kind == Kind::Unscanned && gone(&f.subject)));
        self.add(alloc::vec![Finding::new(Severity::Error, Kind::Incomplete, file, cut.describe())]);
    }
}

#[cfg(test)]
mod tests;
