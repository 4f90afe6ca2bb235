//! The 4-bit codebook formats: IQ4_NL (ggml's non-linear 4-bit values, 32 per f16
//! scale), MXFP4 (OCP e2m1 values, e8m0 scale per 32) and NVFP4 (e2m1 values, four ue4m3
//! scales per 64). The block kernels port gguf-py 0.19.0's `dequantize_blocks` of the same
//! name, keeping its f32 operation order; [`at`] decodes one element alike; [`encode`]
//! ports ggml's MXFP4, NVFP4, IQ4_NL and IQ4_XS quantizers (IQ4_XS: IQ4_NL's values, 6-bit
//! scales per 32 under an f16 one per 256; its decoder is with the i-quants').

use super::float::{e8m0_to_f32_half, f16_le, ue4m3_to_f32_half};

/// `kvalues_iq4nl` in ggml.
pub(crate) const KVALUES_IQ4NL: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
/// e2m1 values, doubled (`kvalues_mxfp4`).
pub(crate) const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

#[inline]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16_le([b[i], b[i + 1]])
}

/// IQ4_NL: `d * kvalues[q]`.
pub fn iq4_nl(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        y[j] = d * f32::from(KVALUES_IQ4NL[usize::from(q & 0xF)]);
        y[j + 16] = d * f32::from(KVALUES_IQ4NL[usize::from(q >> 4)]);
    }
}

/// MXFP4: e8m0 scale (halved) times doubled e2m1 values.
pub fn mxfp4(b: &[u8; 17], y: &mut [f32; 32]) {
    let d = e8m0_to_f32_half(b[0]);
    for j in 0..16 {
        let q = b[1 + j];
        y[j] = d * f32::from(KVALUES_MXFP4[usize::from(q & 0xF)]);
        y[j + 16] = d * f32::from(KVALUES_MXFP4[usize::from(q >> 4)]);
    }
}

/// NVFP4: four ue4m3 scales (halved), each over 16 doubled e2m1 values.
pub fn nvfp4(b: &[u8; 36], y: &mut [f32; 64]) {
    for s in 0..4 {
        let d = ue4m3_to_f32_half(b[s]);
        for j in 0..8 {
            let q = b[4 + s * 8 + j];
            y[s * 16 + j] = d * f32::from(KVALUES_MXFP4[usize::from(q & 0xF)]);
            y[s * 16 + 8 + j] = d * f32::from(KVALUES_MXFP4[usize::from(q >> 4)]);
        }
    }
}

/// Single elements: element `j` of block `b`, as the block kernels give it.
pub mod at {
    use super::super::float::{e8m0_to_f32_half, ue4m3_to_f32_half};
    use super::super::legacy::at::{d16, nib};
    use super::{KVALUES_IQ4NL, KVALUES_MXFP4};

    #[inline(always)]
    pub fn iq4_nl(b: &[u8], j: usize) -> f32 {
        d16(b, 0) * f32::from(KVALUES_IQ4NL[usize::from(nib(b, 2, j))])
    }
    #[inline(always)]
    pub fn mxfp4(b: &[u8], j: usize) -> f32 {
        e8m0_to_f32_half(b[0]) * f32::from(KVALUES_MXFP4[usize::from(nib(b, 1, j))])
    }
    /// NVFP4: four halved ue4m3 scales, each over 16 e2m1 values (8 bytes).
    #[inline(always)]
    pub fn nvfp4(b: &[u8], j: usize) -> f32 {
        let (s, r) = (j / 16, j % 16);
        let q = b[4 + s * 8 + r % 8];
        let nib = if r < 8 { q & 0xF } else { q >> 4 };
        ue4m3_to_f32_half(b[s]) * f32::from(KVALUES_MXFP4[usize::from(nib)])
    }
}

/// The IQ4_NL quantizer: a port of ggml's `quantize_iq4_nl` without importance weights
/// (what llama-quantize writes when it has no imatrix, as for the rows of a 256-block type
/// that are not whole 256-blocks), through `quantize_row_iq4_nl_impl`, keeping the order of
/// every f32 operation, so the blocks are ggml's to the bit (vectors from ggml's own code:
/// scripts/gen-ggml-quant-vectors.sh).
///
/// ggml's `quantize_row_iq4_nl_ref` calls the same search with `ntry = -1` instead of 7:
/// a cruder scale, and an all-zero block left with the codes its stack buffer held (the
/// previous block's, or uninitialized memory), so that is not what a file gets.
pub mod encode {
    use super::super::float::{e8m0_to_f32_half, f32_to_f16, ue4m3_to_f32_half};
    use super::KVALUES_IQ4NL as VALUES;
    use super::KVALUES_MXFP4;
    use alloc::vec::Vec;

