//! The page's controller: what the app is doing ([`Phase`], the progress, the report on
//! screen) and what the user can do (open files, cancel), in [`Controller`]; [`App`] lays
//! the views of `view/` out over it. Every number comes from organ-core.

use crate::export;
use crate::measure::{self, Progress};
use crate::pool;
use crate::source::{self, MetaRow};
use crate::view::{DropZone, Header, ReportView, StatusLine};
use leptos::prelude::*;
use leptos::task::spawn_local;
use organ_core::report::Report;
use std::sync::Arc;

/// What the app is doing.
#[derive(Clone, Debug, PartialEq)]
pub enum Phase {
    Idle,
    /// Reading the header of, or opening, the named file.
    Reading(String),
    /// Measuring the named model.
    Measuring(String),
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

/// The app's state and its actions. `Copy`: it holds only signal handles, so every event
/// handler can own one.
#[derive(Clone, Copy)]
pub struct Controller {
    /// Worker threads in the pool; 0 while it starts.
    threads: RwSignal<usize>,
    phase: RwSignal<Phase>,
    progress: RwSignal<Progress>,
    data: RwSignal<Option<Arc<ViewData>>>,
    /// Set by the user; the measurement stops at its next read.
    cancel: RwSignal<bool>,
}

impl Controller {
    /// A controller with nothing open; starts the worker pool.
    pub fn start() -> Self {
        let c = Self {
            threads: RwSignal::new(0),
            phase: RwSignal::new(Phase::Idle),
            progress: RwSignal::new(Progress::default()),
            data: RwSignal::new(None),
            cancel: RwSignal::new(false),
        };
        spawn_local(async move {
            match pool::start().await {
                Ok(n) => c.threads.set(n),
                Err(e) => c.phase.set(Phase::Error(e)),
            }
        });
        c
    }

    /// Worker threads in the pool; 0 while it starts.
    pub fn threads(&self) -> ReadSignal<usize> {
        self.threads.read_only()
    }

    /// What the app is doing.
    pub fn phase(&self) -> ReadSignal<Phase> {
        self.phase.read_only()
    }

    /// The measurement's progress.
    pub fn progress(&self) -> ReadSignal<Progress> {
        self.progress.read_only()
    }

    /// The report on screen.
    pub fn data(&self) -> ReadSignal<Option<Arc<ViewData>>> {
        self.data.read_only()
    }

    /// Asks the measurement under way to stop.
    pub fn cancel(&self) {
        self.cancel.set(true);
    }

    /// Opens what the user chose: a model (one file, or all the shards of a split one),
    /// measured here, or a report exported earlier. Ignored while a file is being read.
    pub fn open(self, files: Vec<web_sys::File>) {
        if files.is_empty() || matches!(self.phase.get_untracked(), Phase::Reading(_) | Phase::Measuring(_)) {
            return;
        }
        self.cancel.set(false);
        self.data.set(None);
        self.progress.set(Progress::default());
        spawn_local(async move {
            let files: Vec<gloo_file::File> = files.into_iter().map(gloo_file::File::from).collect();
            let first = files[0].name();
            self.phase.set(Phase::Reading(first.clone()));
            let shown = if files.len() == 1 && export::is_export(&first) {
                self.open_export(&files[0]).await
            } else {
                self.measure(files).await
            };
            match shown {
                Ok(v) => {
                    self.data.set(Some(Arc::new(v)));
                    self.phase.set(Phase::Done);
                }
                Err(_) if self.cancel.get_untracked() => self.phase.set(Phase::Cancelled),
                Err(e) => self.phase.set(Phase::Error(e)),
            }
        });
    }

    /// Reads a report exported earlier.
    async fn open_export(self, file: &gloo_file::File) -> Result<ViewData, String> {
        let name = file.name();
        let text = gloo_file::futures::read_as_text(file).await.map_err(|e| format!("{name}: {e}"))?;
        let report = export::parse_export(&name, &text)?;
        let histograms = report.models.first().map_or(0, |m| m.tensors.len());
        Ok(ViewData { report, histograms: vec![None; histograms], metadata: Vec::new(), version: None, run: None })
    }

    /// Measures a model in this tab.
    async fn measure(self, files: Vec<gloo_file::File>) -> Result<ViewData, String> {
        // The run is timed from here, the file chosen, as `organ measure` is timed from
        // its start: reading and parsing the header count.
        let chosen = pool::now_ms();
        let model = source::open(files).await?;
        self.phase.set(Phase::Measuring(model.label.clone()));
        let o = measure::measure(&model, &|| self.cancel.get_untracked(), &|p| self.progress.set(p)).await?;
        Ok(ViewData {
            report: o.report,
            histograms: o.histograms,
            version: Some(model.version),
            metadata: model.metadata,
            run: Some((pool::now_ms() - chosen, o.bytes_read, o.threads)),
        })
    }
}

/// The page: the header, the drop zone, what is under way, and the report.
#[component]
pub fn App() -> impl IntoView {
    let c = Controller::start();
    let data = c.data();
    view! {
        <Header threads=c.threads() />
        <main>
            <DropZone on_files=Callback::new(move |files| c.open(files)) />
            <StatusLine phase=c.phase() progress=c.progress() on_cancel=Callback::new(move |()| c.cancel()) />
            {move || data.get().map(|d| view! { <ReportView data=d /> })}
        </main>
    }
}
