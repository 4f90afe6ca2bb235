//! Exact sizes: a tensor's bytes in a type, and the file `llama-quantize` writes.
//!
//! `llama-quantize` (`llama_model_quantize_impl`) writes ggml's header (`gguf_get_meta_size`:
//! the input's metadata with `general.quantization_version` and `general.file_type` set
//! and the `split.*` keys removed, one tensor info per tensor, zero padding to 32), then
//! each tensor's rows × `ggml_row_size` bytes followed by zeros to the next multiple of 32
//! (`GGUF_DEFAULT_ALIGNMENT`). With an importance matrix it also sets
//! `quantize.imatrix.file` and `quantize.imatrix.dataset` (strings cut at 127 bytes) and
//! `quantize.imatrix.entries_count` and `quantize.imatrix.chunks_count` (UINT32): organ
//! cannot know the strings before the tool runs, so it accounts them at their longest,
//! the one allowance in an otherwise exact account.

use super::accept::DEFAULT_FTYPE;
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::gguf::writer::{padding, plan, TensorSpec};
use crate::gguf::MetaValue;
use alloc::format;
use alloc::vec::Vec;

/// The alignment `llama-quantize` pads every tensor to.
pub const ALIGNMENT: u64 = 32;

/// `GGML_QNT_VERSION`, which `llama-quantize` writes as `general.quantization_version`.
pub const QUANTIZATION_VERSION: u32 = 2;

/// The longest string `llama-quantize` stores for an importance matrix's name or dataset.
pub const MAX_IMATRIX_STRING: usize = 127;

/// Bytes of a tensor of shape `dims` (ggml order) in type `ty`: rows × the row's bytes,
/// or `None` when the type's block does not divide the row or the size overflows.
pub fn tensor_bytes(ty: GgmlType, dims: &[u64]) -> Option<u64> {
    let n_in = dims.first().copied().unwrap_or(1);
    let block = ty.block_size() as u64;
    if n_in % block != 0 {
        return None;
    }
    let row = (n_in / block).checked_mul(ty.type_size() as u64)?;
    dims.iter().skip(1).try_fold(row, |n, &d| n.checked_mul(d))
}

/// What a budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Account {
    /// Tensor data bytes (a bits-per-weight target: total tensor bits / total elements,
    /// as `llama-quantize` prints its BPW).
    Data,
    /// Bytes in the file: each tensor's data padded to [`ALIGNMENT`].
    File,
}

impl Account {
    /// The bytes a tensor of `bytes` data bytes takes from the budget.
    pub fn charge(self, bytes: u64) -> u64 {
        match self {
            Account::Data => bytes,
            Account::File => bytes.saturating_add(padding(bytes, ALIGNMENT)),
        }
    }
}

/// The length of the header `llama-quantize` writes for a model with metadata `kvs` and
/// tensors `tensors` (name, dims, own type), padding included; with `imatrix`, room for
/// the importance matrix's keys at their longest.
///
/// # Errors
/// `general.alignment` other than 32 (`llama-quantize` would pad the header and the
/// tensors differently), or a header the writer refuses.
pub fn header_len(kvs: &[(&str, MetaValue<'_>)], tensors: &[(&str, &[u64], GgmlType)], imatrix: bool) -> Result<u64> {
    const SET: [&str; 6] = [
        "general.quantization_version",
        "general.file_type",
        "quantize.imatrix.file",
        "quantize.imatrix.dataset",
        "quantize.imatrix.entries_count",
        "quantize.imatrix.chunks_count",
    ];
    const SPLIT: [&str; 3] = ["split.no", "split.count", "split.tensors.count"];
    if let Some((_, v)) = kvs.iter().find(|(k, _)| *k == "general.alignment") {
        if *v != MetaValue::U32(ALIGNMENT as u32) {
            return Err(Error::Unwritable {
                reason: format!("general.alignment {v:?}: llama-quantize pads tensors to {ALIGNMENT} regardless"),
            });
        }
    }
    let long = [b'x'; MAX_IMATRIX_STRING];
    let mut out: Vec<(&str, MetaValue<'_>)> =
        kvs.iter().filter(|(k, _)| !SPLIT.contains(k) && !SET.contains(k)).cloned().collect();
    out.push((SET[0], MetaValue::U32(QUANTIZATION_VERSION)));
    out.push((SET[1], MetaValue::U32(DEFAULT_FTYPE.1)));
    if imatrix {
        out.push((SET[2], MetaValue::Str(&long)));
        out.push((SET[3], MetaValue::Str(&long)));
        out.push((SET[4], MetaValue::U32(0)));
        out.push((SET[5], MetaValue::U32(0)));
    } else {
        // An input already quantized with an importance matrix keeps its keys.
        out.extend(kvs.iter().filter(|(k, _)| SET[2..].contains(k)).cloned());
    }
    // ggml writes as many dimensions as ggml_n_dims counts.
    let trimmed: Vec<Vec<u64>> =
        tensors.iter().map(|(_, d, _)| d[..super::accept::n_dims(d).min(d.len())].to_vec()).collect();
    let specs: Vec<TensorSpec<'_>> =
        tensors.iter().zip(&trimmed).map(|((name, _, ty), dims)| TensorSpec { name, dims, ty: *ty }).collect();
    Ok(plan(3, &out, &specs)?.header.len() as u64)
}