    use super::super::search::{nearest_int, GROUP_MAX_EPS};
    /// `ntry` of `quantize_iq4_nl`: the scale search tries `ntry * 2 + 1` scales.
    const NTRY: i32 = 7;

    /// The 16 IQ4_NL values as f32, converted once rather than in the searches' loops.
    const VALUES_F32: [f32; 16] = {
        let mut v = [0f32; 16];
        let mut i = 0;
        while i < 16 {
            v[i] = VALUES[i] as f32;
            i += 1;
        }
        v
    };

    /// ggml's `best_index_int8` over the 16 IQ4_NL values: the index of the value nearest
    /// `x` (the upper one on a tie), by bisection.
    ///
    /// ggml's loop runs three or four halvings; this runs four, each a select rather than
    /// a branch (a mispredicted branch per halving was most of IQ4_XS's time). A fourth
    /// halving of a bracket already one wide is a no-op: its midpoint is `ml`, and
    /// `x < VALUES[ml]` is false (`x` is at or above it, or NaN, which no comparison
    /// takes), for every `x` the two ends do not answer.
    pub(super) fn best_index(x: f32) -> u8 {
        let val = |i: usize| VALUES_F32[i];
        let (mut ml, mut mu) = (0, 15);
        for _ in 0..4 {
            let mav = (ml + mu) / 2;
            let below = x < val(mav);
            mu = if below { mav } else { mu };
            ml = if below { ml } else { mav };
        }
        // Below VALUES[0] the halvings end at mu 0, an answer the selects below replace.
        let mu = mu.max(1);
        let mid = if x - val(mu - 1) < val(mu) - x { mu - 1 } else { mu };
        let k = if x >= val(15) { 15 } else { mid };
        (if x <= val(0) { 0 } else { k }) as u8
    }

    /// ggml's weights without an importance matrix: x².
    fn squares(x: &[f32; 32]) -> [f32; 32] {
        x.map(|v| v * v)
    }

