//! The 32-element formats with a linear scale: Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0. The block
//! kernels port the `dequantize_blocks` of gguf-py 0.19.0's class of the same name
//! (`dequantize_row_*` in ggml-quants.c), keeping its f32 operation order; [`at`] decodes
//! one element with the same expressions; [`encode`] ports gguf-py's `quantize_blocks`.

use super::float::f16_le;

#[inline]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16_le([b[i], b[i + 1]])
}

/// Q4_0: `d * (q - 8)`.
pub fn q4_0(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        y[j] = d * f32::from((q & 0xF) as i8 - 8);
        y[j + 16] = d * f32::from((q >> 4) as i8 - 8);
    }
}

/// Q4_1: `d * q + m`.
pub fn q4_1(b: &[u8; 20], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    for j in 0..16 {
        let q = b[4 + j];
        y[j] = d * f32::from(q & 0xF) + m;
        y[j + 16] = d * f32::from(q >> 4) + m;
    }
}

/// Q5_0: `d * (q - 16)`, the fifth bit from a u32 mask.
pub fn q5_0(b: &[u8; 22], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    for j in 0..16 {
        let q = b[6 + j];
        let h0 = ((qh >> j) & 1) as u8;
        let h1 = ((qh >> (j + 16)) & 1) as u8;
        y[j] = d * f32::from(((q & 0xF) | (h0 << 4)) as i8 - 16);
        y[j + 16] = d * f32::from(((q >> 4) | (h1 << 4)) as i8 - 16);
    }
}

/// Q5_1: `d * q + m`.
pub fn q5_1(b: &[u8; 24], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    for j in 0..16 {
        let q = b[8 + j];
        let h0 = ((qh >> j) & 1) as u8;
        let h1 = ((qh >> (j + 16)) & 1) as u8;
        y[j] = d * f32::from((q & 0xF) | (h0 << 4)) + m;
        y[j + 16] = d * f32::from((q >> 4) | (h1 << 4)) + m;
    }
}

/// Q8_0: `q * d`.
pub fn q8_0(b: &[u8; 34], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..32 {
        y[j] = f32::from(b[2 + j] as i8) * d;
    }
}

/// Single elements: element `j` (0..32) of block `b`, as the block kernels give it.
pub mod at {
    use super::super::float::f16_le;

    /// The f16 at byte `i` of a block (its scale), as f32. Shared with `codebook4`.
    #[inline(always)]
    pub(in crate::quant) fn d16(b: &[u8], i: usize) -> f32 {
        f16_le([b[i], b[i + 1]])
    }

    /// The nibble of element `j` in a 32-element block whose 16 quant bytes start at `at`.
    /// Shared with `codebook4`.
    #[inline(always)]
    pub(in crate::quant) fn nib(b: &[u8], at: usize, j: usize) -> u8 {
        (b[at + j % 16] >> (4 * (j / 16))) & 0xF
    }

    #[inline(always)]
    fn bit5(qh: u32, j: usize) -> u8 {
        (((qh >> j) & 1) as u8) << 4
    }

    #[inline(always)]
    pub fn q4_0(b: &[u8], j: usize) -> f32 {
        d16(b, 0) * f32::from(nib(b, 2, j) as i8 - 8)
    }
    #[inline(always)]
    pub fn q4_1(b: &[u8], j: usize) -> f32 {
        d16(b, 0) * f32::from(nib(b, 4, j)) + d16(b, 2)
    }
    #[inline(always)]
    pub fn q5_0(b: &[u8], j: usize) -> f32 {
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        d16(b, 0) * f32::from((nib(b, 6, j) | bit5(qh, j)) as i8 - 16)
    }
    #[inline(always)]
    pub fn q5_1(b: &[u8], j: usize) -> f32 {
        let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        d16(b, 0) * f32::from(nib(b, 8, j) | bit5(qh, j)) + d16(b, 2)
    }
    #[inline(always)]
    pub fn q8_0(b: &[u8], j: usize) -> f32 {
        f32::from(b[2 + j] as i8) * d16(b, 0)
    }
}

/// The quantizers gguf-py 0.19.0 has for these types, bit-identical to its
/// `quantize_blocks`: one block of 32 values in, its bytes appended to `out`.
pub mod encode {
    use super::super::float::f32_to_f16;
    use alloc::vec::Vec;

    /// numpy's `np_roundf` in gguf-py: round half away from zero, in f32 (C's `roundf`,
    /// which ggml's reference quantizers call). Below 2²³ the truncation and the fraction
    /// are exact, so this equals `floor(a) + floor(2·(a − floor(a)))` without libm's
    /// software floor (baseline x86-64 has no rounding instruction); at and above 2²³
    /// every f32 is an integer already.
    #[inline(always)]
    fn roundf(n: f32) -> f32 {
        let a = n.abs();
        if a >= 8_388_608.0 || a.is_nan() {
            return n; // an integer, an infinity or NaN: as floor would leave it
        }
        let t = a as i32 as f32;
        let b = if a - t >= 0.5 { t + 1.0 } else { t };
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
    #[inline(always)]
    fn trunc_u8(v: f32, hi: u8) -> u8 {
        // `as` truncates toward zero and saturates: truncf first would change nothing.
        (v as u8).min(hi)
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

    pub fn q8_0(x: &[f32], out: &mut Vec<u8>) {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = inv(d);
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend(x.iter().map(|&v| roundf(v * id) as i8 as u8));
    }

    pub fn q4_0(x: &[f32], out: &mut Vec<u8>) {
        let d = signed_absmax(x) / -8.0;
        let id = inv(d);
        let q: Vec<u8> = x.iter().map(|&v| trunc_u8(v * id + 8.5, 15)).collect();
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend((0..16).map(|j| q[j] | (q[j + 16] << 4)));
    }

    pub fn q4_1(x: &[f32], out: &mut Vec<u8>) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inv(d);
        let q: Vec<u8> = x.iter().map(|&v| trunc_u8((v - min) * id + 0.5, 15)).collect();
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend_from_slice(&f32_to_f16(min).to_le_bytes());
        out.extend((0..16).map(|j| q[j] | (q[j + 16] << 4)));
    }

    pub(in crate::quant) fn pack5(q: &[u8], out: &mut Vec<u8>) {
        let qh = q.iter().enumerate().fold(0u32, |h, (j, &v)| h | (u32::from(v >> 4) << j));
        out.extend_from_slice(&qh.to_le_bytes());
        out.extend((0..16).map(|j| (q[j] & 0x0F) | (q[j + 16] << 4)));
    }

    pub fn q5_0(x: &[f32], out: &mut Vec<u8>) {
        let d = signed_absmax(x) / -16.0;
        let id = inv(d);
        let q: Vec<u8> = x.iter().map(|&v| trunc_u8(v * id + 16.5, 31)).collect();
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        pack5(&q, out);
    }

    pub fn q5_1(x: &[f32], out: &mut Vec<u8>) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inv(d);
        let q: Vec<u8> = x.iter().map(|&v| trunc_u8((v - min) * id + 0.5, 31)).collect();
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend_from_slice(&f32_to_f16(min).to_le_bytes());
        pack5(&q, out);
    }
}
