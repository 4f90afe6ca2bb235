//! `--apply OUT.gguf`: the model quantized by organ with the recipe (`organ quantize` with
//! its lines as `--tensor-type` patterns over Q8_0, requantizing allowed, and the
//! recipe's importance matrix), the plan checked against the recipe before a byte is
//! written (every tensor in the type chosen, the file the size accounted); with
//! `--check-with-llama-quantize`, llama-quantize makes the same file from the same lines
//! and the two are compared; then the output is evaluated against the model on a
//! held-out text, and the additivity of single-tensor KL divergences reported.

use super::{Apply, Recipe};
use crate::cmd::outputs::Files;
use crate::cmd::quantize::{self, Flags};
use crate::llama_cpp::handed::{create_private, hand_model, scratch_dir};
use crate::llama_cpp::perplexity::evaluate;
use crate::llama_cpp::quantize::{Output, Quantize};
use crate::llama_cpp::{self, Handed};
use crate::model::Model;
use anyhow::{anyhow, Context, Result};
use organ_core::quantize::{derived::header_difference, Ftype};
use organ_core::recipe::accept::DEFAULT_FTYPE;
use organ_core::report::recipe::Applied;
use std::io::Write;
use std::path::Path;

/// Quantizes `model` with `r`'s lines into `a.out`, checks (and, when asked, compares with
/// llama-quantize's) and evaluates it.
///
/// # Errors
/// The plan has a tensor in another type than the recipe's or another size than
/// accounted, a value a type cannot hold, llama-quantize (when asked for) is missing,
/// fails or writes other bytes, the evaluation fails.
pub fn run(model: &Path, r: &Recipe, a: &Apply<'_>, force: bool, measured: bool) -> Result<Applied> {
    let ftype = Ftype::from_id(DEFAULT_FTYPE.1).ok_or_else(|| anyhow!("file type {} unknown", DEFAULT_FTYPE.0))?;
    let flags = Flags { imatrix: a.imatrix, tensor_types: &r.lines, allow_requantize: true, ..Flags::default() };
    let o = quantize::Options {
        input: model,
        output: a.out,
        params: quantize::params(ftype, &flags)?,
        force,
        threads: None,
        reports: Files::default(),
    };
    let (m, plan) = quantize::open(&o)?;
    let file_bytes = plan.check_recipe(r).with_context(|| format!("{}: the recipe's plan", model.display()))?;
    let temp = quantize::write(&m, &plan, &o)?.pop().ok_or_else(|| anyhow!("nothing written"))?;
    drop(m);
    let checked_with = match a.check_with_llama_quantize {
        true => Some(same_as_llama_quantize(model, r, a, &temp.path)?),
        false => None,
    };
    temp.commit()?;
    let scratch = a.out.parent().filter(|p| !p.as_os_str().is_empty());
    let eval = a.eval.as_ref().map(|s| evaluate(a.out, Some(model), s, scratch)).transpose()?;
    Ok(Applied::new(
        a.out.display().to_string(),
        file_bytes,
        format!("organ {}", env!("CARGO_PKG_VERSION")),
        checked_with,
        eval,
        (r.predicted_kld, measured),
    ))
}

/// Runs llama-quantize with the recipe's lines on `model` (files handed open, in a private
/// scratch directory) and compares its file with organ's at `ours`: the same header but
/// for the importance matrix's path, the same bytes in every tensor. Returns the
/// llama-quantize that agreed.
fn same_as_llama_quantize(model: &Path, r: &Recipe, a: &Apply<'_>, ours: &Path) -> Result<String> {
    let tool = llama_cpp::find("llama-quantize", a.llama_cpp)?;
    let dir = scratch_dir(ours.parent().filter(|p| !p.as_os_str().is_empty()))?;
    let (handed_model, read) = hand_model(model, &dir.path.join("model"))?;
    drop(read);
    let mut recipe = create_private(&dir.path.join("recipe.txt"))?;
    recipe.write_all((r.lines.join("\n") + "\n").as_bytes()).context("cannot write the recipe for llama-quantize")?;
    let recipe = Handed::file(recipe)?;
    let imatrix = a.imatrix.map(|p| crate::input::open(p).and_then(Handed::file)).transpose()?;
    let theirs = dir.path.join("llama-quantize.gguf");
    let out = Handed::file(create_private(&theirs)?)?;
    let c = Quantize {
        allow_requantize: true,
        pure: false,
        tensor_type_file: Some(&recipe),
        imatrix: imatrix.as_ref(),
        model: &handed_model,
        out: Output::Handed(&out),
        ftype: DEFAULT_FTYPE.0,
    };
    llama_cpp::run(c.command(&tool)).with_context(|| format!("{}: llama-quantize with the recipe", model.display()))?;
    drop((handed_model, recipe, out, imatrix));
    let (ours_m, theirs_m) = (Model::open(ours)?, Model::open(&theirs)?);
    let differs = |what: String| anyhow!("organ's file and llama-quantize's ({}) differ: {what}", tool.display());
    if let Some(d) = header_difference(&ours_m.model, &theirs_m.model) {
        return Err(differs(d));
    }
    for (x, y) in ours_m.tensors.iter().zip(&theirs_m.tensors) {
        let (bx, by) = (x.bytes_or_read()?, y.bytes_or_read()?);
        if let Some(i) = bx.iter().zip(by.iter()).position(|(p, q)| p != q) {
            return Err(differs(format!("tensor {:?} ({}) from byte {i} of {}", x.name, x.ty, bx.len())));
        }
        drop((bx, by));
        x.release();
        y.release();
    }
    Ok(tool.display().to_string())
}
