//! The three indicators and the angle (Z-measure v1 §2, §3), computed in f64 the way the
//! reference (`zref.py`, numpy) does: same expressions, same order, numpy's pairwise sums.

use super::sum::{mean, pairwise_sum};
use alloc::vec::Vec;
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
pub fn indicators(x: &mut [f32]) -> Option<Indicators> {
    let m = x.len();
    if m < 2 {
        return None;
    }
    let xs: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let (mut mn, mut mx) = (xs[0], xs[0]);
    for &v in &xs {
        mn = mn.min(v);
        mx = mx.max(v);
    }
    if !(mx > mn) {
        return None;
    }

    // Entropy: floor((x - min) / (max - min) * 256), clamped to 255. The argument is never
    // negative, so truncation is floor.
    let mut counts = [0u64; 256];
    let range = mx - mn;
    for &v in &xs {
        let b = ((v - mn) / range * 256.0) as usize;
        counts[b.min(255)] += 1;
    }
    let terms: Vec<f64> = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / m as f64;
            p * libm::log(p)
        })
        .collect();
    let entropy = -(0.0 + pairwise_sum(&terms)) / libm::log(256.0);

    // Kurtosis.
    let mu = mean(&xs);
    let d2: Vec<f64> = xs.iter().map(|&v| (v - mu) * (v - mu)).collect();
    let m2 = mean(&d2);
    let d4: Vec<f64> = d2.iter().map(|&v| v * v).collect();
    let m4 = mean(&d4);
    let kurtosis = m4 / (m2 * m2) - 3.0;
    drop((xs, d2, d4));

    // Scale coherence: std / mean of the gaps between sorted values.
    radsort::sort(x);
    let gaps: Vec<f64> = x
        .windows(2)
        .map(|w| f64::from(w[1]) - f64::from(w[0]))
        .collect();
    let md = mean(&gaps);
    let cv = if md > 0.0 {
        let dev: Vec<f64> = gaps.iter().map(|&g| (g - md) * (g - md)).collect();
        libm::sqrt(mean(&dev)) / md
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
