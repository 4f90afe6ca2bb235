//! Measuring by positioned reads of the sampled blocks only (`organ measure --stream`, and
//! models over 2 GiB): memory stays bounded whatever the model's size.
//!
//! Each tensor's [`ReadPlan`] lists the ranges its sample needs; the core's [`Batcher`]
//! joins the ranges of neighbouring tensors into one read (the browser batches its `Blob`
//! reads with the same code). The calling thread reads the batches in file order and hands
//! each tensor, once all its ranges are in, to the threads that measure it; all of them
//! are joined before [`measure`] returns, a stop included.
//!
//! With `--sigma` each tensor is read once per draw (§7): draw k is a job of its own, with
//! the plan of the sample seeded by `NAME@k`, so a draw holds no more memory than a plain
//! measure does, and the nine jobs of a tensor are measured in parallel. With `--exact` a
//! job's plan is the whole tensor, and fewer jobs are in flight.
//!
//! With `--experts` each expert of an expert tensor is read and measured as a tensor of its
//! own (`NAME#e`, §6): jobs of their own ([`jobs::jobs`]), with plans that start at the
//! expert's bytes.

use super::{Measured, BYTES_READ};
use crate::model::Model;
use anyhow::{Context, Result};
use organ_core::zmeasure::batch::{Batch, Batcher};
use organ_core::zmeasure::experts::ExpertLayout;
use organ_core::zmeasure::jobs::{self, Gathered, Job};
use organ_core::zmeasure::{measure_values, Measurement, Mode, ReadPlan};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Mutex;

/// Needed blocks of neighbouring tensors share a read only when they touch: `--stream` is
/// for reading little, and a local file's reads cost little besides their bytes (the
/// browser, where each read costs far more, joins ranges across gaps).
const MAX_GAP: u64 = 0;
/// The longest single read.
const MAX_READ: u64 = 1 << 20;
/// The longest single request to a remote model. Several are in flight at once, and every
/// tensor whose ranges they cover holds its plan (1.6 MB) until they land, so this times
/// `--remote-concurrency` bounds memory: SmolLM2 over loopback peaked at 276 MB with 4 MiB
/// requests, 127 MB with 1 MiB ones (95 requests, 1 s), 77 MB one request at a time.
const MAX_REMOTE_READ: u64 = 1 << 20;

/// Ranges one range request asks for at most (`Range: bytes=a-b,c-d,…`; the remote
/// reader keeps the header under its budget, splitting further if need be).
const REMOTE_RANGES: usize = 256;
/// What one more range costs in a multipart answer: its part's boundary and headers
/// (nginx's are 90 to 130 bytes), and its bit of the request's Range header. Sampled
/// blocks of a sparse tensor closer than this share a range.
const PART_COST: u64 = 128;

/// How the reads are made: how far apart ranges may lie and still share one (per tensor,
/// from its sampling density, when `per_tensor`), the longest read, how many ranges one
/// read may ask for, and how many reads are made at once.
#[derive(Clone, Copy)]
pub(super) struct Reads {
    gap: u64,
    per_tensor: bool,
    max_read: u64,
    ranges: usize,
    at_once: usize,
}

impl Reads {
    /// Positioned reads of local files, one at a time.
    pub(super) const LOCAL: Reads =
        Reads { gap: MAX_GAP, per_tensor: false, max_read: MAX_READ, ranges: 1, at_once: 1 };

    /// Range requests ([`crate::remote::config`]): a request costs a round trip, so it
    /// asks for many ranges, ranges are joined across gaps, and several are in flight.
    pub(super) fn remote() -> Reads {
        let c = crate::remote::config();
        Reads {
            gap: c.gap,
            per_tensor: true,
            max_read: MAX_REMOTE_READ,
            ranges: REMOTE_RANGES,
            at_once: c.concurrency.max(1),
        }
    }

