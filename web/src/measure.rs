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

use crate::experts;
use crate::pool;
use crate::source::{read_buffer, Model, Src};
use futures_util::future::{FutureExt, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};
use organ_core::report::{Histogram, ModelReport, Report, TensorReport};
use organ_core::zmeasure::batch::{Batch, Batcher};
use organ_core::zmeasure::jobs::{self, Job};
use organ_core::zmeasure::{measure_values_sorted, Measurement, Mode, ReadPlan, GENERATOR};
use std::collections::VecDeque;

/// Needed blocks closer than this share one read, within a tensor and across tensors: a
/// browser read costs far more than the bytes in a small gap.
pub(crate) const MAX_GAP: u64 = 64 << 10;
/// The longest single read. Chromium spends about 1 ms of CPU per read besides the
/// bytes: reading SmolLM2 (98 MB) took 100–130 ms of CPU in 16 MB reads, 150–190 ms in
/// 4 MB reads and 260 ms in 1 MB reads (headless Chromium, 2 cores).
pub(crate) const MAX_READ: u64 = 16 << 20;
/// The first read's longest; each next read may be twice as long, up to [`MAX_READ`]: the
/// pool gets its first tensors in a few milliseconds instead of waiting for 16 MB.
pub(crate) const FIRST_READ: u64 = 1 << 20;
/// Histogram bins kept per tensor (the values themselves are not kept).
pub const BINS: usize = 48;
/// Jobs whose plans are worked out ahead of the reads: a sparse plan holds two indices per
/// sampled value (1.6 MB), and with σ a model has nine times as many jobs.
const PLANS_AHEAD: usize = 32;

/// Progress, for the bar.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
    pub bytes_read: u64,
    /// Bytes to read for the tensors planned so far.
    pub bytes_total: u64,
    pub elapsed_ms: f64,
}

impl Progress {
    /// Estimated milliseconds left, from the tensors still to measure.
    pub fn eta_ms(&self) -> Option<f64> {
        (self.done > 0 && self.elapsed_ms > 200.0)
            .then(|| self.elapsed_ms * (self.total - self.done) as f64 / self.done as f64)
    }
}

/// A finished measurement: the report, plus a histogram per tensor for the UI.
pub struct Outcome {
    pub report: Report,
    pub histograms: Vec<Option<Histogram>>,
    pub bytes_read: u64,
    pub threads: usize,
}

/// A finished job: its index, its result, and its buffer, for the next job.
type Done = (usize, Result<(Measurement, Option<Histogram>), String>, Vec<u8>);
type Computing = FuturesUnordered<futures_channel::oneshot::Receiver<Done>>;

/// Reads issued at once: one being copied while the next is read. More reads at once
/// did not read faster, and each read lands later.
pub(crate) const MAX_READS_IN_FLIGHT: usize = 2;

/// A job whose reads are under way (`i` indexes the jobs).
struct Open {
    i: usize,
    plan: ReadPlan,
    /// At least the plan's buffer size; the first `len` bytes are the plan's buffer.
    buf: Vec<u8>,
    len: usize,
    /// Reads not landed yet.
    left: usize,
}

/// Reads a batch's bytes.
pub(crate) async fn read_batch(file: Src, batch: Batch) -> Result<(Batch, js_sys::ArrayBuffer), String> {
    read_buffer(&file, batch.start, batch.end).await.map(|b| (batch, b))
}

/// Tensor buffers handed back by finished tensors, for the next ones. A fresh buffer costs
/// the page's thread an allocation, zeroing and often wasm memory growth: for SmolLM2
/// that was 30–340 ms of a 0.5–1 s run. A reused buffer is not cleared: the reads of a
/// plan write every byte of its buffer (dense: the ranges tile the tensor; sparse: every
/// needed block is filled).
#[derive(Default)]
pub(crate) struct Buffers(Vec<Vec<u8>>);

impl Buffers {
    /// Bytes kept for reuse at most; buffers beyond it are freed.
    const KEEP_BYTES: usize = 256 << 20;

