//! `organ diff A B`: Compare v1 (`docs/compare.md`), tensor by tensor, of a base A and
//! another model B, each a GGUF, a split GGUF or an organ directory. The logic is the
//! core's ([`organ_core::compare`]); this file only reads bytes: through the memory maps
//! for ordinary models, and by positioned reads of bounded size for huge ones (`--stream`,
//! automatic over 2 GiB), so memory stays bounded whatever the size.

use crate::model::{Model, Tensor};
use anyhow::{Context, Result};
use organ_core::compare::{
    self, expert_name, figures, figures_of_same, CompareReport, ExpertLayout, ExpertPair, Figures, PairReport, Side,
};
use organ_core::report::formats::{AnyReport, Shown};
use organ_core::zmeasure::{ReadPlan, GENERATOR};
use rayon::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Options {
    pub a: PathBuf,
    pub b: PathBuf,
    /// The report files asked for (`--json`, `--csv`, `--html`).
    pub files: super::outputs::Files,
    /// Most changed tensors to print.
    pub top: usize,
    /// Per-tensor outputs (CSV rows, the JSON's `pairs`) list changed pairs only.
    pub only_changed: bool,
    /// Positioned reads only, never mapping tensor data.
    pub stream: bool,
    pub force: bool,
}

/// Bytes compared to decide `identical` (both sides), for `--stats`.
pub static BYTES_COMPARED: AtomicU64 = AtomicU64::new(0);
/// Bytes read by positioned reads (streaming: the comparison's and the samples'), for `--stats`.
pub static BYTES_READ: AtomicU64 = AtomicU64::new(0);

/// The chunk both sides are read in to compare their bytes, when streaming.
const COMPARE_CHUNK: usize = 1 << 20;
/// Sampled blocks closer than this share a read when streaming: a page is read anyway.
const MAX_GAP: u64 = 4096;
/// The longest single read of sampled blocks.
const MAX_READ: u64 = 1 << 20;

/// Compares A and B and returns the report (no output written).
pub fn compare_models(a_path: &Path, b_path: &Path, stream: bool) -> Result<CompareReport> {
    let a = Model::open_fetched(a_path)?;
    let b = Model::open_fetched(b_path)?;
    let (a_bytes, b_bytes) = (file_bytes(&a), file_bytes(&b));
    // Both are fetched whole (Model::open_fetched): in memory.
    let stream = crate::byte_source::stream(stream, true, a_bytes.max(b_bytes));
    if stream {
        for f in a.tensors.iter().chain(&b.tensors).filter_map(|t| t.in_file.file()) {
            let _ = rustix::fs::fadvise(f, 0, None, rustix::fs::Advice::Random);
        }
    }
    let plan = compare::plan(&a.model, &b.model);
    let pairing = &plan.pairing;
    let progress = crate::progress::tensor_bar();
    crate::progress::grow(&progress, pairing.pairs.len() as u64);
    let rows: Vec<Result<PairReport>> = pairing
        .pairs
        .par_iter()
        .map(|&(i, j)| {
            let (x, y) = (&a.tensors[i], &b.tensors[j]);
            let r = if stream { compare_streamed(x, y) } else { compare_mapped(x, y) };
            crate::progress::tensor_done(&progress);
            r.with_context(|| format!("{} and {}: tensor {:?}", a_path.display(), b_path.display(), x.name))
        })
        .collect();
    progress.finish_and_clear();
    let rows = rows.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(CompareReport::new(
        GENERATOR,
        Side::of(&a.label, &a.model, a_bytes),
        Side::of(&b.label, &b.model, b_bytes),
        plan,
        rows,
    ))
}

/// The size of a model's files (each file once).
fn file_bytes(m: &Model) -> u64 {
    let mut files: Vec<&crate::model_file::ModelFile> = m.tensors.iter().map(|t| &*t.in_file).collect();
    files.sort_by(|x, y| x.path.cmp(&y.path));
    files.dedup_by(|x, y| x.path == y.path);
    files.iter().map(|f| f.bytes().len() as u64).sum()
}

/// A pair whose bytes are in the memory maps: the core does it all.
fn compare_mapped(x: &Tensor, y: &Tensor) -> Result<PairReport> {
    if x.ty == y.ty {
        BYTES_COMPARED.fetch_add(2 * x.n_bytes, Ordering::Relaxed);
    }
    Ok(compare::compare_slices(x, x.bytes(), y, y.bytes())?)
}

