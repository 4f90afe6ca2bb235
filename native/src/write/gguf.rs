//! Writing one GGUF file from metadata and tensors (the layout is the core's,
//! [`organ_core::gguf::writer`]): staged in a temp path beside the destination.

use super::copy::write_tensor_data;
use crate::atomic::Temp;
use crate::model::Tensor;
use anyhow::{Context, Result};
use organ_core::gguf::writer::{padding, plan, TensorSpec};
use organ_core::gguf::MetaValue;
use organ_core::model::OwnedValue;
use std::io::Write;
use std::path::Path;

/// Writes a GGUF holding `kvs` and `tensors` (each with its own type and bytes) to `dest`.
pub fn write_gguf(
    version: u32,
    kvs: &[(String, OwnedValue)],
    tensors: &[Tensor],
    dest: &Path,
    force: bool,
) -> Result<u64> {
    let (tmp, len) = stage_gguf(version, kvs, tensors, dest, force)?;
    tmp.commit()?;
    Ok(len)
}

/// The layout of the GGUF of `kvs` and `specs`, to be written at `dest` (named by errors).
pub(crate) fn lay_out<'a>(
    version: u32,
    kvs: &[(String, OwnedValue)],
    specs: impl Iterator<Item = TensorSpec<'a>>,
    dest: &Path,
) -> Result<organ_core::gguf::writer::Layout> {
    let views = kvs.iter().map(|(k, v)| Ok((k.as_str(), v.view()?))).collect::<Result<Vec<(&str, MetaValue<'_>)>>>()?;
    let specs: Vec<TensorSpec<'_>> = specs.collect();
    plan(version, &views, &specs).with_context(|| format!("{}: cannot lay out the GGUF", dest.display()))
}

/// The GGUF [`stage_gguf`] writes for these metadata and tensors: its header and where
/// each tensor goes, nothing written (`inspect` of an organ directory shows it).
///
/// # Errors
/// What the core's [`plan`] refuses, named after `dest`.
pub fn plan_gguf(
    version: u32,
    kvs: &[(String, OwnedValue)],
    tensors: &[Tensor],
    dest: &Path,
) -> Result<organ_core::gguf::writer::Layout> {
    let specs = tensors.iter().map(|t| TensorSpec { name: &t.name, dims: &t.dims, ty: t.ty });
    lay_out(version, kvs, specs, dest)
}

/// Writes the GGUF into a temp path beside `dest` and returns it uncommitted, with the
/// file's length: the caller commits it (or drops it, which removes it).
pub fn stage_gguf(
    version: u32,
    kvs: &[(String, OwnedValue)],
    tensors: &[Tensor],
    dest: &Path,
    force: bool,
) -> Result<(Temp, u64)> {
    let layout = plan_gguf(version, kvs, tensors, dest)?;
    let (tmp, mut f) = Temp::file(dest, force)?;
    f.write_all(&layout.header)?;
    let zeros = vec![0u8; layout.alignment as usize];
    for (t, &(_, n)) in tensors.iter().zip(&layout.tensors) {
        write_tensor_data(t, &mut f).with_context(|| format!("{}: copying tensor {:?}", tmp.path.display(), t.name))?;
        f.write_all(&zeros[..padding(n, layout.alignment) as usize])?;
    }
    // Flushed by commit when it must be (crate::atomic's note on durability).
    Ok((tmp, layout.file_len))
}
