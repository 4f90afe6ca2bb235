//! The importance matrix `llama-imatrix` writes: a GGUF (`general.type = "imatrix"`)
//! holding, per weight matrix `NAME` it saw multiplied, the sum over every token of each
//! input column's square (`NAME.in_sum2`, F32, ggml dims `[n_in, n_mat]`) and how many
//! tokens went in (`NAME.counts`, F32, dims `[1, n_mat]`); `n_mat` is the expert count of a
//! MoE weight, 1 otherwise. `NAME.in_sum` (plain sums) and `NAME.stats` are written too
//! and not needed here. Format: llama.cpp's `IMatrixCollector::save_imatrix`
//! (tools/imatrix/imatrix.cpp) and `common_imatrix_load` (common/imatrix-loader.cpp).
//!
//! What organ takes from it is each column's mean square over the tokens,
//! `E[x_j²] = in_sum2_j / count` per matrix ([`Entry::mean_squares`]): the weights of the
//! round-trip error in `crate::predict`. The older `.dat` format is read too (`legacy`),
//! as llama-quantize reads it when a file is not a GGUF.

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::gguf::{Gguf, MetaValue, TensorInfo, ValueType};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// One weight matrix's statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The weight's name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Input columns per matrix (the weight's `dims[0]`).
    pub n_in: usize,
    /// Tokens seen per matrix (`n_mat` of them: experts of a MoE weight, else 1).
    pub counts: Vec<f32>,
    /// Σ x_j² per matrix, `n_mat × n_in` values, matrix after matrix.
    pub sum2: Vec<f32>,
}

impl Entry {
    /// Matrices (experts) in this entry.
    pub fn n_mat(&self) -> usize {
        self.counts.len()
    }

    /// `E[x_j²]` of matrix `mat`'s input columns, or `None` when the matrix saw no token
    /// (an expert the calibration text never routed to) or `mat` is out of range.
    pub fn mean_squares(&self, mat: usize) -> Option<Vec<f32>> {
        let count = *self.counts.get(mat)?;
        let sums = self.sum2.get(mat * self.n_in..(mat + 1) * self.n_in)?;
        (count > 0.0).then(|| sums.iter().map(|s| s / count).collect())
    }
}

/// A parsed importance matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Imatrix {
    /// `imatrix.datasets`: the calibration files' names.
    pub datasets: Vec<String>,
    /// `imatrix.chunk_count`: chunks of text processed.
    pub chunk_count: Option<u64>,
    /// `imatrix.chunk_size`: tokens per chunk.
    pub chunk_size: Option<u64>,
    /// One entry per weight, by name.
    pub entries: BTreeMap<String, Entry>,
    /// Read from the legacy `.dat` format: one count (`ncall`) per entry, experts and all,
    /// and llama-quantize's weights are the sums as they are when it is not positive.
    pub legacy: bool,
}

fn bad(reason: String) -> Error {
    Error::BadMetadata { key: "imatrix".into(), reason }
}