    /// The scale `quantize_row_iq4_nl_impl`'s search settles on for one 32-value block
    /// under weights `w`, 0 for a block below [`GROUP_MAX_EPS`].
    fn block_scale(x: &[f32; 32], w: &[f32; 32]) -> f32 {
        let (mut amax, mut max) = (0f32, 0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax < GROUP_MAX_EPS {
            return 0.0;
        }
        // The first guess and the 2·NTRY + 1 tries, summed side by side: a try's sums do
        // not depend on the others', only the comparisons below do, in ggml's order.
        const TRIES: usize = 2 * NTRY as usize + 2;
        let mut ids = [1.0 / (-max / VALUES_F32[0]); TRIES];
        for (id, itry) in ids[1..].iter_mut().zip(-NTRY..=NTRY) {
            *id = (itry + i32::from(VALUES[0])) as f32 / max;
        }
        let (mut sumqx, mut sumq2) = ([0f32; TRIES], [0f32; TRIES]);
        for (j, &v) in x.iter().enumerate() {
            for t in 0..TRIES {
                let q = VALUES_F32[usize::from(best_index(ids[t] * v))];
                sumqx[t] += w[j] * q * v;
                sumq2[t] += w[j] * q * q;
            }
        }
        let mut d = if sumq2[0] > 0.0 { sumqx[0] / sumq2[0] } else { 0.0 };
        let mut best = d * sumqx[0];
        for t in 1..TRIES {
            if sumq2[t] > 0.0 && sumqx[t] * sumqx[t] > best * sumq2[t] {
                d = sumqx[t] / sumq2[t];
                best = d * sumqx[t];
            }
        }
        d
    }

    /// One IQ4_NL block (`quantize_row_iq4_nl_impl` with one 32-value block, no
    /// importance weights, `ntry` 7): d, qs[16] (value j low nibble, j + 16 high).
    pub fn iq4_nl(x: &[f32], out: &mut Vec<u8>) {
        let Ok(x) = <&[f32; 32]>::try_from(x) else { return };
        iq4_nl_weighted(x, &squares(x), out);
    }

    /// [`iq4_nl`] under weights `w` (the importance matrix's, or x²).
    pub(in crate::quant) fn iq4_nl_weighted(x: &[f32; 32], w: &[f32; 32], out: &mut Vec<u8>) {
        let d = block_scale(x, w);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let l = x.map(|v| best_index(id * v));
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend((0..16).map(|j| l[j] | (l[j + 16] << 4)));
    }

    /// One IQ4_XS super-block of 256 (`quantize_iq4_xs` without an importance matrix:
    /// `quantize_row_iq4_nl_impl(256, 32, …, ntry 7)`): each block's scale searched as
    /// IQ4_NL's, then stored as 6 bits of the super-block's f16 `d = -max_scale / 32`,
    /// and the codes chosen again for the stored scale. Layout: d, scales_h (2 bits a
    /// block), scales_l[4] (4 bits a block), qs[128].
    pub fn iq4_xs(x: &[f32], out: &mut Vec<u8>) {
        let w: [[f32; 32]; 8] = core::array::from_fn(|ib| {
            let mut b = [0f32; 32];
            for (b, &v) in b.iter_mut().zip(&x[32 * ib..32 * ib + 32]) {
                *b = v * v;
            }
            b
        });
        iq4_xs_weighted(x, &w, out);
    }

    /// [`iq4_xs`] under weights `w`, a block of 32 at a time.
    pub(in crate::quant) fn iq4_xs_weighted(x: &[f32], w: &[[f32; 32]; 8], out: &mut Vec<u8>) {
        if x.len() != 256 {
            return;
        }
        let mut scales = [0f32; 8];
        let (mut max_scale, mut amax_scale) = (0f32, 0f32);
        for (ib, s) in scales.iter_mut().enumerate() {
            let Ok(xb) = <&[f32; 32]>::try_from(&x[32 * ib..32 * ib + 32]) else { return };
            *s = block_scale(xb, &w[ib]);
            if s.abs() > amax_scale {
                amax_scale = s.abs();
                max_scale = *s;
            }
        }
        let d = -max_scale / 32.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let (mut scales_h, mut scales_l) = (0u16, [0u8; 4]);
        let mut l = [0u8; 256];
        for ib in 0..8 {
            let q = nearest_int(id * scales[ib]).clamp(-32, 31);
            let dl = d * q as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for j in 0..32 {
                l[32 * ib + j] = best_index(idl * x[32 * ib + j]);
            }
            let q = (q + 32) as u8;
            scales_l[ib / 2] |= (q & 0xF) << (4 * (ib % 2));
            scales_h |= u16::from(q >> 4) << (2 * (ib % 8));
        }
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend_from_slice(&scales_h.to_le_bytes());
        out.extend_from_slice(&scales_l);
        for i in 0..8 {
            out.extend((0..16).map(|j| l[32 * i + j] | (l[32 * i + 16 + j] << 4)));
        }
    }

    /// One MXFP4 block (`quantize_row_mxfp4_ref`, what `quantize_mxfp4` and so
    /// llama-quantize write, with or without an importance matrix): the e8m0 exponent
    /// `floor(log2(amax)) - 2 + 127`, then each value's nearest doubled e2m1 code under
    /// the halved scale (the first on a tie). ggml converts that exponent from float to
    /// `uint8_t` through a 32-bit integer, so below 2⁻¹⁰² it wraps; organ wraps alike.
    /// `libm::log2f` and glibc's differ in the last bit for some floats, but their floors
    /// agree on every positive finite f32 (bench/mxfp4-log2f.sh, docs/quantize.md).
    pub fn mxfp4(x: &[f32], out: &mut Vec<u8>) {
        let Ok(x) = <&[f32; 32]>::try_from(x) else { return };
        let amax = x.iter().fold(0f32, |m, v| if m < v.abs() { v.abs() } else { m });
        let e = if amax > 0.0 { (libm::floorf(libm::log2f(amax)) - 2.0 + 127.0) as i32 as u8 } else { 0 };
        let d = e8m0_to_f32_half(e);
        out.push(e);
        out.extend((0..16).map(|j| mxfp4_index(x[j], d) | (mxfp4_index(x[j + 16], d) << 4)));
    }

    /// `best_index_mxfp4`: the doubled e2m1 code nearest `v` under scale `d`, the first
    /// on a tie.
    fn mxfp4_index(v: f32, d: f32) -> u8 {
        let err = |i: usize| (f32::from(KVALUES_MXFP4[i]) * d - v).abs();
        let (mut best, mut best_err) = (0u8, err(0));
        for i in 1..16 {
            if err(i) < best_err {
                (best, best_err) = (i as u8, err(i));
            }
        }
        best
    }

    /// `ggml_fp32_to_ue4m3`: an unsigned e4m3 (bias 7) scale, 448 at most, rounded half up
    /// on its mantissa's fourth bit; below 2⁻⁶, a subnormal `round(x · 2⁹)`.
    fn f32_to_ue4m3(x: f32) -> u8 {
        // `!(x > 0)`: NaN too.
        if x.is_nan() || x <= 0.0 {
            return 0;
        }
        let x = if x > 448.0 { 448.0 } else { x };
        let bits = x.to_bits();
        let mut exp = ((bits >> 23) & 0xFF) as i32 - 127 + 7;
        if exp <= 0 {
            let man = ((x * 512.0 + 0.5) as i32).min(7);
            return if man < 1 { 0 } else { man as u8 };
        }
        if exp >= 15 {
            return 0x7E;
        }
        let mut man = ((bits >> 20) & 0x7) as i32 + ((bits >> 19) & 1) as i32;
        if man > 7 {
            man = 0;
            exp += 1;
            if exp >= 15 {
                return 0x7E;
            }
        }
        ((exp << 3) | man) as u8
    }

    /// One NVFP4 block of 64 (`quantize_row_nvfp4_ref`, what `quantize_nvfp4` writes with
    /// or without an importance matrix): per 16 values a ue4m3 scale of `amax / 6`, then
    /// MXFP4's codes under it. Layout: d[4], qs[32] (per sub-block, value j low nibble,
    /// j + 8 high).
    pub fn nvfp4(x: &[f32], out: &mut Vec<u8>) {
        let Ok(x) = <&[f32; 64]>::try_from(x) else { return };
        let mut qs = [0u8; 32];
        for (s, xb) in x.chunks_exact(16).enumerate() {
            let amax = xb.iter().fold(0f32, |m, v| if m < v.abs() { v.abs() } else { m });
            let ue = f32_to_ue4m3(amax / 6.0);
            out.push(ue);
            let d = ue4m3_to_f32_half(ue);
            for j in 0..8 {
                qs[s * 8 + j] = mxfp4_index(xb[j], d) | (mxfp4_index(xb[8 + j], d) << 4);
            }
        }
        out.extend_from_slice(&qs);
    }
}

#[cfg(test)]
mod tests {
    /// ggml's `best_index_int8` as written (a branch per halving, 3 or 4 of them), the
    /// oracle for the branch-free [`super::encode::best_index`].
    fn ggml_best_index(x: f32) -> u8 {
        let val = |i: usize| f32::from(super::KVALUES_IQ4NL[i]);
        if x <= val(0) {
            return 0;
        }
        if x >= val(15) {
            return 15;
        }
        let (mut ml, mut mu) = (0, 15);
        while mu - ml > 1 {
            let mav = (ml + mu) / 2;
            if x < val(mav) {
                mu = mav;
            } else {
                ml = mav;
            }
        }
        (if x - val(mu - 1) < val(mu) - x { mu - 1 } else { mu }) as u8
    }

