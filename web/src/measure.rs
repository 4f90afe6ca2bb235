//! Measuring a model in the browser: the core's `ReadPlan` says which byte ranges each
//! tensor's sample needs and its `Batcher` joins them into reads across tensors; the page
//! reads them with `Blob.slice` while the worker pool decodes and measures tensors already
//! read. The report is built by the same core functions as `organ measure`'s.
//!
//! With σ (§7) a sampled tensor is nine jobs, its sample and its 8 alternate draws, each
//! read by the plan of its own seed, as `organ measure --sigma --stream` does; in exact
//! mode a job's plan is the whole tensor. The core's `zmeasure::jobs` lists the jobs,
//! plans them and puts their results back together, for both. Each expert of an expert
//! tensor (§6) is measured too, by jobs of its own (`crate::experts`).

use crate::error::Error;
use crate::experts;
use crate::pool;
use crate::reads::{worker_gone, Jobs, Meter, Progress, Read, Reads, Slot, MAX_GAP, MAX_READ};
use crate::source::Model;
use organ_core::report::{Histogram, ModelReport, Report, TensorReport};
use organ_core::zmeasure::jobs::{self, Job};
use organ_core::zmeasure::{measure_values_sorted, Measurement, Mode, GENERATOR};
use std::collections::VecDeque;

/// Histogram bins kept per tensor (the values themselves are not kept).
pub const BINS: usize = 48;
/// Jobs whose plans are worked out ahead of the reads: a sparse plan holds two indices per
/// sampled value (1.6 MB), and with σ a model has nine times as many jobs.
const PLANS_AHEAD: usize = 32;

/// A finished measurement: the report, plus a histogram per tensor for the UI.
pub struct Outcome {
    pub report: Report,
    pub histograms: Vec<Option<Histogram>>,
    pub bytes_read: u64,
    pub threads: usize,
}

/// Where a job's error is: the model, the tensor, the expert and the draw.
fn job_place(model: &Model, job: Job) -> String {
    let mut place = format!("{}: tensor {:?}", model.label, model.tensors[job.tensor].name);
    if let Some(x) = job.expert {
        place += &format!(": expert {x}");
    }
    if job.draw > 0 {
        place += &format!(": draw {}", job.draw);
    }
    place
}

/// The measure's jobs, for the read scheduler: a job is one slot, its plan; its result
/// is kept per job.
struct Measuring<'m> {
    model: &'m Model,
    /// What is read and measured: a tensor's sample, or one of its alternate draws.
    jobs: &'m [Job],
    measured: Vec<Option<(Measurement, Option<Histogram>)>>,
}

impl Jobs for Measuring<'_> {
    /// Whether the job's histogram is kept.
    type In = bool;
    type Out = (Measurement, Option<Histogram>);

    fn input(&self, i: usize) -> bool {
        // The histogram is of the tensor's own sample (or of every value, when exact).
        self.jobs[i].draw == 0 && self.jobs[i].expert.is_none()
    }

    fn run(histogram: bool, slots: &[Slot]) -> Result<Self::Out, Error> {
        let slot = slots.first().ok_or(Error::Internal("a job without its bytes"))?;
        let values = slot.plan.values(slot.bytes()).map_err(Error::refused)?;
        let (m, sorted) = measure_values_sorted(values);
        Ok((m, histogram.then(|| Histogram::of_sorted(&sorted, BINS)).flatten()))
    }

    fn done(&mut self, i: usize, out: Self::Out) -> bool {
        self.measured[i] = Some(out);
        true
    }

    fn err(&self, i: usize, e: Error) -> Error {
        e.at(job_place(self.model, self.jobs[i]))
    }
}

