//! The page's controller: what the app is doing ([`Phase`], the progress, the report on
//! screen, the tensor table's view) and what the user can do (measure a model, compare
//! two, compare the one measured with another, open an export, cancel), in
//! [`Controller`]; [`App`] lays the views of `view/` out over it and keeps the view in the
//! URL fragment (`organ_core::report::ViewState`). Every number comes from organ-core.

mod inspect_mode;
mod quantize_mode;

pub use quantize_mode::RECIPE;
mod sensitivity_mode;

use crate::adapter;
use crate::check;
use crate::compare;
use crate::edit;
use crate::error::Error;
use crate::export::{self, Export};
use crate::measure;
use crate::pool;
use crate::reads::Progress;
use crate::sensitivity;
use crate::source;
use crate::state::{
    CheckData, CompareData, InspectData, Mode, PendingEdit, Phase, QuantizeData, Quantized, Role, SensData, TensorView,
    ViewData, Writing,
};
use crate::view::{
    CheckView, CompareInputs, CompareView, DropZone, Header, InspectView, MeasureModePicker, ModeTabs, QuantizeView,
    ReportView, StatusLine, UrlField,
};
use leptos::prelude::*;
use leptos::task::spawn_local;
use organ_core::report::ViewState;
use organ_core::zmeasure;
use organ_core::GgmlType;
use std::rc::Rc;
use std::sync::Arc;

/// What is on screen.
#[derive(Clone)]
pub enum Shown {
    Measure(Arc<ViewData>),
    Compare(Arc<CompareData>),
    Check(Arc<CheckData>),
    Inspect(Arc<InspectData>),
    Quantize(Arc<QuantizeData>),
}

