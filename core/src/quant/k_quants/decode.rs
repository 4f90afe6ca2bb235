//! Decoding the 256-element k-quants Q2_K … Q6_K. Each block kernel ports gguf-py
//! 0.19.0's `dequantize_blocks` of the same name (ggml's `dequantize_row_*`), keeping its
//! f32 operation order; [`at`] decodes one element with the same expressions.

use super::super::float::f16_le;
use core::mem::{offset_of, size_of};

/// ggml's `block_q2_K`: 16 scale bytes (low nibble scale, high nibble min), 2-bit quants,
/// then the f16 super-block scale and min.
#[repr(C)]
pub struct BlockQ2K {
    pub scales: [u8; 16],
    pub qs: [u8; 64],
    pub d: [u8; 2],
    pub dmin: [u8; 2],
}
/// ggml's `block_q3_K`: the high bits, 2-bit low bits, 12 bytes of 6-bit scales, f16 scale.
#[repr(C)]
pub struct BlockQ3K {
    pub hmask: [u8; 32],
    pub qs: [u8; 64],
    pub scales: [u8; 12],
    pub d: [u8; 2],
}
/// ggml's `block_q4_K`: f16 scale and min, 12 bytes of 6-bit scales and mins, 4-bit quants.
#[repr(C)]
pub struct BlockQ4K {
    pub d: [u8; 2],
    pub dmin: [u8; 2],
    pub scales: [u8; 12],
    pub qs: [u8; 128],
}
/// ggml's `block_q5_K`: as Q4_K, with the fifth bits before the quants.
#[repr(C)]
pub struct BlockQ5K {
    pub d: [u8; 2],
    pub dmin: [u8; 2],
    pub scales: [u8; 12],
    pub qh: [u8; 32],
    pub qs: [u8; 128],
}
/// ggml's `block_q6_K`: low 4 bits, high 2 bits, 16 i8 scales, f16 scale.
#[repr(C)]
pub struct BlockQ6K {
    pub ql: [u8; 128],
    pub qh: [u8; 64],
    pub scales: [u8; 16],
    pub d: [u8; 2],
}
const _: () = {
    assert!(size_of::<BlockQ2K>() == 84 && size_of::<BlockQ3K>() == 110 && size_of::<BlockQ4K>() == 144);
    assert!(size_of::<BlockQ5K>() == 176 && size_of::<BlockQ6K>() == 210);
};

const Q2K_QS: usize = offset_of!(BlockQ2K, qs);
const Q2K_D: usize = offset_of!(BlockQ2K, d);
const Q2K_DMIN: usize = offset_of!(BlockQ2K, dmin);
const Q3K_QS: usize = offset_of!(BlockQ3K, qs);
const Q3K_SCALES: usize = offset_of!(BlockQ3K, scales);
const Q3K_D: usize = offset_of!(BlockQ3K, d);
const Q45K_DMIN: usize = offset_of!(BlockQ4K, dmin);
const Q45K_SCALES: usize = offset_of!(BlockQ4K, scales);
const Q4K_QS: usize = offset_of!(BlockQ4K, qs);
const Q5K_QH: usize = offset_of!(BlockQ5K, qh);
const Q5K_QS: usize = offset_of!(BlockQ5K, qs);
const Q6K_QH: usize = offset_of!(BlockQ6K, qh);
const Q6K_SCALES: usize = offset_of!(BlockQ6K, scales);
const Q6K_D: usize = offset_of!(BlockQ6K, d);
const _: () =
    assert!(offset_of!(BlockQ4K, d) == 0 && offset_of!(BlockQ5K, d) == 0 && offset_of!(BlockQ5K, dmin) == Q45K_DMIN);
const _: () = assert!(offset_of!(BlockQ5K, scales) == Q45K_SCALES);

#[inline]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16_le([b[i], b[i + 1]])
}

/// The 6-bit scales and mins of Q4_K and Q5_K (`get_scale_min_k4` in ggml).
#[inline]
fn scale_min_k4(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 0x3F;
        mn[j] = s[4 + j] & 0x3F;
        sc[4 + j] = (s[8 + j] & 0x0F) | ((s[j] >> 2) & 0x30);
        mn[4 + j] = (s[8 + j] >> 4) | ((s[4 + j] >> 2) & 0x30);
    }
    (sc, mn)
}

