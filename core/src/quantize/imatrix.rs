//! `--imatrix` as llama-quantize takes it (tools/quantize/quantize.cpp `load_imatrix`,
//! `prepare_imatrix`; src/llama-quant.cpp): each entry's weights are its sums of squares
//! over its counts (rounded to whole tokens), an expert that saw none weighing 1 (a legacy
//! `.dat` file's: its sums over its one call count, or as they are without one);
//! `--exclude-weights` and `--include-weights` keep or drop entries whose name contains a
//! text; the header records the file, the first dataset, the entries kept and the chunks.

use crate::error::{Error, Result};
use crate::gguf::MetaValue;
use crate::imatrix::Imatrix;
use crate::model::OwnedValue;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// llama-quantize's importance matrix: the quant weights of each weight matrix it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantImatrix {
    /// `--imatrix`'s argument as given (recorded in `quantize.imatrix.file`).
    pub file: String,
    /// The first calibration dataset's name, if any.
    pub dataset: Option<String>,
    /// `imatrix.chunk_count` (0 when absent).
    pub chunk_count: u64,
    /// Per weight: `n_mat × n_in` weights, matrix (expert) after matrix.
    pub entries: BTreeMap<String, Vec<f32>>,
}

/// The longest string llama-quantize records (`strncpy` into 128 bytes).
const MAX_STR: usize = 127;

impl QuantImatrix {
    /// `im` filtered as `prepare_imatrix` filters it: first every entry whose name contains
    /// an `exclude` text is dropped, then, if `include` is not empty, only entries whose
    /// name contains an `include` text are kept.
    pub fn new(im: &Imatrix, file: &str, include: &[String], exclude: &[String]) -> QuantImatrix {
        let entries = im
            .entries
            .iter()
            .filter(|(name, _)| !exclude.iter().any(|x| name.contains(x.as_str())))
            .filter(|(name, _)| include.is_empty() || include.iter().any(|x| name.contains(x.as_str())))
            .map(|(name, e)| (name.clone(), crate::imatrix::quant_weights(im, e)))
            .collect();
        QuantImatrix {
            file: file.to_string(),
            dataset: im.datasets.first().cloned(),
            chunk_count: im.chunk_count.unwrap_or(0),
            entries,
        }
    }

    /// The weights of tensor `name` of ggml dims `dims`, `None` when the matrix has no
    /// entry for it (quantized without, as llama-quantize does).
    ///
    /// # Errors
    /// [`Error::Quantize`] when the entry's size is not `ne[0] · ne[2]`, as llama-quantize
    /// refuses it (but for the token embedding, which it quantizes without).
    pub fn weights(&self, name: &str, dims: &[u64]) -> Result<Option<&[f32]>> {
        let Some(w) = self.entries.get(name) else { return Ok(None) };
        Ok(crate::imatrix::takes(name, dims, w.len())?.then_some(w.as_slice()))
    }

    /// The keys llama-quantize adds for it (its `kv_overrides`), in order.
    pub(crate) fn keys(&self) -> Vec<(String, OwnedValue)> {
        let s = |v: &str| OwnedValue::Str(v.as_bytes()[..v.len().min(MAX_STR)].to_vec().into());
        let mut kvs = Vec::new();
        if !self.file.is_empty() {
            kvs.push(("quantize.imatrix.file".to_string(), s(&self.file)));
        }
        if let Some(d) = &self.dataset {
            kvs.push(("quantize.imatrix.dataset".to_string(), s(d)));
        }
        let n = u32::try_from(self.entries.len()).unwrap_or(u32::MAX);
        kvs.push(("quantize.imatrix.entries_count".to_string(), OwnedValue::Scalar(MetaValue::U32(n))));
        if self.chunk_count > 0 {
            let n = u32::try_from(self.chunk_count).unwrap_or(u32::MAX);
            kvs.push(("quantize.imatrix.chunks_count".to_string(), OwnedValue::Scalar(MetaValue::U32(n))));
        }
        kvs
    }
}

/// Refuses, before anything is written, what llama-quantize refuses (or ggml aborts on) only
/// when it reaches the tensor: an entry of the wrong size ([`super::weights_for`]), no entry
/// for a tensor that `requires` one (`tensor_requires_imatrix`, and allowed to change) when
/// a matrix was given, and no weights for a type ggml quantizes only with them.
pub(super) fn check_weights(p: &super::Params, t: &super::Planned, requires: bool) -> Result<()> {
    if super::weights_for(p, t)?.is_some() || t.to == t.from || p.dry_run {
        return Ok(());
    }
    let name = &t.name;
    if requires && p.has_imatrix() {
        let reason = format!("missing importance matrix for tensor {name:?} in a very low-bit quantization ({})", t.to);
        return Err(Error::Quantize { reason });
    }
    if crate::quant::quantize::requires_imatrix(t.to) {
        let reason = format!(
            "tensor {name:?}: ggml quantizes {} only with an importance matrix, and there is none for it \
             (llama-quantize aborts here)",
            t.to
        );
        return Err(Error::Quantize { reason });
    }
    Ok(())
}
