//! `organ recipe`: a ggml type per tensor, chosen to minimise the predicted total KL
//! divergence within a size budget (the core's [`organ_core::recipe`]), written as
//! `llama-quantize --tensor-type-file` lines and a table; `--apply` runs llama-quantize
//! with them and evaluates the result against the model (docs/recipe.md).
//!
//! The losses come from a [`CurveSource`]: measured sensitivity reports (`--from`,
//! [`sensitivity`]) today; another source is one type implementing the trait and one
//! arm in [`SourceSpec::open`].

mod apply;
pub mod predicted;
pub mod sensitivity;

use crate::model::Model;
use anyhow::{bail, Context, Result};
use organ_core::ggml_type::GgmlType;
use organ_core::model::TensorEntry;
use organ_core::recipe::accept::{quantizable, tensor_type_arg};
use organ_core::recipe::size::{header_len, Account};
use organ_core::recipe::solve::{solve, Solution, Why};
use organ_core::recipe::{Curve, Target, Tensor};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where each tensor's loss per type comes from.
pub trait CurveSource {
    /// What it is, for the table.
    fn describe(&self) -> String;
    /// The types it gives a loss for.
    fn types(&self) -> Vec<GgmlType>;
    /// The loss (mean KL divergence, nats) of `tensor` alone stored in `ty`, if known.
    fn cost(&self, tensor: &TensorEntry, ty: GgmlType) -> Option<f64>;
    /// Whether the losses are measured single-tensor KL divergences (the additivity check
    /// compares their sum with the measured KL divergence of the whole recipe).
    fn measured(&self) -> bool;
}

/// The curve source the flags name.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceSpec {
    /// `--from SENS.json…`: one sensitivity report per candidate type.
    Measured(Vec<PathBuf>),
    /// `--imatrix FILE` (`Some`) or `--data-free` (`None`): predicted curves, for these
    /// candidate types (and Q8_0).
    Predicted { imatrix: Option<PathBuf>, types: Vec<GgmlType> },
}

impl SourceSpec {
    /// Reads the source for `model`.
    ///
    /// # Errors
    /// The source's files are bad or not of this model.
    pub fn open(&self, model: &Model) -> Result<Box<dyn CurveSource>> {
        match self {
            SourceSpec::Measured(paths) => {
                let blake3 = model.fingerprint(false)?.blake3;
                let tensors: Vec<&TensorEntry> = model.tensors.iter().map(|t| &t.entry).collect();
                let reports = paths.iter().map(|p| sensitivity::read(p, &tensors, &blake3)).collect::<Result<_>>()?;
                Ok(Box::new(sensitivity::Measured::new(reports)?))
            }
            SourceSpec::Predicted { imatrix, types } => {
                let im = match imatrix {
                    Some(p) => Some((p.as_path(), crate::predict::read_imatrix(p)?)),
                    None => None,
                };
                Ok(Box::new(predicted::Predicted::new(model, im.as_ref().map(|(p, i)| (*p, i)), types)?))
            }
        }
    }
}

/// `--apply`: what to run after the recipe is written.
pub struct Apply<'a> {
    pub out: &'a Path,
    pub imatrix: Option<&'a Path>,
    /// The held-out text the output is evaluated on against the model.
    pub eval: Option<crate::llama_cpp::perplexity::Settings>,
    pub llama_cpp: Option<&'a Path>,
}

/// `organ recipe`'s options.
pub struct Options<'a> {
    pub model: &'a Path,
    pub target: Target,
    pub source: SourceSpec,
    pub out: Option<&'a Path>,
    pub json: Option<&'a Path>,
    pub apply: Option<Apply<'a>>,
    pub force: bool,
}

/// One tensor's line of the table.
#[derive(Serialize)]
pub struct Row {
    pub name: String,
    pub from: GgmlType,
    #[serde(rename = "type")]
    pub ty: GgmlType,
    pub bytes: u64,
    pub cost: f64,
    pub why: String,
}

/// The recipe: the table and its totals.
#[derive(Serialize)]
pub struct Recipe {
    pub recipe: u32,
    pub model: String,
    pub source: String,
    pub target: String,
    /// The budget in the bytes it counts (`data` or `file`), and what it counted.
    pub budget: u64,
    pub account: &'static str,
    pub charged: u64,
    /// Header bytes of the output as llama-quantize writes it (padding included).
    pub header_bytes: u64,
    /// The output's size: header plus each tensor padded to 32.
    pub file_bytes: u64,
    pub tensor_bytes: u64,
    pub bpw: f64,
    pub predicted_kld: f64,
    pub lower_bound: f64,
    pub lambda: f64,
    pub tensors: Vec<Row>,
    /// The --tensor-type lines, as written to --out.
    #[serde(skip)]
    pub lines: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied: Option<apply::Applied>,
}

