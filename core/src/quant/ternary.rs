//! The ternary formats TQ1_0 and TQ2_0 (256 values in {-1, 0, 1} per f16 scale). Each
//! block kernel ports gguf-py 0.19.0's `dequantize_blocks` of the same name (ggml's
//! `dequantize_row_tq*_0`), keeping its f32 operation order; [`at`] decodes one element;
//! [`encode`] ports ggml's `quantize_row_tq1_0_ref` / `quantize_row_tq2_0_ref`.

use super::float::f16_le;
use core::mem::{offset_of, size_of};

/// ggml's `block_tq1_0`: five base-3 digits per byte of `qs`, four per byte of `qh`, then
/// the f16 scale.
#[repr(C)]
pub struct BlockTQ1_0 {
    pub qs: [u8; 48],
    pub qh: [u8; 4],
    pub d: [u8; 2],
}
/// ggml's `block_tq2_0`: four 2-bit codes (q - 1 in {-1, 0, 1}) per byte, then the f16 scale.
#[repr(C)]
pub struct BlockTQ2_0 {
    pub qs: [u8; 64],
    pub d: [u8; 2],
}
const _: () = assert!(size_of::<BlockTQ1_0>() == 54 && size_of::<BlockTQ2_0>() == 66);

const TQ1_QH: usize = offset_of!(BlockTQ1_0, qh);
const TQ1_D: usize = offset_of!(BlockTQ1_0, d);
const TQ2_D: usize = offset_of!(BlockTQ2_0, d);

#[inline]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16_le([b[i], b[i + 1]])
}

/// TQ1_0's multipliers: byte × 3^k (mod 256) brings base-3 digit k to the top.
const TQ1_POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// TQ1_0: base-3 packed ternary, layout qs[48], qh[4], d.
pub fn tq1_0(b: &[u8; 54], y: &mut [f32; 256]) {
    let d = f16_at(b, TQ1_D);
    let tern = |v: u8, m: u8| -> f32 {
        let t = v.wrapping_mul(m);
        f32::from(((u16::from(t) * 3) >> 8) as i8 - 1)
    };
    for (k, &m) in TQ1_POW3.iter().enumerate() {
        for l in 0..32 {
            y[k * 32 + l] = d * tern(b[l], m);
        }
        for l in 0..16 {
            y[160 + k * 16 + l] = d * tern(b[32 + l], m);
        }
    }
    for (k, &m) in TQ1_POW3[..4].iter().enumerate() {
        for l in 0..4 {
            y[240 + k * 4 + l] = d * tern(b[TQ1_QH + l], m);
        }
    }
}

/// TQ2_0: 2-bit ternary, layout qs[64], d.
pub fn tq2_0(b: &[u8; 66], y: &mut [f32; 256]) {
    let d = f16_at(b, TQ2_D);
    for (i, out) in y.iter_mut().enumerate() {
        let (h, s, l) = (i / 128, (i / 32) % 4, i % 32);
        let q = ((b[h * 32 + l] >> (2 * s)) & 3) as i8 - 1;
        *out = d * f32::from(q);
    }
}

/// Single elements: element `j` (0..256) of block `b`, as the block kernels give it.
pub mod at {
    use super::super::float::f16_le;
    use super::{TQ1_QH, TQ2_D};

    #[inline(always)]
    fn d16(b: &[u8], i: usize) -> f32 {
        f16_le([b[i], b[i + 1]])
    }