/// The app's state and its actions. `Copy`: it holds only signal handles, so every event
/// handler can own one.
#[derive(Clone, Copy)]
pub struct Controller {
    /// Worker threads in the pool; 0 while it starts.
    threads: RwSignal<usize>,
    phase: RwSignal<Phase>,
    progress: RwSignal<Progress>,
    data: RwSignal<Option<Shown>>,
    /// Set by the user; the measurement stops at its next read.
    cancel: RwSignal<bool>,
    mode: RwSignal<Mode>,
    /// How a model is measured: sampled θ, θ with σ, or exact θ (§7).
    measure_mode: RwSignal<zmeasure::Mode>,
    /// The files chosen as A and as B (the browser's `File`s stay on this thread).
    chosen: RwSignal<[Option<Vec<web_sys::File>>; 2], LocalStorage>,
    /// Their names, for the drop zones.
    chosen_names: RwSignal<[String; 2]>,
    /// The model measured in this tab, for its sensitivity (its `File`s stay on this thread).
    model: RwSignal<Option<Rc<source::Model>>, LocalStorage>,
    /// Sensitivity beside θ, for the model on screen.
    sens: RwSignal<SensData>,
    /// The files of the model measured last (for "Compare with…").
    files: RwSignal<Option<Vec<web_sys::File>>, LocalStorage>,
    /// The tensor table's sort, filters and selection, kept in the URL fragment.
    tensors: TensorView,
    /// The files of the model inspected, which the metadata editor writes from.
    inspected: RwSignal<Vec<source::Src>, LocalStorage>,
    /// Where writing the edited model is.
    writing: RwSignal<Writing>,
    /// Whether the next report keeps the table's view: the page opened with one in its
    /// fragment, and no report was shown since.
    restore: RwSignal<bool>,
    /// The model opened to quantize (its `File`s stay on this thread).
    quant_model: RwSignal<Option<Rc<source::Model>>, LocalStorage>,
    /// The importance matrix dropped to steer the quantizers, and its file's name.
    quant_imatrix: RwSignal<Option<Rc<crate::quantize::DroppedImatrix>>, LocalStorage>,
    quant_imatrix_name: RwSignal<String>,
    /// Where quantizing the model opened is.
    quantized: RwSignal<Quantized>,
    /// The recipe chosen last for the model opened.
    quant_recipe: RwSignal<Option<Arc<organ_core::recipe::report::Recipe>>, LocalStorage>,
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
            mode: RwSignal::new(Mode::Measure),
            measure_mode: RwSignal::new(zmeasure::Mode::Sampled),
            chosen: RwSignal::new_local([None, None]),
            chosen_names: RwSignal::new([String::new(), String::new()]),
            model: RwSignal::new_local(None),
            sens: RwSignal::new(SensData::default()),
            files: RwSignal::new_local(None),
            tensors: TensorView::default(),
            inspected: RwSignal::new_local(Vec::new()),
            writing: RwSignal::new(Writing::Idle),
            restore: RwSignal::new(false),
            quant_model: RwSignal::new_local(None),
            quant_imatrix: RwSignal::new_local(None),
            quant_imatrix_name: RwSignal::new(String::new()),
            quantized: RwSignal::new(Quantized::Idle),
            quant_recipe: RwSignal::new_local(None),
        };
        // The view a link or a reload names, shown once a model or report is opened.
        let v = ViewState::parse(&window().location().hash().unwrap_or_default());
        if let Some(m) = v.mode.as_deref().and_then(Mode::from_key) {
            c.mode.set(m);
        }
        c.tensors.set(&v);
        c.restore.set(ViewState { mode: None, ..v } != ViewState::default());
        spawn_local(async move {
            match pool::start().await {
                Ok(n) => c.threads.set(n),
                Err(e) => c.phase.set(Phase::Error(e.to_string())),
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
    pub fn data(&self) -> ReadSignal<Option<Shown>> {
        self.data.read_only()
    }

    /// What the page is for.
    pub fn mode(&self) -> ReadSignal<Mode> {
        self.mode.read_only()
    }

    /// How a model is measured.
    pub fn measure_mode(&self) -> ReadSignal<zmeasure::Mode> {
        self.measure_mode.read_only()
    }

    /// Chooses how the next model is measured (not while one is).
    pub fn set_measure_mode(&self, m: zmeasure::Mode) {
        if !self.busy() {
            self.measure_mode.set(m);
        }
    }

    /// The names of the files chosen as A and B (empty: none yet).
    pub fn chosen_names(&self) -> ReadSignal<[String; 2]> {
        self.chosen_names.read_only()
    }

    /// Switches between measuring and comparing (not while a file is being read).
    pub fn set_mode(&self, m: Mode) {
        if !self.busy() {
            self.mode.set(m);
        }
    }

    fn busy(&self) -> bool {
        matches!(
            self.phase.get_untracked(),
            Phase::Reading(_)
                | Phase::Measuring(_)
                | Phase::Comparing(_)
                | Phase::Checking(_)
                | Phase::Predicting(_)
                | Phase::Quantizing(_)
        )
    }

    /// The tensor table's sort, filters and selection.
    pub fn tensors(&self) -> TensorView {
        self.tensors
    }

    /// Whether the model on screen can be compared with another: its files were measured
    /// in this tab (a model read from a URL or a report opened cannot).
    pub fn can_compare(&self) -> bool {
        self.files.with_untracked(Option::is_some)
    }

    /// "Compare with…": compare mode, with the model measured last as A, waiting for B.
    pub fn compare_with(self) {
        let Some(files) = self.files.get_untracked() else { return };
        if self.busy() {
            return;
        }
        let mut names: Vec<String> = files.iter().map(|f| f.name()).collect();
        names.sort();
        self.chosen_names.set([names.join(", "), String::new()]);
        self.chosen.set([Some(files), None]);
        self.mode.set(Mode::Compare);
    }

    /// Takes the files chosen as A or B (a model, or all the shards of a split one), and
    /// compares once both are there. A single export file is opened instead, whatever
    /// its kind. Ignored while a file is being read.
    pub fn choose(self, role: Role, files: Vec<web_sys::File>) {
        if files.is_empty() || self.busy() {
            return;
        }
        if files.len() == 1 && export::is_export(&files[0].name()) {
            self.open(files);
            return;
        }
        let k = role as usize;
        let mut names: Vec<String> = files.iter().map(|f| f.name()).collect();
        names.sort();
        self.chosen_names.update(|n| n[k] = names.join(", "));
        self.chosen.update(|c| c[k] = Some(files));
        let [Some(a), Some(b)] = self.chosen.get_untracked() else { return };
        self.run_job(
            format!("{} and {}", self.chosen_names.get_untracked()[0], self.chosen_names.get_untracked()[1]),
            move |c| async move { c.compare(a, b).await.map(|d| Shown::Compare(Arc::new(d))) },
        );
    }

    /// Runs `work` as the page's one job: clears what is shown, and shows its result, its
    /// error, or that it was cancelled.
    fn run_job<F, Fut>(self, first: String, work: F)
    where
        F: FnOnce(Self) -> Fut + 'static,
        Fut: std::future::Future<Output = Result<Shown, Error>> + 'static,
    {
        self.cancel.set(false);
        self.data.set(None);
        self.model.set(None);
        self.inspected.set(Vec::new());
        self.writing.set(Writing::Idle);
        self.quant_model.set(None);
        self.quantized.set(Quantized::Idle);
        self.quant_recipe.set(None);
        // A new report starts with the table as it comes, unless a link named its view.
        if !self.restore.get_untracked() {
            self.tensors.set(&ViewState::default());
        }
        self.restore.set(false);
        self.sens.set(SensData::default());
        self.progress.set(Progress::default());
        self.phase.set(Phase::Reading(first));
        spawn_local(async move {
            match work(self).await {
                Ok(v) => {
                    self.data.set(Some(v));
                    self.phase.set(Phase::Done);
                }
                Err(Error::Cancelled) => self.phase.set(Phase::Cancelled),
                // An error that a stop brought about (a read cut off) is the stop's.
                Err(_) if self.cancel.get_untracked() => self.phase.set(Phase::Cancelled),
                Err(e) => self.phase.set(Phase::Error(e.to_string())),
            }
        });
    }

    /// Asks the measurement under way to stop.
    pub fn cancel(&self) {
        self.cancel.set(true);
    }

    /// Opens what the user chose: a model (one file, or all the shards of a split one),
    /// measured here, or a report exported earlier. Ignored while a file is being read.
    pub fn open(self, files: Vec<web_sys::File>) {
        if files.is_empty() || self.busy() {
            return;
        }
        let export = files.len() == 1 && export::is_export(&files[0].name());
        self.files.set((!export).then(|| files.clone()));
        let files: Vec<gloo_file::File> = files.into_iter().map(gloo_file::File::from).collect();
        let first = files[0].name();
        self.run_job(first.clone(), move |c| async move {
            if files.len() == 1 && export::is_export(&first) {
                c.open_export(&files[0]).await
            } else {
                c.measure(files).await.map(|v| Shown::Measure(Arc::new(v)))
            }
        });
    }

    /// Reads a report exported earlier, θ or compare, and shows it in its mode.
    async fn open_export(self, file: &gloo_file::File) -> Result<Shown, Error> {
        let name = file.name();
        let text = gloo_file::futures::read_as_text(file).await.map_err(|e| Error::Read(format!("{name}: {e}")))?;
        Ok(match export::parse_export(&name, &text)? {
            Export::Measure(report) => {
                self.mode.set(Mode::Measure);
                let histograms = report.models.first().map_or(0, |m| m.tensors.len());
                Shown::Measure(Arc::new(ViewData {
                    report,
                    histograms: vec![None; histograms],
                    metadata: Vec::new(),
                    version: None,
                    run: None,
                }))
            }
            Export::Compare(report) => {
                self.mode.set(Mode::Compare);
                Shown::Compare(Arc::new(CompareData { report: *report, run: None }))
            }
        })
    }

    /// Compares A and B in this tab.
    async fn compare(self, a: Vec<web_sys::File>, b: Vec<web_sys::File>) -> Result<CompareData, Error> {
        let chosen = pool::now_ms();
        let a = source::open(a.into_iter().map(gloo_file::File::from).collect()).await?;
        self.phase.set(Phase::Reading(b.first().map(|f| f.name()).unwrap_or_default()));
        let b = source::open(b.into_iter().map(gloo_file::File::from).collect()).await?;
        self.phase.set(Phase::Comparing(format!("{} (A) and {} (B)", a.label, b.label)));
        let o = compare::compare(&a, &b, &|| self.cancel.get_untracked(), &|p| self.progress.set(p)).await?;
        Ok(CompareData { report: o.report, run: Some((pool::now_ms() - chosen, o.bytes_read, o.threads)) })
    }

    /// Measures the model at a URL (read by range requests) in this tab. Ignored while a
    /// file is being read.
    pub fn open_url(self, url: String) {
        let url = url.trim().to_owned();
        if url.is_empty() || self.busy() {
            return;
        }
        self.files.set(None);
        self.run_job(url.clone(), move |c| async move {
            let chosen = pool::now_ms();
            let model = source::open_url(&url).await?;
            c.measure_model(model, chosen).await.map(|v| Shown::Measure(Arc::new(v)))
        });
    }

    /// Measures a model in this tab.
    async fn measure(self, files: Vec<gloo_file::File>) -> Result<ViewData, Error> {
        // The run is timed from here, the file chosen, as `organ measure` is timed from
        // its start: reading and parsing the header count.
        let chosen = pool::now_ms();
        let (model, base) = source::open_measured(files).await?;
        if organ_core::lora::is_adapter(&model.model) {
            return self.measure_adapter(model, base, chosen).await;
        }
        self.measure_model(model, chosen).await
    }

    /// Measures a LoRA adapter opened at `chosen` (ms), against `base` when dropped with it.
    async fn measure_adapter(
        self,
        model: source::Model,
        base: Option<source::Model>,
        chosen: f64,
    ) -> Result<ViewData, Error> {
        self.phase.set(Phase::Measuring(model.label.clone()));
        let mode = self.measure_mode.get_untracked();
        let (cancelled, progress) = (&|| self.cancel.get_untracked(), &|p| self.progress.set(p));
        let o = adapter::measure(&model, base.as_ref(), mode, cancelled, progress).await?;
        // Not kept as the model to predict or compare from: an adapter's rows are updates,
        // not its tensors.
        self.files.set(None);
        Ok(ViewData {
            report: o.report,
            histograms: o.histograms,
            version: Some(model.version),
            metadata: model.metadata.clone(),
            run: Some((pool::now_ms() - chosen, o.bytes_read, o.threads)),
        })
    }

    /// Measures a model opened at `chosen` (ms).
    async fn measure_model(self, model: source::Model, chosen: f64) -> Result<ViewData, Error> {
        self.phase.set(Phase::Measuring(model.label.clone()));
        let mode = self.measure_mode.get_untracked();
        let o = measure::measure(&model, mode, &|| self.cancel.get_untracked(), &|p| self.progress.set(p)).await?;
        let data = ViewData {
            report: o.report,
            histograms: o.histograms,
            version: Some(model.version),
            metadata: model.metadata.clone(),
            run: Some((pool::now_ms() - chosen, o.bytes_read, o.threads)),
        };
        self.model.set(Some(Rc::new(model)));
        Ok(data)
    }
}

/// Whether the report on screen is an adapter's (its rows are updates, not tensors to
/// predict the sensitivity of).
fn is_adapter(d: &ViewData) -> bool {
    d.report.models.first().is_some_and(|m| m.adapter.is_some())
}

/// The page: the header, the mode tabs, the drop zone (or A's and B's), what is under
/// way, and the report.
#[component]
pub fn App() -> impl IntoView {
    let c = Controller::start();
    let data = c.data();
    let mode = c.mode();
    // The view in the URL fragment, as it changes (replaced, not pushed: no history entry
    // per click). Never bytes: the mode, and in measure mode the table's view.
    Effect::new(move |_| {
        let m = mode.get();
        let mut v = if m == Mode::Measure { c.tensors().get() } else { ViewState::default() };
        v.mode = Some(m.key().to_owned());
        if let Ok(h) = window().history() {
            let _ = h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&v.to_fragment()));
        }
    });
    // After a run, the drop zone of the mode whose report is on screen is a thin bar.
    let slim = Signal::derive(move || {
        data.with(|d| {
            matches!(
                (mode.get(), d),
                (Mode::Measure, Some(Shown::Measure(_)))
                    | (Mode::Compare, Some(Shown::Compare(_)))
                    | (Mode::Check, Some(Shown::Check(_)))
                    | (Mode::Inspect, Some(Shown::Inspect(_)))
                    | (Mode::Quantize, Some(Shown::Quantize(_)))
            )
        })
    });
    view! {
        <Header threads=c.threads() />
        <main>
            <ModeTabs mode on_mode=Callback::new(move |m| c.set_mode(m)) />
            {move || match mode.get() {
                Mode::Measure => view! {
                    <MeasureModePicker mode=c.measure_mode() on_mode=Callback::new(move |m| c.set_measure_mode(m)) />
                    <DropZone on_files=Callback::new(move |files| c.open(files)) slim />
                    <UrlField on_url=Callback::new(move |url| c.open_url(url)) />
                }.into_any(),
                Mode::Check => view! {
                    <DropZone on_files=Callback::new(move |files| c.check(files)) slim
                        hint="All the shards of a split model together. Every byte is read: non-finite values or scales, zero, constant and copied tensors, and the metadata llama.cpp needs." />
                }.into_any(),
                Mode::Inspect => view! {
                    <DropZone on_files=Callback::new(move |files| c.inspect(files)) slim
                        hint="Only the header is read: the memory llama.cpp needs to run the model, and its metadata to edit and write as a new file (the tensor data copied as it is, never read)." />
                    <UrlField on_url=Callback::new(move |url| c.inspect_url(url)) button="Inspect"
                        note="Only the header is read, by range requests; the host must allow this page to read it (CORS)." />
                }.into_any(),
                Mode::Quantize => view! {
                    <DropZone on_files=Callback::new(move |files| c.quantize_open(files)) slim
                        title="Drop a .gguf model to quantize (F16, BF16, F32 or Q8_0), or click to choose one"
                        hint="All the shards of a split model together. Quantized here, as llama-quantize quantizes it, byte for byte; the file is written where you choose, as it is made. Nothing is uploaded." />
                    <DropZone on_files=Callback::new(move |files| c.quantize_imatrix(files)) id="imatrix-drop" input_id="imatrix-input"
                        title=Signal::derive(move || match c.quant_imatrix_name().get() {
                            n if n.is_empty() => "Optionally, an importance matrix (llama-imatrix's .gguf)".to_owned(),
                            n => format!("Importance matrix: {n} (drop another to replace it)"),
                        })
                        hint="It steers the quantizers as llama-quantize --imatrix does, and a recipe for a size is predicted from it." />
                }.into_any(),
                Mode::Compare => view! {
                    <CompareInputs names=c.chosen_names() on_files=Callback::new(move |(role, files)| c.choose(role, files)) slim />
                }.into_any(),
            }}
            <StatusLine phase=c.phase() progress=c.progress() on_cancel=Callback::new(move |()| c.cancel()) />
            // Each mode shows its own kind of report: switching modes hides the other's
            // (and switching back shows it again).
            {move || data.get().and_then(|d| match (mode.get(), d) {
                // Only a model measured in this tab can be read again for its sensitivity.
                (Mode::Measure, Shown::Measure(d)) => Some(view! {
                    <ReportView can_predict=d.run.is_some() && !is_adapter(&d) can_compare=d.run.is_some() && c.can_compare() data=d sens=c.sens()
                        on_predict=Callback::new(move |ty| c.predict(ty))
                        on_open=Callback::new(move |files| c.open_sensitivity(files))
                        view=c.tensors() on_compare=Callback::new(move |()| c.compare_with()) />
                }.into_any()),
                (Mode::Compare, Shown::Compare(d)) => Some(view! { <CompareView data=d /> }.into_any()),
                (Mode::Check, Shown::Check(d)) => Some(view! { <CheckView data=d /> }.into_any()),
                (Mode::Inspect, Shown::Inspect(d)) => Some(view! {
                    <InspectView data=d writing=c.writing() on_write=Callback::new(move |p| c.write_edited(p)) />
                }.into_any()),
                (Mode::Quantize, Shown::Quantize(d)) => Some(view! {
                    <QuantizeView data=d imatrix=c.quant_imatrix_name() quantized=c.quantized() recipe=c.quant_recipe()
                        on_recipe=Callback::new(move |t| c.quantize_recipe(t))
                        on_preview=Callback::new(move |ty| c.quantize_preview(ty))
                        on_quantize=Callback::new(move |ty| c.quantize_run(ty))
                        on_no_imatrix=Callback::new(move |()| c.quantize_no_imatrix()) />
                }.into_any()),
                _ => None,
            })}
        </main>
    }
}
