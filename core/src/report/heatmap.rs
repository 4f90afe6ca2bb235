//! The layer × group θ heatmap of a model's report, computed once here so the browser
//! app, its static HTML export and the CLI's `--html` draw the same one. With σ (§7)
//! each cell also has the σ of its mean, and cells noisier than a threshold are marked.

use super::{ModelReport, TensorReport};
use crate::anatomy::Group;
use crate::zmeasure::{population_std, DRAWS};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde::Serialize;

/// The σ above which a heatmap cell is marked as noisy unless the viewer picks another
/// threshold: a 1° move is about a tenth of the colour scale on a typical model.
pub const SIGMA_MARK: f64 = 1.0;

/// The CSS that marks a noisy cell (its σ above the threshold): a dashed inner outline.
pub const NOISY_STYLE: &str = "outline:2px dashed #222;outline-offset:-4px";

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
    /// Per cell, as `cells`: the σ of the cell's mean θ over the alternate draws (§7: the
    /// population standard deviation over k of the mean with draw k for each sampled
    /// tensor, θ for the others); `None` when the report has no σ.
    pub sigmas: Vec<Option<f64>>,
    /// The largest cell σ (the σ colour scale's top; 0 without σ).
    pub sigma_max: f64,
}

/// θ of `t` in draw `k` (0-based): its alternate draw's θ when it has one, else its θ.
fn drawn(t: &TensorReport, theta: f64, k: usize) -> f64 {
    t.draws.as_ref().and_then(|d| d.get(k).copied()).unwrap_or(theta)
}

impl Heatmap {
    /// The heatmap of a model's report.
    pub fn of(m: &ModelReport) -> Heatmap {
        let rows: Vec<(u32, Group, f64, &TensorReport)> =
            m.tensors.iter().filter_map(|t| Some((t.layer?, t.group, t.theta?, t))).collect();
        let mut layers: Vec<u32> = rows.iter().map(|r| r.0).collect();
        layers.sort_unstable();
        layers.dedup();
        let groups: Vec<Group> = Group::ALL.into_iter().filter(|g| rows.iter().any(|r| r.1 == *g)).collect();
        let mut sums = vec![(0.0f64, 0u32); layers.len() * groups.len()];
        // Per cell: the sum of θ in each draw, and whether any tensor has a σ.
        let mut drawn_sums = vec![([0.0f64; DRAWS], false); sums.len()];
        for &(l, g, t, r) in &rows {
            // Both searches succeed: layers and groups were built from these rows.
            let row = layers.binary_search(&l).unwrap_or(0);
            let col = groups.iter().position(|x| *x == g).unwrap_or(0);
            let at = row * groups.len() + col;
            let c = &mut sums[at];
            c.0 += t;
            c.1 += 1;
            let d = &mut drawn_sums[at];
            for (k, x) in d.0.iter_mut().enumerate() {
                *x += drawn(r, t, k);
            }
            d.1 |= r.sigma.is_some();
        }
        let sigmas: Vec<Option<f64>> = (sums.iter().zip(&drawn_sums))
            .map(|(&(_, n), (d, has))| (*has && n > 0).then(|| population_std(&d.map(|x| x / f64::from(n)))))
            .collect();
        let sigma_max = sigmas.iter().flatten().copied().fold(0.0, f64::max);
        let cells: Vec<Option<(f64, u32)>> =
            sums.into_iter().map(|(s, n)| (n > 0).then(|| (s / f64::from(n), n))).collect();
        let means = cells.iter().flatten().map(|c| c.0);
        let lo = means.clone().fold(f64::INFINITY, f64::min);
        let hi = means.fold(f64::NEG_INFINITY, f64::max);
        let range = if lo <= hi { (lo, hi) } else { (0.0, 90.0) };
        Heatmap { layers, groups, cells, range, sigmas, sigma_max }
    }

    /// The cell of `layer` (row index) and `group` (column index).
    pub fn cell(&self, row: usize, col: usize) -> Option<(f64, u32)> {
        self.cells.get(row * self.groups.len() + col).copied().flatten()
    }

