//! The browser's one read scheduler: every byte of a model's tensors that the page reads
//! is read here, in one of two kinds of job.
//!
//! - **Planned jobs** ([`Reads`]), for measuring and comparing: a caller's job is one or
//!   more slots, each a `ReadPlan` over one model's file (a measure job is one slot, a
//!   compare job one per side). The core's `Batcher` of each model joins the slots' ranges
//!   into reads across slots; at most [`MAX_READS_IN_FLIGHT`] reads are under way; their
//!   bytes land in the slots' buffers (reused from job to job), and a job whose slots have
//!   all landed goes to the worker pool, to run what the caller says ([`Jobs::run`]), with
//!   at most `window` jobs there at once.
//! - **Streamed jobs** ([`Chunks`], [`read_ranges`], [`each`]), for the passes whose state
//!   takes bytes in order or asks for its next bytes from what it was fed: check's scan
//!   and hashing, compare's byte equality, the experts' duplicate search. A job reads a
//!   span a chunk at a time (or a few ranges at once, at most [`MAX_READS_IN_FLIGHT`]), so
//!   memory stays a chunk per job under way; [`each`] keeps at most `window` jobs under
//!   way.
//!
//! The progress is shown at most every [`PROGRESS_EVERY_MS`] ([`Meter`], for both kinds).

use crate::error::Error;
use crate::pool;
use crate::source::{read_buffer, read_range, Model, Src};
use futures_util::future::{FutureExt, LocalBoxFuture};
use futures_util::stream::{self, FuturesUnordered, StreamExt, TryStreamExt};
use organ_core::zmeasure::batch::{Batch, Batcher};
use organ_core::zmeasure::ReadPlan;
use std::collections::{BTreeMap, VecDeque};

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
/// Reads issued at once: one being copied while the next is read. More reads at once
/// did not read faster, and each read lands later.
pub(crate) const MAX_READS_IN_FLIGHT: usize = 2;
/// How often the progress bar is redrawn at most (SmolLM2 finishes a tensor every 1–2 ms):
/// each redraw takes the page's thread (style, layout, paint) from reading the file.
pub(crate) const PROGRESS_EVERY_MS: f64 = 100.0;

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

/// The progress of a run, and when it was last shown.
pub(crate) struct Meter<'a> {
    pub progress: Progress,
    on_progress: &'a dyn Fn(Progress),
    t0: f64,
    shown: f64,
}

impl<'a> Meter<'a> {
    /// A run started at `t0` (ms) of `total` steps.
    pub fn new(total: usize, t0: f64, on_progress: &'a dyn Fn(Progress)) -> Self {
        Self { progress: Progress { total, ..Progress::default() }, on_progress, t0, shown: f64::NEG_INFINITY }
    }

    /// Counts one more step done; shows the progress if it was not shown for a while.
    pub fn tick(&mut self) {
        self.progress.done += 1;
        self.show();
    }

    /// Counts `n` more bytes read; shows the progress if it was not shown for a while.
    pub fn read_more(&mut self, n: u64) {
        self.progress.bytes_read += n;
        self.show();
    }

    /// Shows the progress, at most every [`PROGRESS_EVERY_MS`].
    pub fn show(&mut self) {
        let now = pool::now_ms();
        self.progress.elapsed_ms = now - self.t0;
        if now - self.shown >= PROGRESS_EVERY_MS {
            self.shown = now;
            (self.on_progress)(self.progress);
        }
    }

    /// Shows the progress, however recently it was.
    pub fn show_now(&self) {
        (self.on_progress)(self.progress);
    }
}

/// The error when a worker drops its answer's channel before answering.
pub(crate) fn worker_gone<E>(_: E) -> Error {
    Error::Workers("a worker stopped before finishing".to_owned())
}

/// Reads a batch's bytes.
async fn read_batch(file: Src, batch: Batch) -> Result<(Batch, js_sys::ArrayBuffer), Error> {
    read_buffer(&file, batch.start, batch.end).await.map(|b| (batch, b))
}

/// Slot buffers handed back by finished jobs, for the next ones. A fresh buffer costs the
/// page's thread an allocation, zeroing and often wasm memory growth: for SmolLM2 that was
/// 30–340 ms of a 0.5–1 s run. A reused buffer is not cleared: the reads of a plan write
/// every byte of its buffer (dense: the ranges tile the tensor; sparse: every needed block
/// is filled).
#[derive(Default)]
struct Buffers(Vec<Vec<u8>>);

