//! Comparing two models in the browser (Compare v1, `docs/compare.md`), by the core's
//! `compare` functions, as `organ diff` does: the core pairs the tensors; per pair, the
//! page decides `identical` on the bytes (both tensors read a chunk at a time with
//! `Blob.slice`, stopping at the first difference), then each side's sampled values come
//! from the core's `ReadPlan` (the same positions on both sides: the sampler depends only
//! on the name and the element count), read through one `Batcher` per model and decoded
//! on the worker pool, where `compare::figures` turns them into the pair's figures
//! (`compare::figures_of_same` when the bytes are identical: B is then not read at all).
//! Expert tensors are also compared expert by expert (`ExpertLayout`, sampler name
//! `NAME#e`). Memory stays bounded: two compare chunks, a few plans ahead, and at most
//! `window` pairs' sampled blocks at once; no model is ever loaded whole.

use crate::measure::{
    read_batch, worker_gone, Buffers, Progress, FIRST_READ, MAX_GAP, MAX_READ, MAX_READS_IN_FLIGHT, PROGRESS_EVERY_MS,
};
use crate::pool;
use crate::source::{read_buffer, Model};
use futures_util::future::{join, FutureExt, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};
use organ_core::compare::{self, expert_name, CompareReport, ExpertLayout, ExpertPair, Figures, PairReport, Side};
use organ_core::model::TensorEntry;
use organ_core::zmeasure::batch::{Batch, Batcher};
use organ_core::zmeasure::{ReadPlan, GENERATOR};
use std::collections::{BTreeMap, VecDeque};

/// The chunk each side is read in to compare bytes (two at once in memory).
const COMPARE_CHUNK: u64 = 4 << 20;
/// Plans worked out on the pool ahead of the reads, at most (a sparse plan of a large
/// tensor holds ~1.6 MB of indices).
const PLANS_AHEAD: usize = 16;

/// A finished comparison.
pub struct Outcome {
    pub report: CompareReport,
    /// Bytes read from both models.
    pub bytes_read: u64,
    pub threads: usize,
}

/// One set of sampled values to compare: a whole tensor pair, or one expert of it.
struct Job {
    /// The pair's index in the pairing.
    pair: usize,
    /// The expert, for an expert's job.
    expert: Option<u64>,
    /// The sampler name: the tensor's, or `NAME#e`.
    name: String,
    n: u64,
    /// Where the job's data starts in each side's tensor data.
    at: [u64; 2],
}

/// The error of a pair, naming both models and the tensor (as `organ diff`'s does).
fn pair_err(a: &Model, b: &Model, name: &str, e: impl core::fmt::Display) -> String {
    format!("{} and {}: tensor {name:?}: {e}", a.label, b.label)
}

/// Where `len` bytes at `at` in tensor `t`'s data lie in its file, checked.
fn span(m: &Model, t: &TensorEntry, at: u64, len: u64) -> Result<(u64, u64), String> {
    let start = t.offset.checked_add(at).filter(|_| at.checked_add(len).is_some_and(|e| e <= t.n_bytes));
    let start = start.ok_or_else(|| format!("{}: tensor {:?}: bytes {at}+{len} lie outside it", m.label, t.name))?;
    Ok((start, start + len))
}

/// Whether `len` bytes at `oa` in `ta`'s data and at `ob` in `tb`'s are the same: both
/// read a chunk at a time, stopping at the first difference. `on_read` gets the bytes of
/// each chunk read (both sides).
#[allow(clippy::too_many_arguments)]
async fn same_bytes(
    (a, ta, oa): (&Model, &TensorEntry, u64),
    (b, tb, ob): (&Model, &TensorEntry, u64),
    len: u64,
    bufs: &mut (Vec<u8>, Vec<u8>),
    cancelled: &dyn Fn() -> bool,
    on_read: &mut dyn FnMut(u64),
) -> Result<bool, String> {
    let (fa, fb) = (&a.files[ta.file], &b.files[tb.file]);
    let mut done = 0u64;
    while done < len {
        if cancelled() {
            return Err("cancelled".into());
        }
        let n = (len - done).min(COMPARE_CHUNK);
        let (sa, ea) = span(a, ta, oa + done, n)?;
        let (sb, eb) = span(b, tb, ob + done, n)?;
        let (x, y) = join(read_buffer(fa, sa, ea), read_buffer(fb, sb, eb)).await;
        let (x, y) = (x?, y?);
        let k = n as usize;
        for (buf, js) in [(&mut bufs.0, &x), (&mut bufs.1, &y)] {
            if buf.len() < k {
                buf.resize(k, 0);
            }
            js_sys::Uint8Array::new(js).copy_to(&mut buf[..k]);
        }
        on_read(2 * n);
        if bufs.0[..k] != bufs.1[..k] {
            return Ok(false);
        }
        done += n;
    }
    Ok(true)
}