    /// Every f32 from -256 to 256 whose low 8 bits are zero (every code's bracket, its
    /// ties and ends), plus NaN, the infinities, and the largest and smallest magnitudes.
    #[test]
    fn best_index_is_ggmls_bisection() {
        let mut xs = alloc::vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN, 0.0, -0.0, 1e-45];
        for v in super::KVALUES_IQ4NL.windows(2) {
            xs.push((f32::from(v[0]) + f32::from(v[1])) / 2.0);
        }
        xs.extend((0..=0x4380_0000u32).step_by(256).flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)]));
        for x in xs {
            assert_eq!(super::encode::best_index(x), ggml_best_index(x), "{x:e}");
        }
    }

    /// MXFP4's exponent is `floor(log2f(amax))`: organ's `libm::log2f` must floor as the
    /// platform's (glibc's, which ggml calls) does. Their last bits differ on some floats,
    /// but a floor can only differ where log2 is within about 90 ulps of a power of two
    /// (below that distance log2 is more than half an ulp from the integer), so each
    /// power's 2¹⁶ floats either side are checked; [`libm_log2f_floors_as_the_platforms_everywhere`]
    /// compares every positive finite f32 (bench/mxfp4-log2f.sh).
    #[test]
    fn libm_log2f_floors_as_the_platforms() {
        for e in 1u32..255 {
            let p = e << 23;
            for bits in p.saturating_sub(1 << 16)..(p + (1 << 16)).min(0x7f80_0000) {
                let x = f32::from_bits(bits);
                assert_eq!(libm::floorf(libm::log2f(x)), x.log2().floor(), "{x:e}");
            }
        }
    }

    /// [`libm_log2f_floors_as_the_platforms`] over every positive finite f32 (2³¹ − 2²³ of
    /// them, seconds in a release build: bench/mxfp4-log2f.sh runs it), printing how many
    /// last bits differ.
    #[test]
    #[ignore = "every positive finite f32: a bench, bench/mxfp4-log2f.sh"]
    fn libm_log2f_floors_as_the_platforms_everywhere() {
        let mut last_bit = 0u64;
        for bits in 1u32..0x7f80_0000 {
            let x = f32::from_bits(bits);
            let (ours, platform) = (libm::log2f(x), x.log2());
            last_bit += u64::from(ours.to_bits() != platform.to_bits());
            assert_eq!(libm::floorf(ours), platform.floor(), "{x:e}");
        }
        std::println!(
            "log2f: {last_bit} of the 2139095039 positive finite f32 differ in the last bit; no floor differs"
        );
    }
}