    /// The gap for a tensor whose plan is `plan`. A dense tensor (its sampled blocks, with
    /// a part's framing each, at least half the bytes they lie in) is read in long ranges
    /// across gaps of up to `--remote-gap`; a sparse one (a large tensor's blocks lie KiBs
    /// apart) block by block, many blocks a request, joined only across gaps smaller than
    /// a part's framing: else `--remote-gap` would join them all into the whole tensor.
    fn gap_for(&self, plan: &ReadPlan) -> u64 {
        let (Some(first), Some(last)) = (plan.ranges.first(), plan.ranges.last()) else { return self.gap };
        if !self.per_tensor {
            return self.gap;
        }
        let extent = (last.offset + last.len).saturating_sub(first.offset);
        let needed = plan.bytes_to_read().saturating_add(plan.ranges.len() as u64 * PART_COST);
        if extent <= needed.saturating_mul(2) {
            self.gap
        } else {
            self.gap.min(PART_COST)
        }
    }
}
/// Tensors whose plans are made at once, in parallel: a plan holds two indices per sampled
/// value (1.6 MB), so they are made as the reads reach them, not all first.
const PLANS_AHEAD: usize = 16;

/// Needed blocks of one expert share a read across gaps this long: an expert's 100 000
/// samples fall in a third of its blocks (a 64-expert Q4_K tensor of 4096 × 14336 per
/// expert), so without it each expert is tens of thousands of reads of a block or two.
const EXPERT_GAP: u64 = 4096;

/// How the jobs are planned and read: the mode, the expert layouts per tensor, the reads,
/// and whether to stop.
#[derive(Clone, Copy)]
struct How<'a> {
    mode: Mode,
    layouts: &'a [Option<ExpertLayout>],
    reads: Reads,
    stopped: &'a (dyn Fn() -> bool + Sync),
}

/// A job whose ranges are all read: its index, plan and filled buffer.
type Filled = (usize, ReadPlan, Vec<u8>);

/// What [`measure`] found: per tensor, its measurement and, for expert tensors measured
/// per expert, each expert's.
pub(super) type Found = (Vec<Option<Measured>>, Vec<Option<Vec<Measured>>>);

/// Measures every tensor of `model` by positioned reads in `mode`, and each expert of the
/// expert tensors `layouts` names (`None`: measured whole only); `tick` is called once per
/// tensor (measured or not measurable), and the work ends, an error, once `stopped` says
/// so (looked at before each job). The result is in tensor order, `None` where the type
/// cannot be measured.
pub(super) fn measure(
    model: &Model,
    path: &Path,
    mode: Mode,
    layouts: &[Option<ExpertLayout>],
    reads: Reads,
    tick: &(dyn Fn() + Sync),
    stopped: &(dyn Fn() -> bool + Sync),
) -> Result<Found> {
    // File order, measurable tensors only.
    let mut order: Vec<usize> = (0..model.tensors.len()).filter(|&i| model.tensors[i].ty.can_dequantize()).collect();
    order.sort_by_key(|&i| (model.tensors[i].file, file_key(model, i), model.tensors[i].offset));
    (0..model.tensors.len() - order.len()).for_each(|_| tick());
    let layout = |i: usize| layouts.get(i).copied().flatten();
    let jobs: Vec<Job> = jobs::jobs(mode, order.iter().map(|&i| (i, model.tensors[i].n_elements, layout(i))));
    let named = |j: usize| {
        let (t, e) = (&model.tensors[jobs[j].tensor].name, jobs[j].expert);
        let expert = e.map_or_else(String::new, |e| format!(" expert {e}"));
        format!("{}: tensor {t:?}{expert}", path.display())
    };
    // A job's tensor is done when all its jobs are: counted down here.
    let mut per_tensor = vec![0usize; model.tensors.len()];
    jobs.iter().for_each(|j| per_tensor[j.tensor] += 1);
    let left: Vec<std::sync::atomic::AtomicUsize> =
        per_tensor.iter().map(|&n| std::sync::atomic::AtomicUsize::new(n)).collect();
    let job_done = |j: usize| {
        if left[jobs[j].tensor].fetch_sub(1, Ordering::Relaxed) == 1 {
            tick();
        }
    };
    let mut found: Vec<Option<Measurement>> = vec![None; jobs.len()];
    run_jobs(model, &jobs, How { mode, layouts, reads, stopped }, &named, &job_done, &mut found)?;
    let gathered: Gathered =
        jobs::gather(&jobs, &found, model.tensors.len()).with_context(|| format!("{}", path.display()))?;
    Ok(gathered)
}

