//! Merging adapters into their base: W' = W + Σᵢ sᵢ (αᵢ / rᵢ) BᵢAᵢ, computed in f32 (as
//! `llama-export-lora` does, `export-lora.cpp` of the llama.cpp the tests build), then
//! stored in the output type. [`plan`] says which base tensors change, by which pairs,
//! and in which type they are written; [`merge_rows`] merges whole rows of one of them.
//!
//! Unlike export-lora, adapters may adapt different weights: a weight gets the sum of the
//! pairs that name it, whichever adapters hold them.

use super::{Adapter, Factors};
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::model::{Model, TensorEntry};
use crate::quant::quantize::{can_quantize, quantize_in_range as quantize};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::borrow::Borrow;

/// The type a merged tensor is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputType {
    /// The base tensor's own type when organ has its quantizer, else F16.
    Keep,
    /// This type for every merged tensor.
    Forced(GgmlType),
}

/// One pair's share of a merged tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Part {
    /// Which adapter (the index in [`plan`]'s list).
    pub adapter: usize,
    /// Which of its pairs.
    pub pair: usize,
    /// The factor of B·A: s · α / r ([`Adapter::scale`]).
    pub scale: f64,
}

/// One base tensor that changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Merge {
    /// Its index among the base's tensors.
    pub tensor: usize,
    /// The base tensor's type.
    pub from: GgmlType,
    /// The type it is written in.
    pub to: GgmlType,
    /// Why that type: `true` when it is the base's own (kept), `false` when forced or
    /// when organ has no quantizer for the base's type (F16 then).
    pub kept: bool,
    /// The pairs added to it, in the order of the adapters.
    pub parts: Vec<Part>,
}

/// Which base tensors change, in base order, for `adapters` (each with the user's scale
/// `s`, 1 for `--lora`), written as `out` says. The adapters are assumed to have passed
/// [`Adapter::first_error`] and [`Adapter::fits`]; what would still make a merge fail is
/// refused here, named by tensor.
///
/// # Errors
/// [`Error::BadLayout`] for a pair whose weight the base lacks or shapes otherwise, a base
/// type organ cannot dequantize, or an output type whose blocks do not divide a row.
/// [`Error::Unsupported`] for a forced type organ cannot quantize to.
pub fn plan<T: Borrow<TensorEntry>>(
    base: &Model<T>,
    adapters: &[(&Adapter, f64)],
    out: OutputType,
) -> Result<Vec<Merge>> {
    if let OutputType::Forced(ty) = out {
        if !can_quantize(ty) {
            return Err(Error::Unsupported { reason: format!("organ cannot write {ty} tensors") });
        }
    }
    let mut parts: Vec<Vec<Part>> = vec![Vec::new(); base.tensors.len()];
    for (ai, (adapter, s)) in adapters.iter().enumerate() {
        for ((pi, p), found) in adapter.pairs.iter().enumerate().zip(adapter.base_weights(base)) {
            let Some(ti) = found.filter(|&i| base.tensors[i].borrow().dims[..] == p.shape()) else {
                return Err(bad(&p.target, format!("the base has no weight of shape {:?} by that name", p.shape())));
            };
            parts[ti].push(Part { adapter: ai, pair: pi, scale: adapter.scale(p.rank, *s) });
        }
    }
    let mut merges = Vec::new();
    for (ti, parts) in parts.into_iter().enumerate() {
        if parts.is_empty() {
            continue;
        }
        let t = base.tensors[ti].borrow();
        if !t.ty.can_dequantize() {
            return Err(bad(&t.name, format!("organ cannot dequantize its type {}", t.ty)));
        }
        let (to, kept) = match out {
            OutputType::Forced(ty) => (ty, ty == t.ty),
            OutputType::Keep if can_quantize(t.ty) => (t.ty, true),
            OutputType::Keep => (GgmlType::F16, false),
        };
        let cols = t.dims.first().copied().unwrap_or(0);
        if cols % to.block_size() as u64 != 0 {
            return Err(bad(
                &t.name,
                format!("its rows of {cols} values are not whole {to} blocks of {}", to.block_size()),
            ));
        }
        merges.push(Merge { tensor: ti, from: t.ty, to, kept, parts });
    }
    Ok(merges)
}