    /// A buffer of at least `len` bytes: the smallest kept one that is large enough, else a
    /// new one.
    pub(crate) fn take(&mut self, len: usize) -> Vec<u8> {
        let fit =
            (self.0.iter().enumerate()).filter(|(_, b)| b.len() >= len).min_by_key(|(_, b)| b.len()).map(|(k, _)| k);
        match fit {
            Some(k) => self.0.swap_remove(k),
            None => vec![0u8; len],
        }
    }

    /// Keeps `b` for reuse, within [`Buffers::KEEP_BYTES`] (dropping the smallest first).
    pub(crate) fn give(&mut self, b: Vec<u8>) {
        self.0.push(b);
        self.0.sort_unstable_by_key(|b| core::cmp::Reverse(b.len()));
        let mut kept = 0;
        self.0.retain(|b| {
            kept += b.len();
            kept <= Self::KEEP_BYTES
        });
    }
}

/// How often the progress bar is redrawn at most (SmolLM2 finishes a tensor every 1–2 ms):
/// each redraw takes the page's thread (style, layout, paint) from reading the file.
pub(crate) const PROGRESS_EVERY_MS: f64 = 100.0;

/// A tensor's error, with the model and the tensor named.
fn tensor_err(model: &Model, i: usize, e: impl core::fmt::Display) -> String {
    format!("{}: tensor {:?}: {e}", model.label, model.tensors[i].name)
}

/// A job's error, with the model, the tensor and the draw named.
fn job_err(model: &Model, job: Job, e: impl core::fmt::Display) -> String {
    let expert = job.expert.map_or_else(String::new, |x| format!("expert {x}: "));
    match job.draw {
        0 => tensor_err(model, job.tensor, format!("{expert}{e}")),
        k => tensor_err(model, job.tensor, format!("{expert}draw {k}: {e}")),
    }
}

/// The error when a worker drops its answer's channel before answering.
pub(crate) fn worker_gone<E>(_: E) -> String {
    "a worker stopped before finishing".to_owned()
}

/// The read scheduler: gathers the tensors' ranges into batched file reads, keeps at most
/// [`MAX_READS_IN_FLIGHT`] of them under way, lands their bytes in the tensors' buffers,
/// and hands each tensor whose reads have all landed to the pool, with at most `window`
/// tensors there at once. Tensors come in through [`Scheduler::add`], in read order.
struct Scheduler<'m> {
    model: &'m Model,
    /// What is read and measured: a tensor's sample, or one of its alternate draws.
    jobs: &'m [Job],
    on_progress: &'m dyn Fn(Progress),
    /// Reads under way.
    reads: FuturesUnordered<LocalBoxFuture<'static, Result<(Batch, js_sys::ArrayBuffer), String>>>,
    /// Joins the tensors' ranges into reads (the core's, as `organ measure --stream`'s).
    batcher: Batcher,
    /// Reads the batcher closed, to issue.
    full: Vec<Batch>,
    /// Tensors whose reads are under way.
    open: VecDeque<Open>,
    /// Tensors being measured on the pool.
    computing: Computing,
    /// Tensors on the pool at most, which bounds memory.
    window: usize,
    buffers: Buffers,
    /// Where a sparse plan's read is copied before its blocks go to the tensor's buffer.
    staging: Vec<u8>,
    /// Per job.
    measured: Vec<Option<(Measurement, Option<Histogram>)>>,
    progress: Progress,
    t0: f64,
    /// When progress was last shown.
    shown: f64,
}

