//! The changed models: the input with one tensor's bytes replaced, every other tensor's
//! bytes and the metadata unchanged. Each is made of the staged model's shards
//! ([`super::staged`]); `--keep-models` writes it whole instead ([`write_whole`]: every
//! other tensor copied byte for byte, in the kernel, as graft copies them).
//!
//! For `--to TYPE` the replacement comes from a donor, the whole model quantized once by
//! `llama-quantize --pure` to TYPE (so every tensor's bytes are llama.cpp's own, as a
//! recipe applied by llama-quantize would make them); a tensor llama.cpp cannot hold in
//! TYPE (its rows are not whole blocks: llama-quantize falls back to another type) is left
//! out, and said so. For `--ablate` organ makes the values and stores them in the tensor's
//! own type (F16 where organ has no quantizer for it).

use super::run_dir::Cache;
use crate::atomic::Temp;
use crate::llama_cpp::quantize::{Output, Quantize};
use crate::llama_cpp::{self, Handed};
use crate::model::{Model, Tensor};
use anyhow::{bail, Context, Result};
use organ_core::quant::dequantize;
use organ_core::quant::quantize::{can_quantize, quantize};
use organ_core::sensitivity::{ablated, Change};
use organ_core::GgmlType;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The llama.cpp tools a run needs, found before any work.
pub struct Tools {
    pub perplexity: PathBuf,
    quantize: Option<PathBuf>,
}

impl Tools {
    /// llama-perplexity, and llama-quantize for `--to`.
    ///
    /// # Errors
    /// A tool is missing (the error says how to build it).
    pub fn find(change: Change, dir: Option<&Path>) -> Result<Tools> {
        let perplexity = llama_cpp::find("llama-perplexity", dir)?;
        let quantize = match change {
            Change::To(ty) => {
                ftype_name(ty)?;
                Some(llama_cpp::find("llama-quantize", dir)?)
            }
            _ => None,
        };
        Ok(Tools { perplexity, quantize })
    }
}

/// llama-quantize's name for a model of `ty` (its `type` argument), or an error for
/// types it cannot make without an importance matrix or at all.
fn ftype_name(ty: GgmlType) -> Result<&'static str> {
    use GgmlType as T;
    Ok(match ty {
        T::F32 | T::F16 | T::BF16 | T::Q4_0 | T::Q4_1 | T::Q5_0 | T::Q5_1 | T::Q8_0 | T::Q2_K | T::Q3_K => ty.name(),
        T::Q4_K | T::Q5_K | T::Q6_K | T::IQ4_NL | T::IQ4_XS | T::TQ1_0 | T::TQ2_0 | T::Q1_0 | T::Q2_0 => ty.name(),
        _ => bail!(
            "--to {}: llama-quantize makes it only with an importance matrix or not as a whole model; \
             give one of F16, BF16, Q8_0, Q6_K, Q5_K, Q5_1, Q5_0, Q4_K, Q4_1, Q4_0, IQ4_NL, IQ4_XS, Q3_K, Q2_K, Q2_0, \
             TQ2_0, TQ1_0, Q1_0",
            ty.name()
        ),
    })
}

/// Where the changed tensors' bytes come from.
pub enum Donor {
    /// The model quantized to the type by llama-quantize.
    Quantized { ty: GgmlType, model: Model },
    /// Values organ makes (noise, zeros).
    Ablated(Change),
}

impl Donor {
    /// For `--to`, the donor (kept in the cache, made by llama-quantize if not there yet).
    ///
    /// # Errors
    /// llama-quantize fails, or its output cannot be read.
    pub fn make(model: &Model, path: &Path, change: Change, tools: &Tools, cache: &Cache) -> Result<Donor> {
        let Change::To(ty) = change else { return Ok(Donor::Ablated(change)) };
        let dest = cache.model_dir().join(format!("donor-{}.gguf", ty.name()));
        if !dest.is_file() {
            let quantize = tools.quantize.as_deref().context("llama-quantize was not found")?;
            quantize_whole(quantize, path, model, ty, &dest)?;
        }
        let donor = Model::open(&dest).with_context(|| format!("the {} donor made by llama-quantize", ty.name()))?;
        Ok(Donor::Quantized { ty, model: donor })
    }