/// Reads and measures every job of `jobs` (in file order) into `found`.
fn run_jobs(
    model: &Model,
    jobs: &[Job],
    how: How<'_>,
    named: &(dyn Fn(usize) -> String + Sync),
    job_done: &(dyn Fn(usize) + Sync),
    found: &mut [Option<Measurement>],
) -> Result<()> {
    let mode = how.mode;
    // Tensors read wait here; a full channel holds the reader back, which bounds the
    // buffers held at once. They are measured on threads of their own, not the rayon pool:
    // the reader makes its plans on the pool, and pool threads waiting on this channel
    // would leave none to make them.
    let threads = rayon::current_num_threads().max(1);
    // A whole tensor per job in --exact: one waits in the channel, not two per thread.
    let waiting = if mode == Mode::Exact { 1 } else { 2 * threads };
    let (tx, rx) = sync_channel::<Result<Filled>>(waiting);
    let rx = Mutex::new(rx);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (stop, rx) = (&stop, &rx);
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    // After a failure, or once the caller stopped waiting, what the reader
                    // still sends is drained, unmeasured, until it sees `stop` and ends: a
                    // worker that left would leave it blocked on a full channel.
                    let mut failed = None;
                    loop {
                        // The lock is let go before measuring.
                        let next = rx.lock().map_err(|_| anyhow::anyhow!("a measuring thread panicked"))?.recv();
                        let Ok(next) = next else { break };
                        if failed.is_some() {
                            continue;
                        }
                        if (how.stopped)() {
                            stop.store(true, Ordering::Relaxed);
                            failed = Some(anyhow::anyhow!("{}: stopped", model.path.display()));
                            continue;
                        }
                        let r = next.and_then(|(i, plan, buf)| {
                            let m = plan.values(&buf).map(measure_values);
                            Ok((i, m.map_err(|e| anyhow::Error::new(e).context(named(i)))?))
                        });
                        match r {
                            Ok(m) => {
                                job_done(m.0);
                                out.push(m);
                            }
                            Err(e) => {
                                stop.store(true, Ordering::Relaxed);
                                failed = Some(e);
                            }
                        }
                    }
                    failed.map_or(Ok(out), Err)
                })
            })
            .collect();
        // The reader is this thread, which is in the caller's rayon pool (the Python
        // module's `threads=`): its plans are made there. On a thread of its own they were
        // made on rayon's global pool, whose threads were started for them and outlived
        // the call. Its sender goes with it: when it is done, the workers' loops end.
        let read = read_all(model, jobs, how, &tx, stop, named);
        if let Err(e) = read {
            let _ = tx.send(Err(e));
        }
        drop(tx);
        for w in workers {
            let done = w.join().map_err(|_| anyhow::anyhow!("a measuring thread panicked"))??;
            for (j, m) in done {
                found[j] = Some(m);
            }
        }
        Ok::<_, anyhow::Error>(())
    })
}

/// Which file tensor `i`'s bytes are in, as the batcher numbers files: the open file itself
/// (its address), not `entry.file`, which indexes the files of the model a tensor was read
/// from and so may clash in a model made of two (a graft's).
fn file_key(model: &Model, i: usize) -> usize {
    std::sync::Arc::as_ptr(&model.tensors[i].in_file) as usize
}

/// Jobs whose reads are under way: plan, buffer, ranges still to land.
type Open = HashMap<usize, (ReadPlan, Vec<u8>, usize)>;