/// `organ recipe`: chooses, prints, writes; applies when asked.
pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    let model = Model::open(o.model)?;
    let source = o.source.open(&model)?;
    let imatrix = o.apply.as_ref().is_some_and(|a| a.imatrix.is_some());
    let mut r = choose(&model, source.as_ref(), o.target, imatrix)?;
    print(&r, w)?;
    if let Some(p) = o.out {
        crate::atomic::write_text(p, o.force, &(r.lines.join("\n") + "\n"))?;
    }
    if let Some(a) = &o.apply {
        let applied = apply::run(o.model, &r, a, o.force, source.measured())?;
        apply::print(&applied, w)?;
        r.applied = Some(applied);
    }
    if let Some(p) = o.json {
        crate::atomic::write_json(p, o.force, &r)?;
    }
    Ok(())
}

/// The recipe for `model` from `source` within `target`.
///
/// # Errors
/// A tensor llama-quantize cannot be told about, a budget below the smallest recipe.
pub fn choose(model: &Model, source: &dyn CurveSource, target: Target, imatrix: bool) -> Result<Recipe> {
    let label = model.label.clone();
    let arch = model.architecture().unwrap_or_default().into_owned();
    let views = model.kvs.iter().map(|(k, v)| Ok((k.as_str(), v.view()?))).collect::<Result<Vec<_>>>()?;
    let infos: Vec<(&str, &[u64], GgmlType)> =
        model.tensors.iter().map(|t| (t.name.as_str(), t.dims.as_slice(), t.ty)).collect();
    let header = header_len(&views, &infos, imatrix).with_context(|| format!("{label}: the output's header"))?;
    let n_elements: u64 = model.tensors.iter().map(|t| t.n_elements).sum();
    let Some((budget, account)) = target.budget(n_elements, header) else {
        bail!("{}: the output's header alone takes {header} bytes", describe(target));
    };
    let types = source.types();
    let mut curves = Vec::with_capacity(model.tensors.len());
    for t in model.tensors.iter() {
        let candidates: Vec<(GgmlType, f64)> =
            types.iter().filter_map(|&ty| Some((ty, source.cost(&t.entry, ty)?))).collect();
        let tensor = Tensor { name: &t.name, dims: &t.dims, ty: t.ty };
        let (curve, _refused) = Curve::of(&arch, tensor, &candidates, imatrix);
        if curve.options.is_empty() {
            bail!("{label}: tensor {}: its own type {} does not fit its shape {:?}", t.name, t.ty, t.dims);
        }
        curves.push(curve);
    }
    let s = solve(&curves, budget, account).map_err(|e| anyhow::anyhow!("{label}, {}: {e}", describe(target)))?;
    // Every tensor llama-quantize quantizes gets its line, those that keep their type too:
    // a tensor no pattern names would get the default type and its mixture's rules.
    let mut lines = Vec::new();
    for ((t, c), &(o, _)) in model.tensors.iter().zip(&curves).zip(&s.choices) {
        if quantizable(&arch, &t.name, &t.dims) {
            let line = tensor_type_arg(&t.name, c.options[o].ty).map_err(|reason| {
                anyhow::anyhow!("{label}: {}", organ_core::recipe::Error::Unnameable { tensor: t.name.clone(), reason })
            })?;
            lines.push(line);
        }
    }
    Ok(table(model, &curves, &s, header, budget, account, target, source, lines))
}

/// The target as the user gave it.
fn describe(t: Target) -> String {
    match t {
        Target::Bpw(b) => format!("--target-bpw {b}"),
        Target::Size(s) => format!("--target-size {s}"),
    }
}

