//! Where each quantized type keeps its f16 block scales: what a full scan reads to find
//! non-finite numbers without decoding every value (a value is a scale times a small
//! integer, so it is finite exactly when its scales are). The offsets are those of ggml's
//! `block_*` structs (ggml-common.h); a test sets each one to NaN and checks that the
//! type's block kernel then yields non-finite values.

use crate::ggml_type::GgmlType;

/// The names and byte offsets of `ty`'s f16 block scales, for the types whose scales are
/// plain f16 fields of the block; `None` for the others (float and integer types, MXFP4's
/// e8m0 exponent, NVFP4's fp8 scales, IQ1_M's scale spread over four nibbles).
pub fn scale_fields(ty: GgmlType) -> Option<(&'static str, &'static [usize])> {
    use GgmlType as T;
    Some(match ty {
        T::Q4_0 | T::Q5_0 | T::Q8_0 | T::IQ4_NL | T::Q1_0 | T::Q2_0 => ("d", &[0]),
        T::Q4_1 | T::Q5_1 => ("d, m", &[0, 2]),
        T::Q4_K | T::Q5_K => ("d, dmin", &[0, 2]),
        // block_q2_K: scales[16], qs[64], d, dmin.
        T::Q2_K => ("d, dmin", &[80, 82]),
        // block_q3_K: hmask[32], qs[64], scales[12], d.
        T::Q3_K => ("d", &[108]),
        // block_q6_K: ql[128], qh[64], scales[16], d.
        T::Q6_K => ("d", &[208]),
        // block_tq1_0: qs[48], qh[4], d; block_tq2_0: qs[64], d.
        T::TQ1_0 => ("d", &[52]),
        T::TQ2_0 => ("d", &[64]),
        T::IQ2_XXS | T::IQ2_XS | T::IQ2_S | T::IQ3_XXS | T::IQ3_S | T::IQ1_S | T::IQ4_XS => ("d", &[0]),
        _ => return None,
    })
}
