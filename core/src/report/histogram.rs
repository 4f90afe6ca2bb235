//! The histogram of a tensor's sampled values that the browser app draws beside its θ.

use alloc::vec;
use alloc::vec::Vec;
use serde::Serialize;

/// Counts of values in equal-width bins over their finite range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Histogram {
    /// Lowest finite value.
    pub lo: f32,
    /// Highest finite value.
    pub hi: f32,
    /// Per bin, lowest first.
    pub counts: Vec<u32>,
}

impl Histogram {
    /// The histogram of the finite `values` in `bins` bins (`None` if none is finite or
    /// `bins` is 0).
    pub fn of(values: &[f32], bins: usize) -> Option<Histogram> {
        let finite = values.iter().copied().filter(|v| v.is_finite());
        let (lo, hi) = finite.clone().fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), v| (l.min(v), h.max(v)));
        if bins == 0 || lo > hi {
            return None;
        }
        let mut counts = vec![0u32; bins];
        let bin = Self::bin_of(lo, hi, bins);
        for v in finite {
            counts[bin(v)] += 1;
        }
        Some(Histogram { lo, hi, counts })
    }

    /// [`Histogram::of`] for values that are all finite and in ascending order (as
    /// [`crate::zmeasure::measure_values_sorted`] hands them back): the same histogram
    /// from `bins` binary searches instead of a pass over every value.
    pub fn of_sorted(sorted: &[f32], bins: usize) -> Option<Histogram> {
        let (&lo, &hi) = (sorted.first()?, sorted.last()?);
        if bins == 0 || !lo.is_finite() || !hi.is_finite() {
            return None;
        }
        // bin() is monotone (each step is a monotone rounding), so each bin is a run.
        let mut counts = vec![0u32; bins];
        for (b, len) in crate::zmeasure::bin_runs(sorted, Self::bin_of(lo, hi, bins)) {
            counts[b] = len as u32;
        }
        Some(Histogram { lo, hi, counts })
    }

    /// The bin of a value in [lo, hi]. A display histogram: one multiply per value (no
    /// division) is close enough.
    fn bin_of(lo: f32, hi: f32, bins: usize) -> impl Fn(f32) -> usize {
        let width = f64::from(hi) - f64::from(lo);
        let scale = if width > 0.0 { bins as f64 / width } else { 0.0 };
        move |v: f32| (((f64::from(v) - f64::from(lo)) * scale) as usize).min(bins - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_counts_every_finite_value_once() {
        let h = Histogram::of(&[0.0, 1.0, 0.5, f32::NAN, 0.25, f32::INFINITY], 4).unwrap();
        assert_eq!((h.lo, h.hi), (0.0, 1.0));
        assert_eq!(h.counts, [1, 1, 1, 1]);
        assert_eq!(Histogram::of(&[2.0; 3], 8).unwrap().counts[0], 3);
        assert!(Histogram::of(&[f32::NAN], 8).is_none());
        assert!(Histogram::of(&[1.0], 0).is_none());
    }

    proptest::proptest! {
        /// The browser's path: the histogram of the measure's sorted values is the one of
        /// all the values, non-finite ones and all.
        #[test]
        fn from_the_measures_sorted_values_as_from_all(
            bits in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..3000),
            levels in 1u32..50,
        ) {
            let x: Vec<f32> = bits
                .iter()
                .map(|&b| if b % 97 == 0 { f32::from_bits(b) } else { (b % levels) as f32 * 0.01 - 0.2 })
                .collect();
            let (_, sorted) = crate::zmeasure::measure_values_sorted(x.clone());
            proptest::prop_assert_eq!(Histogram::of_sorted(&sorted, 48), Histogram::of(&x, 48));
        }

        #[test]
        fn from_sorted_values_as_from_all(
            raw in proptest::collection::vec(-1000i32..1000, 0..3000),
            scale in 1e-6f32..1e3,
            bins in 0usize..64,
        ) {
            let x: Vec<f32> = raw.iter().map(|&r| r as f32 * scale).collect();
            let mut sorted = x.clone();
            sorted.sort_by(f32::total_cmp);
            proptest::prop_assert_eq!(Histogram::of_sorted(&sorted, bins), Histogram::of(&x, bins));
        }
    }
}
