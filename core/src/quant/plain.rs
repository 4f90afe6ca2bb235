//! The plain (one element per block) types: F32, F16, BF16, F64 and the integers. gguf-py
//! 0.19.0 dequantizes F32, F16 and BF16; F64 and the integers it exposes as typed numpy
//! arrays, and we match `array.astype(np.float32)` (round to nearest, ties to even).
//! A "block" here is one element, so the block kernels are the element decoders.

use super::float::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use alloc::vec::Vec;

/// Single elements: the value of the one-element block `b` (`j` is always 0).
pub mod at {
    use super::*;

    #[inline(always)]
    pub fn f32(b: &[u8], _: usize) -> f32 {
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
    #[inline(always)]
    pub fn f16(b: &[u8], _: usize) -> f32 {
        f16_to_f32(u16::from_le_bytes([b[0], b[1]]))
    }
    #[inline(always)]
    pub fn bf16(b: &[u8], _: usize) -> f32 {
        bf16_to_f32(u16::from_le_bytes([b[0], b[1]]))
    }
    #[inline(always)]
    pub fn f64(b: &[u8], _: usize) -> f32 {
        f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32
    }
    #[inline(always)]
    pub fn i8(b: &[u8], _: usize) -> f32 {
        f32::from(b[0] as i8)
    }
    #[inline(always)]
    pub fn i16(b: &[u8], _: usize) -> f32 {
        f32::from(i16::from_le_bytes([b[0], b[1]]))
    }
    #[inline(always)]
    pub fn i32(b: &[u8], _: usize) -> f32 {
        i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32
    }
    #[inline(always)]
    pub fn i64(b: &[u8], _: usize) -> f32 {
        i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32
    }
}

/// Block kernels: the element decoder over a one-element block.
macro_rules! one {
    ($($name:ident: $ts:literal;)*) => {$(
        #[inline(always)]
        pub fn $name(b: &[u8; $ts], y: &mut [f32; 1]) {
            y[0] = at::$name(b, 0);
        }
    )*};
}
one! { f32: 4; f16: 2; bf16: 2; f64: 8; i8: 1; i16: 2; i32: 4; i64: 8; }

/// Quantizers: one value in, its bytes appended to `out` (gguf-py's `quantize` for F16 and
/// BF16; F32 is the value's own bytes).
pub mod encode {
    use super::*;

    pub fn f32(x: &[f32], out: &mut Vec<u8>) {
        out.extend_from_slice(&x[0].to_le_bytes());
    }
    pub fn f16(x: &[f32], out: &mut Vec<u8>) {
        out.extend_from_slice(&f32_to_f16(x[0]).to_le_bytes());
    }
    pub fn bf16(x: &[f32], out: &mut Vec<u8>) {
        out.extend_from_slice(&f32_to_bf16(x[0]).to_le_bytes());
    }
}