/// A side of a job whose reads are under way. `slot` = 2 × job + side.
struct Open {
    slot: usize,
    plan: ReadPlan,
    buf: Vec<u8>,
    len: usize,
    left: usize,
}

/// A side of a job whose bytes have all landed.
struct Landed {
    plan: ReadPlan,
    buf: Vec<u8>,
    len: usize,
}

type Done = (usize, Result<Figures, String>, Vec<Vec<u8>>);
type ReadResult = (usize, Result<(Batch, js_sys::ArrayBuffer), String>);

/// The read scheduler of a comparison: like the measure's, with two models, so one
/// `Batcher` per side; a job goes to the pool when both its sides have landed (or only A,
/// when B's bytes are A's).
struct Scheduler<'m> {
    sides: [&'m Model; 2],
    on_progress: &'m dyn Fn(Progress),
    reads: FuturesUnordered<LocalBoxFuture<'static, ReadResult>>,
    batchers: [Batcher; 2],
    open: VecDeque<Open>,
    /// Jobs with a side landed: A's, B's (`None` for B when A's values serve both).
    landed: BTreeMap<usize, [Option<Landed>; 2]>,
    /// Per job: whether B is read (false: B's bytes are A's).
    reads_b: Vec<bool>,
    computing: FuturesUnordered<futures_channel::oneshot::Receiver<Done>>,
    window: usize,
    buffers: Buffers,
    staging: Vec<u8>,
    figures: Vec<Option<Figures>>,
    /// Per pair, jobs not finished yet.
    pair_left: Vec<u32>,
    pair_of_job: Vec<usize>,
    names: Vec<String>,
    progress: Progress,
    t0: f64,
    shown: f64,
}

impl<'m> Scheduler<'m> {
    fn add_side(&mut self, job: usize, side: usize, plan: ReadPlan, t: &TensorEntry, at: u64, full: &mut Vec<Batch>) {
        self.progress.bytes_total += plan.bytes_to_read();
        let slot = 2 * job + side;
        self.batchers[side].push_plan(slot, &plan, t.file, t.offset.saturating_add(at), full);
        let len = plan.buffer_len();
        let buf = self.buffers.take(len);
        self.open.push_back(Open { slot, left: plan.ranges.len(), plan, buf, len });
    }

    /// Schedules job `job`'s reads: A's plan at `at[0]` in `ta`'s data, and B's (when
    /// given) at `at[1]` in `tb`'s; then, while the pool holds more than `window` jobs,
    /// waits for them.
    #[allow(clippy::too_many_arguments)]
    async fn add(
        &mut self,
        job: usize,
        ta: &TensorEntry,
        tb: &TensorEntry,
        at: [u64; 2],
        plan_a: ReadPlan,
        plan_b: Option<ReadPlan>,
    ) -> Result<(), String> {
        let (mut full_a, mut full_b) = (Vec::new(), Vec::new());
        self.reads_b[job] = plan_b.is_some();
        self.add_side(job, 0, plan_a, ta, at[0], &mut full_a);
        if let Some(p) = plan_b {
            self.add_side(job, 1, p, tb, at[1], &mut full_b);
        }
        self.dispatch();
        for b in full_a {
            self.issue(0, b).await?;
        }
        for b in full_b {
            self.issue(1, b).await?;
        }
        while self.computing.len() > self.window {
            self.finish_next().await?;
        }
        Ok(())
    }

    async fn issue(&mut self, side: usize, batch: Batch) -> Result<(), String> {
        while self.reads.len() >= MAX_READS_IN_FLIGHT {
            if let Some(r) = self.reads.next().await {
                self.land(r)?;
            }
        }
        let file = self.sides[side].files[batch.file].clone();
        self.reads.push(read_batch(file, batch).map(move |r| (side, r)).boxed_local());
        Ok(())
    }