/// Q2_K: layout scales[16], qs[64], d, dmin; `dl * q - ml` per 16.
pub fn q2_k(b: &[u8; 84], y: &mut [f32; 256]) {
    let (scales, qs) = (&b[..Q2K_QS], &b[Q2K_QS..Q2K_D]);
    let d = f16_at(b, Q2K_D);
    let dmin = f16_at(b, Q2K_DMIN);
    for (i, out) in y.iter_mut().enumerate() {
        let (h, s, l) = (i / 128, (i / 32) % 4, i % 32);
        let q = (qs[h * 32 + l] >> (2 * s)) & 3;
        let sc = scales[i / 16];
        let dl = d * f32::from(sc & 0xF);
        let ml = dmin * f32::from(sc >> 4);
        *out = dl * f32::from(q) - ml;
    }
}

/// Q3_K: layout hmask[32], qs[64], scales[12], d; `d * (scale - 32) * q` per 16.
pub fn q3_k(b: &[u8; 110], y: &mut [f32; 256]) {
    let (hmask, qs, sc) = (&b[..Q3K_QS], &b[Q3K_QS..Q3K_SCALES], &b[Q3K_SCALES..Q3K_D]);
    let d = f16_at(b, Q3K_D);
    let mut dl = [0f32; 16];
    for (i, dl) in dl.iter_mut().enumerate() {
        let lo = (sc[i % 8] >> (4 * (i / 8))) & 0x0F;
        let hi = (sc[8 + i % 4] >> (2 * (i / 4))) & 0x03;
        let s = ((lo | (hi << 4)) as i8).wrapping_sub(32);
        *dl = d * f32::from(s);
    }
    for (i, out) in y.iter_mut().enumerate() {
        let (h, s, l) = (i / 128, (i / 32) % 4, i % 32);
        let ql = ((qs[h * 32 + l] >> (2 * s)) & 3) as i8;
        // The high bit subtracts 4 when it is *clear*.
        let qh = (((hmask[l] >> (i / 32)) & 1) ^ 1) as i8;
        *out = dl[i / 16] * f32::from(ql - (qh << 2));
    }
}

/// Q4_K: layout d, dmin, scales[12], qs[128]; `d * sc * q - dmin * m` per 32.
pub fn q4_k(b: &[u8; 144], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, Q45K_DMIN);
    let (sc, mn) = scale_min_k4(&b[Q45K_SCALES..Q4K_QS]);
    let qs = &b[Q4K_QS..];
    for j in 0..8 {
        let dj = d * f32::from(sc[j]);
        let mj = dmin * f32::from(mn[j]);
        let (c, shift) = (j / 2, 4 * (j % 2));
        for l in 0..32 {
            let q = (qs[c * 32 + l] >> shift) & 0xF;
            y[j * 32 + l] = dj * f32::from(q) - mj;
        }
    }
}

/// Q5_K: layout d, dmin, scales[12], qh[32], qs[128].
pub fn q5_k(b: &[u8; 176], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, Q45K_DMIN);
    let (sc, mn) = scale_min_k4(&b[Q45K_SCALES..Q5K_QH]);
    let (qh, qs) = (&b[Q5K_QH..Q5K_QS], &b[Q5K_QS..]);
    for j in 0..8 {
        let dj = d * f32::from(sc[j]);
        let mj = dmin * f32::from(mn[j]);
        let (c, shift) = (j / 2, 4 * (j % 2));
        for l in 0..32 {
            let q = ((qs[c * 32 + l] >> shift) & 0xF) | (((qh[l] >> j) & 1) << 4);
            y[j * 32 + l] = dj * f32::from(q) - mj;
        }
    }
}

/// Q6_K: layout ql[128], qh[64], scales[16] (i8), d; `d * scale * (q - 32)` per 16.
pub fn q6_k(b: &[u8; 210], y: &mut [f32; 256]) {
    let (ql, qh, scales) = (&b[..Q6K_QH], &b[Q6K_QH..Q6K_SCALES], &b[Q6K_SCALES..Q6K_D]);
    let d = f16_at(b, Q6K_D);
    for (i, out) in y.iter_mut().enumerate() {
        let (h, r) = (i / 128, i % 128);
        let lo = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
        let hi = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 3;
        let q = ((lo | (hi << 4)) as i8) - 32;
        let dl = d * f32::from(scales[i / 16] as i8);
        *out = dl * f32::from(q);
    }
}

