//! `organ recipe`: a ggml type per tensor, chosen to minimise the predicted total KL
//! divergence within a size budget (the core's [`organ_core::recipe`]), written as
//! `llama-quantize --tensor-type-file` lines and a table; `--apply` quantizes the model
//! with them (organ's quantizer, llama-quantize's bytes) and evaluates the result against
//! the model (docs/recipe.md).
//!
//! The losses come from a [`CurveSource`]: measured sensitivity reports (`--from`,
//! [`sensitivity`]), the prediction (`--imatrix`, `--data-free`: [`predicted`]), or both,
//! the measurement anchoring the prediction ([`Anchored`]); another source is one type
//! implementing the trait and one arm in [`SourceSpec::open`].

mod apply;
pub mod predicted;
pub mod sensitivity;

pub use organ_core::recipe::choose::CurveSource;
pub use organ_core::report::recipe::{Recipe, Row};

use super::outputs::{self, Files};
use crate::model::Model;
use anyhow::{anyhow, Result};
use organ_core::ggml_type::GgmlType;
use organ_core::model::TensorEntry;
use organ_core::recipe::anchored::{self, Anchored};
use organ_core::recipe::choose::Refusal;
use organ_core::recipe::Target;
use organ_core::report::formats::{AnyReport, Shown, TENSOR_TYPES};
use organ_core::report::recipe::applied_text;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The curve source the flags name.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceSpec {
    /// `--from SENS.json…`: one sensitivity report per candidate type.
    Measured(Vec<PathBuf>),
    /// `--imatrix FILE` (`Some`) or `--data-free` (`None`): predicted curves, for these
    /// candidate types (and Q8_0).
    Predicted { imatrix: Option<PathBuf>, types: Vec<GgmlType> },
    /// `--from SENS.json…` with `--imatrix FILE` or `--data-free`: the measured curves,
    /// and the predicted ones scaled per tensor by them ([`Anchored`]).
    Anchored { from: Vec<PathBuf>, imatrix: Option<PathBuf>, types: Vec<GgmlType> },
}

impl SourceSpec {
    /// Reads the source for `model`.
    ///
    /// # Errors
    /// The source's files are bad or not of this model.
    pub fn open(&self, model: &Model) -> Result<Box<dyn CurveSource>> {
        match self {
            SourceSpec::Measured(paths) => Ok(Box::new(measured(model, paths)?)),
            SourceSpec::Predicted { imatrix, types } => Ok(Box::new(predict(model, imatrix.as_deref(), types)?)),
            SourceSpec::Anchored { from, imatrix, types } => {
                let measured = measured(model, from)?;
                // Predicted in the measured types too, where the scale is taken.
                let types = anchored::with_types(types.clone(), measured.types());
                let predicted = predict(model, imatrix.as_deref(), &types)?;
                Ok(Box::new(Anchored::new(Box::new(measured), Box::new(predicted))))
            }
        }
    }
}

fn measured(model: &Model, paths: &[PathBuf]) -> Result<sensitivity::Measured> {
    let blake3 = model.fingerprint(false)?.blake3;
    let tensors: Vec<&TensorEntry> = model.tensors.iter().map(|t| &t.entry).collect();
    let reports = paths.iter().map(|p| sensitivity::read(p, &tensors, &blake3)).collect::<Result<_>>()?;
    sensitivity::Measured::new(reports)
}

fn predict(model: &Model, imatrix: Option<&Path>, types: &[GgmlType]) -> Result<predicted::Predicted> {
    let im = match imatrix {
        Some(p) => Some((p, crate::predict::read_imatrix(p)?)),
        None => None,
    };
    predicted::predicted(model, im.as_ref().map(|(p, i)| (*p, i)), types)
}

/// `--apply`: what to run after the recipe is written.
pub struct Apply<'a> {
    pub out: &'a Path,
    pub imatrix: Option<&'a Path>,
    /// Also have llama-quantize write the recipe, and compare its bytes with organ's.
    pub check_with_llama_quantize: bool,
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

/// `organ recipe`: chooses, prints, writes; applies when asked.
pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    let model = Model::open(o.model)?;
    let imatrix = o.apply.as_ref().is_some_and(|a| a.imatrix.is_some());
    // A target no recipe meets is refused before the prediction's minute.
    if let SourceSpec::Predicted { types, .. } = &o.source {
        let offered = |t: &TensorEntry| organ_core::recipe::predicted::offered(&t.name, types);
        organ_core::recipe::choose::check_target(&model.model, &offered, o.target, imatrix)
            .map_err(|e| refusal(&model, o.target, e))?;
    }
    let source = o.source.open(&model)?;
    let mut r = choose(&model, source.as_ref(), o.target, imatrix)?;
    outputs::print(AnyReport::Recipe(&r), &Shown::WHOLE, w)?;
    let files = Files::default().with(&TENSOR_TYPES, o.out.map(Path::to_path_buf));
    outputs::write_all(AnyReport::Recipe(&r), &files, &Shown::WHOLE, o.force)?;
    if let Some(a) = &o.apply {
        let applied = apply::run(o.model, &r, a, o.force, source.measured())?;
        let mut text = String::new();
        applied_text(&applied, &mut text)?;
        w.write_all(text.as_bytes())?;
        r.applied = Some(applied);
    }
    if let Some(p) = o.json {
        outputs::write_json(AnyReport::Recipe(&r), p, o.force)?;
    }
    Ok(())
}

/// The recipe for `model` from `source` within `target` (the core's
/// [`organ_core::recipe::choose::choose`]), its refusals in the CLI's words.
///
/// # Errors
/// A tensor llama-quantize cannot be told about, a budget below the smallest recipe.
pub fn choose(model: &Model, source: &dyn CurveSource, target: Target, imatrix: bool) -> Result<Recipe> {
    let asked = describe(target);
    organ_core::recipe::choose::choose(&model.model, &model.label, source, (target, &asked), imatrix)
        .map_err(|e| refusal(model, target, e))
}

/// A refusal of the core's recipe, in the CLI's words.
fn refusal(model: &Model, target: Target, e: Refusal) -> anyhow::Error {
    let (label, asked) = (&model.label, describe(target));
    match e {
        // The core's error stays in the chain: a format error, for --progress jsonl.
        Refusal::Metadata(c) => anyhow::Error::new(c),
        Refusal::Header(c) => anyhow::Error::new(c).context(format!("{label}: the output's header")),
        Refusal::HeaderAlone { .. } => anyhow!("{asked}: {e}"),
        Refusal::Solve(_) => anyhow!("{label}, {asked}: {e}"),
        _ => anyhow!("{label}: {e}"),
    }
}

/// The target as the user gave it.
fn describe(t: Target) -> String {
    match t {
        Target::Bpw(b) => format!("--target-bpw {b}"),
        Target::Size(s) => format!("--target-size {s}"),
    }
}
