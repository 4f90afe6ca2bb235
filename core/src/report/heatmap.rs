//! The layer × group θ heatmap of a model's report, computed once here so the browser
//! app, its static HTML export and the CLI's `--html` draw the same one.

use super::ModelReport;
use crate::anatomy::Group;
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
    }
}
