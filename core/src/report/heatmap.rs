//! The layer × group θ heatmap of a model's report, computed once here so the browser
//! app, its static HTML export and the CLI's `--html` draw the same one. The tensors outside
//! the layers (the embedding, the output head and its norm) make a row of their own. With σ
//! (§7) each cell also has the σ of its mean; cells noisier than a threshold are marked,
//! and so are the cells whose θ is within the sampling noise of the layers above and below.

use super::readable::SIGMA_STOPS;
use super::{hex, ModelReport, TensorReport};
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

/// The CSS that marks a noisy cell (its σ above the threshold): a dashed inner outline in
/// the cell's text colour, so it shows on every colour of the scale.
pub const NOISY_STYLE: &str = "outline:2px dashed currentColor;outline-offset:-4px";

/// How many σ of a difference two neighbouring cells may differ by and still be within the
/// sampling noise of each other.
pub const NEIGHBOUR_SIGMAS: f64 = 2.0;

/// The median per-tensor σ_θ of SmolLM2 over 8 alternate draws (docs/z-measure.md §7): what
/// a report measured without σ says colour differences may be.
pub const TYPICAL_SIGMA: f64 = 3.3;

/// The label of the row of tensors outside the layers.
pub const OUTSIDE_LABEL: &str = "no layer";

/// The CSS that hatches a cell within the noise of its neighbours, for a cell whose text is
/// `ink`: stripes of the opposite colour, half transparent, which only raise the text's
/// contrast (a lighter stripe under black text, a darker one under white).
pub fn hatch_style(ink: [u8; 3]) -> String {
    let stripe = if ink == [0; 3] { "255,255,255" } else { "0,0,0" };
    format!("background-image:repeating-linear-gradient(135deg,transparent 0 4px,rgba({stripe},.45) 4px 7px)")
}

