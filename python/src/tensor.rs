//! `organ.tensor()`: one tensor dequantized by the core, in parallel chunks.

use crate::run;
use anyhow::{Context, Result};
use organ_native::model::Model;
use pyo3::prelude::*;
use pyo3::types::PyByteArray;
use rayon::prelude::*;
use std::path::PathBuf;

/// Elements a dequantizing task takes at a time (a multiple of every block size).
const DEQUANTIZE_CHUNK: usize = 1 << 20;

/// Tensor `name` of the model at `path`, dequantized to f32 by the core (the same bits as
/// gguf-py's `dequantize`): its values as little-endian f32 bytes, its shape (ggml's
/// order, innermost first) and its type's name.
#[pyfunction]
#[pyo3(signature = (path, name, threads=None))]
pub(crate) fn tensor<'py>(
    py: Python<'py>,
    path: PathBuf,
    name: String,
    threads: Option<usize>,
) -> PyResult<(Bound<'py, PyByteArray>, Vec<u64>, &'static str)> {
    let (values, dims, ty) = run(py, threads, None, move || dequantized(&path, &name))?;
    let bytes = PyByteArray::new_with(py, values.len() * 4, |b| {
        for (o, v) in b.chunks_exact_mut(4).zip(&values) {
            o.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    })?;
    Ok((bytes, dims, ty))
}

/// [`tensor`]'s work: the model opened as the commands open it, the tensor's bytes (mapped,
/// or read for a model at a URL), dequantized a chunk of whole blocks per task.
fn dequantized(path: &std::path::Path, name: &str) -> Result<(Vec<f32>, Vec<u64>, &'static str)> {
    let model = Model::open_any(path)?;
    let Some(t) = model.tensors.iter().find(|t| t.name == name) else {
        let near: Vec<&str> = model.tensors.iter().map(|t| t.name.as_str()).take(5).collect();
        anyhow::bail!(
            "{}: no tensor named {name:?} (it has {} tensors: {}{})",
            path.display(),
            model.tensors.len(),
            near.join(", "),
            if model.tensors.len() > near.len() { ", …" } else { "" }
        );
    };
    let what = || format!("{}: tensor {:?}", path.display(), t.name);
    if !t.ty.can_dequantize() {
        anyhow::bail!("{}: organ cannot dequantize type {}", what(), t.ty.name());
    }
    let bytes = t.bytes_or_read().with_context(what)?;
    let n = usize::try_from(t.n_elements).with_context(|| format!("{}: larger than memory", what()))?;
    let mut out = vec![0f32; n];
    let (bs, ts) = (t.ty.block_size(), t.ty.type_size());
    let per_chunk = DEQUANTIZE_CHUNK / bs * ts;
    out.par_chunks_mut(DEQUANTIZE_CHUNK / bs * bs)
        .zip(bytes.par_chunks(per_chunk))
        .try_for_each(|(o, b)| organ_core::quant::dequantize_into(t.ty, b, o))
        .with_context(what)?;
    Ok((out, t.dims.clone(), t.ty.name()))
}
