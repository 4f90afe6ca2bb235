//! `organ sensitivity --predict`: the cheap estimate of each weight's sensitivity
//! (`crate::predict`, docs/predict.md), from an importance matrix or from the weights
//! alone, in seconds and without llama.cpp; with `--truth SENS.json` (a measured report of
//! the same change) each prediction is shown beside the measured figure, with Spearman's ρ.

use crate::cmd::outputs::Files;
use crate::cmd::recipe::sensitivity as measured;
use crate::model::Model;
use anyhow::{bail, Result};
use organ_core::model::TensorEntry;
use organ_core::predict::Calibration;
use organ_core::report::{AnyReport, Shown};
use organ_core::sensitivity::is_weight;
use organ_core::sensitivity::predicted::{rank_against, rows, PredictionReport, SCHEMA};
use organ_core::surgery::select::Selection;
use organ_core::GgmlType;
use std::io::Write;
use std::path::Path;

/// `organ sensitivity --predict`'s options.
pub struct Options<'a> {
    pub model: &'a Path,
    pub to: GgmlType,
    /// Column mean squares from this `llama-imatrix` output (GGUF); `None`: data-free.
    pub imatrix: Option<&'a Path>,
    /// A measured report of the same change, to rank the predictions against.
    pub truth: Option<&'a Path>,
    /// Which tensors; `None`: every 2-D weight.
    pub selection: Option<Selection>,
    /// The report's files, by format (the registry's).
    pub files: Files,
    pub force: bool,
}

/// Predicts, prints the table (and ρ against the truth) and writes the reports.
pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<PredictionReport> {
    let model = Model::open(o.model)?;
    let imatrix = match o.imatrix {
        Some(p) => Some(crate::predict::read_imatrix(p)?),
        None => None,
    };
    let truth = match o.truth {
        Some(p) => {
            let blake3 = model.fingerprint(false)?.blake3;
            let tensors: Vec<&TensorEntry> = model.tensors.iter().map(|t| &t.entry).collect();
            let t = measured::read(p, &tensors, &blake3)?;
            if t.change != o.to {
                bail!(
                    "{}: measured at {}, but --to is {}: give a report of the same change",
                    p.display(),
                    t.change,
                    o.to
                );
            }
            Some(t)
        }
        None => None,
    };
    let selected = |name: &str, dims: &[u64]| match &o.selection {
        Some(s) => s.matches(name),
        None => is_weight(name, dims),
    };
    let picked: Vec<&str> =
        model.tensors.iter().filter(|t| selected(&t.name, &t.dims)).map(|t| t.name.as_str()).collect();
    if picked.is_empty() {
        match &o.selection {
            Some(s) => bail!("{}: {}", model.label, s.none_matched(model.tensors.iter().map(|t| t.name.as_str()))),
            None => bail!("{}: has no 2-D weight to predict", model.label),
        }
    }
    let calibration = Calibration::for_source(imatrix.is_some());
    let predictions =
        crate::predict::predict_calibrated(&model, imatrix.as_ref(), &[o.to], |n| picked.contains(&n), &calibration)?;
    let (mut tensors, not_predicted) = rows(predictions, &picked);
    let ranking = truth.as_ref().map(|t| rank_against(&mut tensors, |n| t.kld(n)));
    let report = PredictionReport {
        organ_sensitivity_prediction: SCHEMA,
        model: model.label.clone(),
        change: o.to.name().to_owned(),
        source: if imatrix.is_some() { "imatrix" } else { "data-free" }.to_owned(),
        imatrix: o.imatrix.map(|p| p.display().to_string()),
        calibration,
        truth: o.truth.map(|p| p.display().to_string()),
        ranking,
        not_predicted,
        tensors,
    };
    let any = AnyReport::Prediction(&report);
    crate::cmd::outputs::print(any, &Shown::WHOLE, w)?;
    crate::cmd::outputs::write_all(any, &o.files, &Shown::WHOLE, o.force)?;
    Ok(report)
}