/// Mean θ per (layer, group) for a model's tensors, with a row for those outside the layers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Heatmap {
    /// The layers present, ascending: rows `0..layers.len()`.
    pub layers: Vec<u32>,
    /// Whether some tensor with a θ has no layer: then row `layers.len()` holds them (the
    /// faces draw it above the layers, labelled [`OUTSIDE_LABEL`]).
    pub outside: bool,
    /// The groups present in some row, in [`Group::ALL`] order.
    pub groups: Vec<Group>,
    /// `cells[row * groups.len() + col]`: mean θ of the row's tensors in that group with a
    /// θ, and how many there were; `None` where there are none.
    pub cells: Vec<Option<(f64, u32)>>,
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
        let rows: Vec<(Option<u32>, Group, f64, &TensorReport)> =
            m.tensors.iter().filter_map(|t| Some((t.layer, t.group, t.theta?, t))).collect();
        let mut layers: Vec<u32> = rows.iter().filter_map(|r| r.0).collect();
        layers.sort_unstable();
        layers.dedup();
        let outside = rows.iter().any(|r| r.0.is_none());
        let groups: Vec<Group> = Group::ALL.into_iter().filter(|g| rows.iter().any(|r| r.1 == *g)).collect();
        let mut sums = vec![(0.0f64, 0u32); (layers.len() + usize::from(outside)) * groups.len()];
        // Per cell: the sum of θ in each draw, and whether any tensor has a σ.
        let mut drawn_sums = vec![([0.0f64; DRAWS], false); sums.len()];
        for &(l, g, t, r) in &rows {
            // Both searches succeed: layers and groups were built from these rows.
            let row = l.map_or(layers.len(), |l| layers.binary_search(&l).unwrap_or(0));
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
        Heatmap { layers, outside, groups, cells, sigmas, sigma_max }
    }

    /// The rows in the order the faces draw them: the row outside the layers first (the
    /// embedding is the model's input), then the layers; each with its label.
    pub fn rows(&self) -> Vec<(usize, String)> {
        let outside = self.outside.then(|| (self.layers.len(), String::from(OUTSIDE_LABEL)));
        outside.into_iter().chain(self.layers.iter().enumerate().map(|(r, l)| (r, format!("{l}")))).collect()
    }

    /// Whether row `row` is the one outside the layers.
    pub fn is_outside(&self, row: usize) -> bool {
        self.outside && row == self.layers.len()
    }

    /// The cell of `row` (a layer's index, or `layers.len()` for the tensors outside the
    /// layers) and `col` (a group's index).
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

    /// Whether cell (`row`, `col`) is within the sampling noise of its neighbours: the cells
    /// of the layers listed just above and below it in the same column. It is when each
    /// neighbour with a θ differs from it by at most [`NEIGHBOUR_SIGMAS`] σ of the
    /// difference, √(σ² + σ_n²). `None` when that cannot be said: the report has no σ, the
    /// cell or every neighbour is missing, or the cell is outside the layers (it has none).
    pub fn within_neighbours_noise(&self, row: usize, col: usize) -> Option<bool> {
        if row >= self.layers.len() {
            return None;
        }
        let (t, s) = (self.cell(row, col)?.0, self.cell_sigma(row, col)?);
        let above = row.checked_sub(1);
        let below = (row + 1 < self.layers.len()).then_some(row + 1);
        let mut judged = false;
        for n in [above, below].into_iter().flatten() {
            let (Some((tn, _)), Some(sn)) = (self.cell(n, col), self.cell_sigma(n, col)) else { continue };
            judged = true;
            if (t - tn).abs() > NEIGHBOUR_SIGMAS * libm::sqrt(s * s + sn * sn) {
                return Some(false);
            }
        }
        judged.then_some(true)
    }

    /// How many layer cells are [`Heatmap::within_neighbours_noise`], of how many could be
    /// judged.
    pub fn count_within_neighbours_noise(&self) -> (usize, usize) {
        let judged: Vec<bool> = (0..self.layers.len())
            .flat_map(|r| (0..self.groups.len()).map(move |c| (r, c)))
            .filter_map(|(r, c)| self.within_neighbours_noise(r, c))
            .collect();
        (judged.iter().filter(|&&x| x).count(), judged.len())
    }

    /// The line under the θ heatmap that says how much of its colour is noise: with σ, how
    /// many cells are within the noise of their neighbours (the hatched ones); without, that
    /// differences of a few degrees may be noise and how to measure it.
    pub fn noise_caption(&self) -> String {
        if self.has_sigma() {
            let (within, of) = self.count_within_neighbours_noise();
            format!(
                "{within} of {of} cells within the sampling noise of their neighbours (hatched: θ within \
                 {NEIGHBOUR_SIGMAS}σ of the layers above and below)."
            )
        } else {
            format!(
                "Colour differences of a few degrees may be sampling noise (per-tensor σ_θ has median \
                 {TYPICAL_SIGMA}° on SmolLM2, Z-measure §7); measuring with σ (organ measure --sigma) says which."
            )
        }
    }

    /// A cell's tooltip: its tensors, mean θ and, with σ, the σ of that mean and whether it
    /// exceeds `threshold`.
    pub fn title(&self, row: usize, col: usize, threshold: f64) -> String {
        let Some((t, n)) = self.cell(row, col) else { return String::new() };
        let mut title = match self.cell_sigma(row, col) {
            Some(s) if s > threshold => {
                format!("{n} tensors, mean θ {t:.3}° ± {s:.3}° (σ above {threshold}°: within the sampling noise)")
            }
            Some(s) => format!("{n} tensors, mean θ {t:.3}° ± {s:.3}°"),
            None => format!("{n} tensors, mean θ {t:.3}°"),
        };
        if self.within_neighbours_noise(row, col) == Some(true) {
            title.push_str("; within the sampling noise of the layers above and below");
        }
        if self.is_outside(row) {
            title.push_str("; tensors outside the layers");
        }
        title
    }
}

/// The colour of a σ on a scale from 0 (pale) to `max` (deep orange), as CSS.
pub fn sigma_color(sigma: f64, max: f64) -> String {
    hex(super::sigma_rgb(sigma, max))
}

