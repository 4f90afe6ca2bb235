//! Quantization: f32 values into ggml blocks, for writers that must keep a tensor's type
//! (purification requantizes to the source type). Where gguf-py 0.19.0 has a quantizer
//! (`gguf.quants.quantize`: F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), ours ports it with
//! the same f32 operation order and is bit-identical to it (`core/tests/quantize_vectors.rs`).
//! The types gguf-py cannot quantize port ggml's reference C quantizers and are
//! bit-identical to those (vectors from ggml's own code, scripts/gen-ggml-quant-vectors.sh):
//! Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (`k_quants`), Q1_0, Q2_0 (`low_bit`), TQ1_0, TQ2_0
//! (`ternary`), IQ4_NL and IQ4_XS (`codebook4`, ggml's `quantize_iq4_nl` and
//! `quantize_iq4_xs` without an imatrix), IQ3_XXS and IQ3_S (`iq3_quant`, ggml's
//! `quantize_iq3_xxs` and `quantize_iq3_s` without an imatrix), IQ2_S and IQ1_M
//! (`iq2_quant`, `iq1_quant`: ggml's `quantize_iq2_s` and `quantize_iq1_m` without one).
//! IQ2_XXS, IQ2_XS and IQ1_S ggml quantizes only under an importance matrix:
//! [`quantize_weighted`] writes them, [`quantize`] refuses them.
//! Inputs must be finite; the caller decides what a non-finite tensor means.

use super::table::kernels;
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::vec;
use alloc::vec::Vec;

pub use super::float::{f32_to_bf16, f32_to_f16};

/// Whether [`quantize`] can produce this type (without an importance matrix).
pub fn can_quantize(ty: GgmlType) -> bool {
    kernels(ty).is_some_and(|k| k.quantize.is_some())
}

/// Whether [`quantize_weighted`] can produce this type: every type [`quantize`] can, and
/// those ggml quantizes only under an importance matrix ([`requires_imatrix`]).
pub fn can_quantize_weighted(ty: GgmlType) -> bool {
    can_quantize(ty) || requires_imatrix(ty)
}

/// Whether ggml quantizes `ty` only with an importance matrix
/// (`ggml_quantize_requires_imatrix`: IQ2_XXS, IQ2_XS, IQ1_S), so that [`quantize`]
/// refuses it and [`quantize_weighted`] writes it.
pub fn requires_imatrix(ty: GgmlType) -> bool {
    !can_quantize(ty) && super::weighted::row_quantizer(ty).is_some()
}

/// Quantizes `values` (whole blocks of `ty`, all finite) and appends the blocks to `out`.
///
/// # Errors
/// [`Error::Unwritable`] for types without a quantizer (named, never silently changed),
/// for the types that need an importance matrix ([`requires_imatrix`]), for a length that
/// is not whole blocks, or for non-finite values. Values past the type's range are written
/// as ggml writes them (infinities): [`quantize_in_range`] refuses them.
pub fn quantize(ty: GgmlType, values: &[f32], out: &mut Vec<u8>) -> Result<()> {
    if requires_imatrix(ty) {
        return Err(Error::Unwritable {
            reason: alloc::format!("{ty} needs an importance matrix: ggml quantizes it only under one (--imatrix)"),
        });
    }
    let Some(quantize_blocks) = kernels(ty).and_then(|k| k.quantize) else {
        return Err(Error::Unwritable { reason: alloc::format!("organ cannot quantize to {ty}") });
    };
    let bs = ty.block_size();
    if values.len() % bs != 0 {
        return Err(Error::Unwritable {
            reason: alloc::format!("{} values are not whole {ty} blocks of {bs}", values.len()),
        });
    }
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(Error::Unwritable { reason: alloc::format!("value {i} is not finite; {ty} cannot hold it") });
    }
    out.reserve(values.len() / bs * ty.type_size());
    quantize_blocks(values, out);
    Ok(())
}

/// Quantizes `values`, whole rows of `qw.len()` values, as ggml does with an importance
/// matrix (`ggml_quantize_chunk` with quant weights, what llama-quantize `--imatrix`
/// writes): each row under the weights `qw` (the matrix's mean squares of its input
/// columns) for the types whose ggml quantizer takes them (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K …
/// Q6_K, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M), as
/// [`quantize`] for the others, which ggml quantizes without.
///
/// # Errors
/// As [`quantize`], and a row length that is not whole blocks or does not divide `values`.
pub fn quantize_weighted(ty: GgmlType, values: &[f32], qw: &[f32], out: &mut Vec<u8>) -> Result<()> {
    let Some(row) = super::weighted::row_quantizer(ty) else { return quantize(ty, values, out) };
    let (n, bs) = (qw.len(), ty.block_size());
    if n == 0 || n % bs != 0 || values.len() % n != 0 {
        return Err(Error::Unwritable {
            reason: alloc::format!(
                "{} values are not whole rows of {n} (an importance matrix row), or {n} is not whole {ty} blocks of {bs}",
                values.len()
            ),
        });
    }
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(Error::Unwritable { reason: alloc::format!("value {i} is not finite; {ty} cannot hold it") });
    }
    out.reserve(values.len() / bs * ty.type_size());
    for x in values.chunks_exact(n) {
        row(x, qw, out);
    }
    Ok(())
}

