//! Measuring a model in the browser: the core's `ReadPlan` says which byte ranges each
//! tensor's sample needs; the page reads them with `Blob.slice` (batched: nearby blocks
//! share a read) while the worker pool decodes and measures tensors already read. The
//! report is built by the same core functions as `organ measure`'s.

use crate::pool;
use crate::source::{read_buffer, Model};
use futures_util::stream::{FuturesOrdered, StreamExt};
use organ_core::zmeasure::report::{ModelReport, Report, TensorReport};
use organ_core::zmeasure::view::Histogram;
use organ_core::zmeasure::{measure_values_and_histogram, Measurement, ReadPlan};
use std::collections::VecDeque;

/// What produced the report.
pub const GENERATOR: &str = concat!("organ ", env!("CARGO_PKG_VERSION"), " (browser)");
/// Needed blocks closer than this share one read, within a tensor and across tensors: a
/// browser read costs far more than the bytes in a small gap.
const MAX_GAP: u64 = 64 << 10;
/// The longest single read.
const MAX_READ: u64 = 8 << 20;
/// Histogram bins kept per tensor (the values themselves are not kept).
pub const BINS: usize = 48;

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
    pub elapsed_ms: f64,
    pub bytes_read: u64,
    pub threads: usize,
}

type Done = (usize, Result<(Measurement, Option<Histogram>), String>);

/// Reads issued at once: the browser serves several file reads concurrently.
const MAX_READS_IN_FLIGHT: usize = 6;

/// A tensor whose reads are under way.
struct Open {
    i: usize,
    plan: ReadPlan,
    buf: Vec<u8>,
    /// Reads not landed yet.
    left: usize,
}

/// One file read, which may serve ranges of several consecutive tensors: tensors lie one
/// after another in the file, and a browser read costs far more than the bytes of a
/// small gap, so a model is read in a few large reads rather than one or more per tensor.
struct Batch {
    file: usize,
    start: u64,
    end: u64,
    /// (tensor index, range index in its plan, absolute start, absolute end).
    parts: Vec<(usize, usize, u64, u64)>,
}

impl Batch {
    /// Whether `[start, end)` of `file` can join this read.
    fn takes(&self, file: usize, start: u64, end: u64) -> bool {
        file == self.file && start >= self.end && start - self.end <= MAX_GAP && end - self.start <= MAX_READ
    }
}

/// Reads a batch's bytes.
async fn read_batch(file: gloo_file::File, batch: Batch) -> Result<(Batch, js_sys::ArrayBuffer), String> {
    read_buffer(&file, batch.start, batch.end).await.map(|b| (batch, b))
}

/// Sends every tensor at the front whose reads have all landed to the pool.
fn dispatch(open: &mut VecDeque<Open>, computing: &mut VecDeque<futures_channel::oneshot::Receiver<Done>>) {
    while open.front().is_some_and(|o| o.left == 0) {
        let Some(Open { i, plan, buf, .. }) = open.pop_front() else { break };
        computing.push_back(pool::spawn(move || {
            let r = plan.values(&buf).map(|values| measure_values_and_histogram(values, BINS));
            (i, r.map_err(|e| e.to_string()))
        }));
    }
}

/// Stores a finished tensor's result.
fn finish(d: Done, measured: &mut [Option<(Measurement, Option<Histogram>)>]) -> Result<(), (usize, String)> {
    let (i, r) = d;
    measured[i] = Some(r.map_err(|e| (i, e))?);
    Ok(())
}

