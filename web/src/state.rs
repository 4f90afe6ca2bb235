//! What the views show, as the page's controller (`crate::app`) hands it to them: the
//! page's mode, what it is doing, and the reports on screen. Views take these as props
//! and never reach into the controller.

use crate::sensitivity::Measured;
use crate::source::MetaRow;
use organ_core::compare::CompareReport;
use organ_core::report::Report;
use organ_core::sensitivity::predicted::PredictionReport;
use std::sync::Arc;

/// What the page is for: one model's θ, or two models compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Measure,
    Compare,
    /// One model's health (`organ check`).
    Check,
}

/// Which model of a comparison: A, the base, or B, the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    A,
    B,
}

/// A compare report on screen, compared here or opened from an export.
pub struct CompareData {
    pub report: CompareReport,
    /// `Some` when compared in this tab: (ms, bytes read, threads).
    pub run: Option<(f64, u64, usize)>,
}

/// A check report made in this tab, and its run: (ms, bytes read, threads).
pub struct CheckData {
    pub report: organ_core::check::CheckReport,
    pub run: (f64, u64, usize),
}

/// What the app is doing.
#[derive(Clone, Debug, PartialEq)]
pub enum Phase {
    Idle,
    /// Reading the header of, or opening, the named file.
    Reading(String),
    /// Measuring the named model.
    Measuring(String),
    /// Comparing the two named models.
    Comparing(String),
    /// Checking the named model.
    Checking(String),
    /// Predicting the named model's sensitivity (its report stays on screen).
    Predicting(String),
    Done,
    Cancelled,
    Error(String),
}

/// A report on screen, measured here or opened from an export.
pub struct ViewData {
    pub report: Report,
    /// Per tensor of the report's first model, when measured here.
    pub histograms: Vec<Option<organ_core::report::Histogram>>,
    pub metadata: Vec<MetaRow>,
    /// The GGUF version, when measured here.
    pub version: Option<u32>,
    /// `Some` when measured in this tab: (ms, bytes read, threads).
    pub run: Option<(f64, u64, usize)>,
}

/// Sensitivity beside θ: the data-free prediction made in this tab and a measured report
/// opened (`organ sensitivity --json`), when there are.
#[derive(Clone, Default)]
pub struct SensData {
    pub predicted: Option<Arc<PredictionReport>>,
    pub measured: Option<Arc<Measured>>,
}