    fn job_err(&self, slot: usize, e: impl core::fmt::Display) -> String {
        let [a, b] = self.sides;
        pair_err(a, b, &self.names[slot / 2], e)
    }

    fn land(&mut self, (_, r): ReadResult) -> Result<(), String> {
        let (batch, bytes) = r?;
        for p in &batch.parts {
            let k = self.open.iter().position(|o| o.slot == p.tensor).ok_or("a read landed for no tensor")?;
            let span = batch.span(p);
            let part =
                js_sys::Uint8Array::new_with_byte_offset_and_length(&bytes, span.start as u32, span.len() as u32);
            let o = &mut self.open[k];
            match o.plan.dense_target(p.range) {
                Some(t) if t.len() == part.length() as usize && t.end <= o.len => part.copy_to(&mut o.buf[t]),
                _ => {
                    let n = part.length() as usize;
                    if self.staging.len() < n {
                        self.staging.resize(n, 0);
                    }
                    part.copy_to(&mut self.staging[..n]);
                    if let Err(e) = o.plan.fill(p.range, &self.staging[..n], &mut o.buf[..o.len]) {
                        let slot = o.slot;
                        return Err(self.job_err(slot, e));
                    }
                }
            }
            o.left -= 1;
        }
        self.progress.bytes_read += u64::from(bytes.byte_length());
        self.dispatch();
        Ok(())
    }

    /// Moves sides whose reads have all landed to `landed`, and sends every job whose
    /// sides are all there to the pool.
    fn dispatch(&mut self) {
        let mut k = 0;
        while k < self.open.len() {
            if self.open[k].left > 0 {
                k += 1;
                continue;
            }
            let Some(Open { slot, plan, buf, len, .. }) = self.open.remove(k) else { break };
            let (job, side) = (slot / 2, slot % 2);
            let sides = self.landed.entry(job).or_insert([None, None]);
            sides[side] = Some(Landed { plan, buf, len });
            if sides[0].is_some() && (sides[1].is_some() || !self.reads_b[job]) {
                let Some([Some(a), b]) = self.landed.remove(&job) else { continue };
                self.computing.push(pool::spawn(move || {
                    let va = a.plan.values(&a.buf[..a.len]);
                    // B's bytes are A's: the core's figures of a pair holding the same
                    // values, as organ diff's (θ measured once).
                    let f = match &b {
                        Some(b) => {
                            va.and_then(|va| b.plan.values(&b.buf[..b.len]).and_then(|vb| compare::figures(va, vb)))
                        }
                        None => va.map(compare::figures_of_same),
                    };
                    let mut bufs = vec![a.buf];
                    bufs.extend(b.map(|b| b.buf));
                    (job, f.map_err(|e| e.to_string()), bufs)
                }));
            }
        }
    }

    async fn finish_next(&mut self) -> Result<bool, String> {
        let Some(d) = self.computing.next().await else { return Ok(false) };
        let (job, r, bufs) = d.map_err(worker_gone)?;
        for b in bufs {
            self.buffers.give(b);
        }
        self.figures[job] = Some(r.map_err(|e| self.job_err(2 * job, e))?);
        let pair = self.pair_of_job[job];
        self.pair_left[pair] -= 1;
        if self.pair_left[pair] == 0 {
            self.tick();
        }
        Ok(true)
    }

    /// Counts bytes read to tell identical bytes; shows the progress if it was not shown
    /// for a while (a large tensor's comparison takes a while).
    fn read_more(&mut self, n: u64) {
        self.progress.bytes_read += n;
        self.show();
    }

    /// Counts one more pair done; shows the progress if it was not shown for a while.
    fn tick(&mut self) {
        self.progress.done += 1;
        self.show();
    }

    /// Shows the progress, at most every [`PROGRESS_EVERY_MS`].
    fn show(&mut self) {
        let now = pool::now_ms();
        self.progress.elapsed_ms = now - self.t0;
        if now - self.shown >= PROGRESS_EVERY_MS {
            self.shown = now;
            (self.on_progress)(self.progress);
        }
    }

