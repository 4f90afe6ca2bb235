//! Comparing two models in the browser (Compare v1, `docs/compare.md`), by the core's
//! `compare` functions, as `organ diff` does: the core pairs the tensors; per pair, the
//! page decides `identical` on the bytes (both tensors read a chunk at a time, the read
//! scheduler's streamed jobs, stopping at the first difference), then each side's sampled values come
//! from the core's `ReadPlan` (the same positions on both sides: the sampler depends only
//! on the name and the element count), read through one `Batcher` per model and decoded
//! on the worker pool, where `compare::figures` turns them into the pair's figures
//! (`compare::figures_of_same` when the bytes are identical: B is then not read at all).
//! Expert tensors are also compared expert by expert (`ExpertLayout`, sampler name
//! `NAME#e`). Memory stays bounded: two compare chunks, a few plans ahead, and at most
//! `window` pairs' sampled blocks at once; no model is ever loaded whole.

use crate::error::Error;
use crate::pool;
use crate::reads::{worker_gone, Chunks, Jobs, Meter, Progress, Read, Reads, Slot, MAX_GAP, MAX_READ};
use crate::source::Model;
use futures_util::future::join;
use organ_core::compare::{self, expert_name, CompareReport, ExpertLayout, ExpertPair, Figures, PairReport, Side};
use organ_core::model::TensorEntry;
use organ_core::zmeasure::{ReadPlan, GENERATOR};
use std::collections::VecDeque;

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

/// Where a pair's error is: both models and the tensor (as `organ diff`'s says).
fn pair_place(a: &Model, b: &Model, name: &str) -> String {
    format!("{} and {}: tensor {name:?}", a.label, b.label)
}

/// The core's refusal `e` of a pair's tensor.
fn pair_err(a: &Model, b: &Model, name: &str, e: impl core::fmt::Display) -> Error {
    Error::refused(e).at(pair_place(a, b, name))
}

