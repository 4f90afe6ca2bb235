//! The three indicators and the angle (Z-measure v1 §2, §3), computed in f64 the way the
//! reference (`zref.py`, numpy) does: same expressions, same order, numpy's pairwise sums.

use super::sum::{mean_by, pairwise_sum};
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

/// The indicators of `x` (finite values, in any order), or `None` when the set is
/// degenerate (fewer than 2 values, or all equal). `x` is left sorted.
///
/// numpy materializes `x - mu`, `d2 * d2`, the gaps…; we compute each term where the sum
/// needs it ([`mean_by`]), in the same order, which gives the same bits with no arrays.
pub fn indicators(x: &mut [f32]) -> Option<Indicators> {
    let m = x.len();
    if m < 2 {
        return None;
    }
    // min/max of f32 values equal those of their exact f64 images. The values are finite,
    // so plain comparisons suffice.
    let (mut lo, mut hi) = (x[0], x[0]);
    for &v in x.iter() {
        lo = if v < lo { v } else { lo };
        hi = if v > hi { v } else { hi };
    }
    let (mn, mx) = (f64::from(lo), f64::from(hi));
    if mx <= mn {
        return None;
    }

    // Entropy: floor((x - min) / (max - min) * 256), clamped to 255. The argument is never
    // negative, so truncation is floor.
    let mut counts = [0u64; 256];
    let range = mx - mn;
    for &v in x.iter() {
        let b = ((f64::from(v) - mn) / range * 256.0) as usize;
        counts[b.min(255)] += 1;
    }
    let mut terms = [0f64; 256];
    let mut nt = 0;
    for &c in counts.iter().filter(|&&c| c > 0) {
        let p = c as f64 / m as f64;
        terms[nt] = p * libm::log(p);
        nt += 1;
    }
    let entropy = -(0.0 + pairwise_sum(&terms[..nt])) / libm::log(256.0);

    // Kurtosis: mu = mean(x); d2 = (x - mu)²; K = mean(d2²) / mean(d2)² - 3.
    let xf = |i: usize| f64::from(x[i]);
    let mu = mean_by(m, &xf);
    let d2 = |i: usize| (xf(i) - mu) * (xf(i) - mu);
    let m2 = mean_by(m, &d2);
    let m4 = mean_by(m, &|i| d2(i) * d2(i));
    let kurtosis = m4 / (m2 * m2) - 3.0;

    // Scale coherence: std / mean of the gaps between sorted values.
    super::radix::sort_f32(x);
    let gap = |i: usize| f64::from(x[i + 1]) - f64::from(x[i]);
    let md = mean_by(m - 1, &gap);
    let cv = if md > 0.0 {
        let var = mean_by(m - 1, &|i| (gap(i) - md) * (gap(i) - md));
        libm::sqrt(var) / md
    } else {
        0.0
    };
    Some(Indicators {
        entropy,
        kurtosis,
        cv,
    })
}

/// θ in degrees from the indicators (§3).
pub fn theta(ind: &Indicators) -> f64 {
    let s_h = ((0.95 - ind.entropy) / 0.45).clamp(0.0, 1.0);
    let k = ind.kurtosis.max(0.0);
    let s_k = k / (k + 3.0);
    let s_c = if ind.cv > 0.0 {
        (libm::log10(ind.cv) / 2.0).clamp(0.0, 1.0)
    } else {
        0.0
    };
    90.0 * (s_h + s_k + s_c) / 3.0
}
