//! Dequantization of every ggml type gguf-py 0.19.0 can dequantize, bit-identical to
//! `gguf.quants.dequantize`.
//!
//! The scalar functions here *are* the specification: each ports gguf-py's numpy code
//! (itself a port of ggml's `dequantize_row_*`) keeping the order of every f32 operation,
//! so results match to the bit. Besides whole tensors, single blocks can be dequantized, so
//! a sampler reads only the blocks it needs.
//!
//! F64 and the integer types have no `dequantize` in gguf-py 0.19.0 (it raises
//! `NotImplementedError`); its `GGUFReader` exposes them as typed numpy arrays, and we
//! match `array.astype(np.float32)` (round to nearest, ties to even).

pub mod float;
mod iq;
mod iq_grids;
mod k_quantize;
mod k_quants;
mod legacy;

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::vec;
use alloc::vec::Vec;

/// The largest block, in elements (`QK_K`).
pub const MAX_BLOCK_SIZE: usize = crate::ggml_type::QK_K;

type BlockFn = fn(&[u8], &mut [f32]);

macro_rules! block_fn {
    ($f:path, $ts:literal, $bs:literal) => {{
        fn wrapped(b: &[u8], y: &mut [f32]) {
            // The dispatcher only passes exact-size chunks, so both conversions succeed.
            if let (Ok(b), Ok(y)) = (<&[u8; $ts]>::try_from(b), <&mut [f32; $bs]>::try_from(y)) {
                $f(b, y)
            }
        }
        wrapped as BlockFn
    }};
}

/// The block kernel of a block-quantized type; `None` for plain types and types we cannot
/// dequantize.
fn block_kernel(ty: GgmlType) -> Option<BlockFn> {
    use GgmlType as T;
    Some(match ty {
        T::Q4_0 => block_fn!(legacy::q4_0, 18, 32),
        T::Q4_1 => block_fn!(legacy::q4_1, 20, 32),
        T::Q5_0 => block_fn!(legacy::q5_0, 22, 32),
        T::Q5_1 => block_fn!(legacy::q5_1, 24, 32),
        T::Q8_0 => block_fn!(legacy::q8_0, 34, 32),
        T::IQ4_NL => block_fn!(legacy::iq4_nl, 18, 32),
        T::MXFP4 => block_fn!(legacy::mxfp4, 17, 32),
        T::NVFP4 => block_fn!(legacy::nvfp4, 36, 64),
        T::Q2_K => block_fn!(k_quants::q2_k, 84, 256),
        T::Q3_K => block_fn!(k_quants::q3_k, 110, 256),
        T::Q4_K => block_fn!(k_quants::q4_k, 144, 256),
        T::Q5_K => block_fn!(k_quants::q5_k, 176, 256),
        T::Q6_K => block_fn!(k_quants::q6_k, 210, 256),
        T::TQ1_0 => block_fn!(k_quants::tq1_0, 54, 256),
        T::TQ2_0 => block_fn!(k_quants::tq2_0, 66, 256),
        T::IQ2_XXS => block_fn!(iq::iq2_xxs, 66, 256),
        T::IQ2_XS => block_fn!(iq::iq2_xs, 74, 256),
        T::IQ2_S => block_fn!(iq::iq2_s, 82, 256),
        T::IQ3_XXS => block_fn!(iq::iq3_xxs, 98, 256),
        T::IQ3_S => block_fn!(iq::iq3_s, 110, 256),
        T::IQ1_S => block_fn!(iq::iq1_s, 50, 256),
        T::IQ1_M => block_fn!(iq::iq1_m, 56, 256),
        T::IQ4_XS => block_fn!(iq::iq4_xs, 136, 256),
        _ => return None,
    })
}