/// The CSS `background` of the σ scale's legend.
pub fn sigma_legend() -> String {
    let stops: Vec<String> = SIGMA_STOPS.iter().map(|c| hex(*c)).collect();
    format!("linear-gradient(90deg,{})", stops.join(","))
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
        assert_eq!(h.groups, [Group::Skeleton, Group::Organ, Group::Embed]);
        assert_eq!(h.cell(0, 0), Some((45.0, 2)));
        assert_eq!(h.cell(0, 1), None);
        assert_eq!(h.cell(1, 1), Some((70.0, 1)));
        assert!(!h.has_sigma());
        assert_eq!((h.cell_sigma(0, 0), h.sigma_max, h.count_noisy(0.0)), (None, 0.0, 0));
        // Without σ nothing can be said of neighbours, and the caption says so.
        assert_eq!(h.within_neighbours_noise(1, 1), None);
        assert_eq!(h.count_within_neighbours_noise(), (0, 0));
        assert!(h.noise_caption().contains("may be sampling noise") && h.noise_caption().contains("--sigma"));
    }

    /// The embedding, the output head and the final norm have no layer: they make a row of
    /// their own, drawn first, in their groups' columns.
    #[test]
    fn tensors_outside_the_layers_have_a_row() {
        let tensors = vec![
            row("token_embd.weight", 20.0),
            row("output.weight", 30.0),
            row("output_norm.weight", 5.0),
            row("blk.0.attn_q.weight", 40.0),
            row("blk.0.attn_norm.weight", 7.0),
        ];
        let h = Heatmap::of(&ModelReport::from_parts("m", None, None, 0, tensors));
        assert_eq!(h.layers, [0]);
        assert!(h.outside && h.is_outside(1) && !h.is_outside(0));
        assert_eq!(h.groups, [Group::Skeleton, Group::Embed, Group::Norm]);
        assert_eq!(h.rows(), [(1, String::from(OUTSIDE_LABEL)), (0, String::from("0"))]);
        assert_eq!((h.cell(1, 0), h.cell(1, 1), h.cell(1, 2)), (None, Some((25.0, 2)), Some((5.0, 1))));
        assert_eq!(h.cell(0, 1), None);
        assert!(h.title(1, 1, SIGMA_MARK).ends_with("tensors outside the layers"), "{}", h.title(1, 1, SIGMA_MARK));
        // A model whose tensors all have a layer has no such row.
        let h = Heatmap::of(&ModelReport::from_parts("m", None, None, 0, vec![row("blk.3.ffn_up.weight", 1.0)]));
        assert!(!h.outside && h.rows() == [(0, String::from("3"))] && h.cells.len() == 1);
    }

    /// With σ, a cell is within the noise of its neighbours when it differs from the cell
    /// above and the cell below by at most 2σ of the difference; a step beyond that on
    /// either side is not. Neither the row outside the layers nor a lone layer is judged.
    #[test]
    fn cells_within_the_noise_of_their_neighbours() {
        // Draws spread ±s around θ: each tensor's σ_θ is s.
        let with = |name: &str, theta: f64, s: f64| {
            let d: [f64; DRAWS] = core::array::from_fn(|k| if k % 2 == 0 { theta - s } else { theta + s });
            row(name, theta).with_draws(Some(&d))
        };
        // Column attn_q: 40, 41, 50, 50.5 with σ 1 (2σ of a difference: 2.83°).
        let tensors = vec![
            with("blk.0.attn_q.weight", 40.0, 1.0),
            with("blk.1.attn_q.weight", 41.0, 1.0),
            with("blk.2.attn_q.weight", 50.0, 1.0),
            with("blk.3.attn_q.weight", 50.5, 1.0),
            with("token_embd.weight", 40.0, 1.0),
        ];
        let h = Heatmap::of(&ModelReport::from_parts("m", None, None, 0, tensors));
        assert_eq!(h.cell_sigma(0, 0), Some(1.0));
        let judged: Vec<_> = (0..4).map(|r| h.within_neighbours_noise(r, 0)).collect();
        // Layer 0 has only layer 1 (1° away); 1 and 2 are 9° apart; 3 has only 2.
        assert_eq!(judged, [Some(true), Some(false), Some(false), Some(true)]);
        assert_eq!(h.within_neighbours_noise(4, 1), None, "outside the layers");
        assert_eq!(h.count_within_neighbours_noise(), (2, 4));
        assert_eq!(
            h.noise_caption(),
            "2 of 4 cells within the sampling noise of their neighbours (hatched: θ within 2σ of the layers above and below)."
        );
        assert!(h.title(0, 0, SIGMA_MARK).ends_with("within the sampling noise of the layers above and below"));
        // Exactly at the bound is within; a hair beyond is not.
        let bound = 2.0 * libm::sqrt(2.0);
        let edge = |d: f64| {
            let t = vec![with("blk.0.attn_q.weight", 40.0, 1.0), with("blk.1.attn_q.weight", 40.0 + d, 1.0)];
            Heatmap::of(&ModelReport::from_parts("m", None, None, 0, t)).within_neighbours_noise(0, 0)
        };
        assert_eq!((edge(bound - 1e-9), edge(bound + 1e-9)), (Some(true), Some(false)));
        // A lone layer has no neighbours.
        let lone =
            Heatmap::of(&ModelReport::from_parts("m", None, None, 0, vec![with("blk.0.attn_q.weight", 40.0, 1.0)]));
        assert_eq!(lone.within_neighbours_noise(0, 0), None);
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
        assert_eq!(sigma_color(0.0, 2.0), "#fff5eb");
        assert_eq!(sigma_color(5.0, 2.0), sigma_color(2.0, 2.0));
        assert_eq!(sigma_color(2.0, 2.0), "#7f2704");
    }
}