impl Buffers {
    /// Bytes kept for reuse at most; buffers beyond it are freed.
    const KEEP_BYTES: usize = 256 << 20;

    /// A buffer of at least `len` bytes: the smallest kept one that is large enough, else a
    /// new one.
    fn take(&mut self, len: usize) -> Vec<u8> {
        let fit =
            (self.0.iter().enumerate()).filter(|(_, b)| b.len() >= len).min_by_key(|(_, b)| b.len()).map(|(k, _)| k);
        match fit {
            Some(k) => self.0.swap_remove(k),
            None => vec![0u8; len],
        }
    }

    /// Keeps `b` for reuse, within [`Buffers::KEEP_BYTES`] (dropping the smallest first).
    fn give(&mut self, b: Vec<u8>) {
        self.0.push(b);
        self.0.sort_unstable_by_key(|b| core::cmp::Reverse(b.len()));
        let mut kept = 0;
        self.0.retain(|b| {
            kept += b.len();
            kept <= Self::KEEP_BYTES
        });
    }
}

/// One slot of a job to read: `plan`'s offsets start at `offset` in file `file` of model
/// `model` (an index into the models given to [`Reads::new`]).
pub(crate) struct Read {
    pub model: usize,
    pub file: usize,
    pub offset: u64,
    pub plan: ReadPlan,
}

/// A slot whose reads have all landed: its plan and its bytes.
pub(crate) struct Slot {
    pub plan: ReadPlan,
    /// At least the plan's buffer size; the first `len` bytes are the plan's buffer.
    buf: Vec<u8>,
    len: usize,
}

impl Slot {
    /// The plan's buffer.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// What a caller's jobs are: what each runs on the pool, and where its result goes.
pub(crate) trait Jobs {
    /// What a job's work on the pool needs besides its slots.
    type In: Send + 'static;
    /// A job's result.
    type Out: Send + 'static;
    /// Job `job`'s input, taken when its slots have all landed.
    fn input(&self, job: usize) -> Self::In;
    /// A job's work on the pool, on its slots in the order they were added.
    fn run(input: Self::In, slots: &[Slot]) -> Result<Self::Out, Error>;
    /// Keeps job `job`'s result; true when it completes a step of the progress.
    fn done(&mut self, job: usize, out: Self::Out) -> bool;
    /// Job `job`'s error `e`, said at what it reads.
    fn err(&self, job: usize, e: Error) -> Error;
}

/// A slot whose reads are under way.
struct Open {
    /// The slot's id in the batchers.
    id: usize,
    job: usize,
    /// Its place among the job's slots.
    k: usize,
    plan: ReadPlan,
    buf: Vec<u8>,
    len: usize,
    /// Reads not landed yet.
    left: usize,
}

/// A finished job: its index, its result, and its slots' buffers, for the next job.
type Done<T> = (usize, Result<T, Error>, Vec<Vec<u8>>);
type ReadResult = (usize, Result<(Batch, js_sys::ArrayBuffer), Error>);

/// Starts a job's work on the pool (generic only over what crosses to the pool).
fn spawn<I: Send + 'static, O: Send + 'static>(
    job: usize,
    input: I,
    slots: Vec<Slot>,
    run: fn(I, &[Slot]) -> Result<O, Error>,
) -> futures_channel::oneshot::Receiver<Done<O>> {
    pool::spawn(move || {
        let r = run(input, &slots);
        (job, r, slots.into_iter().map(|s| s.buf).collect())
    })
}

/// The read scheduler (see the module's text). Jobs come in through [`Reads::add`], in
/// read order; [`Reads::finish`] gives the caller's [`Jobs`] back with every result kept.
pub(crate) struct Reads<'m, J: Jobs> {
    models: Vec<&'m Model>,
    /// Joins the slots' ranges into reads, one per model (the core's, as the CLI's).
    batchers: Vec<Batcher>,
    /// Reads under way, with their model.
    reads: FuturesUnordered<LocalBoxFuture<'static, ReadResult>>,
    /// Slots whose reads are under way.
    open: VecDeque<Open>,
    /// Per job under way: its slots not landed yet, and those landed.
    landing: BTreeMap<usize, (usize, Vec<Option<Slot>>)>,
    next_id: usize,
    /// Jobs on the pool.
    computing: FuturesUnordered<futures_channel::oneshot::Receiver<Done<J::Out>>>,
    /// Jobs on the pool at most, which bounds memory.
    window: usize,
    buffers: Buffers,
    /// Where a sparse plan's read is copied before its blocks go to the slot's buffer.
    staging: Vec<u8>,
    pub jobs: J,
    pub meter: Meter<'m>,
}

