//! Measuring a LoRA adapter in the browser, as `organ measure ADAPTER [--base BASE]`: a
//! row per pair, ΔW measured from its two halves (small: r rows or columns each), read
//! whole with `Blob.slice`; with the base dropped beside it, ‖W‖_F of each weight the
//! adapter updates, its weight read whole. The checks, the rows and the report are the
//! core's (`organ_core::lora`, `organ_core::report::adapter`), the CLI's; only the reads are the browser's. Each pair is
//! measured on the worker pool.

use crate::error::Error;
use crate::measure::Outcome;
use crate::pool;
use crate::reads::{worker_gone, Meter, Progress};
use crate::source::{read_range, Model};
use organ_core::lora::Adapter;
use organ_core::model::TensorEntry;
use organ_core::report::adapter as measure;
use organ_core::report::Report;
use organ_core::zmeasure::{Mode, GENERATOR};
use std::sync::Arc;

/// A tensor's bytes, read whole.
async fn whole(m: &Model, t: &TensorEntry) -> Result<Vec<u8>, Error> {
    let end = t
        .offset
        .checked_add(t.n_bytes)
        .ok_or_else(|| Error::Refused(format!("{}: tensor {:?}: past the file", m.label, t.name)))?;
    let file =
        m.files.get(t.file).ok_or_else(|| Error::Refused(format!("{}: tensor {:?}: in no file", m.label, t.name)))?;
    read_range(file, t.offset, end).await
}

/// Measures the adapter `model` in `mode`, against `base` when given (its first error,
/// or its first error against the base, is the error).
pub async fn measure(
    model: &Model,
    base: Option<&Model>,
    mode: Mode,
    cancelled: &dyn Fn() -> bool,
    on_progress: &dyn Fn(Progress),
) -> Result<Outcome, Error> {
    let t0 = pool::now_ms();
    let threads = pool::start().await?;
    let adapter = Adapter::read_checked(&model.model, &model.label, base.map(|b| (&b.model, b.label.as_str())))
        .map_err(Error::refused)?;
    let adapter = Arc::new(adapter);
    let mut meter = Meter::new(adapter.pairs.len(), t0, on_progress);
    // Every pair is read, then measured on the pool while the next is read.
    let mut pending = Vec::with_capacity(adapter.pairs.len());
    let weights = base.map(|b| adapter.base_weights(b));
    for (i, p) in adapter.pairs.iter().enumerate() {
        if cancelled() {
            return Err(Error::Cancelled);
        }
        let weight = match (base, &weights) {
            (Some(b), Some(w)) => {
                let t = w[i].and_then(|at| b.tensors.get(at));
                let t = t.ok_or_else(|| Error::Refused(format!("{}: no tensor {:?}", b.label, p.target)))?;
                let bytes = whole(b, t).await?;
                meter.read_more(bytes.len() as u64);
                Some((b.label.clone(), t.ty, bytes))
            }
            _ => None,
        };
        let (ta, tb) = (&model.tensors[p.a], &model.tensors[p.b]);
        let (a, b) = (whole(model, ta).await?, whole(model, tb).await?);
        meter.read_more((a.len() + b.len()) as u64);
        let (ty_a, ty_b, adapter, label) = (ta.ty, tb.ty, adapter.clone(), model.label.clone());
        pending.push(pool::spawn(move || {
            let p = &adapter.pairs[i];
            let base_frobenius = match weight {
                Some((base, ty, bytes)) => Some(
                    measure::weight_frobenius(ty, &bytes)
                        .map_err(|e| Error::Refused(format!("{base}: tensor {:?}: {e}", p.target)))?,
                ),
                None => None,
            };
            measure::pair_row(&adapter, i, (ty_a, &a), (ty_b, &b), mode, base_frobenius)
                .map_err(|e| Error::Refused(format!("{label}: the pair of {:?}: {e}", p.target)))
        }));
    }
    let mut rows = Vec::with_capacity(pending.len());
    for rx in pending {
        rows.push(rx.await.map_err(worker_gone)??);
        meter.tick();
    }
    meter.show_now();
    let bytes_read = meter.progress.bytes_read;
    let m =
        measure::report(&adapter, &model.label, &model.model, model.file_bytes, rows, base.map(|b| b.label.as_str()));
    let mut report = Report::new(&format!("{GENERATOR} (browser)"), vec![m]);
    report.measure = mode.label().to_owned();
    let histograms = vec![None; adapter.pairs.len()];
    Ok(Outcome { report, histograms, bytes_read, threads })
}
