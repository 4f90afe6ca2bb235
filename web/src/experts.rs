//! Experts in the browser (§6 of the Z-measure), on for every model with expert tensors:
//! each expert of an `_exps` tensor is measured as a tensor of its own, through the read
//! scheduler (`crate::reads`) with the measure's other jobs (jobs with `expert: Some(e)`
//! from the core's `zmeasure::jobs`, as `organ measure --experts --stream` has them); here
//! are the layouts, the duplicate search fed by reads of only the bytes it asks for, and
//! the report rows, all the core's. The duplicate search is a streamed job of the read
//! scheduler ([`Chunks`], [`read_ranges`]): what it asks for next depends on what it was
//! fed, so its reads cannot join the planned ones.

use crate::error::Error;
use crate::reads::{read_ranges, Chunks};
use crate::source::Model;
use organ_core::zmeasure::experts::{duplicates_in, expert_rows, DuplicateSearch, ExpertLayout, ExpertTheta};
use organ_core::zmeasure::jobs::Measured;
use organ_core::zmeasure::Mode;

/// An expert tensor no larger than this is read whole for its duplicate search (one read);
/// a larger one a chunk per expert at a time, as the search asks.
const READ_WHOLE: u64 = 16 << 20;
/// Bytes of experts a duplicate search holds at once, as `organ measure --stream`'s.
const DUPLICATE_BUDGET: u64 = 16 << 20;

/// Each tensor's expert layout (`None`: measured whole only), as `organ measure --experts`
/// takes it: a tensor named as an expert tensor that is not one is an error naming it; a
/// type without a dequantizer has no θ, so no per-expert θ either.
pub fn layouts(model: &Model) -> Result<Vec<Option<ExpertLayout>>, Error> {
    (model.tensors.iter())
        .map(|t| {
            let l = ExpertLayout::required(t).map_err(|e| Error::Refused(format!("{}: {e}", model.label)))?;
            Ok(l.filter(|_| t.ty.can_dequantize()))
        })
        .collect()
}

/// Tensor `i`'s experts' `duplicate_of`, from reads of its file: the whole tensor when
/// small, else only the chunks a [`DuplicateSearch`] asks for.
async fn duplicates_of(model: &Model, i: usize, l: &ExpertLayout) -> Result<Vec<Option<u64>>, Error> {
    let t = &model.tensors[i];
    let file = model
        .files
        .get(t.file)
        .ok_or_else(|| Error::Refused(format!("{}: tensor {:?}: no file", model.label, t.name)))?;
    let named = |e: organ_core::Error| Error::refused(e).at(format_args!("{}: tensor {:?}", model.label, t.name));
    if t.n_bytes <= READ_WHOLE {
        let mut whole = Chunks::new(file, t.offset, t.n_bytes, READ_WHOLE)
            .map_err(|e| Error::Refused(format!("tensor {:?}: {e}", t.name)))?;
        let bytes = match whole.next().await {
            Some(c) => js_sys::Uint8Array::new(&c?.1).to_vec(),
            None => Vec::new(),
        };
        return duplicates_in(l, &bytes).map_err(named);
    }
    let chunk = (DUPLICATE_BUDGET / l.count.max(1)).clamp(4 << 10, 1 << 20);
    let mut search = DuplicateSearch::new(l, chunk);
    while let Some((r, experts)) = search.next() {
        let ranges: Vec<(u64, u64)> = (experts.iter())
            .map(|&e| {
                let start = t.offset + l.range(e).start + r.start;
                (start, start + (r.end - r.start))
            })
            .collect();
        let chunks = read_ranges(file, &ranges).await?;
        let chunks: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        search.feed(&chunks).map_err(named)?;
    }
    Ok(search.finish())
}

/// The report rows of every expert tensor: each expert's θ (σ in `mode` [`Mode::Sigma`],
/// 0 in [`Mode::Exact`]) from `measured`, outliers, and duplicates found by reads.
/// `cancelled` stops it between tensors.
pub async fn rows(
    model: &Model,
    mode: Mode,
    layouts: &[Option<ExpertLayout>],
    measured: &[Option<Vec<Measured>>],
    cancelled: &dyn Fn() -> bool,
) -> Result<Vec<Option<Vec<ExpertTheta>>>, Error> {
    let mut out = vec![None; layouts.len()];
    for (i, (l, m)) in layouts.iter().zip(measured).enumerate() {
        let (Some(l), Some(m)) = (l, m) else { continue };
        if cancelled() {
            return Err(Error::Cancelled);
        }
        let dups = duplicates_of(model, i, l).await?;
        out[i] = Some(expert_rows(m, &dups, mode != Mode::Sampled));
    }
    Ok(out)
}