/// Merges whole rows of a weight: `bytes` are its rows `first..` in type `from`, `cols`
/// values each; each of `factors` is added ([`Factors::add_to`], f32), and the rows are
/// appended to `out` in type `to`.
///
/// # Errors
/// A type organ cannot dequantize or quantize to, bytes that are not whole rows, rows
/// outside a factor's, a non-finite merged value (no type but F32 can hold it).
pub fn merge_rows(
    from: GgmlType,
    bytes: &[u8],
    first: usize,
    cols: usize,
    factors: &[Factors],
    to: GgmlType,
    out: &mut Vec<u8>,
) -> Result<()> {
    let mut w = crate::quant::dequantize(from, bytes)?;
    if cols == 0 || w.len() % cols != 0 {
        return Err(Error::SizeMismatch {
            what: "merged rows (whole rows)",
            expected: cols as u64,
            got: w.len() as u64,
        });
    }
    for f in factors {
        if f.cols != cols {
            return Err(Error::SizeMismatch { what: "a pair's columns", expected: cols as u64, got: f.cols as u64 });
        }
        f.add_to(first, &mut w)?;
    }
    quantize(to, &w, out)
}

/// `general.file_type` (llama.cpp's `llama_ftype`) of a model whose weights are mostly
/// `ty`, for the types with one value (the K-quants have several mixes, S, M and L, and
/// none of them is all one type).
pub fn file_type(ty: GgmlType) -> Option<u32> {
    Some(match ty {
        GgmlType::F32 => 0,
        GgmlType::F16 => 1,
        GgmlType::Q4_0 => 2,
        GgmlType::Q4_1 => 3,
        GgmlType::Q8_0 => 7,
        GgmlType::Q5_0 => 8,
        GgmlType::Q5_1 => 9,
        GgmlType::Q6_K => 18,
        GgmlType::IQ4_NL => 25,
        GgmlType::BF16 => 32,
        GgmlType::TQ1_0 => 36,
        GgmlType::TQ2_0 => 37,
        _ => return None,
    })
}