/// Measures every tensor of `model`. `cancelled` stops it between reads; `on_progress` is
/// called after each tensor.
pub async fn measure(
    model: &Model,
    cancelled: &dyn Fn() -> bool,
    on_progress: &dyn Fn(Progress),
) -> Result<Outcome, String> {
    let t0 = pool::now_ms();
    let threads = pool::start().await?;
    let n = model.tensors.len();
    // Plans (100k sample indices each, sorted) are worked out on the pool, ahead of the reads.
    let mut plans: VecDeque<_> = model
        .tensors
        .iter()
        .map(|t| {
            let (name, ty, count) = (t.name.clone(), t.ty, t.n_elements);
            ty.can_dequantize().then(|| pool::spawn(move || ReadPlan::new(&name, ty, count, MAX_GAP, MAX_READ)))
        })
        .collect();
    let mut progress = Progress { total: n, ..Progress::default() };
    let mut measured: Vec<Option<(Measurement, Option<Histogram>)>> = vec![None; n];
    // Tensors being measured; at most `window` at once bounds memory.
    let window = 2 * threads.max(1);
    let mut computing: VecDeque<futures_channel::oneshot::Receiver<Done>> = VecDeque::new();
    // Tensors whose reads are under way, in order, with the reads still to land.
    let mut open: VecDeque<Open> = VecDeque::new();
    let mut reads = FuturesOrdered::new();
    let worker_gone = |_| "a worker stopped before finishing".to_owned();
    let name_err = |i: usize, e: String| format!("{}: tensor {:?}: {e}", model.label, model.tensors[i].name);

    // Lands one read: fills the buffers of the tensors it serves; tensors complete in
    // order go to the pool.
    let land = |r: Result<(Batch, js_sys::ArrayBuffer), String>,
                open: &mut VecDeque<Open>,
                computing: &mut VecDeque<_>,
                progress: &mut Progress|
     -> Result<(), String> {
        let (batch, bytes) = r?;
        for &(i, k, start, end) in &batch.parts {
            let o = open.iter_mut().find(|o| o.i == i).ok_or("a read landed for no tensor")?;
            // Every part lies inside its batch, whose length was checked.
            let part = js_sys::Uint8Array::new_with_byte_offset_and_length(
                &bytes,
                (start - batch.start) as u32,
                (end - start) as u32,
            );
            match o.plan.dense_target(k) {
                // Dense plans: one copy, from the JS buffer to the tensor's buffer.
                Some(t) if t.len() == part.length() as usize => part.copy_to(&mut o.buf[t]),
                _ => o.plan.fill(k, &part.to_vec(), &mut o.buf).map_err(|e| name_err(o.i, e.to_string()))?,
            }
            o.left -= 1;
        }
        progress.bytes_read += u64::from(bytes.byte_length());
        dispatch(open, computing);
        Ok(())
    };
    // Issues a read, waiting first for a slot among those in flight.
    macro_rules! issue {
        ($batch:expr) => {{
            let batch: Batch = $batch;
            while reads.len() >= MAX_READS_IN_FLIGHT {
                if let Some(r) = reads.next().await {
                    land(r, &mut open, &mut computing, &mut progress)?;
                }
            }
            let file = model.files[batch.file].clone();
            reads.push_back(read_batch(file, batch));
        }};
    }
    let mut pending: Option<Batch> = None;
    for i in 0..n {
        if cancelled() {
            return Err("cancelled".into());
        }
        let Some(rx) = plans.pop_front().flatten() else {
            progress.done += 1; // not measurable: nothing to read
            continue;
        };
        let plan = rx.await.map_err(worker_gone)?.map_err(|e| name_err(i, e.to_string()))?;
        progress.bytes_total += plan.bytes_to_read();
        let t = &model.tensors[i];
        let ranges: Vec<(usize, u64, u64)> = plan
            .ranges
            .iter()
            .enumerate()
            .map(|(k, r)| (k, t.offset + r.offset, t.offset + r.offset + r.len))
            .collect();
        open.push_back(Open { i, buf: plan.buffer(), left: ranges.len(), plan });
        dispatch(&mut open, &mut computing);
        for (k, start, end) in ranges {
            match pending.as_mut() {
                Some(b) if b.takes(t.file, start, end) => {
                    b.end = end;
                    b.parts.push((i, k, start, end));
                }
                _ => {
                    let next = Batch { file: t.file, start, end, parts: vec![(i, k, start, end)] };
                    if let Some(full) = pending.replace(next) {
                        issue!(full);
                    }
                }
            }
        }
        while computing.len() > window {
            if let Some(rx) = computing.pop_front() {
                finish(rx.await.map_err(worker_gone)?, &mut measured).map_err(|(i, e)| name_err(i, e))?;
                progress.done += 1;
                progress.elapsed_ms = pool::now_ms() - t0;
                on_progress(progress);
            }
        }
    }
    if let Some(last) = pending.take() {
        issue!(last);
    }
    while let Some(r) = reads.next().await {
        land(r, &mut open, &mut computing, &mut progress)?;
    }
    while let Some(rx) = computing.pop_front() {
        finish(rx.await.map_err(worker_gone)?, &mut measured).map_err(|(i, e)| name_err(i, e))?;
        progress.done += 1;
        progress.elapsed_ms = pool::now_ms() - t0;
        on_progress(progress);
    }
    let mut rows = Vec::with_capacity(model.tensors.len());
    let mut histograms = Vec::with_capacity(model.tensors.len());
    for (t, m) in model.tensors.iter().zip(measured) {
        let (m, h) = match m {
            Some((m, h)) => (Some(m), h),
            None => (None, None),
        };
        rows.push(TensorReport::from_parts(&t.name, t.ty, &t.dims, t.n_bytes, m.as_ref()));
        histograms.push(h);
    }
    let m = ModelReport::from_parts(
        &model.label,
        model.architecture.as_deref(),
        model.name.as_deref(),
        model.file_bytes,
        rows,
    );
    Ok(Outcome {
        report: Report::new(GENERATOR, vec![m]),
        histograms,
        elapsed_ms: pool::now_ms() - t0,
        bytes_read: progress.bytes_read,
        threads,
    })
}
