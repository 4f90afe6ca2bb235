//! What the views show, as the page's controller (`crate::app`) hands it to them: the
//! page's mode, what it is doing, and the reports on screen. Views take these as props
//! and never reach into the controller.

use crate::sensitivity::Measured;
use crate::source::MetaRow;
use leptos::prelude::*;
use organ_core::compare::CompareReport;
use organ_core::report::{Report, ViewState};
use organ_core::sensitivity::predicted::PredictionReport;
use std::sync::Arc;

/// What the page is for: one model's θ, or two models compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Measure,
    Compare,
    /// One model's health (`organ check`).
    Check,
    /// One model's header: its metadata, edited and written again (`organ meta`), and the
    /// memory llama.cpp needs to run it (`organ inspect --memory`).
    Inspect,
    /// One model quantized, llama-quantize's bytes (`organ quantize`).
    Quantize,
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
    /// Quantizing the named model (it stays on screen).
    Quantizing(String),
    Done,
    Cancelled,
    Error(String),
}

/// A model's header on screen (inspect mode): what the memory view and the metadata
/// editor read. The files stay with the controller, which writes the edited model.
pub struct InspectData {
    /// The (first shard's) file name.
    pub label: String,
    /// The shards' file names.
    pub files: Vec<String>,
    pub file_bytes: u64,
    pub metadata: Vec<MetaRow>,
    /// The core's model: its metadata and tensors, for the memory estimate and the
    /// editor's starting values.
    pub model: organ_core::model::Model,
    /// What each file cut short (a partial download) lacks, as `organ inspect` says it.
    pub cuts: Vec<String>,
    /// Why the metadata cannot be written from here, if it cannot (a model at a URL, a
    /// split model); the table is shown all the same.
    pub not_editable: Option<String>,
}

/// One edit of the metadata or the tensors as the editor lists it, before it is read
/// against the header (typed, checked) by the core: `organ meta`'s `--set`, `--rm`,
/// `--rename`, `--rename-tensor`, `--remove-tensor` and `--retype-tensor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PendingEdit {
    /// `--set KEY=TEXT[:TYPE]` (an empty type: the key's own, or inferred for a new key).
    Set { key: String, text: String, ty: String },
    /// `--rm KEY`.
    Remove { key: String },
    /// `--rename FROM=TO`.
    Rename { from: String, to: String },
    /// `--rename-tensor PATTERN=REPLACEMENT`.
    RenameTensors { pattern: String, replacement: String },
    /// `--remove-tensor PATTERN`.
    RemoveTensors { pattern: String },
    /// `--retype-tensor PATTERN=TYPE`.
    RetypeTensors { pattern: String, ty: String },
}

impl PendingEdit {
    /// The key the edit is about (a rename's old name), or a tensor edit's pattern.
    pub fn key(&self) -> &str {
        match self {
            PendingEdit::Set { key, .. } | PendingEdit::Remove { key } => key,
            PendingEdit::Rename { from, .. } => from,
            PendingEdit::RenameTensors { pattern, .. }
            | PendingEdit::RemoveTensors { pattern }
            | PendingEdit::RetypeTensors { pattern, .. } => pattern,
        }
    }

    /// Whether it edits tensors rather than a key.
    pub fn is_tensor_edit(&self) -> bool {
        matches!(
            self,
            PendingEdit::RenameTensors { .. } | PendingEdit::RemoveTensors { .. } | PendingEdit::RetypeTensors { .. }
        )
    }
}

/// Where writing the edited model is.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Writing {
    #[default]
    Idle,
    /// Reading the header again and composing the new file.
    Busy,
    /// Offered as downloads: the (first) file's size, what `organ meta` says it wrote,
    /// each change as it prints it, and the time taken.
    Wrote {
        bytes: u64,
        wrote: String,
        changes: Vec<String>,
        /// What the check finds broken that was not (`organ meta`'s lines after `wrote`).
        findings: Vec<String>,
        ms: f64,
    },
    Failed(String),
}

/// A model opened to be quantized: what the quantize view shows of it.
pub struct QuantizeData {
    /// The (first shard's) file name.
    pub label: String,
    pub file_bytes: u64,
    pub n_tensors: usize,
    /// Its tensors' types, each with how many tensors have it.
    pub types: Vec<(organ_core::GgmlType, usize)>,
}

