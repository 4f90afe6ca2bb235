//! `organ sensitivity --predict`: the cheap estimate of each weight's sensitivity
//! (`crate::predict`, docs/predict.md), from an importance matrix or from the weights
//! alone, in seconds and without llama.cpp; with `--truth SENS.json` (a measured report of
//! the same change) each prediction is shown beside the measured figure, with Spearman's ρ.

use crate::cmd::recipe::sensitivity as measured;
use crate::model::Model;
use anyhow::{bail, Result};
use organ_core::model::TensorEntry;
use organ_core::predict::Calibration;
use organ_core::sensitivity::is_weight;
use organ_core::sensitivity::predicted::{rank_against, rows, PredictedRow, PredictionReport, Ranking, SCHEMA};
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
    pub json: Option<&'a Path>,
    pub csv: Option<&'a Path>,
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
    print(&report, w)?;
    if let Some(p) = o.json {
        crate::atomic::write_json(p, o.force, &report)?;
    }
    if let Some(p) = o.csv {
        let mut s = String::new();
        organ_core::report::prediction_csv(&report, &mut s)
            .map_err(|_| anyhow::anyhow!("{}: cannot render the report", p.display()))?;
        crate::atomic::write_text(p, o.force, &s)?;
    }
    Ok(report)
}

/// Prints the table, most sensitive (predicted) first, with the measured figure when known.
fn print(r: &PredictionReport, w: &mut dyn Write) -> Result<()> {
    writeln!(
        w,
        "predicted sensitivity of {} to {} ({}{}; docs/predict.md)",
        r.model,
        r.change,
        r.source,
        r.imatrix.as_deref().map(|i| format!(" {i}")).unwrap_or_default()
    )?;
    writeln!(w, "  a {} prediction {}", r.source, Calibration::measured_rho(r.source == "imatrix"))?;
    let mut rows: Vec<&PredictedRow> = r.tensors.iter().collect();
    rows.sort_by(|a, b| b.predicted_kld.total_cmp(&a.predicted_kld));
    super::line(w, "tensor", "kind", "type", "as", &format!("{:>14} {:>14}", "predicted KLD", "measured KLD"))?;
    for t in rows {
        let measured = t.measured_kld.map(|k| format!("{k:.6}")).unwrap_or_default();
        super::line(w, &t.name, &t.kind, &t.ty, &t.changed_type, &format!("{:>14.6} {measured:>14}", t.predicted_kld))?;
    }
    for (name, why) in &r.not_predicted {
        writeln!(w, "  not predicted: {}: {why}", organ_core::gguf::display::printable(name))?;
    }
    if let Some(k) = &r.ranking {
        print_ranking(k, r.truth.as_deref().unwrap_or(""), w)?;
    }
    Ok(())
}

fn print_ranking(k: &Ranking, truth: &str, w: &mut dyn Write) -> Result<()> {
    let rho = |x: Option<f64>| x.map_or_else(|| "undefined".to_owned(), |x| format!("{x:+.3}"));
    let kinds: Vec<String> = k.within_kind.iter().map(|x| format!("{} {}", x.kind, rho(x.rho))).collect();
    writeln!(
        w,
        "against {truth} ({} weights measured): Spearman ρ {} overall, {} within kind (mean; {})",
        k.n,
        rho(k.overall),
        rho(k.within_kind_mean),
        kinds.join(", ")
    )?;
    Ok(())
}