impl Imatrix {
    /// Parses an importance matrix from the whole file's bytes, checking every shape, type
    /// and count, and that every value is finite and non-negative.
    ///
    /// A file that is not a GGUF is read as the legacy `.dat` format.
    ///
    /// # Errors
    /// A non-GGUF that is not a whole legacy file, naming the entry; a GGUF whose `general.type`
    /// is not `imatrix`; any parse error; an `in_sum2` without its `counts` or the other
    /// way round, shapes that disagree, a type other than F32, or values out of range,
    /// each naming the tensor.
    pub fn parse(file: &[u8]) -> Result<Imatrix> {
        let g = match Gguf::parse(file, file.len() as u64) {
            Err(Error::BadMagic { .. }) => return legacy::parse(file),
            r => r?,
        };
        match g.get("general.type").and_then(MetaValue::as_str) {
            Some("imatrix") => {}
            other => {
                return Err(bad(format!(
                    "general.type is {other:?}, expected \"imatrix\": not an importance matrix llama-imatrix wrote"
                )));
            }
        }
        let count = |key: &str| g.get(key).and_then(MetaValue::as_u64);
        let mut datasets = Vec::new();
        if let Some(MetaValue::Array(a)) = g.get("imatrix.datasets") {
            if a.elem_type == ValueType::String {
                datasets.extend(a.iter().filter_map(|v| v.as_str().map(ToString::to_string)));
            }
        }
        let mut entries = BTreeMap::new();
        for t in g.tensors.iter().filter(|t| t.name.ends_with(".in_sum2")) {
            let name = &t.name[..t.name.len() - ".in_sum2".len()];
            let Some(c) = g.tensor(&format!("{name}.counts")) else {
                return Err(bad_tensor(t, format!("has no {name}.counts beside it")));
            };
            let e = entry(file, name, t, c)?;
            entries.insert(e.name.clone(), e);
        }
        if let Some(t) =
            g.tensors.iter().find(|t| t.name.strip_suffix(".counts").is_some_and(|n| !entries.contains_key(n)))
        {
            return Err(bad_tensor(t, "has no .in_sum2 beside it".into()));
        }
        if entries.is_empty() {
            return Err(bad("holds no NAME.in_sum2 tensor: no weight was measured".into()));
        }
        Ok(Imatrix {
            datasets,
            chunk_count: count("imatrix.chunk_count"),
            chunk_size: count("imatrix.chunk_size"),
            entries,
            legacy: false,
        })
    }

    /// The entry of the weight `name`, if the calibration run saw it.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    /// `E[x_j²]` for the input columns of the weight `name` of shape `dims` (ggml order;
    /// a third dimension is the expert count): `n_mat × n_in` values.
    ///
    /// # Errors
    /// The weight is not in the matrix, its shape disagrees, or an expert saw no token.
    pub fn column_weights(&self, name: &str, dims: &[u64]) -> Result<Vec<f32>> {
        let e = self.get(name).ok_or_else(|| bad(format!("has no entry for {name}")))?;
        let n_in = dims.first().copied().unwrap_or(0);
        let n_mat = dims.get(2).copied().unwrap_or(1);
        if n_in != e.n_in as u64 || n_mat != e.n_mat() as u64 {
            return Err(bad(format!(
                "{name}: {} columns × {} matrices, but the weight has {n_in} × {n_mat}",
                e.n_in,
                e.n_mat()
            )));
        }
        let mut out = Vec::with_capacity(e.sum2.len());
        for m in 0..e.n_mat() {
            let ms = e.mean_squares(m).ok_or_else(|| bad(format!("{name}: matrix {m} saw no token")))?;
            out.extend(ms);
        }
        Ok(out)
    }
}

/// The largest mean square of an input column read (`in_sum2 / count`): real activations
/// are below 1e5 (squares below 1e10); a bound far above them keeps every weighted error a
/// prediction sums finite in f32.
pub const MAX_MEAN_SQUARE: f32 = 1e20;

/// The largest importance matrix file organ reads (SmolLM2's is 1.3 MB; a 70B model's
/// about 50 MB): every face checks it before reading the file.
pub const MAX_BYTES: u64 = 1 << 30;

fn bad_tensor(t: &TensorInfo<'_>, reason: String) -> Error {
    Error::BadTensor { tensor: t.name.to_string(), offset: t.info_offset, reason }
}

/// F32 values of a tensor, each finite and non-negative.
fn values(file: &[u8], t: &TensorInfo<'_>) -> Result<Vec<f32>> {
    if t.ty != GgmlType::F32 {
        return Err(bad_tensor(t, format!("is {}, expected F32", t.ty)));
    }
    let v: Vec<f32> = t.data(file)?.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    if let Some(i) = v.iter().position(|x| !x.is_finite() || *x < 0.0) {
        return Err(bad_tensor(t, format!("value {i} is {}, expected a finite sum of squares or count ≥ 0", v[i])));
    }
    Ok(v)
}