    async fn finish(mut self) -> Result<(Vec<Option<Figures>>, u64), String> {
        for side in 0..2 {
            if let Some(last) = self.batchers[side].finish() {
                self.issue(side, last).await?;
            }
        }
        while let Some(r) = self.reads.next().await {
            self.land(r)?;
        }
        while self.finish_next().await? {}
        (self.on_progress)(self.progress);
        Ok((self.figures, self.progress.bytes_read))
    }
}

/// Compares A (the base) and B. `cancelled` stops it between reads; `on_progress` is
/// called at most every [`PROGRESS_EVERY_MS`] as pairs finish, and once at the end
/// (`total`, `done`: comparable pairs).
pub async fn compare(
    a: &Model,
    b: &Model,
    cancelled: &dyn Fn() -> bool,
    on_progress: &dyn Fn(Progress),
) -> Result<Outcome, String> {
    let t0 = pool::now_ms();
    let threads = pool::start().await?;
    let pairing = compare::pair(&a.model, &b.model);
    // The expert layouts, and every job (a measurable pair, then each of its experts).
    let mut layouts = Vec::with_capacity(pairing.pairs.len());
    let mut jobs: Vec<Job> = Vec::new();
    let mut pair_left = vec![0u32; pairing.pairs.len()];
    for (k, &(i, j)) in pairing.pairs.iter().enumerate() {
        let (ta, tb) = (&a.tensors[i], &b.tensors[j]);
        let err = |e| pair_err(a, b, &ta.name, e);
        let l = match (ExpertLayout::of(ta).map_err(err)?, ExpertLayout::of(tb).map_err(err)?) {
            (Some(x), Some(y)) => Some((x, y)),
            _ => None,
        };
        if ta.ty.can_dequantize() && tb.ty.can_dequantize() {
            jobs.push(Job { pair: k, expert: None, name: ta.name.clone(), n: ta.n_elements, at: [0, 0] });
            if let Some((x, y)) = &l {
                for e in 0..x.count {
                    let at = [x.range(e).start, y.range(e).start];
                    jobs.push(Job { pair: k, expert: Some(e), name: expert_name(&ta.name, e), n: x.elements, at });
                }
            }
        }
        layouts.push(l);
    }
    for job in &jobs {
        pair_left[job.pair] += 1;
    }
    let types = |job: &Job| {
        let (i, j) = pairing.pairs[job.pair];
        (a.tensors[i].ty, b.tensors[j].ty)
    };
    // Plans are worked out on the pool, a few jobs ahead of the reads: A's, and B's when
    // its type differs (else A's plan serves B too: same name, count and type).
    let spawn_plans = |job: &Job| {
        let (ta, tb) = types(job);
        let plan = |ty| {
            let name = job.name.clone();
            let n = job.n;
            pool::spawn(move || ReadPlan::new(&name, ty, n, MAX_GAP, MAX_READ))
        };
        (plan(ta), (ta != tb).then(|| plan(tb)))
    };
    let mut ahead: VecDeque<_> = jobs.iter().take(PLANS_AHEAD).map(spawn_plans).collect();
    let mut s = Scheduler {
        sides: [a, b],
        on_progress,
        reads: FuturesUnordered::new(),
        batchers: [Batcher::new(MAX_GAP, FIRST_READ, MAX_READ), Batcher::new(MAX_GAP, FIRST_READ, MAX_READ)],
        open: VecDeque::new(),
        landed: BTreeMap::new(),
        reads_b: vec![false; jobs.len()],
        computing: FuturesUnordered::new(),
        window: 2 * threads.max(1),
        buffers: Buffers::default(),
        staging: Vec::new(),
        figures: vec![None; jobs.len()],
        pair_left: pair_left.clone(),
        pair_of_job: jobs.iter().map(|j| j.pair).collect(),
        names: jobs.iter().map(|j| a.tensors[pairing.pairs[j.pair].0].name.clone()).collect(),
        progress: Progress { total: pairing.pairs.len(), ..Progress::default() },
        t0,
        shown: f64::NEG_INFINITY,
    };
    // Per pair: identical, and per expert identical (empty when the types differ: none is).
    let mut identical = vec![false; pairing.pairs.len()];
    let mut expert_same: Vec<Vec<bool>> = vec![Vec::new(); pairing.pairs.len()];
    let mut bufs = (Vec::new(), Vec::new());
    let mut next_job = 0usize;
    for (k, &(i, j)) in pairing.pairs.iter().enumerate() {
        if cancelled() {
            return Err("cancelled".into());
        }
        let (ta, tb) = (&a.tensors[i], &b.tensors[j]);
        let err = |e: String| if e == "cancelled" { e } else { pair_err(a, b, &ta.name, e) };
        // Identical: same type and the same bytes. An expert tensor is compared expert by
        // expert (each stopping at its first difference); it is identical when all are.
        if ta.ty == tb.ty && ta.n_bytes == tb.n_bytes {
            s.progress.bytes_total += 2 * ta.n_bytes;
            match &layouts[k] {
                Some((la, lb)) => {
                    for e in 0..la.count {
                        let (ra, rb) = (la.range(e), lb.range(e));
                        let same = same_bytes(
                            (a, ta, ra.start),
                            (b, tb, rb.start),
                            la.bytes,
                            &mut bufs,
                            cancelled,
                            &mut |n| s.read_more(n),
                        )
                        .await
                        .map_err(err)?;
                        expert_same[k].push(same);
                    }
                    identical[k] = expert_same[k].iter().all(|&x| x);
                }
                None => {
                    identical[k] =
                        same_bytes((a, ta, 0), (b, tb, 0), ta.n_bytes, &mut bufs, cancelled, &mut |n| s.read_more(n))
                            .await
                            .map_err(err)?;
                }
            }
        }
        if pair_left[k] == 0 {
            s.tick();
        }
        // This pair's jobs: the whole tensor, then each expert.
        while next_job < jobs.len() && jobs[next_job].pair == k {
            let job = &jobs[next_job];
            let (rx_a, rx_b) = ahead.pop_front().ok_or("a plan went missing")?;
            if let Some(next) = jobs.get(next_job + PLANS_AHEAD) {
                ahead.push_back(spawn_plans(next));
            }
            let plan_a = rx_a.await.map_err(worker_gone)?.map_err(|e| pair_err(a, b, &job.name, e))?;
            let plan_b = match rx_b {
                Some(rx) => Some(rx.await.map_err(worker_gone)?.map_err(|e| pair_err(a, b, &job.name, e))?),
                None => None,
            };
            // B's bytes are A's: A's values serve both.
            let same = match job.expert {
                None => identical[k],
                Some(e) => expert_same[k].get(e as usize).copied().unwrap_or(false),
            };
            let plan_b = if same {
                None
            } else {
                Some(match plan_b {
                    Some(p) => p,
                    None => plan_a.clone(),
                })
            };
            s.add(next_job, ta, tb, job.at, plan_a, plan_b).await?;
            next_job += 1;
        }
    }
    let (figures, bytes_read) = s.finish().await?;
    // The rows, from what was found, by the core's constructors.
    // Per pair: the tensor's figures and each expert's (none when not measurable).
    let mut found: Vec<(Option<Figures>, Vec<Option<Figures>>)> = vec![(None, Vec::new()); pairing.pairs.len()];
    for (job, f) in jobs.iter().zip(figures) {
        match job.expert {
            None => found[job.pair].0 = f,
            Some(_) => found[job.pair].1.push(f),
        }
    }
    let mut rows = Vec::with_capacity(pairing.pairs.len());
    for (k, &(i, j)) in pairing.pairs.iter().enumerate() {
        let (ta, tb) = (&a.tensors[i], &b.tensors[j]);
        let (f, ef) = &found[k];
        let experts = layouts[k].as_ref().map(|(la, _)| {
            (0..la.count)
                .map(|e| {
                    let same = expert_same[k].get(e as usize).copied().unwrap_or(false);
                    ExpertPair::new(e, same, ef.get(e as usize).copied().flatten().as_ref())
                })
                .collect::<Vec<_>>()
        });
        rows.push(PairReport::new(ta, tb, identical[k], f.as_ref(), experts));
    }
    let generator = format!("{GENERATOR} (browser)");
    let report = CompareReport::new(
        &generator,
        Side::of(&a.label, &a.model, a.file_bytes),
        Side::of(&b.label, &b.model, b.file_bytes),
        pairing,
        rows,
    );
    Ok(Outcome { report, bytes_read, threads })
}
