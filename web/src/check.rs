//! Checking a model in the browser (Check k1, as `organ check`): every tensor's bytes are
//! read in chunks of whole blocks (`Blob.slice`) and fed, on the worker pool, to the
//! core's scanner and to the core's gatherer of the tensor's ends; the tensors the core's
//! rule (`check::digest`) says may be copies are then read again and hashed whole; the
//! report is the core's `check_model`, as the CLI's. Several tensors are under way at
//! once, each with one chunk in memory, so memory stays bounded whatever the model's size.
//! These reads stream through a scanner's state chunk after chunk: they are the read
//! scheduler's streamed jobs (`crate::reads`: [`Chunks`], [`each`]), with its `Meter`.

use crate::error::Error;
use crate::pool;
use crate::reads::{each, worker_gone, Chunks, Meter, Progress};
use crate::source::Model;
use futures_util::future::FutureExt;
use organ_core::check::{check_model, digest, CheckReport, ScanError, Scanner, TensorScan};
use organ_core::zmeasure::GENERATOR;
use std::cell::Cell;

/// The longest read: a browser read costs about 1 ms of CPU besides its bytes (see
/// `reads::MAX_READ`), and each tensor under way holds one.
const CHUNK: usize = 8 << 20;
/// Tensors under way at most, whatever the threads.
const MAX_WINDOW: usize = 8;

/// A finished check: the report, bytes read, threads.
pub struct Outcome {
    pub report: CheckReport,
    pub bytes_read: u64,
    pub threads: usize,
}

/// One tensor's scan (or why it could not be read) and the digest of its ends.
type Scanned = (Result<TensorScan, ScanError>, Option<[u8; 32]>);

/// Reads tensor `i`'s bytes in order, a chunk of whole blocks at a time, and calls `f` on
/// the pool with `state`, each chunk and its offset in the tensor; gives `state` back.
async fn pass<S: Send + 'static>(
    model: &Model,
    i: usize,
    mut state: S,
    f: fn(&mut S, u64, &[u8]) -> Result<(), Error>,
    read: &Cell<u64>,
) -> Result<S, Error> {
    let t = &model.tensors[i];
    let file = model
        .files
        .get(t.file)
        .ok_or_else(|| Error::Refused(format!("{}: tensor {:?}: no file {}", model.label, t.name, t.file)))?;
    let chunk = Scanner::chunk_len(t.ty, CHUNK) as u64;
    let mut chunks = Chunks::new(file, t.offset, t.n_bytes, chunk)
        .map_err(|e| Error::Refused(format!("tensor {:?}: {e}", t.name)))?;
    while let Some(c) = chunks.next().await {
        let (at, buf) = c?;
        let bytes = js_sys::Uint8Array::new(&buf).to_vec();
        read.set(read.get() + bytes.len() as u64);
        let (s, r) = pool::spawn(move || {
            let r = f(&mut state, at, &bytes);
            (state, r)
        })
        .await
        .map_err(worker_gone)?;
        state = s;
        r?;
    }
    Ok(state)
}

/// Tensor `i`'s scan and the digest of its ends, as the CLI's `scan`.
async fn scan(model: &Model, i: usize, read: &Cell<u64>) -> Scanned {
    let t = &model.tensors[i];
    let state = (Scanner::new(t.ty, t.n_bytes), digest::Ends::new(t.n_bytes));
    let fed = pass(
        model,
        i,
        state,
        |(s, e), at, c| {
            e.feed(at, c);
            s.update(c).map_err(Error::refused)
        },
        read,
    );
    match fed.await {
        Ok((s, e)) => match s.finish() {
            Ok(s) => (Ok(s), Some(e.digest())),
            Err(x) => (Err(ScanError { reason: x.to_string() }), None),
        },
        Err(x) => (Err(ScanError { reason: x.to_string() }), None),
    }
}

/// Tensor `i`'s digest, its bytes hashed whole.
async fn hash(model: &Model, i: usize, read: &Cell<u64>) -> Result<[u8; 32], Error> {
    let h = pass(
        model,
        i,
        digest::Hasher::new(),
        |h, _, c| {
            h.update(c);
            Ok(())
        },
        read,
    );
    Ok(h.await?.finish())
}

/// Checks every tensor of `model`. `cancelled` stops it between tensors; `on_progress` is
/// called at most every [`PROGRESS_EVERY_MS`](crate::reads::PROGRESS_EVERY_MS) as
/// tensors finish, and once at the end.
pub async fn check(
    model: &Model,
    cancelled: &dyn Fn() -> bool,
    on_progress: &dyn Fn(Progress),
) -> Result<Outcome, Error> {
    let t0 = pool::now_ms();
    let threads = pool::start().await?;
    let window = (2 * threads).clamp(2, MAX_WINDOW);
    let n = model.tensors.len();
    let read = Cell::new(0u64);
    let mut meter = Meter::new(n, t0, on_progress);
    meter.progress.bytes_total = model.tensors.iter().map(|t| t.n_bytes).sum();
    let all: Vec<usize> = (0..n).collect();
    let mut scanned: Vec<Scanned> = vec![(Err(ScanError { reason: "not read".into() }), None); n];
    each(
        &all,
        window,
        cancelled,
        |i| scan(model, i, &read).boxed_local(),
        |i, r| {
            scanned[i] = r;
            meter.progress.bytes_read = read.get();
            meter.tick();
        },
    )
    .await?;
    let (scans, ends): (Vec<_>, Vec<_>) = scanned.into_iter().unzip();
    let whole: Vec<usize> = (digest::hash_whole(&model.tensors, &ends).into_iter().enumerate())
        .filter_map(|(i, w)| w.then_some(i))
        .collect();
    meter.progress.total += whole.len();
    meter.progress.bytes_total += whole.iter().map(|&i| model.tensors[i].n_bytes).sum::<u64>();
    let mut digests: Vec<Option<[u8; 32]>> = vec![None; n];
    let mut failed = None;
    each(
        &whole,
        window,
        cancelled,
        |i| hash(model, i, &read).boxed_local(),
        |i, r| {
            match r {
                Ok(d) => digests[i] = Some(d),
                Err(e) => failed = failed.take().or(Some(e)),
            }
            meter.progress.bytes_read = read.get();
            meter.tick();
        },
    )
    .await?;
    if let Some(e) = failed {
        return Err(e);
    }
    meter.progress.bytes_read = read.get();
    meter.show_now();
    let report = check_model(&format!("{GENERATOR} (browser)"), &model.label, &model.model, scans, &digests);
    Ok(Outcome { report, bytes_read: read.get(), threads })
}
