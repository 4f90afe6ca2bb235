//! `organ measure ADAPTER.gguf [--base BASE]`: an adapter measured as a model of its
//! updates, one row per pair (ΔW named `TARGET.lora`, sampled as Z-measure v1 samples a
//! tensor of that name and shape), with its rank, scale, ‖ΔW‖_F and, with a base,
//! ‖W‖_F of the weight it updates (core: [`organ_core::report::adapter`]). The pairs are
//! small (r rows or columns each): each is read whole, and ΔW is never made whole.

use crate::model::Model;
use anyhow::{bail, Context, Result};
use organ_core::lora::Adapter;
use organ_core::report::adapter as measure;
use organ_core::report::ModelReport;
use organ_core::zmeasure::Mode;
use rayon::prelude::*;
use std::path::Path;

/// Reads an adapter (and checks it against `base`, when given) before any work.
///
/// # Errors
/// The first problem that stops llama.cpp from applying it, or organ from applying it as
/// llama.cpp does, naming the file.
pub fn read(model: &Model, path: &Path, base: Option<(&Model, &Path)>) -> Result<Adapter> {
    // What merging needs, not what a run needs: a tied token_embd pair is measured.
    let base_named = base.map(|(b, bp)| (&b.model, bp.display().to_string()));
    Adapter::read_checked(&model.model, &path.display().to_string(), base_named.as_ref().map(|(b, n)| (*b, n.as_str())))
        .map_err(anyhow::Error::msg)
}

/// Refuses a model that is not an adapter, for `--base`, which only adapters take.
pub fn must_be_adapter(model: &Model, path: &Path) -> Result<()> {
    if !organ_core::lora::is_adapter(&model.model) {
        bail!("{}: --base is for adapters, and this is not one (general.type is not \"adapter\")", path.display());
    }
    Ok(())
}

/// Measures the adapter `model` (read from `path`) in `mode`, against `base` if given;
/// the progress bar advances per pair.
pub fn measure_adapter(
    model: &Model,
    path: &Path,
    mode: Mode,
    base: Option<(&Model, &Path)>,
    file_bytes: u64,
    tick: &(dyn Fn() + Sync),
) -> Result<ModelReport> {
    let adapter = read(model, path, base)?;
    let weights = base.map(|(b, _)| adapter.base_weights(b));
    let rows = (0..adapter.pairs.len())
        .into_par_iter()
        .map(|i| {
            let p = &adapter.pairs[i];
            let base_frobenius = match (base, &weights) {
                (Some((b, bp)), Some(w)) => {
                    Some(weight_frobenius(b, w[i], &p.target).with_context(|| format!("{}", bp.display()))?)
                }
                _ => None,
            };
            let (a, b) = (&model.tensors[p.a], &model.tensors[p.b]);
            let row = measure::pair_row(
                &adapter,
                i,
                (a.ty, &a.bytes_or_read()?),
                (b.ty, &b.bytes_or_read()?),
                mode,
                base_frobenius,
            )
            .with_context(|| format!("{}: the pair of {:?}", model.label, p.target))?;
            tick();
            Ok(row)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(measure::report(&adapter, &model.label, model, file_bytes, rows, base.map(|(b, _)| b.label.as_str())))
}

/// ‖W‖_F of the base's weight `name`, found at `at` ([`Adapter::base_weights`]).
fn weight_frobenius(base: &Model, at: Option<usize>, name: &str) -> Result<f64> {
    let t = at.and_then(|i| base.tensors.get(i)).with_context(|| format!("no tensor {name:?}"))?;
    measure::weight_frobenius(t.ty, &t.bytes_or_read()?).with_context(|| format!("tensor {name:?}"))
}