    /// The σ of a cell's mean θ, when the report has σ.
    pub fn cell_sigma(&self, row: usize, col: usize) -> Option<f64> {
        self.sigmas.get(row * self.groups.len() + col).copied().flatten()
    }

    /// Whether the heatmap has σ (the report was measured with it).
    pub fn has_sigma(&self) -> bool {
        self.sigmas.iter().any(Option::is_some)
    }

    /// Whether a cell's σ exceeds `threshold` degrees: its colour is within the noise.
    pub fn noisy(&self, row: usize, col: usize, threshold: f64) -> bool {
        self.cell_sigma(row, col).is_some_and(|s| s > threshold)
    }

    /// How many cells are [`Heatmap::noisy`] at `threshold`.
    pub fn count_noisy(&self, threshold: f64) -> usize {
        self.sigmas.iter().flatten().filter(|&&s| s > threshold).count()
    }

    /// A cell's tooltip: its tensors, mean θ and, with σ, the σ of that mean and whether it
    /// exceeds `threshold`.
    pub fn title(&self, row: usize, col: usize, threshold: f64) -> String {
        let Some((t, n)) = self.cell(row, col) else { return String::new() };
        match self.cell_sigma(row, col) {
            Some(s) if s > threshold => {
                format!("{n} tensors, mean θ {t:.3}° ± {s:.3}° (σ above {threshold}°: within the sampling noise)")
            }
            Some(s) => format!("{n} tensors, mean θ {t:.3}° ± {s:.3}°"),
            None => format!("{n} tensors, mean θ {t:.3}°"),
        }
    }
}

/// The colour of a σ on a scale from 0 (pale) to `max` (deep amber), as a CSS `hsl()`.
pub fn sigma_color(sigma: f64, max: f64) -> String {
    let x = if max > 0.0 { (sigma / max).clamp(0.0, 1.0) } else { 0.0 };
    format!("hsl(38,{:.0}%,{:.0}%)", 40.0 + 50.0 * x, 94.0 - 44.0 * x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::TensorReport;
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
        assert!(!h.has_sigma());
        assert_eq!((h.cell_sigma(0, 0), h.sigma_max, h.count_noisy(0.0)), (None, 0.0, 0));
    }

    /// A cell's σ is the spread over k of its mean with draw k (θ for tensors without
    /// draws); a cell is noisy when that exceeds the threshold.
    #[test]
    fn heatmap_cells_carry_the_sigma_of_their_mean() {
        let with = |name: &str, theta: f64, draws: Option<[f64; DRAWS]>| row(name, theta).with_draws(draws.as_ref());
        let d = [40.0, 42.0, 44.0, 46.0, 40.0, 42.0, 44.0, 46.0];
        let tensors = vec![
            with("blk.0.attn_q.weight", 43.0, Some(d)),
            // Unsampled: its θ in every draw, σ_θ 0.
            with("blk.0.attn_k.weight", 50.0, None),
            with("blk.1.attn_q.weight", 30.0, Some([30.0; DRAWS])),
        ];
        let h = Heatmap::of(&ModelReport::from_parts("m", None, None, 0, tensors));
        assert!(h.has_sigma());
        // Cell means (d_k + 50) / 2: half the spread of d.
        let want = population_std(&d) / 2.0;
        assert_eq!(h.cell_sigma(0, 0), Some(want));
        assert_eq!(h.cell_sigma(1, 0), Some(0.0));
        assert_eq!(h.sigma_max, want);
        assert!(h.noisy(0, 0, want - 1e-9) && !h.noisy(0, 0, want) && !h.noisy(1, 0, 0.0));
        assert_eq!((h.count_noisy(0.5), h.count_noisy(want)), (1, 0));
        assert!(h.title(0, 0, 0.5).contains("within the sampling noise"), "{}", h.title(0, 0, 0.5));
        assert!(!h.title(1, 0, 0.5).contains("noise"));
        assert_eq!(sigma_color(0.0, 2.0), "hsl(38,40%,94%)");
        assert_eq!(sigma_color(5.0, 2.0), sigma_color(2.0, 2.0));
    }
}
