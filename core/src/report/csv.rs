//! The CSV formats: a θ report's row per tensor (and per expert), a compare report's row
//! per pair (and per expert), and the ranking's row per model. Fields are quoted only where
//! they must be, records end in `\n` (csv-core's writer, as the `csv` crate's default).

use super::kinds::{AnyReport, Shown};
use super::{Report, TensorReport};
use crate::anatomy::Group;
use crate::compare::CompareReport;
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use csv_core::WriteResult;

/// Records written to a text sink, one at a time.
struct Records<'a> {
    w: csv_core::Writer,
    out: &'a mut dyn fmt::Write,
    line: Vec<u8>,
}

impl<'a> Records<'a> {
    fn new(out: &'a mut dyn fmt::Write) -> Records<'a> {
        Records { w: csv_core::Writer::new(), out, line: Vec::new() }
    }

    /// Writes one record of `fields`.
    fn record<S: AsRef<str>>(&mut self, fields: &[S]) -> fmt::Result {
        let Records { w, out, line } = self;
        line.clear();
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                grow(line, |o| w.delimiter(o));
            }
            let mut input = f.as_ref().as_bytes();
            grow(line, |o| {
                let (r, nin, nout) = w.field(input, o);
                input = &input[nin..];
                (r, nout)
            });
        }
        grow(line, |o| w.terminator(o));
        // Fields are text and the writer adds only ASCII quotes, commas and newlines.
        out.write_str(core::str::from_utf8(line).map_err(|_| fmt::Error)?)
    }
}

/// Runs one step of the writer on `line`'s spare room, growing it until the step is done.
fn grow(line: &mut Vec<u8>, mut step: impl FnMut(&mut [u8]) -> (WriteResult, usize)) {
    loop {
        let at = line.len();
        line.resize(at + at.max(256), 0);
        let (r, n) = step(&mut line[at..]);
        line.truncate(at + n);
        if matches!(r, WriteResult::InputEmpty) {
            return;
        }
    }
}

/// An enum's name as the JSON gives it (`"attention"`), empty for one that is no string.
pub(super) fn json_name<T: serde::Serialize>(v: T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// A figure as Rust prints it exactly (`0.1`, `1e-7`), empty for none.
fn num(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v:?}"))
}

/// Whether the report carries σ_θ (`--sigma`, `--exact`): then its lists show it.
pub(super) fn has_sigma(report: &Report) -> bool {
    report.models.iter().any(|m| m.summary.theta_mean_sigma.is_some())
}

/// The columns experts add to a θ report's rows, after the others.
const EXPERT_HEAD: [&str; 4] = ["expert", "outlier", "duplicate_of", "standing"];

/// Writes `report` as CSV: a θ report's row per tensor and per expert, a compare report's
/// row per pair and per expert.
///
/// # Errors
/// `out` refused a write.
pub fn render(report: AnyReport<'_>, _: &Shown, out: &mut dyn fmt::Write) -> fmt::Result {
    match report {
        AnyReport::Measure(r) => measure(r, &mut Records::new(out)),
        AnyReport::Compare(r) => compare(r, &mut Records::new(out)),
        AnyReport::Check(_)
        | AnyReport::Eval(_)
        | AnyReport::Surgery(_)
        | AnyReport::Recipe(_)
        | AnyReport::Quantize(_) => Ok(()),
        AnyReport::Sensitivity(r) => sensitivity(r, out),
        AnyReport::Prediction(r) => prediction(r, out),
    }
}

fn measure(report: &Report, c: &mut Records<'_>) -> fmt::Result {
    let sigma = has_sigma(report);
    let mut head = vec![
        "model",
        "tensor",
        "group",
        "organ",
        "layer",
        "type",
        "n_elements",
        "status",
        "theta",
        "entropy",
        "kurtosis",
        "cv",
        "sampled",
        "dropped",
    ];
    if sigma {
        head.push("sigma");
    }
    let with_experts = report.models.iter().any(|m| m.tensors.iter().any(|t| t.experts.is_some()));
    if with_experts {
        head.extend(EXPERT_HEAD);
    }
    c.record(&head)?;
    for m in &report.models {
        for t in &m.tensors {
            let mut row = vec![
                m.model.clone(),
                t.name.clone(),
                t.group.name().to_owned(),
                t.organ.map(json_name).unwrap_or_default(),
                t.layer.map_or_else(String::new, |l| l.to_string()),
                t.ty.clone(),
                t.n_elements.to_string(),
                json_name(t.status),
                num(t.theta),
                num(t.entropy),
                num(t.kurtosis),
                num(t.cv),
                t.sampled.to_string(),
                t.dropped.to_string(),
            ];
            if sigma {
                row.push(num(t.sigma));
            }
            if with_experts {
                row.extend(EXPERT_HEAD.map(|_| String::new()));
            }
            c.record(&row)?;
            for r in expert_rows(&m.model, t, sigma) {
                c.record(&r)?;
            }
        }
    }
    Ok(())
}