/// Plans the jobs a few at a time, joins their ranges into batches, reads each batch, and
/// sends every job whose ranges are all in. Returns early (`Ok`) when a worker met an
/// error (`stop`) or the caller stopped waiting (`how.stopped`: the workers then end).
fn read_all(
    model: &Model,
    jobs: &[Job],
    how: How<'_>,
    tx: &SyncSender<Result<Filled>>,
    stop: &AtomicBool,
    named: &(dyn Fn(usize) -> String + Sync),
) -> Result<()> {
    let How { mode, layouts, reads, .. } = how;
    let halted = || stop.load(Ordering::Relaxed) || (how.stopped)();
    let mut batcher = Batcher::new(reads.gap, MAX_READ, reads.max_read);
    let mut open = Open::new();
    let mut bufs = Vec::new();
    let mut batches = Vec::new();
    // Bytes of the batches waiting.
    let mut pending = 0u64;
    // A plan's buffer is allocated as it is made: in --exact, that is a whole tensor.
    let ahead = if mode == Mode::Exact { 1 } else { PLANS_AHEAD };
    let index: Vec<usize> = (0..jobs.len()).collect();
    for chunk in index.chunks(ahead) {
        if halted() {
            return Ok(());
        }
        let plans = (chunk.par_iter())
            .map(|&j| {
                if (how.stopped)() {
                    anyhow::bail!("{}: stopped", model.path.display());
                }
                let t = &model.tensors[jobs[j].tensor];
                let layout = layouts.get(jobs[j].tensor).and_then(Option::as_ref);
                let plan = jobs[j].plan(mode, &t.name, t.ty, t.n_elements, layout, MAX_GAP, EXPERT_GAP, MAX_READ);
                plan.map_err(|e| anyhow::Error::new(e).context(named(j)))
            })
            .collect::<Result<Vec<_>>>()?;
        for (&i, (plan, at)) in chunk.iter().zip(plans) {
            let t = &model.tensors[jobs[i].tensor];
            batcher.set_max_gap(reads.gap_for(&plan));
            let before = batches.len();
            batcher.push_plan(i, &plan, file_key(model, jobs[i].tensor), t.offset + at, &mut batches);
            let buf = plan.buffer();
            let left = plan.ranges.len();
            if left == 0 {
                // No elements: nothing to read.
                if tx.send(Ok((i, plan, buf))).is_err() {
                    return Ok(());
                }
                continue;
            }
            pending += batches[before..].iter().map(Batch::len).sum::<u64>();
            open.insert(i, (plan, buf, left));
            let full = reads.at_once.saturating_mul(reads.ranges);
            if batches.len() >= full || pending >= reads.max_read.saturating_mul(reads.at_once as u64) {
                if !read_batches(model, jobs, reads, &mut batches, &mut bufs, &mut open, tx, &halted, named)? {
                    return Ok(());
                }
                pending = 0;
            }
        }
    }
    batches.extend(batcher.finish());
    read_batches(model, jobs, reads, &mut batches, &mut bufs, &mut open, tx, &halted, named)?;
    Ok(())
}