impl<'m, J: Jobs> Reads<'m, J> {
    /// A scheduler reading `models`, with at most `window` jobs on the pool.
    pub fn new(models: Vec<&'m Model>, window: usize, jobs: J, meter: Meter<'m>) -> Self {
        Self {
            batchers: models.iter().map(|_| Batcher::new(MAX_GAP, FIRST_READ, MAX_READ)).collect(),
            models,
            reads: FuturesUnordered::new(),
            open: VecDeque::new(),
            landing: BTreeMap::new(),
            next_id: 0,
            computing: FuturesUnordered::new(),
            window,
            buffers: Buffers::default(),
            staging: Vec::new(),
            jobs,
            meter,
        }
    }

    /// Schedules the reads of job `job`'s slots; then, while the pool holds more than
    /// `window` jobs, waits for them to finish.
    pub async fn add(&mut self, job: usize, slots: Vec<Read>) -> Result<(), Error> {
        if slots.is_empty() {
            return Err(self.jobs.err(job, Error::Internal("nothing to read")));
        }
        let mut full = Vec::new();
        let n = slots.len();
        for (k, Read { model, file, offset, plan }) in slots.into_iter().enumerate() {
            self.meter.progress.bytes_total += plan.bytes_to_read();
            let id = self.next_id;
            self.next_id += 1;
            let batcher = self.batchers.get_mut(model).ok_or(Error::Internal("a read of no model"))?;
            let mut closed = Vec::new();
            batcher.push_plan(id, &plan, file, offset, &mut closed);
            full.extend(closed.into_iter().map(|b| (model, b)));
            let len = plan.buffer_len();
            let buf = self.buffers.take(len);
            self.open.push_back(Open { id, job, k, left: plan.ranges.len(), plan, buf, len });
        }
        self.landing.insert(job, (n, (0..n).map(|_| None).collect()));
        self.dispatch();
        for (model, b) in full {
            self.issue(model, b).await?;
        }
        while self.computing.len() > self.window {
            self.finish_next().await?;
        }
        Ok(())
    }

    /// Issues a read, waiting first for a place among those in flight.
    async fn issue(&mut self, model: usize, batch: Batch) -> Result<(), Error> {
        while self.reads.len() >= MAX_READS_IN_FLIGHT {
            if let Some(r) = self.reads.next().await {
                self.land(r)?;
            }
        }
        let file = self.models[model].files.get(batch.file).ok_or(Error::Internal("a read of no file"))?.clone();
        self.reads.push(read_batch(file, batch).map(move |r| (model, r)).boxed_local());
        Ok(())
    }

    /// Lands one read: fills the buffers of the slots it serves; complete jobs go to the
    /// pool.
    fn land(&mut self, (_, r): ReadResult) -> Result<(), Error> {
        let (batch, bytes) = r?;
        for p in &batch.parts {
            let o = self
                .open
                .iter_mut()
                .find(|o| o.id == p.tensor)
                .ok_or(Error::Internal("a read landed for no tensor"))?;
            // Every part lies inside its batch, whose length was checked.
            let span = batch.span(p);
            let part =
                js_sys::Uint8Array::new_with_byte_offset_and_length(&bytes, span.start as u32, span.len() as u32);
            match o.plan.dense_target(p.range) {
                // Dense plans: one copy, from the JS buffer to the slot's buffer.
                Some(t) if t.len() == part.length() as usize && t.end <= o.len => part.copy_to(&mut o.buf[t]),
                // Sparse plans: the part goes to a staging buffer kept from read to read,
                // and only the needed blocks on to the slot's buffer.
                _ => {
                    let n = part.length() as usize;
                    if self.staging.len() < n {
                        self.staging.resize(n, 0);
                    }
                    part.copy_to(&mut self.staging[..n]);
                    let filled = o.plan.fill(p.range, &self.staging[..n], &mut o.buf[..o.len]);
                    filled.map_err(|e| self.jobs.err(o.job, Error::refused(e)))?
                }
            }
            o.left -= 1;
        }
        self.meter.progress.bytes_read += u64::from(bytes.byte_length());
        self.dispatch();
        Ok(())
    }

