//! Quantization: f32 values into ggml blocks, for writers that must keep a tensor's type
//! (purification requantizes to the source type). Where gguf-py 0.19.0 has a quantizer
//! (`gguf.quants.quantize`: F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), ours ports it with
//! the same f32 operation order and is bit-identical to it (`core/tests/quantize_vectors.rs`).
//! The types gguf-py cannot quantize port ggml's reference C quantizers and are
//! bit-identical to those (vectors from ggml's own code, scripts/gen-ggml-quant-vectors.sh):
//! Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (`k_quants`), Q1_0, Q2_0 (`low_bit`), TQ1_0, TQ2_0
//! (`ternary`) and IQ4_NL (`codebook4`, ggml's `quantize_iq4_nl` without an imatrix).
//! Inputs must be finite; the caller decides what a non-finite tensor means.

use super::table::kernels;
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::vec;
use alloc::vec::Vec;

pub use super::float::{f32_to_bf16, f32_to_f16};

/// Whether [`quantize`] can produce this type.
pub fn can_quantize(ty: GgmlType) -> bool {
    kernels(ty).is_some_and(|k| k.quantize.is_some())
}

/// Quantizes `values` (whole blocks of `ty`, all finite) and appends the blocks to `out`.
///
/// # Errors
/// [`Error::Unwritable`] for types without a quantizer (named, never silently changed),
/// for a length that is not whole blocks, or for non-finite values.
pub fn quantize(ty: GgmlType, values: &[f32], out: &mut Vec<u8>) -> Result<()> {
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