/// Reads `batches`: runs of neighbouring batches of one file (ascending, at most
/// `reads.ranges` of them and `reads.max_read` bytes) are one read each, `reads.at_once`
/// reads at a time (each on a thread of its own when more than one, into buffers of `bufs`
/// kept from one call to the next); their bytes are handed on in order, and `batches` is
/// left empty. `false` when the measuring side stopped listening, or `halted` says to stop
/// (looked at before each group of reads, so a stop waits for one read at most).
#[allow(clippy::too_many_arguments)]
fn read_batches(
    model: &Model,
    jobs: &[Job],
    reads: Reads,
    batches: &mut Vec<Batch>,
    bufs: &mut Vec<Vec<u8>>,
    open: &mut Open,
    tx: &SyncSender<Result<Filled>>,
    halted: &dyn Fn() -> bool,
    named: &(dyn Fn(usize) -> String + Sync),
) -> Result<bool> {
    let at_once = reads.at_once.max(1);
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    let mut i = 0;
    while i < batches.len() {
        let (mut j, mut bytes) = (i + 1, batches[i].len());
        while j < batches.len()
            && j - i < reads.ranges
            && batches[j].file == batches[i].file
            && batches[j].start >= batches[j - 1].end
            && bytes + batches[j].len() <= reads.max_read
        {
            bytes += batches[j].len();
            j += 1;
        }
        runs.push(i..j);
        i = j;
    }
    bufs.resize_with(at_once, Vec::new);
    for group in runs.chunks(at_once) {
        if halted() {
            return Ok(false);
        }
        // Sized here, on this thread: the reading threads only fill them.
        for (run, buf) in group.iter().zip(bufs.iter_mut()) {
            let n: u64 = batches[run.clone()].iter().map(Batch::len).sum();
            buf.resize(usize::try_from(n).context("a read larger than memory")?, 0);
        }
        let read: Vec<Result<()>> = if let ([run], [buf, ..]) = (group, bufs.as_mut_slice()) {
            vec![fetch_run(model, jobs, &batches[run.clone()], buf, named)]
        } else {
            let batches = &batches[..];
            std::thread::scope(|s| {
                let reads: Vec<_> = (group.iter().zip(bufs.iter_mut()))
                    .map(|(run, buf)| s.spawn(move || fetch_run(model, jobs, &batches[run.clone()], buf, named)))
                    .collect();
                reads.into_iter().map(|h| h.join().map_err(|_| anyhow::anyhow!("a reading thread panicked"))?).collect()
            })
        };
        for ((run, got), buf) in group.iter().zip(read).zip(bufs.iter()) {
            got?;
            let mut at = 0;
            for b in &batches[run.clone()] {
                let n = b.len() as usize;
                if !read_batch(b, &buf[at..at + n], open, tx, named)? {
                    return Ok(false);
                }
                at += n;
            }
        }
    }
    batches.clear();
    Ok(true)
}

/// Reads the bytes of a run of batches of one file (ascending) into `bytes`, one after
/// another: one read ([`crate::model_file::ModelFile::read_ranges`]).
fn fetch_run(
    model: &Model,
    jobs: &[Job],
    run: &[Batch],
    bytes: &mut [u8],
    named: &(dyn Fn(usize) -> String + Sync),
) -> Result<()> {
    let first = run.first().and_then(|b| b.parts.first()).context("a read that serves no tensor")?.tensor;
    let mut parts: Vec<(u64, &mut [u8])> = Vec::with_capacity(run.len());
    let mut rest = bytes;
    for b in run {
        let (head, tail) = rest.split_at_mut(b.len() as usize);
        parts.push((b.start, head));
        rest = tail;
    }
    model.tensors[jobs[first].tensor].in_file.read_ranges(&mut parts).with_context(|| named(first))?;
    BYTES_READ.fetch_add(run.iter().map(Batch::len).sum(), Ordering::Relaxed);
    Ok(())
}

/// Copies one batch's bytes into the buffers of the jobs it serves and sends those now
/// complete. `false` when the measuring side stopped listening.
fn read_batch(
    b: &Batch,
    bytes: &[u8],
    open: &mut Open,
    tx: &SyncSender<Result<Filled>>,
    named: &(dyn Fn(usize) -> String + Sync),
) -> Result<bool> {
    for p in &b.parts {
        let (plan, buf, left) = open.get_mut(&p.tensor).context("a read for a tensor not planned")?;
        plan.fill(p.range, &bytes[b.span(p)], buf).map_err(|e| anyhow::Error::new(e).context(named(p.tensor)))?;
        *left -= 1;
        if *left == 0 {
            let (plan, buf, _) = open.remove(&p.tensor).context("a finished tensor not planned")?;
            if tx.send(Ok((p.tensor, plan, buf))).is_err() {
                return Ok(false);
            }
        }
    }
    Ok(true)
}