    /// Sends every job whose slots have all landed to the pool, in whatever order they
    /// complete: a large tensor still being read does not hold back the small ones after it.
    fn dispatch(&mut self) {
        let mut k = 0;
        while k < self.open.len() {
            if self.open[k].left > 0 {
                k += 1;
                continue;
            }
            let Some(Open { job, k: place, plan, buf, len, .. }) = self.open.remove(k) else { break };
            let Some((left, slots)) = self.landing.get_mut(&job) else { continue };
            slots[place] = Some(Slot { plan, buf, len });
            *left -= 1;
            if *left > 0 {
                continue;
            }
            let Some((_, slots)) = self.landing.remove(&job) else { continue };
            let slots = slots.into_iter().flatten().collect();
            self.computing.push(spawn(job, self.jobs.input(job), slots, J::run));
        }
    }

    /// Waits for one job on the pool; keeps its result and its buffers. False when none is
    /// there.
    async fn finish_next(&mut self) -> Result<bool, Error> {
        let Some(d) = self.computing.next().await else { return Ok(false) };
        let (job, r, bufs) = d.map_err(worker_gone)?;
        for b in bufs {
            self.buffers.give(b);
        }
        let out = r.map_err(|e| self.jobs.err(job, e))?;
        if self.jobs.done(job, out) {
            self.meter.tick();
        }
        Ok(true)
    }

    /// Issues each model's last read, lands every read and waits for every job; shows the
    /// final progress. Gives the jobs back, with the bytes read.
    pub async fn finish(mut self) -> Result<(J, u64), Error> {
        for model in 0..self.batchers.len() {
            if let Some(last) = self.batchers[model].finish() {
                self.issue(model, last).await?;
            }
        }
        while let Some(r) = self.reads.next().await {
            self.land(r)?;
        }
        while self.finish_next().await? {}
        self.meter.show_now();
        Ok((self.jobs, self.meter.progress.bytes_read))
    }
}

/// A span of a file read in order, a chunk at a time: a streamed job's reads. The span is
/// checked against the file's size when made.
pub(crate) struct Chunks<'a> {
    file: &'a Src,
    start: u64,
    len: u64,
    /// Bytes of the span given so far.
    at: u64,
    chunk: u64,
}

impl<'a> Chunks<'a> {
    /// The `len` bytes at `start` of `file`, in chunks of `chunk` bytes (the last shorter).
    pub fn new(file: &'a Src, start: u64, len: u64, chunk: u64) -> Result<Self, Error> {
        if start.checked_add(len).is_none_or(|end| end > file.size()) {
            return Err(Error::Read(format!(
                "{}: bytes {start}..{start}+{len} run past the end of the file ({} bytes)",
                file.what(),
                file.size()
            )));
        }
        Ok(Self { file, start, len, at: 0, chunk: chunk.max(1) })
    }

    /// The next chunk: where it starts in the span, and its bytes; `None` after the last.
    pub async fn next(&mut self) -> Option<Result<(u64, js_sys::ArrayBuffer), Error>> {
        if self.at >= self.len {
            return None;
        }
        let (at, n) = (self.at, (self.len - self.at).min(self.chunk));
        self.at += n;
        // Within the file: checked when made.
        let s = self.start + at;
        Some(read_buffer(self.file, s, s + n).await.map(|b| (at, b)))
    }
}

/// Reads `ranges` (`[start, end)` each) of `file`, [`MAX_READS_IN_FLIGHT`] at once; their
/// bytes in the ranges' order.
pub(crate) async fn read_ranges(file: &Src, ranges: &[(u64, u64)]) -> Result<Vec<Vec<u8>>, Error> {
    stream::iter(ranges.iter().map(|&(start, end)| read_range(file, start, end)))
        .buffered(MAX_READS_IN_FLIGHT)
        .try_collect()
        .await
}

/// Runs streamed job `job` on each of `items` with at most `window` under way, calling
/// `done` with each result as it comes; stops between jobs when `cancelled`.
pub(crate) async fn each<'a, T>(
    items: &[usize],
    window: usize,
    cancelled: &dyn Fn() -> bool,
    job: impl Fn(usize) -> LocalBoxFuture<'a, T>,
    mut done: impl FnMut(usize, T),
) -> Result<(), Error> {
    let mut under_way = FuturesUnordered::new();
    for &i in items {
        if cancelled() {
            return Err(Error::Cancelled);
        }
        while under_way.len() >= window.max(1) {
            if let Some((k, r)) = under_way.next().await {
                done(k, r);
            }
        }
        under_way.push(job(i).map(move |r| (i, r)));
    }
    while let Some((k, r)) = under_way.next().await {
        done(k, r);
    }
    Ok(())
}