/// Single elements: element `j` (0..256) of block `b`, as the block kernels give it.
pub mod at {
    use super::super::super::float::{f16_le, f16_to_f32};
    use super::*;

    #[inline(always)]
    fn d16(b: &[u8], i: usize) -> f32 {
        f16_le([b[i], b[i + 1]])
    }

    /// Q2_K: `d * (sc & 0xF) * q - dmin * (sc >> 4)`, one scale byte per 16 elements.
    #[inline(always)]
    pub fn q2_k(b: &[u8], j: usize) -> f32 {
        let (h, s, l) = (j / 128, (j / 32) % 4, j % 32);
        let q = (b[Q2K_QS + h * 32 + l] >> (2 * s)) & 3;
        let sc = b[j / 16];
        let dl = d16(b, Q2K_D) * f32::from(sc & 0xF);
        let ml = d16(b, Q2K_DMIN) * f32::from(sc >> 4);
        dl * f32::from(q) - ml
    }
    /// Q3_K: `d * (scale - 32) * q`, 6-bit scales per 16, the third bit of q in hmask.
    #[inline(always)]
    pub fn q3_k(b: &[u8], j: usize) -> f32 {
        let sub = j / 16;
        let lo = (b[Q3K_SCALES + sub % 8] >> (4 * (sub / 8))) & 0x0F;
        let hi = (b[Q3K_SCALES + 8 + sub % 4] >> (2 * (sub / 4))) & 0x03;
        let dl = d16(b, Q3K_D) * f32::from(((lo | (hi << 4)) as i8).wrapping_sub(32));
        let (h, s, l) = (j / 128, (j / 32) % 4, j % 32);
        let ql = ((b[Q3K_QS + h * 32 + l] >> (2 * s)) & 3) as i8;
        // The high bit subtracts 4 when it is *clear*.
        let qh = (((b[l] >> (j / 32)) & 1) ^ 1) as i8;
        dl * f32::from(ql - (qh << 2))
    }
    /// Q4_K.
    #[inline(always)]
    pub fn q4_k(b: &[u8], j: usize) -> f32 {
        qk45::<false>(b, j)
    }
    /// Q5_K.
    #[inline(always)]
    pub fn q5_k(b: &[u8], j: usize) -> f32 {
        qk45::<true>(b, j)
    }
    /// Q4_K (`Q5 = false`) and Q5_K (`Q5 = true`).
    #[inline(always)]
    fn qk45<const Q5: bool>(b: &[u8], j: usize) -> f32 {
        let sub = j / 32;
        let s = &b[Q45K_SCALES..Q45K_SCALES + 12];
        let (sc, mn) = if sub < 4 {
            (s[sub] & 0x3F, s[4 + sub] & 0x3F)
        } else {
            let k = sub - 4;
            ((s[8 + k] & 0x0F) | ((s[k] >> 2) & 0x30), (s[8 + k] >> 4) | ((s[4 + k] >> 2) & 0x30))
        };
        let dj = d16(b, 0) * f32::from(sc);
        let mj = d16(b, Q45K_DMIN) * f32::from(mn);
        let (c, l) = (sub / 2, j % 32);
        let q = if Q5 {
            ((b[Q5K_QS + c * 32 + l] >> (4 * (sub % 2))) & 0xF) | (((b[Q5K_QH + l] >> sub) & 1) << 4)
        } else {
            (b[Q4K_QS + c * 32 + l] >> (4 * (sub % 2))) & 0xF
        };
        dj * f32::from(q) - mj
    }
    #[inline(always)]
    pub fn q6_k(b: &[u8], j: usize) -> f32 {
        let (h, r) = (j / 128, j % 128);
        let lo = (b[h * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
        let hi = (b[Q6K_QH + h * 32 + r % 32] >> (2 * (r / 32))) & 3;
        let q = ((lo | (hi << 4)) as i8) - 32;
        let dl = f16_to_f32(u16::from_le_bytes([b[Q6K_D], b[Q6K_D + 1]])) * f32::from(b[Q6K_SCALES + j / 16] as i8);
        dl * f32::from(q)
    }
}