fn bad(tensor: &str, reason: String) -> Error {
    Error::BadLayout { tensor: tensor.into(), reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lora::Pair;

    fn factors(rows: usize, cols: usize, rank: usize, seed: u32, scale: f64) -> Factors {
        let v = |n: usize, k: u32| -> Vec<f32> {
            (0..n).map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(k) % 1000) as f32 / 1000.0 - 0.5).collect()
        };
        Factors { rows, cols, rank, l: v(rows * rank, seed), r: v(cols * rank, seed + 7), scale }
    }

    #[test]
    fn merged_rows_are_the_base_plus_every_update_element_by_element() {
        let (rows, cols) = (6, 64);
        let base: Vec<f32> = (0..rows * cols).map(|i| i as f32 / 100.0).collect();
        let fs = [factors(rows, cols, 3, 1, 0.5), factors(rows, cols, 5, 2, -2.0)];
        let mut bytes = Vec::new();
        quantize(GgmlType::F32, &base, &mut bytes).unwrap();
        // Two calls of three rows give what one call of six gives, and each element is
        // W + Σ scale · (its dot product in f32, summed in order).
        let mut whole = Vec::new();
        merge_rows(GgmlType::F32, &bytes, 0, cols, &fs, GgmlType::F32, &mut whole).unwrap();
        let mut halves = Vec::new();
        let half = bytes.len() / 2;
        merge_rows(GgmlType::F32, &bytes[..half], 0, cols, &fs, GgmlType::F32, &mut halves).unwrap();
        merge_rows(GgmlType::F32, &bytes[half..], 3, cols, &fs, GgmlType::F32, &mut halves).unwrap();
        assert_eq!(whole, halves);
        let got = crate::quant::dequantize(GgmlType::F32, &whole).unwrap();
        for i in 0..rows {
            for j in 0..cols {
                let mut want = base[i * cols + j];
                for f in &fs {
                    let k = f.rank;
                    let mut dot = 0f32;
                    for t in 0..k {
                        dot += f.l[i * k + t] * f.r[j * k + t];
                    }
                    want += f.scale as f32 * dot;
                }
                assert_eq!(got[i * cols + j], want, "({i}, {j})");
            }
        }
        // Written as Q8_0: the f32 merge, quantized.
        let mut q = Vec::new();
        merge_rows(GgmlType::F32, &bytes, 0, cols, &fs, GgmlType::Q8_0, &mut q).unwrap();
        let mut want = Vec::new();
        quantize(GgmlType::Q8_0, &got, &mut want).unwrap();
        assert_eq!(q, want);
        // Rows outside the factors, and factors of another width, are refused.
        assert!(merge_rows(GgmlType::F32, &bytes, 1, cols, &fs, GgmlType::F32, &mut Vec::new()).is_err());
        let narrow = [factors(rows, 32, 2, 3, 1.0)];
        assert!(merge_rows(GgmlType::F32, &bytes, 0, cols, &narrow, GgmlType::F32, &mut Vec::new()).is_err());
    }

    fn entry(name: &str, ty: GgmlType, dims: &[u64]) -> TensorEntry {
        TensorEntry {
            name: name.into(),
            ty,
            dims: dims.to_vec(),
            n_elements: dims.iter().product(),
            n_bytes: 0,
            offset: 0,
            file: 0,
        }
    }

    fn adapter(pairs: &[(&str, u64, u64, u64)], alpha: f32) -> Adapter {
        let pairs = pairs
            .iter()
            .map(|&(t, rank, rows, cols)| Pair {
                target: t.into(),
                a: 0,
                b: 1,
                rank,
                rows,
                cols,
                embedding: t.starts_with("token_embd"),
            })
            .collect();
        Adapter {
            architecture: Some("llama".into()),
            alpha: Some(alpha),
            invocation_tokens: None,
            pairs,
            skipped: Vec::new(),
            problems: Vec::new(),
        }
    }

    #[test]
    fn the_plan_sums_adapters_of_different_weights_and_chooses_each_type() {
        let base = Model {
            version: 3,
            kvs: Vec::new(),
            tensors: vec![
                entry("a.weight", GgmlType::Q4_1, &[64, 8]),
                entry("b.weight", GgmlType::Q4_K, &[256, 8]),
                entry("c.weight", GgmlType::F32, &[64, 8]),
                entry("n.weight", GgmlType::F32, &[64]),
                entry("d.weight", GgmlType::IQ2_XXS, &[256, 8]),
            ],
        };
        let one = adapter(&[("a.weight", 4, 8, 64), ("c.weight", 4, 8, 64)], 8.0);
        let two = adapter(&[("a.weight", 2, 8, 64), ("b.weight", 2, 8, 256)], 2.0);
        let m = plan(&base, &[(&one, 1.0), (&two, 0.5)], OutputType::Keep).unwrap();
        let tensors: Vec<usize> = m.iter().map(|m| m.tensor).collect();
        assert_eq!(tensors, [0, 1, 2]);
        // A type organ reads but cannot write is written F16.
        let three = adapter(&[("d.weight", 2, 8, 256)], 2.0);
        let d = plan(&base, &[(&three, 1.0)], OutputType::Keep).unwrap();
        assert_eq!((d[0].from, d[0].to, d[0].kept), (GgmlType::IQ2_XXS, GgmlType::F16, false));
        assert_eq!(m[0].parts, [Part { adapter: 0, pair: 0, scale: 2.0 }, Part { adapter: 1, pair: 0, scale: 0.5 }]);
        assert_eq!(m[1].parts, [Part { adapter: 1, pair: 1, scale: 0.5 }]);
        // Kept where organ quantizes the type (Q4_1, Q4_K, F32).
        assert!(m.iter().all(|m| m.kept && m.to == m.from), "{m:?}");
        let f16 = plan(&base, &[(&one, 1.0), (&two, 1.0)], OutputType::Forced(GgmlType::F16)).unwrap();
        assert!(f16.iter().all(|m| m.to == GgmlType::F16 && !m.kept));
        // Q8_0 blocks divide rows of 64 and 256; Q4_K's 256 do not divide 64.
        assert!(plan(&base, &[(&one, 1.0)], OutputType::Forced(GgmlType::Q8_0)).is_ok());
        let e = plan(&base, &[(&one, 1.0)], OutputType::Forced(GgmlType::Q4_K)).unwrap_err();
        assert!(format!("{e}").contains("a.weight"), "{e}");
        // A pair of a weight the base lacks, or of another shape.
        let e = plan(&base, &[(&adapter(&[("z.weight", 2, 8, 64)], 2.0), 1.0)], OutputType::Keep).unwrap_err();
        assert!(format!("{e}").contains("z.weight"), "{e}");
        let e = plan(&base, &[(&adapter(&[("a.weight", 2, 8, 32)], 2.0), 1.0)], OutputType::Keep).unwrap_err();
        assert!(format!("{e}").contains("a.weight"), "{e}");
    }

    #[test]
    fn file_types_are_llama_cpps() {
        assert_eq!(file_type(GgmlType::F16), Some(1));
        assert_eq!(file_type(GgmlType::Q8_0), Some(7));
        assert_eq!(file_type(GgmlType::Q4_K), None);
    }
}