/// Where quantizing the model on screen is.
#[derive(Clone, Default)]
pub enum Quantized {
    #[default]
    Idle,
    /// Written: the report, the file's name, and the run: (ms, bytes read, threads), and
    /// the page's memory at the end (JS heap and wasm memory, bytes) where the browser
    /// says it.
    Wrote {
        report: Arc<organ_core::quantize::report::QuantizeReport>,
        file: String,
        run: (f64, u64, usize),
        heap: Option<(f64, f64)>,
    },
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

impl Mode {
    /// The mode's name in the URL fragment.
    pub fn key(self) -> &'static str {
        match self {
            Mode::Measure => "measure",
            Mode::Compare => "compare",
            Mode::Check => "check",
            Mode::Inspect => "inspect",
            Mode::Quantize => "quantize",
        }
    }

    /// The mode a fragment names.
    pub fn from_key(k: &str) -> Option<Mode> {
        [Mode::Measure, Mode::Compare, Mode::Check, Mode::Inspect, Mode::Quantize].into_iter().find(|m| m.key() == k)
    }
}

/// A column of the tensor table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorCol {
    Index,
    Name,
    Group,
    Layer,
    Type,
    Theta,
    Sigma,
    H,
    K,
    C,
    Predicted,
    Measured,
}

impl TensorCol {
    /// Every column with its key in the URL fragment (the static page's `data-key`).
    const KEYS: [(TensorCol, &'static str); 12] = [
        (TensorCol::Index, "index"),
        (TensorCol::Name, "name"),
        (TensorCol::Group, "group"),
        (TensorCol::Layer, "layer"),
        (TensorCol::Type, "type"),
        (TensorCol::Theta, "theta"),
        (TensorCol::Sigma, "sigma"),
        (TensorCol::H, "h"),
        (TensorCol::K, "k"),
        (TensorCol::C, "c"),
        (TensorCol::Predicted, "predicted"),
        (TensorCol::Measured, "measured"),
    ];

    /// The column's key.
    pub fn key(self) -> &'static str {
        Self::KEYS.iter().find(|(c, _)| *c == self).map_or("index", |(_, k)| k)
    }

    /// The column a key names.
    pub fn from_key(k: &str) -> Option<TensorCol> {
        Self::KEYS.iter().find(|(_, x)| *x == k).map(|(c, _)| *c)
    }
}

/// What the tensor table shows: its sort, its filters and the selected tensor. The
/// heatmap and the wells set it too, and the URL fragment keeps it.
#[derive(Clone, Copy)]
pub struct TensorView {
    /// The column sorted by, and whether ascending.
    pub sort: RwSignal<(TensorCol, bool)>,
    /// A name's substring or a whole type.
    pub query: RwSignal<String>,
    /// A group's name, or empty for all.
    pub group: RwSignal<String>,
    pub layer: RwSignal<Option<u32>>,
    /// The selected tensor's name.
    pub selected: RwSignal<Option<String>>,
}

impl Default for TensorView {
    /// The table in file order, unfiltered, nothing selected.
    fn default() -> Self {
        Self {
            sort: RwSignal::new((TensorCol::Index, true)),
            query: RwSignal::new(String::new()),
            group: RwSignal::new(String::new()),
            layer: RwSignal::new(None),
            selected: RwSignal::new(None),
        }
    }
}

impl TensorView {
    /// Shows what `v` says (a column it does not name sorts in file order).
    pub fn set(&self, v: &ViewState) {
        let sort = v.sort.as_ref().and_then(|(k, asc)| Some((TensorCol::from_key(k)?, *asc)));
        self.sort.set(sort.unwrap_or((TensorCol::Index, true)));
        self.query.set(v.query.clone());
        self.group.set(v.group.clone());
        self.layer.set(v.layer);
        self.selected.set(v.tensor.clone());
    }

    /// What is shown, as a fragment says it (no mode); tracked.
    pub fn get(&self) -> ViewState {
        let (col, asc) = self.sort.get();
        ViewState {
            mode: None,
            sort: (col != TensorCol::Index).then(|| (col.key().to_owned(), asc)),
            query: self.query.get(),
            group: self.group.get(),
            layer: self.layer.get(),
            tensor: self.selected.get(),
        }
    }
}