/// The rows of `t`'s experts, each with the columns of a tensor's row: the tensor's name
/// with `#e`, the expert's θ (and σ when `sigma`), then [`EXPERT_HEAD`]'s.
fn expert_rows(model: &str, t: &TensorReport, sigma: bool) -> Vec<Vec<String>> {
    let Some(experts) = &t.experts else { return Vec::new() };
    let per = t.shape.get(..2).map_or(0, |d| d.iter().product::<u64>());
    experts
        .iter()
        .map(|x| {
            let status = if x.degenerate { "degenerate" } else { "measured" };
            let mut row = vec![
                model.to_owned(),
                format!("{}#{}", t.name, x.expert),
                t.group.name().to_owned(),
                "expert".to_owned(),
                t.layer.map_or_else(String::new, |l| l.to_string()),
                t.ty.clone(),
                per.to_string(),
                status.to_owned(),
                format!("{:?}", x.theta),
            ];
            row.extend(core::iter::repeat_n(String::new(), 5));
            if sigma {
                row.push(num(x.sigma));
            }
            row.extend([
                x.expert.to_string(),
                x.outlier.to_string(),
                x.duplicate_of.map_or_else(String::new, |d| d.to_string()),
                x.standing.name().to_owned(),
            ]);
            row
        })
        .collect()
}