fn entry(file: &[u8], name: &str, s: &TensorInfo<'_>, c: &TensorInfo<'_>) -> Result<Entry> {
    let (sd, cd) = (s.shape(), c.shape());
    let n_in = sd.first().copied().unwrap_or(0);
    let n_mat = sd.get(1).copied().unwrap_or(1);
    if sd.len() > 2 || n_in == 0 || n_mat == 0 {
        return Err(bad_tensor(s, format!("has dims {sd:?}, expected [n_in, n_mat]")));
    }
    if cd.len() > 2 || cd.first() != Some(&1) || cd.get(1).copied().unwrap_or(1) != n_mat {
        return Err(bad_tensor(c, format!("has dims {cd:?}, expected [1, {n_mat}] as {name}.in_sum2 has")));
    }
    let n_in = usize::try_from(n_in).map_err(|_| bad_tensor(s, "is too large".into()))?;
    let (counts, sum2) = (values(file, c)?, values(file, s)?);
    // llama-imatrix counts tokens: a whole number, which every mean square divides by.
    if let Some(m) = counts.iter().position(|&x| libm::truncf(x) != x) {
        return Err(bad_tensor(c, format!("count {m} is {:e}, expected a whole number of tokens", counts[m])));
    }
    for (m, (&count, sums)) in counts.iter().zip(sum2.chunks_exact(n_in)).enumerate() {
        if count == 0.0 {
            continue;
        }
        if let Some(j) = sums.iter().position(|s| (s / count).partial_cmp(&MAX_MEAN_SQUARE).is_none_or(|o| o.is_gt())) {
            let reason = format!(
                "value {} is {:e}: over {count} tokens a mean square above {MAX_MEAN_SQUARE:e}",
                m * n_in + j,
                sums[j]
            );
            return Err(bad_tensor(s, reason));
        }
    }
    Ok(Entry { name: name.into(), n_in, counts, sum2 })
}

impl Imatrix {
    /// The weights llama-quantize takes for tensor `name` of ggml dims `dims` from this
    /// matrix given as it is (no `--include-weights`, no `--exclude-weights`): those of
    /// `QuantImatrix::weights`, made for that one tensor; `None` without an entry.
    ///
    /// # Errors
    /// [`Error::Quantize`] when the entry's size is not `ne[0] · ne[2]` (but for the token
    /// embedding, which llama-quantize quantizes without).
    pub fn quant_weights_of(&self, name: &str, dims: &[u64]) -> Result<Option<Vec<f32>>> {
        let Some(e) = self.get(name) else { return Ok(None) };
        let w = quant_weights(self, e);
        Ok(takes(name, dims, w.len())?.then_some(w))
    }
}

/// An entry's weights as `load_imatrix` makes them: its sums of squares over its counts
/// rounded to whole tokens, an expert that saw none weighing 1; a legacy file's sums over
/// its one call count, or as they are when that is not positive.
pub(crate) fn quant_weights(im: &Imatrix, e: &Entry) -> Vec<f32> {
    if im.legacy {
        let ncall = e.counts.first().copied().unwrap_or(0.0);
        return e.sum2.iter().map(|s| if ncall > 0.0 { s / ncall } else { *s }).collect();
    }
    let mut w = Vec::with_capacity(e.sum2.len());
    for (j, &c) in e.counts.iter().enumerate() {
        let sums = e.sum2.get(j * e.n_in..(j + 1) * e.n_in).unwrap_or(&[]);
        // common_imatrix_load keeps std::lround(count); quantize divides by it.
        let count = libm::roundf(c);
        if count > 0.0 {
            w.extend(sums.iter().map(|s| s / count));
        } else {
            w.extend(sums.iter().map(|_| 1.0));
        }
    }
    w
}

/// Whether llama-quantize quantizes tensor `name` of ggml dims `dims` under an entry of
/// `len` weights: it must be `ne[0] · ne[2]` long; the token embedding is quantized
/// without when it is not.
///
/// # Errors
/// [`Error::Quantize`] for any other tensor of another size, as llama-quantize refuses it.
pub(crate) fn takes(name: &str, dims: &[u64], len: usize) -> Result<bool> {
    let want = dims.first().copied().unwrap_or(1).saturating_mul(dims.get(2).copied().unwrap_or(1));
    if len as u64 == want {
        return Ok(true);
    }
    // llama-quantize's token embedding (`tensor_name_match_token_embd`).
    if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
        return Ok(false);
    }
    Err(Error::Quantize { reason: format!("imatrix size {len} is different from tensor size {want} for {name}") })
}

mod legacy;
#[cfg(test)]
mod tests;