/// Measures every tensor of `model` in `mode` (θ; θ and σ_θ; or θ over every value).
/// `cancelled` stops it between reads; `on_progress` is called at most every
/// [`PROGRESS_EVERY_MS`](crate::reads::PROGRESS_EVERY_MS) as jobs finish, and once at
/// the end.
pub async fn measure(
    model: &Model,
    mode: Mode,
    cancelled: &dyn Fn() -> bool,
    on_progress: &dyn Fn(Progress),
) -> Result<Outcome, Error> {
    let t0 = pool::now_ms();
    let threads = pool::start().await?;
    let n = model.tensors.len();
    // File order, but tensors too large for one read go last: the pool then starts on the
    // small tensors at once, and measures them while the large ones are read (SmolLM2's
    // 30 MB token embedding comes first in the file).
    let mut order: Vec<usize> = (0..n).filter(|&i| model.tensors[i].ty.can_dequantize()).collect();
    order.sort_by_key(|&i| model.tensors[i].n_bytes > MAX_READ);
    // Each tensor's jobs, then each of its experts' when it is an expert tensor.
    let layouts = experts::layouts(model)?;
    let jobs = jobs::jobs(mode, order.iter().map(|&i| (i, model.tensors[i].n_elements, layouts[i])));
    // Plans (100k sample indices each, sorted) are worked out on the pool, a few ahead of
    // the reads.
    let plan = |j: usize| {
        let (job, t, layout) = (jobs[j], &model.tensors[jobs[j].tensor], layouts[jobs[j].tensor]);
        let (name, ty, count) = (t.name.clone(), t.ty, t.n_elements);
        pool::spawn(move || job.plan(mode, &name, ty, count, layout.as_ref(), MAX_GAP, MAX_GAP, MAX_READ))
    };
    let mut plans: VecDeque<_> = (0..jobs.len().min(PLANS_AHEAD)).map(plan).collect();
    // In exact mode a job holds its whole tensor (and its values, twice): about one per
    // thread, as `organ measure --exact` does, rather than two.
    let window = if mode == Mode::Exact { threads.max(1) } else { 2 * threads.max(1) };
    // Tensors that are not measurable have no job, and count as one step each.
    let mut meter = Meter::new(jobs.len() + n - order.len(), t0, on_progress);
    meter.progress.done = n - order.len();
    let measuring = Measuring { model, jobs: &jobs, measured: vec![None; jobs.len()] };
    let mut s = Reads::new(vec![model], window, measuring, meter);
    for j in 0..jobs.len() {
        if cancelled() {
            return Err(Error::Cancelled);
        }
        if j + PLANS_AHEAD < jobs.len() {
            plans.push_back(plan(j + PLANS_AHEAD));
        }
        let rx = plans.pop_front().ok_or(Error::Internal("a job without a plan"))?;
        let (plan, at) = rx.await.map_err(worker_gone)?.map_err(|e| Error::refused(e).at(job_place(model, jobs[j])))?;
        let t = &model.tensors[jobs[j].tensor];
        s.add(j, vec![Read { model: 0, file: t.file, offset: t.offset + at, plan }]).await?;
    }
    let (Measuring { measured, .. }, bytes_read) = s.finish().await?;
    let mut histograms = vec![None; n];
    let mut found = Vec::with_capacity(jobs.len());
    for (job, m) in jobs.iter().zip(measured) {
        if let Some((m, h)) = m {
            if h.is_some() {
                histograms[job.tensor] = h;
            }
            found.push(Some(m));
        } else {
            found.push(None);
        }
    }
    let (measured, per_expert) =
        jobs::gather(&jobs, &found, n).map_err(|e| Error::Refused(format!("{}: {e}", model.label)))?;
    let mut expert_rows = experts::rows(model, mode, &layouts, &per_expert, cancelled).await?;
    let rows = (model.tensors.iter().zip(&measured).zip(expert_rows.iter_mut()))
        .map(|((t, m), x)| {
            TensorReport::new(t, m.as_ref().map(|(m, _)| m))
                .in_mode(mode, m.as_ref().and_then(|(_, d)| d.as_ref()))
                .with_experts(x.take())
        })
        .collect();
    let m = ModelReport::new(&model.label, &model.model, model.file_bytes, rows);
    let generator = format!("{GENERATOR} (browser)");
    let mut report = Report::new(&generator, vec![m]);
    report.measure = mode.label().to_owned();
    Ok(Outcome { report, histograms, bytes_read, threads })
}
