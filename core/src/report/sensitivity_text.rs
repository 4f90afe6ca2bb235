//! The text `organ sensitivity` prints (and the API keeps as the job's `.txt`): a measured
//! report's table, most sensitive first, and a prediction's, with the measured figure
//! beside each weight when a truth was given and the ranking against it.

use crate::gguf::display::printable;
use crate::predict::Calibration;
use crate::predict::Method;
use crate::sensitivity::predicted::{PredictedRow, PredictionReport, Ranking};
use crate::sensitivity::report::{Report, Row};
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// A measured report's text: the run, then every tensor, most sensitive first.
///
/// # Errors
/// `w` refused a write.
pub fn measured(r: &Report, w: &mut dyn Write) -> fmt::Result {
    writeln!(
        w,
        "sensitivity of {} to {} on {} ({} chunks of {} tokens; base perplexity {:.4} ± {:.4})",
        r.model,
        r.change,
        r.text.text,
        r.text.chunks,
        r.text.ctx,
        r.text.base_perplexity.value,
        r.text.base_perplexity.error
    )?;
    let mut rows: Vec<&Row> = r.tensors.iter().collect();
    rows.sort_by(|a, b| b.kld.value.total_cmp(&a.kld.value));
    line(w, "tensor", "kind", "type", "as", &format!("{:>22} {:>10}", "KL divergence (nats)", "PPL"))?;
    for t in rows {
        let repeat = t.repeat_kld.map(|e| format!("  (repeat {:.6})", e.value)).unwrap_or_default();
        let figures = format!("{:>11.6} ± {:<8.6} {:>10.4}{repeat}", t.kld.value, t.kld.error, t.ppl.value);
        line(w, &t.name, &t.kind, &t.ty, &t.changed_type, &figures)?;
    }
    if let (Some(rep), Some(rho)) = (&r.repeat, r.repeat_rho) {
        writeln!(
            w,
            "repeat on {}: Spearman ρ between the two texts' KLDs = {rho:.3} (the ceiling of any predictor)",
            rep.text
        )?;
    }
    Ok(())
}

/// A prediction's text: the table, most sensitive (predicted) first, with the measured
/// figure when known; the weights not predicted; the ranking against the truth.
///
/// # Errors
/// `w` refused a write.
pub fn predicted(r: &PredictionReport, w: &mut dyn Write) -> fmt::Result {
    writeln!(
        w,
        "predicted sensitivity of {} to {} ({}{}; docs/predict.md)",
        r.model,
        r.change,
        r.source,
        r.imatrix.as_deref().map(|i| format!(" {i}")).unwrap_or_default()
    )?;
    let imatrix = r.source == "imatrix";
    let by = |m: Method| r.tensors.iter().filter(|t| t.predictor == m.name()).count();
    let (residual, weighted) = (by(Method::Residual), by(Method::WeightedError));
    if residual > 0 || weighted == 0 {
        writeln!(w, "  a {} prediction {}", r.source, Calibration::measured_rho(imatrix))?;
    }
    if weighted > 0 {
        writeln!(
            w,
            "  {weighted} weights outside the residual model by the weighted error alone, which {}",
            Calibration::weighted_error_rho(imatrix)
        )?;
    }
    let sampled = r.tensors.iter().filter(|t| t.rows_sampled.is_some()).count();
    if sampled > 0 {
        writeln!(
            w,
            "  {sampled} weights of more than {} values each predicted from an even sample of their rows",
            crate::predict::ROUND_TRIP_VALUES
        )?;
    }
    let mut rows: Vec<&PredictedRow> = r.tensors.iter().collect();
    rows.sort_by(|a, b| b.predicted_kld.total_cmp(&a.predicted_kld));
    // The measured column only with a truth to take it from (--truth).
    let truth = r.truth.is_some() || rows.iter().any(|t| t.measured_kld.is_some());
    let measured_head = if truth { format!(" {:>14}", "measured KLD") } else { String::new() };
    let head = format!("{:>14}{measured_head}  by", "predicted KLD");
    line(w, "tensor", "kind", "type", "as", &head)?;
    for t in rows {
        let measured = match (truth, t.measured_kld) {
            (false, _) => String::new(),
            (true, Some(k)) => format!(" {:>14}", format!("{k:.6}")),
            (true, None) => format!(" {:>14}", "-"),
        };
        let figures = format!("{:>14.6}{measured}  {}", t.predicted_kld, printable(&t.predictor));
        line(w, &t.name, &t.kind, &t.ty, &t.changed_type, &figures)?;
    }
    for (name, why) in &r.not_predicted {
        writeln!(w, "  not predicted: {}: {why}", printable(name))?;
    }
    if let Some(k) = &r.ranking {
        ranking(k, r.truth.as_deref().unwrap_or(""), w)?;
    }
    Ok(())
}

fn ranking(k: &Ranking, truth: &str, w: &mut dyn Write) -> fmt::Result {
    let rho = |x: Option<f64>| x.map_or_else(|| "undefined".to_owned(), |x| format!("{x:+.3}"));
    let kinds: Vec<String> = k.within_kind.iter().map(|x| format!("{} {}", x.kind, rho(x.rho))).collect();
    writeln!(
        w,
        "against {truth} ({} weights measured): Spearman ρ {} overall, {} within kind (mean; {})",
        k.n,
        rho(k.overall),
        rho(k.within_kind_mean),
        kinds.join(", ")
    )
}

/// One line of both tables: the tensor, its kind, its type and the type it was changed
/// to, then the figures, formatted.
fn line(w: &mut dyn Write, name: &str, kind: &str, ty: &str, to: &str, figures: &str) -> fmt::Result {
    let name = printable(name);
    writeln!(w, "  {name:<34} {kind:<12} {ty:>7} -> {to:<7} {figures}")
}
