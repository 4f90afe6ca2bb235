//! What the faces draw from a report, computed once here so the browser app, its static
//! HTML export and the CLI's `--html` show the same thing: the layer × group θ heatmap,
//! a value histogram, and the θ colour scale.

use super::report::ModelReport;
use crate::anatomy::Group;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde::Serialize;

/// Mean θ per (layer, group) for a model's layered tensors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Heatmap {
    /// The layers present, ascending.
    pub layers: Vec<u32>,
    /// The groups present in some layer, in [`Group::ALL`] order.
    pub groups: Vec<Group>,
    /// `cells[row * groups.len() + col]`: mean θ of the layer's tensors in that group with a
    /// θ, and how many there were; `None` where there are none.
    pub cells: Vec<Option<(f64, u32)>>,
    /// Lowest and highest cell mean (the colour scale's ends).
    pub range: (f64, f64),
}

impl Heatmap {
    /// The heatmap of a model's report.
    pub fn of(m: &ModelReport) -> Heatmap {
        let rows: Vec<(u32, Group, f64)> =
            m.tensors.iter().filter_map(|t| Some((t.layer?, t.group, t.theta?))).collect();
        let mut layers: Vec<u32> = rows.iter().map(|r| r.0).collect();
        layers.sort_unstable();
        layers.dedup();
        let groups: Vec<Group> = Group::ALL.into_iter().filter(|g| rows.iter().any(|r| r.1 == *g)).collect();
        let mut sums = vec![(0.0f64, 0u32); layers.len() * groups.len()];
        for &(l, g, t) in &rows {
            // Both searches succeed: layers and groups were built from these rows.
            let row = layers.binary_search(&l).unwrap_or(0);
            let col = groups.iter().position(|x| *x == g).unwrap_or(0);
            let c = &mut sums[row * groups.len() + col];
            c.0 += t;
            c.1 += 1;
        }
        let cells: Vec<Option<(f64, u32)>> =
            sums.into_iter().map(|(s, n)| (n > 0).then(|| (s / f64::from(n), n))).collect();
        let means = cells.iter().flatten().map(|c| c.0);
        let lo = means.clone().fold(f64::INFINITY, f64::min);
        let hi = means.fold(f64::NEG_INFINITY, f64::max);
        let range = if lo <= hi { (lo, hi) } else { (0.0, 90.0) };
        Heatmap { layers, groups, cells, range }
    }

    /// The cell of `layer` (row index) and `group` (column index).
    pub fn cell(&self, row: usize, col: usize) -> Option<(f64, u32)> {
        self.cells.get(row * self.groups.len() + col).copied().flatten()
    }
}

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

    /// [`Histogram::of`] for values that are all finite and in ascending order: the same
    /// histogram from `bins` binary searches instead of a pass over every value.
    pub fn of_sorted(sorted: &[f32], bins: usize) -> Option<Histogram> {
        let (&lo, &hi) = (sorted.first()?, sorted.last()?);
        if bins == 0 || !lo.is_finite() || !hi.is_finite() {
            return None;
        }
        // bin() is monotone (each step is a monotone rounding), so each bin is a run.
        let mut counts = vec![0u32; bins];
        for (b, len) in super::bin_runs(sorted, Self::bin_of(lo, hi, bins)) {
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

/// The colour of θ on a scale from `lo` (warm: noise-like) to `hi` (cool: structured), as
/// a CSS `hsl()`.
pub fn theta_color(theta: f64, lo: f64, hi: f64) -> String {
    let x = if hi > lo { ((theta - lo) / (hi - lo)).clamp(0.0, 1.0) } else { 0.5 };
    let hue = 10.0 + 200.0 * x;
    format!("hsl({hue:.0},70%,{:.0}%)", 62.0 - 14.0 * x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zmeasure::report::{ModelReport, TensorReport};
    use crate::zmeasure::Measurement;
    use crate::GgmlType;

    fn row(name: &str, theta: f64) -> TensorReport {
        let m = Measurement {
            theta,
            entropy: Some(0.5),
            kurtosis: Some(0.0),
            cv: Some(0.1),
            degenerate: false,
            sampled: 10,
            dropped: 0,
        };
        TensorReport::from_parts(name, GgmlType::F32, &[10], 40, Some(&m))
    }

    #[test]
    fn heatmap_means_each_layer_and_group() {
        let tensors = vec![
            row("blk.0.attn_q.weight", 40.0),
            row("blk.0.attn_k.weight", 50.0),
            row("blk.2.ffn_up.weight", 70.0),
            row("token_embd.weight", 10.0),
        ];
        let m = ModelReport::from_parts("m", None, None, 0, tensors);
        let h = Heatmap::of(&m);
        assert_eq!(h.layers, [0, 2]);
        assert_eq!(h.groups, [Group::Skeleton, Group::Organ]);
        assert_eq!(h.cell(0, 0), Some((45.0, 2)));
        assert_eq!(h.cell(0, 1), None);
        assert_eq!(h.cell(1, 1), Some((70.0, 1)));
        assert_eq!(h.range, (45.0, 70.0));
    }

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

    #[test]
    fn colours_run_from_warm_to_cool() {
        assert_eq!(theta_color(0.0, 0.0, 90.0), "hsl(10,70%,62%)");
        assert_eq!(theta_color(90.0, 0.0, 90.0), "hsl(210,70%,48%)");
        assert_eq!(theta_color(200.0, 0.0, 90.0), theta_color(90.0, 0.0, 90.0));
    }
}