impl<'m> Scheduler<'m> {
    fn new(model: &'m Model, jobs: &'m [Job], window: usize, t0: f64, on_progress: &'m dyn Fn(Progress)) -> Self {
        // Tensors that are not measurable have no job, and count as one step each.
        let n = jobs.len() + model.tensors.iter().filter(|t| !t.ty.can_dequantize()).count();
        Self {
            model,
            jobs,
            on_progress,
            reads: FuturesUnordered::new(),
            batcher: Batcher::new(MAX_GAP, FIRST_READ, MAX_READ),
            full: Vec::new(),
            open: VecDeque::new(),
            computing: Computing::new(),
            window,
            buffers: Buffers::default(),
            staging: Vec::new(),
            measured: vec![None; jobs.len()],
            progress: Progress { total: n, ..Progress::default() },
            t0,
            shown: f64::NEG_INFINITY,
        }
    }

    /// Counts a tensor that is not measurable: nothing to read.
    fn skip(&mut self) {
        self.progress.done += 1;
    }

    /// Schedules the reads of job `i`'s plan; then, while the pool holds more than
    /// `window` jobs, waits for them to finish.
    /// `at` is where the plan's offsets start in the tensor's data (an expert's bytes).
    async fn add(&mut self, i: usize, plan: ReadPlan, at: u64) -> Result<(), String> {
        self.progress.bytes_total += plan.bytes_to_read();
        let t = &self.model.tensors[self.jobs[i].tensor];
        let mut full = core::mem::take(&mut self.full);
        self.batcher.push_plan(i, &plan, t.file, t.offset + at, &mut full);
        let len = plan.buffer_len();
        let buf = self.buffers.take(len);
        self.open.push_back(Open { i, buf, len, left: plan.ranges.len(), plan });
        self.dispatch();
        for b in full.drain(..) {
            self.issue(b).await?;
        }
        self.full = full;
        while self.computing.len() > self.window {
            self.finish_next().await?;
        }
        Ok(())
    }

    /// Issues a read, waiting first for a slot among those in flight.
    async fn issue(&mut self, batch: Batch) -> Result<(), String> {
        while self.reads.len() >= MAX_READS_IN_FLIGHT {
            if let Some(r) = self.reads.next().await {
                self.land(r)?;
            }
        }
        let file = self.model.files[batch.file].clone();
        self.reads.push(read_batch(file, batch).boxed_local());
        Ok(())
    }

    /// Lands one read: fills the buffers of the tensors it serves; complete tensors go to
    /// the pool.
    fn land(&mut self, r: Result<(Batch, js_sys::ArrayBuffer), String>) -> Result<(), String> {
        let (batch, bytes) = r?;
        for p in &batch.parts {
            let o = self.open.iter_mut().find(|o| o.i == p.tensor).ok_or("a read landed for no tensor")?;
            // Every part lies inside its batch, whose length was checked.
            let span = batch.span(p);
            let part =
                js_sys::Uint8Array::new_with_byte_offset_and_length(&bytes, span.start as u32, span.len() as u32);
            match o.plan.dense_target(p.range) {
                // Dense plans: one copy, from the JS buffer to the tensor's buffer.
                Some(t) if t.len() == part.length() as usize && t.end <= o.len => part.copy_to(&mut o.buf[t]),
                // Sparse plans: the part goes to a staging buffer kept from read to read,
                // and only the needed blocks on to the tensor's buffer.
                _ => {
                    let n = part.length() as usize;
                    if self.staging.len() < n {
                        self.staging.resize(n, 0);
                    }
                    part.copy_to(&mut self.staging[..n]);
                    let filled = o.plan.fill(p.range, &self.staging[..n], &mut o.buf[..o.len]);
                    filled.map_err(|e| job_err(self.model, self.jobs[o.i], e))?
                }
            }
            o.left -= 1;
        }
        self.progress.bytes_read += u64::from(bytes.byte_length());
        self.dispatch();
        Ok(())
    }