/// Where `len` bytes at `at` in tensor `t`'s data lie in its file, checked.
fn span(m: &Model, t: &TensorEntry, at: u64, len: u64) -> Result<(u64, u64), Error> {
    let start = t.offset.checked_add(at).filter(|_| at.checked_add(len).is_some_and(|e| e <= t.n_bytes));
    let start = start
        .ok_or_else(|| Error::Refused(format!("{}: tensor {:?}: bytes {at}+{len} lie outside it", m.label, t.name)))?;
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
) -> Result<bool, Error> {
    let (fa, fb) = (&a.files[ta.file], &b.files[tb.file]);
    let (sa, _) = span(a, ta, oa, len)?;
    let (sb, _) = span(b, tb, ob, len)?;
    let mut ca = Chunks::new(fa, sa, len, COMPARE_CHUNK)?;
    let mut cb = Chunks::new(fb, sb, len, COMPARE_CHUNK)?;
    loop {
        if cancelled() {
            return Err(Error::Cancelled);
        }
        let (x, y) = match join(ca.next(), cb.next()).await {
            (Some(x), Some(y)) => (x?.1, y?.1),
            _ => break,
        };
        let k = x.byte_length() as usize;
        for (buf, js) in [(&mut bufs.0, &x), (&mut bufs.1, &y)] {
            if buf.len() < k {
                buf.resize(k, 0);
            }
            js_sys::Uint8Array::new(js).copy_to(&mut buf[..k]);
        }
        on_read(2 * k as u64);
        if bufs.0[..k] != bufs.1[..k] {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The comparison's jobs, for the read scheduler: a job is A's slot, and B's unless B's
/// bytes are A's; its figures are kept per job, and a pair is a step of the progress
/// when its last job is done.
struct Comparing<'m> {
    sides: [&'m Model; 2],
    figures: Vec<Option<Figures>>,
    /// Per pair, jobs not finished yet.
    pair_left: Vec<u32>,
    pair_of_job: Vec<usize>,
    names: Vec<String>,
}

impl Jobs for Comparing<'_> {
    type In = ();
    type Out = Figures;

    fn input(&self, _: usize) {}

    fn run((): (), slots: &[Slot]) -> Result<Figures, Error> {
        let a = slots.first().ok_or(Error::Internal("a job without its bytes"))?;
        let va = a.plan.values(a.bytes());
        // B's bytes are A's: the core's figures of a pair holding the same values, as
        // organ diff's (θ measured once).
        let f = match slots.get(1) {
            Some(b) => va.and_then(|va| b.plan.values(b.bytes()).and_then(|vb| compare::figures(va, vb))),
            None => va.map(compare::figures_of_same),
        };
        f.map_err(Error::refused)
    }

    fn done(&mut self, job: usize, f: Figures) -> bool {
        self.figures[job] = Some(f);
        let pair = self.pair_of_job[job];
        self.pair_left[pair] -= 1;
        self.pair_left[pair] == 0
    }

    fn err(&self, job: usize, e: Error) -> Error {
        let [a, b] = self.sides;
        e.at(pair_place(a, b, &self.names[job]))
    }
}

/// Compares A (the base) and B. `cancelled` stops it between reads; `on_progress` is
/// called at most every [`PROGRESS_EVERY_MS`](crate::reads::PROGRESS_EVERY_MS) as
/// pairs finish, and once at the end (`total`, `done`: comparable pairs).
pub async fn compare(
    a: &Model,
    b: &Model,
    cancelled: &dyn Fn() -> bool,
    on_progress: &dyn Fn(Progress),
) -> Result<Outcome, Error> {
    let t0 = pool::now_ms();
    let threads = pool::start().await?;
    let plan = compare::plan(&a.model, &b.model);
    let pairing = &plan.pairing;
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
    let comparing = Comparing {
        sides: [a, b],
        figures: vec![None; jobs.len()],
        pair_left: pair_left.clone(),
        pair_of_job: jobs.iter().map(|j| j.pair).collect(),
        names: jobs.iter().map(|j| a.tensors[pairing.pairs[j.pair].0].name.clone()).collect(),
    };
    let meter = Meter::new(pairing.pairs.len(), t0, on_progress);
    let mut s = Reads::new(vec![a, b], 2 * threads.max(1), comparing, meter);
    // Per pair: identical, and per expert identical (empty when the types differ: none is).
    let mut identical = vec![false; pairing.pairs.len()];
    let mut expert_same: Vec<Vec<bool>> = vec![Vec::new(); pairing.pairs.len()];
    let mut bufs = (Vec::new(), Vec::new());
    let mut next_job = 0usize;
    for (k, &(i, j)) in pairing.pairs.iter().enumerate() {
        if cancelled() {
            return Err(Error::Cancelled);
        }
        let (ta, tb) = (&a.tensors[i], &b.tensors[j]);
        let err = |e: Error| e.at(pair_place(a, b, &ta.name));
        // Identical: same type and the same bytes. An expert tensor is compared expert by
        // expert (each stopping at its first difference); it is identical when all are.
        if ta.ty == tb.ty && ta.n_bytes == tb.n_bytes {
            s.meter.progress.bytes_total += 2 * ta.n_bytes;
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
                            &mut |n| s.meter.read_more(n),
                        )
                        .await
                        .map_err(err)?;
                        expert_same[k].push(same);
                    }
                    identical[k] = expert_same[k].iter().all(|&x| x);
                }
                None => {
                    identical[k] = same_bytes((a, ta, 0), (b, tb, 0), ta.n_bytes, &mut bufs, cancelled, &mut |n| {
                        s.meter.read_more(n)
                    })
                    .await
                    .map_err(err)?;
                }
            }
        }
        if pair_left[k] == 0 {
            s.meter.tick();
        }
        // This pair's jobs: the whole tensor, then each expert.
        while next_job < jobs.len() && jobs[next_job].pair == k {
            let job = &jobs[next_job];
            let (rx_a, rx_b) = ahead.pop_front().ok_or(Error::Internal("a plan went missing"))?;
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
            let mut slots =
                vec![Read { model: 0, file: ta.file, offset: ta.offset.saturating_add(job.at[0]), plan: plan_a }];
            if let Some(plan) = plan_b {
                slots.push(Read { model: 1, file: tb.file, offset: tb.offset.saturating_add(job.at[1]), plan });
            }
            s.add(next_job, slots).await?;
            next_job += 1;
        }
    }
    let (Comparing { figures, .. }, bytes_read) = s.finish().await?;
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
        plan,
        rows,
    );
    Ok(Outcome { report, bytes_read, threads })
}
