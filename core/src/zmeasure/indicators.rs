//! The three indicators and the angle (Z-measure v1 §2, §3), computed in f64 the way the
//! reference (`zref.py`, numpy) does: same expressions, same order, numpy's pairwise sums.

use super::sum::{mean, pairwise, pairwise_sum};
use serde::Serialize;

/// Entropy H, excess kurtosis K and scale coherence C of a set of values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Indicators {
    /// Normalized entropy of a 256-bin histogram over [min, max], in [0, 1].
    pub entropy: f64,
    /// Excess kurtosis `m4 / m2² − 3`.
    pub kurtosis: f64,
    /// Coefficient of variation of the gaps between sorted values.
    pub cv: f64,
}

/// The indicators of `x` (finite values, in sample order), or `None` when the set is
/// degenerate (fewer than 2 values, or all equal).
///
/// numpy materializes `x - mu`, `d2 * d2`, the gaps…; we compute each term where the sum
/// needs it ([`pairwise`]), in the same order, which gives the same bits with no arrays.
/// Means run over `x` in sample order, as the reference's do; min, max, the histogram and
/// the gaps come from a sorted copy.
pub fn indicators(x: &[f32]) -> Option<Indicators> {
    indicators_sorted(x, &super::radix::sorted_f32(x))
}

/// [`indicators`], given `sorted`, the values of `x` in ascending order: for callers
/// that need the sorted values for something else too.
pub(crate) fn indicators_sorted(x: &[f32], sorted: &[f32]) -> Option<Indicators> {
    let m = x.len();
    if m < 2 || sorted.len() != m {
        return None;
    }
    let (mn, mx) = (f64::from(sorted[0]), f64::from(sorted[m - 1]));
    if mx <= mn {
        return None;
    }

    // Entropy over 256 bins, bin(v) = floor((v - min) / (max - min) * 256) clamped to 255
    // (the argument is never negative, so truncation is floor). Every step of bin() is a
    // monotone rounding, so bin() is non-decreasing in v: on the sorted values each bin is
    // one contiguous run, found by binary search with the exact same expression.
    let range = mx - mn;
    let bin = |v: f32| (((f64::from(v) - mn) / range * 256.0) as usize).min(255);
    let mut terms = [0f64; 256];
    let mut nt = 0;
    for (_, len) in super::bin_runs(sorted, bin) {
        let p = len as f64 / m as f64;
        terms[nt] = p * libm::log(p);
        nt += 1;
    }
    let entropy = -(0.0 + pairwise_sum(&terms[..nt])) / libm::log(256.0);

    // Kurtosis: mu = mean(x); d2 = (x - mu)²; K = mean(d2²) / mean(d2)² - 3.
    let mu = mean(m, &|i| [f64::from(x[i])], &|i| {
        let c = &x[i..i + 8];
        [core::array::from_fn(|j| f64::from(c[j]))]
    });
    let d2 = |v: f32| (f64::from(v) - mu) * (f64::from(v) - mu);
    let [s2, s4] = pairwise(0, m, &|i| [d2(x[i]), d2(x[i]) * d2(x[i])], &|i| {
        let c = &x[i..i + 8];
        let t: [f64; 8] = core::array::from_fn(|j| d2(c[j]));
        [t, t.map(|v| v * v)]
    });
    let (m2, m4) = ((0.0 + s2) / m as f64, (0.0 + s4) / m as f64);
    let kurtosis = m4 / (m2 * m2) - 3.0;

    // Scale coherence: std / mean of the gaps between sorted values.
    let gap = |i: usize| f64::from(sorted[i + 1]) - f64::from(sorted[i]);
    let gaps8 = |i: usize| -> [f64; 8] {
        let c = &sorted[i..i + 9];
        core::array::from_fn(|j| f64::from(c[j + 1]) - f64::from(c[j]))
    };
    let md = mean(m - 1, &|i| [gap(i)], &|i| [gaps8(i)]);
    let cv = if md > 0.0 {
        let dev = |g: f64| (g - md) * (g - md);
        let var = mean(m - 1, &|i| [dev(gap(i))], &|i| [gaps8(i).map(dev)]);
        libm::sqrt(var) / md
    } else {
        0.0
    };
    Some(Indicators { entropy, kurtosis, cv })
}