fn compare(r: &CompareReport, c: &mut Records<'_>) -> fmt::Result {
    c.record(&[
        "tensor",
        "expert",
        "group",
        "organ",
        "layer",
        "type_a",
        "type_b",
        "n_elements",
        "identical",
        "cos",
        "rel_l2",
        "max_abs",
        "d_theta",
        "theta_a",
        "theta_b",
        "sampled",
        "dropped",
        "name_b",
        "key",
        "change",
        "value_a",
        "value_b",
    ])?;
    // The metadata first, as gguf-dump lists the header before the tensors: a row per key
    // that differs (and the GGUF version, when it does), its tensor columns empty.
    if let Some(m) = &r.metadata {
        let blank = || vec![String::new(); 17];
        if m.counts.versions_differ() {
            let mut row = blank();
            row[2] = "metadata".into();
            row.extend([
                String::new(),
                "GGUF.version".into(),
                "changed".into(),
                m.counts.gguf_version_a.to_string(),
                m.counts.gguf_version_b.to_string(),
            ]);
            c.record(&row)?;
        }
        for (key, how, a, b) in m.rows() {
            let mut row = blank();
            row[2] = "metadata".into();
            let shown = |v: Option<&crate::compare::meta::ValueShown>| v.map(|v| v.line()).unwrap_or_default();
            row.extend([String::new(), key.to_owned(), how.name().to_owned(), shown(a), shown(b)]);
            c.record(&row)?;
        }
    }
    for p in &r.pairs {
        let row = vec![
            p.name.clone(),
            String::new(),
            p.group.name().to_owned(),
            p.organ.map(json_name).unwrap_or_default(),
            p.layer.map_or_else(String::new, |l| l.to_string()),
            p.type_a.clone(),
            p.type_b.clone(),
            p.n_elements.to_string(),
            p.identical.to_string(),
            num(p.cos),
            num(p.rel_l2),
            num(p.max_abs),
            num(p.d_theta),
            num(p.theta_a),
            num(p.theta_b),
            p.sampled.to_string(),
            p.dropped.to_string(),
            p.name_b.clone().unwrap_or_default(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ];
        c.record(&row)?;
        for e in p.experts.iter().flatten() {
            let mut row = row.clone();
            row[1] = e.expert.to_string();
            row[8] = e.identical.to_string();
            row[9] = num(e.cos);
            row[10] = num(e.rel_l2);
            row[11] = num(e.max_abs);
            row[12] = num(e.d_theta);
            row[13] = num(e.theta_a);
            row[14] = num(e.theta_b);
            row[15] = String::new();
            row[16] = e.dropped.to_string();
            c.record(&row)?;
        }
    }
    Ok(())
}

/// Writes a θ report's ranking as CSV: one row per model, in rank order, the ranking's
/// columns, then mean θ per group (and σ with `--sigma`).
///
/// # Errors
/// `out` refused a write, or a ranked model is not in the report.
pub fn render_ranking(report: AnyReport<'_>, _: &Shown, out: &mut dyn fmt::Write) -> fmt::Result {
    let AnyReport::Measure(report) = report else { return Ok(()) };
    let mut c = Records::new(out);
    let mut head: Vec<String> =
        ["rank", "model", "parameters", "theta_mean", "theta_weighted", "signal", "tensors"].map(String::from).to_vec();
    head.extend(Group::ALL.iter().map(|g| format!("theta_{}", g.name())));
    let sigma = has_sigma(report);
    if sigma {
        head.extend(["theta_mean_sigma", "distinguishable_from_next"].map(String::from));
    }
    c.record(&head)?;
    for r in &report.ranking {
        let m = report.models.iter().find(|m| m.model == r.model).ok_or(fmt::Error)?;
        let mut row = vec![
            r.rank.to_string(),
            r.model.clone(),
            r.parameters.to_string(),
            format!("{:?}", r.theta_mean),
            format!("{:?}", r.theta_weighted),
            format!("{:?}", r.signal),
            r.tensors.to_string(),
        ];
        for g in Group::ALL {
            row.push(
                m.summary.groups.iter().find(|x| x.group == g).map_or_else(String::new, |x| format!("{:?}", x.mean)),
            );
        }
        if sigma {
            row.push(num(r.theta_mean_sigma));
            row.push(r.distinguishable_from_next.map_or_else(String::new, |d| d.to_string()));
        }
        c.record(&row)?;
    }
    Ok(())
}

/// A sensitivity report's CSV (`organ sensitivity --csv`): one record per tensor.
pub fn sensitivity(r: &crate::sensitivity::report::Report, out: &mut dyn fmt::Write) -> fmt::Result {
    let mut c = Records::new(out);
    c.record(&[
        "name",
        "kind",
        "layer",
        "type",
        "n_elements",
        "bytes",
        "changed_type",
        "changed_bytes",
        "kld",
        "kld_error",
        "kld_median",
        "kld_p99",
        "ppl",
        "ppl_error",
        "same_top",
        "same_top_error",
        "repeat_kld",
        "repeat_kld_error",
    ])?;
    for t in &r.tensors {
        let (rk, re) = match t.repeat_kld {
            Some(e) => (e.value.to_string(), e.error.to_string()),
            None => (String::new(), String::new()),
        };
        c.record(&[
            t.name.clone(),
            t.kind.clone(),
            t.layer.map(|l| l.to_string()).unwrap_or_default(),
            t.ty.clone(),
            t.n_elements.to_string(),
            t.bytes.to_string(),
            t.changed_type.clone(),
            t.changed_bytes.to_string(),
            t.kld.value.to_string(),
            t.kld.error.to_string(),
            t.kld_median.to_string(),
            t.kld_p99.to_string(),
            t.ppl.value.to_string(),
            t.ppl.error.to_string(),
            t.same_top.value.to_string(),
            t.same_top.error.to_string(),
            rk,
            re,
        ])?;
    }
    Ok(())
}

/// A prediction report's CSV (`organ sensitivity --predict --csv`): one record per weight.
pub fn prediction(r: &crate::sensitivity::predicted::PredictionReport, out: &mut dyn fmt::Write) -> fmt::Result {
    let mut c = Records::new(out);
    c.record(&[
        "name",
        "kind",
        "predictor",
        "layer",
        "type",
        "bytes",
        "changed_type",
        "changed_bytes",
        "predicted_kld",
        "relative",
        "weighted_error",
        "measured_kld",
    ])?;
    for t in &r.tensors {
        c.record(&[
            t.name.clone(),
            t.kind.clone(),
            t.predictor.clone(),
            t.layer.to_string(),
            t.ty.clone(),
            t.bytes.to_string(),
            t.changed_type.clone(),
            t.changed_bytes.to_string(),
            t.predicted_kld.to_string(),
            t.relative.map(|x| x.to_string()).unwrap_or_default(),
            t.weighted_error.to_string(),
            t.measured_kld.map(|k| k.to_string()).unwrap_or_default(),
        ])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_only_where_they_must_be() {
        let long = "é".repeat(700);
        let mut out = String::new();
        let mut c = Records::new(&mut out);
        c.record(&["a", "b,c", "say \"hi\"", "two\nlines", ""]).unwrap();
        // A record of one empty field is written `""`, or it would read as no record.
        c.record(&[""]).unwrap();
        // Longer than the first room the writer is given, in characters of two bytes.
        c.record(&[long.as_str(), "x"]).unwrap();
        assert_eq!(out, format!("a,\"b,c\",\"say \"\"hi\"\"\",\"two\nlines\",\n\"\"\n{long},x\n"));
    }
}
