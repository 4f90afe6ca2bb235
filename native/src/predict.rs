//! The cheap prediction of each weight's sensitivity (`organ_core::predict`,
//! docs/predict.md) over a model's files: the weights read and dequantized here, the
//! tensors in parallel, the maths in the core. Two passes over the block weights: the
//! first gathers each weight's energies for the residual-stream model (small vectors), the
//! second round-trips each selected weight through every candidate type; a thread holds
//! one weight's values, its round trip and its bytes at a time.

use crate::model::Model;
use anyhow::{bail, Context, Result};
use organ_core::imatrix::{Imatrix, MAX_BYTES as MAX_IMATRIX_BYTES};
use organ_core::model::TensorEntry;
use organ_core::predict::steps::{self, EnergyJob};
use organ_core::predict::{Calibration, Predictor};
use organ_core::quant::dequantize;
use organ_core::GgmlType;
use rayon::prelude::*;
use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

pub use organ_core::predict::Prediction;

/// Predicts, for every selected block weight (by the residual model where it covers the
/// architecture, by the weighted error alone elsewhere) and every type of `types`, the KLD
/// of the model with only that weight in that type, from `imatrix`'s column mean squares
/// or, without one, from the weights alone; scaled by the calibration fitted for that
/// source ([`Calibration::for_source`]).
///
/// # Errors
/// A type organ cannot quantize to, a family's counts malformed, a block weight of another
/// shape, an imatrix that lacks a weight or disagrees with its shape.
pub fn predict(
    model: &Model,
    imatrix: Option<&Imatrix>,
    types: &[GgmlType],
    select: impl Fn(&str) -> bool + Sync,
) -> Result<Vec<Prediction>> {
    predict_calibrated(model, imatrix, types, select, &Calibration::for_source(imatrix.is_some()))
}

/// [`predict`] with a calibration of the caller's (one fitted against measured truth): the
/// core's steps ([`organ_core::predict::steps`]), each job on its own thread, over the
/// mapped files.
///
/// # Errors
/// As [`predict`].
pub fn predict_calibrated(
    model: &Model,
    imatrix: Option<&Imatrix>,
    types: &[GgmlType],
    select: impl Fn(&str) -> bool + Sync,
    calibration: &Calibration,
) -> Result<Vec<Prediction>> {
    run(model, imatrix, types, select, calibration, true)
}

/// [`predict`] with every block weight by the weighted error alone, as weights outside the
/// residual model are predicted: how that weaker predictor is measured on a model the
/// residual model covers (docs/predict.md).
///
/// # Errors
/// As [`predict`].
pub fn predict_weighted_error(
    model: &Model,
    imatrix: Option<&Imatrix>,
    types: &[GgmlType],
    select: impl Fn(&str) -> bool + Sync,
) -> Result<Vec<Prediction>> {
    run(model, imatrix, types, select, &Calibration::for_source(imatrix.is_some()), false)
}

fn run(
    model: &Model,
    imatrix: Option<&Imatrix>,
    types: &[GgmlType],
    select: impl Fn(&str) -> bool + Sync,
    calibration: &Calibration,
    residual: bool,
) -> Result<Vec<Prediction>> {
    let what = || format!("predicting the sensitivity of {}", model.label);
    let im = imatrix.map(Cow::Borrowed);
    let p = Predictor::with_residual(&model.model, types, *calibration, im, residual).with_context(what)?;
    let values = |name: &str| -> Result<(&TensorEntry, Vec<f32>)> {
        let t = steps::tensor(&model.model, name).with_context(|| model.label.clone())?;
        Ok((&t.entry, dequantize(t.ty, t.bytes()).with_context(|| format!("{}: reading {name}", model.label))?))
    };
    // A bar (or jsonl progress events) over the jobs: a minute on a small model, silent
    // before (issue 50).
    let bar = crate::progress::tensor_bar();
    bar.set_message(format!("predicting {}", model.label));
    let (energy_jobs, trips) = (p.energy_jobs(), p.round_trip_jobs(&model.model, select));
    crate::progress::grow(&bar, (energy_jobs.len() + trips.len()) as u64);
    let energies = energy_jobs
        .par_iter()
        .map(|job: &EnergyJob| {
            let read: Vec<(&TensorEntry, Vec<f32>)> = job.reads().into_iter().map(values).collect::<Result<_>>()?;
            let tensors: Vec<_> = read.iter().map(|r| r.0).collect();
            let vs: Vec<&[f32]> = read.iter().map(|r| r.1.as_slice()).collect();
            let e = p.energy(job, &tensors, &vs).with_context(what);
            crate::progress::tensor_done(&bar);
            e
        })
        .collect::<Result<Vec<_>>>()?;
    let stream = p.stream(&model.model, energies).with_context(what)?;
    let predicted = trips
        .par_iter()
        .map(|job| {
            let t = &model.tensors[job.tensor];
            let v = dequantize(t.ty, t.bytes()).with_context(|| format!("{}: reading {}", model.label, t.name))?;
            let r = p.predict(&stream, job, t, &v).with_context(|| format!("predicting {}", t.name));
            crate::progress::tensor_done(&bar);
            r
        })
        .collect();
    bar.finish_and_clear();
    predicted
}

/// Reads a `llama-imatrix` output, bounded.
///
/// # Errors
/// Unreadable, too large, or not an importance matrix organ reads.
pub fn read_imatrix(p: &Path) -> Result<Imatrix> {
    let mut bytes = Vec::new();
    crate::input::open(p)?
        .take(MAX_IMATRIX_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{}: cannot read (--imatrix)", p.display()))?;
    if bytes.len() as u64 > MAX_IMATRIX_BYTES {
        bail!("{}: more than {MAX_IMATRIX_BYTES} bytes, not an importance matrix organ reads", p.display());
    }
    Imatrix::parse(&bytes)
        .with_context(|| format!("{}: not an importance matrix llama-imatrix wrote (--imatrix)", p.display()))
}