/// A pair read by positioned reads: the bytes compared a chunk at a time (stopping at the
/// first difference), the samples read block by block.
fn compare_streamed(x: &Tensor, y: &Tensor) -> Result<PairReport> {
    let same_type = x.ty == y.ty;
    let measurable = x.ty.can_dequantize() && y.ty.can_dequantize();
    let fig = |name: &str, n: u64, ox: u64, oy: u64, same: bool| -> Result<Option<Figures>> {
        if !measurable {
            return Ok(None);
        }
        if same {
            return Ok(Some(figures_of_same(sampled(x, ox, name, n)?)));
        }
        Ok(Some(figures(sampled(x, ox, name, n)?, sampled(y, oy, name, n)?)?))
    };
    let experts = match (ExpertLayout::of(x)?, ExpertLayout::of(y)?) {
        (Some(lx), Some(ly)) => Some(
            (0..lx.count)
                .map(|e| {
                    let (rx, ry) = (lx.range(e), ly.range(e));
                    let same = same_type && same_bytes(x, rx.start, y, ry.start, lx.bytes)?;
                    let f = fig(&expert_name(&x.name, e), lx.elements, rx.start, ry.start, same)?;
                    Ok(ExpertPair::new(e, same, f.as_ref()))
                })
                .collect::<Result<Vec<_>>>()?,
        ),
        _ => None,
    };
    // The experts cover the whole tensor: when they were compared, the tensor's bytes need
    // no second comparison.
    let identical = same_type
        && match &experts {
            Some(rows) => rows.iter().all(|e| e.identical),
            None => same_bytes(x, 0, y, 0, x.n_bytes)?,
        };
    let f = fig(&x.name, x.n_elements, 0, 0, identical)?;
    Ok(PairReport::new(x, y, identical, f.as_ref(), experts))
}

/// Whether `len` bytes at `ox` in `x`'s data and at `oy` in `y`'s are the same: read a
/// chunk at a time from both, stopping at the first difference.
fn same_bytes(x: &Tensor, ox: u64, y: &Tensor, oy: u64, len: u64) -> Result<bool> {
    let (mut bx, mut by) = (vec![0u8; COMPARE_CHUNK], vec![0u8; COMPARE_CHUNK]);
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(COMPARE_CHUNK as u64) as usize;
        read(x, ox + done, &mut bx[..n])?;
        read(y, oy + done, &mut by[..n])?;
        BYTES_COMPARED.fetch_add(2 * n as u64, Ordering::Relaxed);
        if bx[..n] != by[..n] {
            return Ok(false);
        }
        done += n as u64;
    }
    Ok(true)
}

/// Reads `buf.len()` bytes at `at` in tensor `t`'s data.
fn read(t: &Tensor, at: u64, buf: &mut [u8]) -> Result<()> {
    if let Some(owned) = &t.owned {
        let s = usize::try_from(at).ok().and_then(|a| owned.get(a..a.checked_add(buf.len())?));
        buf.copy_from_slice(s.context("a read past the end of a tensor")?);
        return Ok(());
    }
    t.in_file.read_exact_at(buf, t.offset + at)?;
    BYTES_READ.fetch_add(buf.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// The sampled values (Z-measure v1 §1, as `sample_values` draws them) of the `n`
/// elements at byte `at` of `t`'s data, sampled under `name`, read range by range.
fn sampled(t: &Tensor, at: u64, name: &str, n: u64) -> Result<Vec<f32>> {
    let plan = ReadPlan::new(name, t.ty, n, MAX_GAP, MAX_READ)?;
    let mut buf = plan.buffer();
    let mut bytes = Vec::new();
    for (k, r) in plan.ranges.iter().enumerate() {
        bytes.resize(usize::try_from(r.len).context("a read larger than memory")?, 0);
        read(t, at + r.offset, &mut bytes)?;
        plan.fill(k, &bytes, &mut buf)?;
    }
    Ok(plan.values(&buf)?)
}

pub fn run(opts: &Options, out: &mut dyn Write) -> Result<bool> {
    let mut report = compare_models(&opts.a, &opts.b, opts.stream)?;
    let changed = report.any_change();
    let shown = Shown { top: opts.top, ..Shown::WHOLE };
    super::outputs::print(AnyReport::Compare(&report), &shown, out)?;
    if opts.only_changed {
        report.pairs.retain(|p| !p.identical);
    }
    super::outputs::write_all(AnyReport::Compare(&report), &opts.files, &shown, opts.force)?;
    Ok(changed)
}
