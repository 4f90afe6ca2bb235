//! `--apply OUT.gguf`: llama-quantize run on the model with the recipe, its output checked
//! (every tensor in the type chosen, the file the size accounted), then evaluated against
//! the model on a held-out text, and the additivity of single-tensor KL divergences
//! reported.

use super::{Apply, Recipe};
use crate::llama_cpp::handed::{create_private, hand_model, scratch_dir};
use crate::llama_cpp::perplexity::evaluate;
use crate::llama_cpp::quantize::{Output, Quantize};
use crate::llama_cpp::{self, Handed};
use anyhow::{bail, Context, Result};
use organ_core::recipe::accept::DEFAULT_FTYPE;
use organ_core::report::recipe::{Additivity, Applied};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// Runs llama-quantize with `r`'s lines on `model` into `a.out`, checks and evaluates it.
///
/// # Errors
/// llama-quantize is missing or fails, its output has a tensor in another type than the
/// recipe's or another size than accounted, the evaluation fails.
pub fn run(model: &Path, r: &Recipe, a: &Apply<'_>, force: bool, measured: bool) -> Result<Applied> {
    let tool = llama_cpp::find("llama-quantize", a.llama_cpp)?;
    let scratch = a.out.parent().filter(|p| !p.as_os_str().is_empty());
    let dir = scratch_dir(scratch)?;
    let (handed_model, read) = hand_model(model, &dir.path.join("model"))?;
    drop(read);
    let mut recipe = create_private(&dir.path.join("recipe.txt"))?;
    recipe.write_all((r.lines.join("\n") + "\n").as_bytes()).context("cannot write the recipe for llama-quantize")?;
    let recipe = Handed::file(recipe)?;
    let imatrix = a.imatrix.map(|p| crate::input::open(p).and_then(Handed::file)).transpose()?;
    let (temp, file) = crate::atomic::Temp::file(a.out, force)?;
    let out = Handed::file(file)?;
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
    let file_bytes = check(&temp.path, r, a.imatrix.is_some()).with_context(|| format!("{}", a.out.display()))?;
    temp.commit()?;
    drop(dir);
    let eval = a.eval.as_ref().map(|s| evaluate(a.out, Some(model), s, scratch)).transpose()?;
    let additivity = eval.as_ref().and_then(|e| e.kl_divergence.as_ref()).filter(|_| measured).map(|k| {
        let sum_single = r.predicted_kld;
        Additivity {
            sum_single,
            measured: k.mean.value,
            measured_error: k.mean.error,
            ratio: k.mean.value / sum_single,
        }
    });
    Ok(Applied {
        out: a.out.display().to_string(),
        file_bytes,
        llama_quantize: tool.display().to_string(),
        eval,
        additivity,
    })
}

/// The output's size, after checking every tensor has the recipe's type and the file the
/// accounted size (at most it, with an importance matrix's strings of unknown length).
fn check(out: &Path, r: &Recipe, imatrix: bool) -> Result<u64> {
    let m = crate::model::Model::open(out)?;
    let got: HashMap<&str, organ_core::ggml_type::GgmlType> =
        m.tensors.iter().map(|t| (t.name.as_str(), t.ty)).collect();
    for row in &r.tensors {
        match got.get(row.name.as_str()) {
            Some(&ty) if ty == row.ty => {}
            Some(ty) => bail!("llama-quantize wrote {} as {ty}, the recipe says {}", row.name, row.ty),
            None => bail!("llama-quantize left out {}", row.name),
        }
    }
    let len = std::fs::metadata(out).with_context(|| format!("{}: cannot stat", out.display()))?.len();
    if len > r.file_bytes || (!imatrix && len != r.file_bytes) {
        bail!("llama-quantize wrote {len} bytes, organ accounted {}", r.file_bytes);
    }
    Ok(len)
}