/// One element of a plain (block size 1) type.
fn plain(ty: GgmlType, b: &[u8]) -> f32 {
    let a2 = |b: &[u8]| [b[0], b[1]];
    let a4 = |b: &[u8]| [b[0], b[1], b[2], b[3]];
    let a8 = |b: &[u8]| [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
    match ty {
        GgmlType::F32 => f32::from_le_bytes(a4(b)),
        GgmlType::F16 => float::f16_to_f32(u16::from_le_bytes(a2(b))),
        GgmlType::BF16 => float::bf16_to_f32(u16::from_le_bytes(a2(b))),
        GgmlType::F64 => f64::from_le_bytes(a8(b)) as f32,
        GgmlType::I8 => f32::from(b[0] as i8),
        GgmlType::I16 => f32::from(i16::from_le_bytes(a2(b))),
        GgmlType::I32 => i32::from_le_bytes(a4(b)) as f32,
        GgmlType::I64 => i64::from_le_bytes(a8(b)) as f32,
        _ => f32::NAN,
    }
}

fn is_plain(ty: GgmlType) -> bool {
    use GgmlType as T;
    matches!(ty, T::F32 | T::F16 | T::BF16 | T::F64 | T::I8 | T::I16 | T::I32 | T::I64)
}

/// Dequantizes whole blocks: `bytes` holds `k` blocks of `ty`, `out` receives
/// `k * ty.block_size()` values.
///
/// # Errors
/// [`Error::NotDequantizable`] for Q8_1, Q8_K, Q1_0; [`Error::SizeMismatch`] when `bytes`
/// is not whole blocks or `out` has the wrong length.
pub fn dequantize_into(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    if !ty.can_dequantize() {
        return Err(Error::NotDequantizable { ty: ty.name() });
    }
    let (ts, bs) = (ty.type_size(), ty.block_size());
    if bytes.len() % ts != 0 {
        return Err(Error::SizeMismatch {
            what: "quantized data (whole blocks)",
            expected: (bytes.len() / ts * ts) as u64,
            got: bytes.len() as u64,
        });
    }
    let want = bytes.len() / ts * bs;
    if out.len() != want {
        return Err(Error::SizeMismatch { what: "dequantized output", expected: want as u64, got: out.len() as u64 });
    }
    if ty == GgmlType::F32 {
        for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
    } else if is_plain(ty) {
        for (o, c) in out.iter_mut().zip(bytes.chunks_exact(ts)) {
            *o = plain(ty, c);
        }
    } else if let Some(f) = block_kernel(ty) {
        for (b, y) in bytes.chunks_exact(ts).zip(out.chunks_exact_mut(bs)) {
            f(b, y);
        }
    } else {
        return Err(Error::NotDequantizable { ty: ty.name() });
    }
    Ok(())
}

/// Dequantizes whole blocks into a new vector.
///
/// # Errors
/// As [`dequantize_into`].
pub fn dequantize(ty: GgmlType, bytes: &[u8]) -> Result<Vec<f32>> {
    let n = bytes.len() / ty.type_size() * ty.block_size();
    let mut out = vec![0f32; n];
    dequantize_into(ty, bytes, &mut out)?;
    Ok(out)
}

/// Dequantizes one block (`ty.type_size()` bytes) into the first `ty.block_size()`
/// entries of `out` (which must be at least that long; [`MAX_BLOCK_SIZE`] always is).
///
/// # Errors
/// As [`dequantize_into`].
pub fn dequantize_block(ty: GgmlType, block: &[u8], out: &mut [f32]) -> Result<()> {
    let bs = ty.block_size();
    let Some(out) = out.get_mut(..bs) else {
        return Err(Error::SizeMismatch { what: "block output", expected: bs as u64, got: out.len() as u64 });
    };
    if block.len() != ty.type_size() {
        return Err(Error::SizeMismatch {
            what: "one block",
            expected: ty.type_size() as u64,
            got: block.len() as u64,
        });
    }
    dequantize_into(ty, block, out)
}

mod element;
pub use element::ElementReader;

pub mod quantize;