    /// The picked tensors that can be changed: for `--to`, those the donor holds in the
    /// type asked for (the others are listed, with the type llama.cpp fell back to).
    ///
    /// # Errors
    /// None of them can.
    pub fn keep_possible(&self, model: &Model, picked: Vec<usize>, w: &mut dyn Write) -> Result<Vec<usize>> {
        let Donor::Quantized { ty, model: donor } = self else { return Ok(picked) };
        let (mut kept, mut left) = (Vec::new(), Vec::new());
        for i in picked {
            let t = &model.tensors[i];
            match donor.tensors.iter().find(|d| d.name == t.name) {
                Some(d) if d.ty == *ty && d.dims == t.dims => kept.push(i),
                Some(d) => left.push(format!("{} ({}: rows of {} values)", t.name, d.ty.name(), t.dims[0])),
                None => left.push(format!("{} (not in the donor)", t.name)),
            }
        }
        if !left.is_empty() {
            writeln!(
                w,
                "left out: {} tensors that llama.cpp does not hold as {} (it falls back to another type): {}",
                left.len(),
                ty.name(),
                left.join(", ")
            )?;
        }
        if kept.is_empty() {
            bail!(
                "{}: no selected tensor can be {} (rows must be whole {}-value blocks)",
                model.label,
                ty.name(),
                ty.block_size()
            );
        }
        Ok(kept)
    }

    /// Tensor `i` of `model` as the change makes it: the donor's, or ablated.
    ///
    /// # Errors
    /// The tensor is not in the donor, or cannot be decoded or stored.
    pub fn replacement(&self, model: &Model, i: usize) -> Result<Tensor> {
        let t = &model.tensors[i];
        match self {
            Donor::Quantized { model: donor, .. } => donor
                .tensors
                .iter()
                .find(|d| d.name == t.name)
                .cloned()
                .with_context(|| format!("{}: not in the donor", t.name)),
            Donor::Ablated(change) => ablate(t, *change),
        }
    }
}

/// Writes the whole model with tensor `i` replaced by `replaced` into a temp file for
/// `dest` (removed when the returned [`Temp`] drops unless committed), with its length:
/// the changed model `--keep-models` keeps, one file that loads alone.
///
/// # Errors
/// The file cannot be written.
pub fn write_whole(model: &Model, i: usize, replaced: &Tensor, dest: &Path, force: bool) -> Result<(Temp, u64)> {
    let mut tensors = model.tensors.clone();
    tensors[i] = replaced.clone();
    crate::write::gguf::stage_gguf(model.version, &model.kvs, &tensors, dest, force)
}

/// `t` with its values replaced under `change`, in its own type where organ quantizes it.
fn ablate(t: &Tensor, change: Change) -> Result<Tensor> {
    let values = dequantize(t.ty, t.bytes()).with_context(|| format!("{}: cannot decode", t.name))?;
    let new = ablated(change, &t.name, &values).context("not an ablation")?;
    let ty = if can_quantize(t.ty) { t.ty } else { GgmlType::F16 };
    let mut bytes = Vec::new();
    quantize(ty, &new, &mut bytes).with_context(|| format!("{}: cannot store as {}", t.name, ty.name()))?;
    let mut nt = t.clone();
    nt.entry.ty = ty;
    nt.entry.n_bytes = bytes.len() as u64;
    nt.owned = Some(Arc::new(bytes));
    Ok(nt)
}

/// `llama-quantize [--allow-requantize] --pure MODEL DEST TYPE`, the model handed open,
/// the output written to a temp name beside `dest` and renamed when llama-quantize succeeded.
fn quantize_whole(tool: &Path, path: &Path, model: &Model, ty: GgmlType, dest: &Path) -> Result<()> {
    if model.files.len() != 1 {
        bail!("{}: --to needs a single GGUF file (merge a split model with llama-gguf-split first)", path.display());
    }
    let input = Handed::file(crate::input::open(path)?)?;
    let (tmp, file) = Temp::file(dest, true)?;
    drop(file);
    let c = Quantize {
        allow_requantize: model.tensors.iter().any(|t| t.ty.block_size() > 1),
        pure: true,
        tensor_type_file: None,
        imatrix: None,
        model: &input,
        out: Output::Path(&tmp.path),
        ftype: ftype_name(ty)?,
    };
    crate::progress::note(format!(
        "making the {} donor with llama-quantize --pure (once per model and type)",
        ty.name()
    ));
    llama_cpp::run(c.command(tool)).with_context(|| format!("{}: llama-quantize to {}", path.display(), ty.name()))?;
    tmp.commit()
}