#[allow(clippy::too_many_arguments)]
fn table(
    model: &Model,
    curves: &[Curve],
    s: &Solution,
    header: u64,
    budget: u64,
    account: Account,
    target: Target,
    source: &dyn CurveSource,
    lines: Vec<String>,
) -> Recipe {
    let tensors: Vec<Row> = model
        .tensors
        .iter()
        .zip(curves)
        .zip(&s.choices)
        .map(|((t, c), &(o, why))| {
            let p = c.options[o];
            let why = match why {
                Why::Only => "its only type".to_string(),
                Why::Smallest => format!("smallest: no type's KLD saved {:.3e}/byte (λ)", s.lambda),
                Why::Hull => format!("least KLD + λ·bytes at λ = {:.3e}/byte", s.lambda),
                Why::Fill => "bytes left after λ".to_string(),
            };
            Row { name: t.name.clone(), from: t.ty, ty: p.ty, bytes: p.bytes, cost: p.cost, why }
        })
        .collect();
    let tensor_bytes: u64 = tensors.iter().map(|r| r.bytes).sum();
    let file_bytes = header + tensors.iter().map(|r| Account::File.charge(r.bytes)).sum::<u64>();
    let n_elements: u64 = model.tensors.iter().map(|t| t.n_elements).sum();
    Recipe {
        recipe: 1,
        model: model.label.clone(),
        source: source.describe(),
        target: describe(target),
        budget,
        account: match account {
            Account::Data => "data",
            Account::File => "file",
        },
        charged: s.charged,
        header_bytes: header,
        file_bytes,
        tensor_bytes,
        bpw: tensor_bytes as f64 * 8.0 / n_elements.max(1) as f64,
        predicted_kld: s.cost,
        lower_bound: s.lower_bound,
        lambda: s.lambda,
        tensors,
        lines,
        applied: None,
    }
}

/// Prints the table and the totals.
pub fn print(r: &Recipe, w: &mut dyn Write) -> Result<()> {
    // Names and paths come from the model: escaped as every other command prints them.
    use organ_core::gguf::display::printable;
    writeln!(w, "recipe for {} ({}), {}", printable(&r.model), printable(&r.source), r.target)?;
    writeln!(w, "{:<36} {:>6} {:>6} {:>11} {:>11}  why", "tensor", "from", "type", "bytes", "pred. KLD")?;
    for t in &r.tensors {
        writeln!(
            w,
            "{:<36} {:>6} {:>6} {:>11} {:>11.4e}  {}",
            printable(&t.name),
            t.from.name(),
            t.ty.name(),
            t.bytes,
            t.cost,
            t.why
        )?;
    }
    writeln!(
        w,
        "total: {} tensor bytes ({:.4} bpw), file {} bytes (header {}); budget {} {} bytes, {} used",
        r.tensor_bytes, r.bpw, r.file_bytes, r.header_bytes, r.budget, r.account, r.charged
    )?;
    writeln!(
        w,
        "predicted KLD (sum of single-tensor KLDs): {:.5} (no recipe within the budget below {:.5}); λ = {:.3e}/byte",
        r.predicted_kld, r.lower_bound, r.lambda
    )?;
    Ok(())
}

#[cfg(test)]
mod print_tests {
    use super::*;

    /// A tensor name and a model label with a terminal's escape sequences (an OSC title, a
    /// colour, CR and LF) are printed escaped (before: raw, to the terminal and the API's
    /// recipe.txt).
    #[test]
    fn control_characters_in_names_are_escaped() {
        let hostile = "blk.0.attn_norm.weight\u{1b}]0;owned\u{7}\r\n\u{1b}[31m";
        let row = Row {
            name: hostile.into(),
            from: GgmlType::F32,
            ty: GgmlType::F32,
            bytes: 4,
            cost: 0.0,
            why: "kept".into(),
        };
        let r = Recipe {
            recipe: 1,
            model: "m\u{1b}[2J.gguf".into(),
            source: "data-free".into(),
            target: "8 bpw".into(),
            budget: 1,
            account: "data",
            charged: 1,
            header_bytes: 1,
            file_bytes: 1,
            tensor_bytes: 1,
            bpw: 8.0,
            predicted_kld: 0.0,
            lower_bound: 0.0,
            lambda: 0.0,
            tensors: vec![row],
            lines: vec![],
            applied: None,
        };
        let mut out = Vec::new();
        print(&r, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains(['\u{1b}', '\u{7}', '\r']), "{text:?}");
        assert_eq!(text.lines().count(), 5, "the name's LF starts no line: {text:?}");
        assert!(text.contains(r"blk.0.attn_norm.weight\u{1b}]0;owned\u{7}\r\n\u{1b}[31m"), "{text}");
        assert!(text.contains(r"m\u{1b}[2J.gguf"), "{text}");
    }
}
