//! `organ purify`: denoise selected tensors (spectral or fractal, docs/purify.md), put them
//! back in their own type (or F16 with `--as f16`), and write a self-describing model.

use crate::model::{Model, Tensor};
use crate::summary::{self, Line};
use anyhow::{bail, Result};
use organ_core::model::OwnedValue;
use organ_core::quant::dequantize;
use organ_core::quant::quantize::{can_quantize, quantize};
use organ_core::report::formats::AnyReport;
use organ_core::report::surgery::{Purify, PurifyRow as Row, Surgery};
use organ_core::surgery::purify::{purify, relative_l2, Method};
use organ_core::surgery::select::Selection;
use organ_core::zmeasure::measure_tensor;
use organ_core::GgmlType;
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

pub struct Options<'a> {
    pub model: &'a Path,
    pub out: &'a Path,
    pub method: Method,
    pub selection: Selection,
    /// Write purified tensors as this type instead of their own.
    pub as_type: Option<GgmlType>,
    pub only_if_improves: bool,
    pub split_max: Option<u64>,
    pub json: Option<&'a Path>,
    /// Replace outputs that exist (never an input).
    pub force: bool,
    /// `--judge`: evaluate the output against the input (crate::judge).
    pub judge: Option<crate::cmd::eval::Settings>,
}

fn method_text(m: Method) -> (String, String) {
    match m {
        Method::Fractal { strength } => ("fractal".into(), format!("strength={strength}")),
        #[allow(unreachable_patterns)]
        Method::Spectral { keep } => ("spectral".into(), format!("keep={keep}")),
    }
}

fn purify_one(t: &Tensor, o: &Options<'_>) -> Result<(Row, Option<Tensor>)> {
    let target = o.as_type.unwrap_or(t.ty);
    let n = t.n_elements;
    let mut row = Row {
        name: t.name.clone(),
        ty: t.ty.name().into(),
        written_as: t.ty.name().into(),
        theta_before: None,
        theta_after: None,
        relative_l2: None,
        status: String::new(),
    };
    let before = measure_tensor(&t.name, t.ty, n, t.bytes())?;
    row.theta_before = Some(before.theta);
    let values = dequantize(t.ty, t.bytes())?;
    let Some(purified) = purify(&values, t.dims.first().copied().unwrap_or(1) as usize, o.method) else {
        row.status = "untouched (non-finite or degenerate)".into();
        return Ok((row, None));
    };
    let mut bytes = Vec::new();
    quantize(target, &purified, &mut bytes)?;
    let after = measure_tensor(&t.name, target, n, &bytes)?;
    let stored = dequantize(target, &bytes)?;
    row.theta_after = Some(after.theta);
    row.relative_l2 = Some(relative_l2(&values, &stored));
    if o.only_if_improves && after.theta <= before.theta {
        row.status = "kept (θ did not rise)".into();
        return Ok((row, None));
    }
    row.status = "purified".into();
    row.written_as = target.name().into();
    let mut nt = t.clone();
    nt.entry.ty = target;
    nt.entry.n_bytes = bytes.len() as u64;
    nt.owned = Some(Arc::new(bytes));
    Ok((row, Some(nt)))
}

pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    if let Some(s) = &o.judge {
        crate::judge::check(o.model, o.out, o.split_max.is_some(), s)?;
    }
    let model = Model::open(o.model)?;
    let selected: Vec<usize> =
        (0..model.tensors.len()).filter(|&i| o.selection.matches(&model.tensors[i].name)).collect();
    if selected.is_empty() {
        bail!("{}: {}", model.label, o.selection.none_matched(model.tensors.iter().map(|t| t.name.as_str())));
    }
    // Refuse, by name and before any work, what cannot be put back in its type.
    let bad: Vec<String> = selected
        .iter()
        .map(|&i| &model.tensors[i])
        .filter(|t| !t.ty.can_dequantize() || !can_quantize(o.as_type.unwrap_or(t.ty)))
        .map(|t| format!("{} ({})", t.name, t.ty))
        .collect();
    if !bad.is_empty() {
        bail!(
            "organ cannot requantize {} selected tensors to their own type: {}. Use --as f16, or select other tensors",
            bad.len(),
            bad.join(", ")
        );
    }
    let results: Vec<(Row, Option<Tensor>)> =
        selected.par_iter().map(|&i| purify_one(&model.tensors[i], o)).collect::<Result<_>>()?;

    let (method, params) = method_text(o.method);
    writeln!(
        w,
        "purify {method} ({params}) of {} tensors of {} ({})",
        selected.len(),
        model.label,
        o.selection.describe()
    )?;
    writeln!(
        w,
        "  {:<40} {:<6} {:<6} {:>9} {:>9} {:>9}  status",
        "tensor", "type", "as", "θ before", "θ after", "rel L2"
    )?;
    table(&results.iter().map(|(r, _)| r).collect::<Vec<_>>(), w)?;

    let mut tensors = model.tensors.clone();
    let mut touched = Vec::new();
    for (&i, (_, t)) in selected.iter().zip(&results) {
        if let Some(t) = t {
            touched.push(t.name.clone());
            tensors[i] = t.clone();
        }
    }
    let mut kvs: Vec<(String, OwnedValue)> =
        model.kvs.iter().filter(|(k, _)| !k.starts_with("organ.purify.")).cloned().collect();
    kvs.push(("organ.purify.method".into(), OwnedValue::string(&method)));
    kvs.push(("organ.purify.parameters".into(), OwnedValue::string(&params)));
    kvs.push(("organ.purify.selection".into(), OwnedValue::string(&o.selection.describe())));
    kvs.push(("organ.purify.as".into(), OwnedValue::string(o.as_type.map_or("source", |t| t.name()))));
    kvs.push(("organ.purify.tensors".into(), OwnedValue::strings(&touched)?));
    let out_model = model.derived(kvs, tensors);
    writeln!(w, "{} of {} selected tensors purified", touched.len(), selected.len())?;
    crate::write::write_model(&out_model, &model, o.out, o.split_max, o.force, w)?;
    let verdict = crate::judge::judged(o.out, o.model, o.judge.as_ref(), w)?;
    if let Some(p) = o.json {
        let tensors = results.iter().map(|(r, _)| r).collect();
        let report =
            Purify { method: &method, parameters: &params, model: &model.label, tensors, judge: verdict.as_ref() };
        super::outputs::write_json(AnyReport::Surgery(&Surgery::Purify(report)), p, o.force)?;
    }
    Ok(())
}

/// The table's rows: one per tensor with `--verbose`; else tensors alike but for their
/// layer (same type, output type and status) are one row with a count, their θ and
/// relative L2 the group's means (the JSON keeps every tensor's).
fn table(rows: &[&Row], w: &mut dyn Write) -> Result<()> {
    let num = |v: Option<f64>, p: usize| v.map_or_else(|| "-".to_string(), |v| format!("{v:.p$}"));
    let mean = |v: &[Option<f64>]| {
        let got: Vec<f64> = v.iter().flatten().copied().collect();
        (!got.is_empty()).then(|| got.iter().sum::<f64>() / got.len() as f64)
    };
    let by_name: std::collections::HashMap<&str, &Row> = rows.iter().map(|r| (r.name.as_str(), *r)).collect();
    let lines = rows
        .iter()
        .map(|r| Line { tensor: r.name.clone(), text: format!("{:<6} {:<6} {}", r.ty, r.written_as, r.status) });
    let groups = summary::lines(lines.collect());
    for g in &groups {
        let members: Vec<&Row> = if g.layers.len() > 1 {
            g.layers
                .iter()
                .filter_map(|n| by_name.get(g.tensor.replacen("blk.*.", &format!("blk.{n}."), 1).as_str()).copied())
                .collect()
        } else {
            by_name.get(g.tensor.as_str()).copied().into_iter().collect()
        };
        let Some(first) = members.first() else { continue };
        let pick = |f: fn(&Row) -> Option<f64>| mean(&members.iter().map(|r| f(r)).collect::<Vec<_>>());
        writeln!(
            w,
            "  {:<40} {:<6} {:<6} {:>9} {:>9} {:>9}  {}{}",
            organ_core::gguf::display::printable(&g.tensor),
            first.ty,
            first.written_as,
            num(pick(|r| r.theta_before), 4),
            num(pick(|r| r.theta_after), 4),
            num(pick(|r| r.relative_l2), 5),
            first.status,
            g.count()
        )?;
    }
    if summary::any_grouped(&groups) {
        writeln!(
            w,
            "  (a row of a count stands for that many tensors, one per layer, with their means; --verbose or the \
             JSON lists each)"
        )?;
    }
    Ok(())
}