    /// TQ1_0: base-3 digits, five per byte of qs[0..48], four per byte of qh[48..52].
    #[inline(always)]
    pub fn tq1_0(b: &[u8], j: usize) -> f32 {
        use super::{TQ1_D, TQ1_POW3 as POW3};
        let (byte, m) = match j {
            0..160 => (b[j % 32], POW3[j / 32]),
            160..240 => (b[32 + (j - 160) % 16], POW3[(j - 160) / 16]),
            _ => (b[TQ1_QH + (j - 240) % 4], POW3[(j - 240) / 4]),
        };
        let t = byte.wrapping_mul(m);
        d16(b, TQ1_D) * f32::from(((u16::from(t) * 3) >> 8) as i8 - 1)
    }
    /// TQ2_0: 2-bit ternary, `d * (q - 1)`.
    #[inline(always)]
    pub fn tq2_0(b: &[u8], j: usize) -> f32 {
        let (h, s, l) = (j / 128, (j / 32) % 4, j % 32);
        let q = ((b[h * 32 + l] >> (2 * s)) & 3) as i8 - 1;
        d16(b, TQ2_D) * f32::from(q)
    }
}

/// The quantizers: ports of ggml's reference C (`quantize_row_tq1_0_ref`,
/// `quantize_row_tq2_0_ref`) keeping the order of every f32 operation, so the blocks are
/// ggml's to the bit (vectors from ggml's own code: scripts/gen-ggml-quant-vectors.sh).
/// One 256-value block in, its bytes appended to `out`.
pub mod encode {
    use super::super::float::f32_to_f16;
    use alloc::vec::Vec;

    /// The block's largest magnitude (ggml's `MAX(amax, fabsf(v))`) and its reciprocal
    /// (0 for an all-zero block).
    fn scale(x: &[f32]) -> (f32, f32) {
        let amax = x.iter().fold(0f32, |m, v| if m > v.abs() { m } else { v.abs() });
        (amax, if amax != 0.0 { 1.0 / amax } else { 0.0 })
    }

    /// ggml's ternary digit `lroundf(v) + 1` (0, 1 or 2 for |v| <= 1) as glibc and x86-64
    /// compute it: round half away from zero; a NaN, an infinity or |v| >= 2^63 makes
    /// `lroundf` return `LONG_MIN`, which plus one truncates to the `int` 1. (ggml meets
    /// that when the block's largest magnitude is so small its reciprocal is infinite.)
    #[inline]
    fn trit(v: f32) -> u8 {
        if v.abs() < 9_223_372_036_854_775_808.0 {
            (libm::roundf(v) as i64 + 1) as u8
        } else {
            1
        }
    }

    /// Five (or four) trits, first most significant, in ggml's `uint8_t` arithmetic, then
    /// scaled to a byte by ceiling division (`(q * 256 + 242) / 243`, truncated to 8 bits:
    /// a wrapped `q` above 242 gives ggml's wrapped byte too).
    fn pack_trits(trits: impl Iterator<Item = u8>, shift: bool) -> u8 {
        let mut q = trits.fold(0u8, |q, t| q.wrapping_mul(3).wrapping_add(t));
        if shift {
            q = q.wrapping_mul(3);
        }
        (u32::from(q) * 256).div_ceil(243) as u8
    }

    /// One TQ1_0 block: qs[48] (five trits a byte, of values 32 or 16 apart), qh[4] (four
    /// trits a byte, 4 apart, shifted to the top), d.
    pub fn tq1_0(x: &[f32], out: &mut Vec<u8>) {
        let (d, id) = scale(x);
        let t = |i: usize| trit(x[i] * id);
        out.extend((0..32).map(|m| pack_trits((0..5).map(|n| t(m + 32 * n)), false)));
        out.extend((0..16).map(|m| pack_trits((0..5).map(|n| t(160 + m + 16 * n)), false)));
        out.extend((0..4).map(|j| pack_trits((0..4).map(|m| t(240 + j + 4 * m)), true)));
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    }

    /// One TQ2_0 block: qs[64] (four 2-bit trits a byte, 32 values apart, low bits first), d.
    pub fn tq2_0(x: &[f32], out: &mut Vec<u8>) {
        let (d, id) = scale(x);
        for h in 0..2 {
            out.extend(
                (0..32).map(|m| {
                    (0..4).fold(0u8, |q, n| q.wrapping_add((trit(x[128 * h + m + 32 * n] * id) & 3) << (2 * n)))
                }),
            );
        }
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    }
}