/// [`quantize`], refusing values the type cannot hold (beyond F16's 65504, a block whose
/// F16 scale would overflow) instead of writing them as infinities, as ggml does: what
/// organ makes (merge, lora merge, lora extract) is refused with the tensor's name, while
/// [`quantize`] stays ggml's bit for bit. `out` is left as it was when refused.
///
/// # Errors
/// As [`quantize`], and the first such value.
pub fn quantize_in_range(ty: GgmlType, values: &[f32], out: &mut Vec<u8>) -> Result<()> {
    quantize_rows_in_range(ty, values, None, out)
}

/// [`quantize_in_range`], with an importance matrix's row of weights as
/// [`quantize_weighted`] takes it.
///
/// # Errors
/// As [`quantize_weighted`], and the first value out of range.
pub fn quantize_rows_in_range(ty: GgmlType, values: &[f32], qw: Option<&[f32]>, out: &mut Vec<u8>) -> Result<()> {
    let bs = ty.block_size().max(1);
    let start = out.len();
    match qw {
        Some(qw) => quantize_weighted(ty, values, qw, out)?,
        None => quantize(ty, values, out)?,
    }
    // Every scale a block stores is at most its largest magnitude (amax / q, q >= 1), so
    // values F16 holds cannot overflow any type: only larger ones pay the check's decode.
    let fits_f16 = values.iter().all(|v| v.abs() <= 65504.0);
    if let Some(k) = if fits_f16 { None } else { first_overflow(ty, &out[start..])? } {
        out.truncate(start);
        // The block's largest value is the one that overflowed it (its scale, or itself).
        let block = &values[k / bs * bs..(k / bs + 1) * bs];
        let at = (0..bs).max_by(|&a, &b| block[a].abs().total_cmp(&block[b].abs())).unwrap_or(0);
        let i = k / bs * bs + at;
        return Err(Error::Unwritable {
            reason: alloc::format!("value {i} ({}) is out of {ty}'s range: it would be written as infinity", values[i]),
        });
    }
    Ok(())
}

/// Blocks decoded at once when [`first_overflow`] checks what was written.
const CHECK_BLOCKS: usize = 4096;

/// The index of the first value of `blocks` (whole blocks of `ty`, made from finite
/// values) that decodes to a non-finite one: a value, or a block's scale, that overflowed.
fn first_overflow(ty: GgmlType, blocks: &[u8]) -> Result<Option<usize>> {
    let (bs, ts) = (ty.block_size(), ty.type_size());
    if ty == GgmlType::F32 || !ty.can_dequantize() {
        return Ok(None);
    }
    let mut buf = vec![0f32; CHECK_BLOCKS * bs];
    for (c, chunk) in blocks.chunks(CHECK_BLOCKS * ts).enumerate() {
        let n = chunk.len() / ts * bs;
        super::dequantize_into(ty, chunk, &mut buf[..n])?;
        if let Some(k) = buf[..n].iter().position(|v| !v.is_finite()) {
            return Ok(Some(c * CHECK_BLOCKS * bs + k));
        }
    }
    Ok(None)
}

/// The values `values` come back as after a trip through `ty`: quantized as [`quantize`]
/// does, then dequantized. The difference from `values` is the error that storing them
/// as `ty` costs, so a predictor can weigh types against each other on a tensor's values.
///
/// # Errors
/// As [`quantize`]: a type without a quantizer, a length that is not whole blocks of
/// `ty`, or a non-finite value.
pub fn roundtrip(ty: GgmlType, values: &[f32]) -> Result<Vec<f32>> {
    let mut bytes = Vec::new();
    quantize(ty, values, &mut bytes)?;
    let mut out = vec![0f32; values.len()];
    super::dequantize_into(ty, &bytes, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod overflow_tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn values_beyond_the_types_range_are_refused_not_written_as_infinity() {
        let mut v = vec![1.0f32; 256];
        v[77] = 1e5;
        for ty in [GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K] {
            // In range: written (F16's largest is 65504; Q8_0's scale is amax / 127).
            let mut ok = vec![1.0f32; 256];
            ok[77] = 6e4;
            let mut out = Vec::new();
            quantize_in_range(ty, &ok, &mut out).unwrap();
            let mut out = vec![9u8];
            let big: Vec<f32> =
                v.iter().map(|&x| if x > 1.0 { x * if ty == GgmlType::F16 { 1.0 } else { 1e4 } } else { x }).collect();
            let e = quantize_in_range(ty, &big, &mut out).unwrap_err().to_string();
            assert!(e.contains("value 77") && e.contains("infinity"), "{ty}: {e}");
            assert_eq!(out, [9], "{ty}: out is left as it was");
        }
        // BF16 holds what f32 holds, but for the top of its range.
        let mut out = Vec::new();
        assert!(quantize_in_range(GgmlType::BF16, &[3.4e38], &mut out).is_err());
        quantize_in_range(GgmlType::BF16, &[1e38], &mut out).unwrap();
    }
}