/// θ in degrees from the indicators (§3).
pub fn theta(ind: &Indicators) -> f64 {
    let s_h = ((0.95 - ind.entropy) / 0.45).clamp(0.0, 1.0);
    let k = ind.kurtosis.max(0.0);
    let s_k = k / (k + 3.0);
    let s_c = if ind.cv > 0.0 { (libm::log10(ind.cv) / 2.0).clamp(0.0, 1.0) } else { 0.0 };
    90.0 * (s_h + s_k + s_c) / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zmeasure::sum::pairwise_sum;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    /// zref.py's `indicators`, transcribed literally: arrays, per-element division,
    /// numpy-order sums.
    fn naive(x: &[f32]) -> Option<Indicators> {
        let x: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let m = x.len();
        if m < 2 {
            return None;
        }
        let mn = x.iter().copied().fold(f64::INFINITY, f64::min);
        let mx = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if mx <= mn {
            return None;
        }
        let mut h = [0u64; 256];
        for &v in &x {
            h[(((v - mn) / (mx - mn) * 256.0) as usize).min(255)] += 1;
        }
        let t: Vec<f64> =
            h.iter().filter(|&&c| c > 0).map(|&c| c as f64 / m as f64).map(|p| p * libm::log(p)).collect();
        let entropy = -(0.0 + pairwise_sum(&t)) / libm::log(256.0);
        let mean = |a: &[f64]| (0.0 + pairwise_sum(a)) / a.len() as f64;
        let mu = mean(&x);
        let d2: Vec<f64> = x.iter().map(|&v| (v - mu) * (v - mu)).collect();
        let d4: Vec<f64> = d2.iter().map(|&v| v * v).collect();
        let (m2, m4) = (mean(&d2), mean(&d4));
        let mut s = x.clone();
        s.sort_by(f64::total_cmp);
        let d: Vec<f64> = s.windows(2).map(|w| w[1] - w[0]).collect();
        let md = mean(&d);
        let cv = if md > 0.0 {
            let dev: Vec<f64> = d.iter().map(|&g| (g - md) * (g - md)).collect();
            libm::sqrt(mean(&dev)) / md
        } else {
            0.0
        };
        Some(Indicators { entropy, kurtosis: m4 / (m2 * m2) - 3.0, cv })
    }

    fn same(a: Option<Indicators>, b: Option<Indicators>) -> bool {
        match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                a.entropy.to_bits() == b.entropy.to_bits()
                    && a.kurtosis.to_bits() == b.kurtosis.to_bits()
                    && a.cv.to_bits() == b.cv.to_bits()
            }
            _ => false,
        }
    }

    proptest! {
        /// Few distinct values (as quantized tensors have) and wide ranges alike.
        #[test]
        fn bit_identical_to_a_literal_transcription(
            levels in 1u32..300,
            scale in -30i32..30,
            raw in proptest::collection::vec(any::<u32>(), 0..5000),
        ) {
            let s = libm::exp2(f64::from(scale)) as f32;
            let x: Vec<f32> = raw.iter().map(|&r| ((r % levels) as f32 - (levels / 3) as f32) * s).collect();
            prop_assert!(same(indicators(&x), naive(&x)));
        }

        #[test]
        fn bit_identical_on_arbitrary_finite_floats(raw in proptest::collection::vec(any::<u32>(), 0..3000)) {
            let x: Vec<f32> = raw.iter().map(|&b| f32::from_bits(b)).filter(|v| v.is_finite() && v.abs() < 1e30).collect();
            prop_assert!(same(indicators(&x), naive(&x)));
        }
    }
}