    /// Sends every tensor whose reads have all landed to the pool, in whatever order they
    /// complete: a large tensor still being read does not hold back the small ones after it.
    fn dispatch(&mut self) {
        let mut k = 0;
        while k < self.open.len() {
            if self.open[k].left > 0 {
                k += 1;
                continue;
            }
            let Some(Open { i, plan, buf, len, .. }) = self.open.remove(k) else { break };
            // The histogram is of the tensor's own sample (or of every value, when exact).
            let histogram = self.jobs[i].draw == 0 && self.jobs[i].expert.is_none();
            self.computing.push(pool::spawn(move || {
                let r = plan.values(&buf[..len]).map(|values| {
                    let (m, sorted) = measure_values_sorted(values);
                    (m, histogram.then(|| Histogram::of_sorted(&sorted, BINS)).flatten())
                });
                (i, r.map_err(|e| e.to_string()), buf)
            }));
        }
    }

    /// Waits for one tensor on the pool; stores its result and keeps its buffer. False
    /// when none is there.
    async fn finish_next(&mut self) -> Result<bool, String> {
        let Some(d) = self.computing.next().await else { return Ok(false) };
        let (i, r, buf) = d.map_err(worker_gone)?;
        self.buffers.give(buf);
        self.measured[i] = Some(r.map_err(|e| job_err(self.model, self.jobs[i], e))?);
        self.tick();
        Ok(true)
    }

    /// Counts one more tensor done; shows the progress if it was not shown for a while.
    fn tick(&mut self) {
        self.progress.done += 1;
        let now = pool::now_ms();
        self.progress.elapsed_ms = now - self.t0;
        if now - self.shown >= PROGRESS_EVERY_MS {
            self.shown = now;
            (self.on_progress)(self.progress);
        }
    }

    /// Issues the last read, lands every read and waits for every tensor; shows the final
    /// progress. Gives each job's result and the bytes read.
    async fn finish(mut self) -> Result<(Vec<Option<(Measurement, Option<Histogram>)>>, u64), String> {
        if let Some(last) = self.batcher.finish() {
            self.issue(last).await?;
        }
        while let Some(r) = self.reads.next().await {
            self.land(r)?;
        }
        while self.finish_next().await? {}
        (self.on_progress)(self.progress);
        Ok((self.measured, self.progress.bytes_read))
    }
}

/// Measures every tensor of `model` in `mode` (θ; θ and σ_θ; or θ over every value).
/// `cancelled` stops it between reads; `on_progress` is called at most every
/// [`PROGRESS_EVERY_MS`] as jobs finish, and once at the end.
pub async fn measure(
    model: &Model,
    mode: Mode,
    cancelled: &dyn Fn() -> bool,
    on_progress: &dyn Fn(Progress),
) -> Result<Outcome, String> {
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
    let mut s = Scheduler::new(model, &jobs, window, t0, on_progress);
    (0..n - order.len()).for_each(|_| s.skip());
    for j in 0..jobs.len() {
        if cancelled() {
            return Err("cancelled".into());
        }
        if j + PLANS_AHEAD < jobs.len() {
            plans.push_back(plan(j + PLANS_AHEAD));
        }
        let rx = plans.pop_front().ok_or("a job without a plan")?;
        let (plan, at) = rx.await.map_err(worker_gone)?.map_err(|e| job_err(model, jobs[j], e))?;
        s.add(j, plan, at).await?;
    }
    let (measured, bytes_read) = s.finish().await?;
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
    let (measured, per_expert) = jobs::gather(&jobs, &found, n).map_err(|e| format!("{}: {e}", model.label))?;
    let mut expert_rows = experts::rows(model, mode, &layouts, &per_expert, cancelled).await?;
    let rows = (model.tensors.iter().zip(&measured).zip(expert_rows.iter_mut()))
        .map(|((t, m), x)| {
            let mut row = TensorReport::new(t, m.as_ref().map(|(m, _)| m))
                .in_mode(mode, m.as_ref().and_then(|(_, d)| d.as_ref()));
            row.experts = x.take();
            row
        })
        .collect();
    let m = ModelReport::new(&model.label, &model.model, model.file_bytes, rows);
    let generator = format!("{GENERATOR} (browser)");
    let mut report = Report::new(&generator, vec![m]);
    report.measure = mode.label().to_owned();
    Ok(Outcome { report, histograms, bytes_read, threads })
}
