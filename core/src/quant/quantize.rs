//! Quantization: f32 values into ggml blocks, for writers that must keep a tensor's type
//! (purification requantizes to the source type). Where gguf-py 0.19.0 has a quantizer
//! (`gguf.quants.quantize`: F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), ours ports it with
//! the same f32 operation order and is bit-identical to it (`core/tests/quantize_vectors.rs`).
//! Q4_K, Q5_K and Q6_K, which gguf-py cannot quantize, port ggml's reference C quantizers
//! and are bit-identical to those (`k_quantize`).
//! Inputs must be finite; the caller decides what a non-finite tensor means.

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::vec::Vec;

/// f32 to IEEE half, round to nearest even, overflow to infinity, NaN kept as NaN with
/// its top payload bits: numpy's `npy_floatbits_to_halfbits` (`astype(np.float16)`).
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xFF) as i32;
    let man = b & 0x7F_FFFF;
    if exp == 0xFF {
        if man == 0 {
            return sign | 0x7C00;
        }
        let r = 0x7C00 | (man >> 13) as u16;
        return sign | if r == 0x7C00 { r + 1 } else { r };
    }
    let e = exp - 127 + 15;
    if e >= 0x1F {
        return sign | 0x7C00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal half: the value is m × 2^-24 with m = mantissa (with its implicit 1)
        // shifted right by 14 - e, rounded to nearest even.
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rem = m & ((1u32 << shift) - 1);
        let mut r = m >> shift;
        if rem > half || (rem == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1FFF;
    if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
        r += 1; // a carry into the exponent is right, up to infinity
    }
    sign | r as u16
}

/// f32 to bfloat16 as gguf-py's `BF16.quantize_blocks` (ggml's `ggml_compute_fp32_to_bf16`):
/// NaNs made quiet, then round to nearest even.
pub fn f32_to_bf16(x: f32) -> u16 {
    let mut n = x.to_bits();
    if n & 0x7FFF_FFFF > 0x7F80_0000 {
        n = (n & 0xFFFF_0000) | (64 << 16);
    }
    ((u64::from(n) + u64::from(0x7FFF + ((n >> 16) & 1))) >> 16) as u16
}

/// numpy's `np_roundf` in gguf-py: round half away from zero, in f32.
fn roundf(n: f32) -> f32 {
    let a = n.abs();
    let floored = libm::floorf(a);
    let b = floored + libm::floorf(2.0 * (a - floored));
    if n > 0.0 {
        b
    } else if n < 0.0 {
        -b
    } else {
        0.0 * b
    }
}

/// `1 / d`, or 0 where `d` is 0 (gguf-py: `np.where(d == 0, 0, 1 / d)`).
fn inv(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

/// `np.trunc(v).astype(np.uint8).clip(0, hi)` for the finite, non-negative `v` these
/// quantizers produce.
fn trunc_u8(v: f32, hi: u8) -> u8 {
    (libm::truncf(v) as u8).min(hi)
}

/// The value of largest magnitude, the first one on ties (`argmax(abs(x))`).
fn signed_absmax(x: &[f32]) -> f32 {
    let mut best = x[0];
    for &v in &x[1..] {
        if v.abs() > best.abs() {
            best = v;
        }
    }
    best
}

fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

fn q8_0(x: &[f32], out: &mut Vec<u8>) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = inv(d);
    out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    out.extend(x.iter().map(|&v| roundf(v * id) as i8 as u8));
}

fn q4_0(x: &[f32], out: &mut Vec<u8>) {
    let d = signed_absmax(x) / -8.0;
    let id = inv(d);
    let q: Vec<u8> = x.iter().map(|&v| trunc_u8(v * id + 8.5, 15)).collect();
    out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    out.extend((0..16).map(|j| q[j] | (q[j + 16] << 4)));
}

fn q4_1(x: &[f32], out: &mut Vec<u8>) {
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    let id = inv(d);
    let q: Vec<u8> = x.iter().map(|&v| trunc_u8((v - min) * id + 0.5, 15)).collect();
    out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    out.extend_from_slice(&f32_to_f16(min).to_le_bytes());
    out.extend((0..16).map(|j| q[j] | (q[j + 16] << 4)));
}

fn pack5(q: &[u8], out: &mut Vec<u8>) {
    let qh = q.iter().enumerate().fold(0u32, |h, (j, &v)| h | (u32::from(v >> 4) << j));
    out.extend_from_slice(&qh.to_le_bytes());
    out.extend((0..16).map(|j| (q[j] & 0x0F) | (q[j + 16] << 4)));
}

fn q5_0(x: &[f32], out: &mut Vec<u8>) {
    let d = signed_absmax(x) / -16.0;
    let id = inv(d);
    let q: Vec<u8> = x.iter().map(|&v| trunc_u8(v * id + 16.5, 31)).collect();
    out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    pack5(&q, out);
}

fn q5_1(x: &[f32], out: &mut Vec<u8>) {
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    let id = inv(d);
    let q: Vec<u8> = x.iter().map(|&v| trunc_u8((v - min) * id + 0.5, 31)).collect();
    out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    out.extend_from_slice(&f32_to_f16(min).to_le_bytes());
    pack5(&q, out);
}

/// Whether [`quantize`] can produce this type.
pub fn can_quantize(ty: GgmlType) -> bool {
    use GgmlType as T;
    matches!(
        ty,
        T::F32 | T::F16 | T::BF16 | T::Q8_0 | T::Q4_0 | T::Q4_1 | T::Q5_0 | T::Q5_1 | T::Q4_K | T::Q5_K | T::Q6_K
    )
}

/// Quantizes `values` (whole blocks of `ty`, all finite) and appends the blocks to `out`.
///
/// # Errors
/// [`Error::Unwritable`] for types without a quantizer (named, never silently changed),
/// for a length that is not whole blocks, or for non-finite values.
pub fn quantize(ty: GgmlType, values: &[f32], out: &mut Vec<u8>) -> Result<()> {
    if !can_quantize(ty) {
        return Err(Error::Unwritable { reason: alloc::format!("organ cannot quantize to {ty}") });
    }
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
    match ty {
        GgmlType::F32 => values.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        GgmlType::F16 => values.iter().for_each(|&v| out.extend_from_slice(&f32_to_f16(v).to_le_bytes())),
        GgmlType::BF16 => values.iter().for_each(|&v| out.extend_from_slice(&f32_to_bf16(v).to_le_bytes())),
        _ => {
            let f: fn(&[f32], &mut Vec<u8>) = match ty {
                GgmlType::Q8_0 => q8_0,
                GgmlType::Q4_0 => q4_0,
                GgmlType::Q4_1 => q4_1,
                GgmlType::Q5_0 => q5_0,
                GgmlType::Q5_1 => q5_1,
                GgmlType::Q4_K => super::k_quantize::q4_k,
                GgmlType::Q5_K => super::k_quantize::q5_k,
                _ => super::k_quantize::q6_k,
            };
            values.chunks_exact(bs).for_each(|b| f(b, out));
        }
    }
    Ok(())
}
