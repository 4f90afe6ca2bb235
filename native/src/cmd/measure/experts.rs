//! `organ measure --experts`: each expert of every expert tensor measured as a tensor of
//! its own (§6 of `docs/z-measure.md`: `NAME#e`, σ from `NAME#e@k`), outliers and
//! duplicates flagged. The measure, the flags and the layouts are the core's
//! ([`organ_core::zmeasure::experts`]); this file reads bytes for them. The experts' rows
//! of the text and the CSV are rendered by the core's report formats.

use super::{Measured, BYTES_READ};
use crate::model::Model;
use anyhow::{Context, Result};
use organ_core::zmeasure::experts::{
    duplicates_in, expert_rows, measure_expert, DuplicateSearch, ExpertLayout, ExpertTheta,
};
use organ_core::zmeasure::Mode;
use rayon::prelude::*;
use std::path::Path;
use std::sync::atomic::Ordering;

/// Bytes of experts a streamed duplicate search holds at once (one chunk per expert still
/// in question), per tensor searched.
const DUPLICATE_BUDGET: u64 = 16 << 20;

/// Each tensor's expert layout when experts are measured (`None`: measured whole only; a
/// type without a dequantizer has no θ, so no per-expert θ either).
///
/// # Errors
/// A tensor named as an expert tensor that is not one (not [d0, d1, E], E = 0 or over the
/// limit, sizes that do not divide), named with its file.
pub(super) fn layouts(model: &Model, path: &Path) -> Result<Vec<Option<ExpertLayout>>> {
    model
        .tensors
        .iter()
        .map(|t| {
            let l = ExpertLayout::required(t).with_context(|| format!("{}: --experts", path.display()))?;
            Ok(l.filter(|_| t.ty.can_dequantize()))
        })
        .collect()
}

/// Measures every expert of the tensors `layouts` names, from the memory map, all experts
/// of all tensors in parallel; the work ends, an error, once `stopped` says so (looked at
/// before each expert).
pub(super) fn measure_mapped(
    model: &Model,
    path: &Path,
    mode: Mode,
    layouts: &[Option<ExpertLayout>],
    stopped: &(dyn Fn() -> bool + Sync),
) -> Result<Vec<Option<Vec<Measured>>>> {
    let jobs: Vec<(usize, u64)> =
        (layouts.iter().enumerate()).flat_map(|(i, l)| (0..l.map_or(0, |l| l.count)).map(move |e| (i, e))).collect();
    let measured: Vec<Measured> = jobs
        .par_iter()
        .map(|&(i, e)| {
            let (t, l) = (&model.tensors[i], layouts[i].as_ref().context("a job for a tensor without experts")?);
            if stopped() {
                anyhow::bail!("{}: stopped before tensor {:?} expert {e}", path.display(), t.name);
            }
            measure_expert(mode, &t.name, t.ty, l, e, t.bytes())
                .with_context(|| format!("{}: tensor {:?} expert {e}", path.display(), t.name))
        })
        .collect::<Result<_>>()?;
    let mut out: Vec<Option<Vec<Measured>>> = vec![None; layouts.len()];
    for (&(i, _), m) in jobs.iter().zip(measured) {
        out[i].get_or_insert_with(Vec::new).push(m);
    }
    Ok(out)
}

/// Each expert tensor's `duplicate_of` per expert: from the memory map, or (`stream`) by
/// positioned reads of only the chunks a [`DuplicateSearch`] asks for.
pub(super) fn duplicates(
    model: &Model,
    path: &Path,
    layouts: &[Option<ExpertLayout>],
    stream: bool,
) -> Result<Vec<Option<Vec<Option<u64>>>>> {
    (layouts.par_iter().enumerate())
        .map(|(i, l)| {
            let Some(l) = l else { return Ok(None) };
            let t = &model.tensors[i];
            let named = || format!("{}: tensor {:?}", path.display(), t.name);
            if !stream || t.owned.is_some() {
                return Ok(Some(duplicates_in(l, t.bytes()).with_context(named)?));
            }
            let chunk = (DUPLICATE_BUDGET / l.count.max(1)).clamp(4 << 10, 1 << 20);
            let mut search = DuplicateSearch::new(l, chunk);
            let mut bufs: Vec<Vec<u8>> = Vec::new();
            while let Some((r, experts)) = search.next() {
                let len = usize::try_from(r.end - r.start).context("a chunk larger than memory")?;
                bufs.resize_with(experts.len(), Vec::new);
                for (b, &e) in bufs.iter_mut().zip(&experts) {
                    b.resize(len, 0);
                    t.in_file.read_exact_at(b, t.offset + l.range(e).start + r.start).with_context(named)?;
                    BYTES_READ.fetch_add(len as u64, Ordering::Relaxed);
                }
                let chunks: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
                search.feed(&chunks).with_context(named)?;
            }
            Ok(Some(search.finish()))
        })
        .collect()
}

/// The report rows of a tensor's experts: their measurements, flags, and σ in `mode`
/// [`Mode::Sigma`] or [`Mode::Exact`] (0 there), as the tensor's own row has.
pub(super) fn rows(mode: Mode, measured: &[Measured], duplicate_of: &[Option<u64>]) -> Vec<ExpertTheta> {
    expert_rows(measured, duplicate_of, mode != Mode::Sampled)
}
