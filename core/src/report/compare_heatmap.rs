//! The layer × group heatmap of a compare report: how far each layer's tensors of each
//! group moved, as 1 − cos, computed once here so the browser app, its static HTML
//! export and `organ diff --html` draw the same one. 1 − cos spans decades (a requantized
//! copy sits near 1e-4, a finetune's layers near 1e-2), so the colour scale is
//! logarithmic ([`super::diff_color`]), and a cell whose pairs are all byte-identical is
//! its own colour, not the scale's low end.

use crate::anatomy::Group;
use crate::compare::CompareReport;
use alloc::vec;
use alloc::vec::Vec;
use serde::Serialize;

/// The smallest 1 − cos the scale shows: a changed pair whose cos rounds to 1 (or just
/// above) is drawn at this floor, never as identical.
pub const DIFF_FLOOR: f64 = 1e-12;

/// One cell: the comparable pairs of one layer and group.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DiffCell {
    /// Comparable pairs in the cell.
    pub pairs: u32,
    /// Byte-identical ones.
    pub identical: u32,
    /// Mean of 1 − cos over the pairs with a cos (identical ones count, as 0); `None`
    /// when no pair has one.
    pub one_minus_cos: Option<f64>,
}

impl DiffCell {
    /// Whether every pair of the cell is byte-identical.
    pub fn all_identical(&self) -> bool {
        self.pairs > 0 && self.identical == self.pairs
    }
}

/// Mean 1 − cos per (layer, group) of the comparable pairs that have a layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareHeatmap {
    /// The layers present, ascending.
    pub layers: Vec<u32>,
    /// The groups present in some layer, in [`Group::ALL`] order.
    pub groups: Vec<Group>,
    /// `cells[row * groups.len() + col]`; `None` where the layer has no pair of the group.
    pub cells: Vec<Option<DiffCell>>,
    /// The colour scale's ends: powers of ten around the lowest and highest positive 1 − cos
    /// of the cells that are not all identical (at least [`DIFF_FLOOR`]; one decade apart at
    /// least; 1e-6 to 1 when there is none).
    pub range: (f64, f64),
}

impl CompareHeatmap {
    /// The heatmap of a compare report.
    pub fn of(r: &CompareReport) -> CompareHeatmap {
        let rows: Vec<_> = r.pairs.iter().filter_map(|p| Some((p.layer?, p.group, p))).collect();
        let mut layers: Vec<u32> = rows.iter().map(|r| r.0).collect();
        layers.sort_unstable();
        layers.dedup();
        let groups: Vec<Group> = Group::ALL.into_iter().filter(|g| rows.iter().any(|r| r.1 == *g)).collect();
        // (pairs, identical, Σ(1 − cos), pairs with a cos)
        let mut sums = vec![(0u32, 0u32, 0.0f64, 0u32); layers.len() * groups.len()];
        for &(l, g, p) in &rows {
            // Both searches succeed: layers and groups were built from these rows.
            let row = layers.binary_search(&l).unwrap_or(0);
            let col = groups.iter().position(|x| *x == g).unwrap_or(0);
            let c = &mut sums[row * groups.len() + col];
            c.0 += 1;
            c.1 += u32::from(p.identical);
            if let Some(cos) = p.cos {
                c.2 += if p.identical { 0.0 } else { 1.0 - cos };
                c.3 += 1;
            }
        }
        let cells: Vec<Option<DiffCell>> = sums
            .into_iter()
            .map(|(pairs, identical, s, n)| {
                (pairs > 0).then(|| DiffCell { pairs, identical, one_minus_cos: (n > 0).then(|| s / f64::from(n)) })
            })
            .collect();
        // A changed cell whose 1 − cos is 0 or below (rounding) takes the scale's low end
        // without stretching the scale down to the floor.
        let shown =
            cells.iter().flatten().filter(|c| !c.all_identical()).filter_map(|c| c.one_minus_cos).filter(|d| *d > 0.0);
        let lo = shown.clone().fold(f64::INFINITY, f64::min).max(DIFF_FLOOR);
        let hi = shown.fold(f64::NEG_INFINITY, f64::max).max(DIFF_FLOOR);
        CompareHeatmap { layers, groups, cells, range: decades(lo, hi) }
    }

    /// The cell of `layer` (row index) and `group` (column index).
    pub fn cell(&self, row: usize, col: usize) -> Option<DiffCell> {
        self.cells.get(row * self.groups.len() + col).copied().flatten()
    }
}

/// The powers of ten around `lo..=hi` (both positive), at least one decade apart; 1e-6 to
/// 1 when there is nothing to show (`lo` > `hi`).
fn decades(lo: f64, hi: f64) -> (f64, f64) {
    if lo.is_nan() || hi.is_nan() || lo > hi {
        return (1e-6, 1.0);
    }
    let a = libm::floor(libm::log10(lo));
    let b = libm::ceil(libm::log10(hi)).max(a + 1.0);
    (libm::pow(10.0, a), libm::pow(10.0, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{pair, CompareReport, Figures, PairReport, Side};
    use crate::model::{Model, TensorEntry};
    use crate::GgmlType;

    fn entry(name: &str) -> TensorEntry {
        TensorEntry {
            name: name.into(),
            ty: GgmlType::F32,
            dims: vec![4],
            n_elements: 4,
            n_bytes: 16,
            file: 0,
            offset: 0,
        }
    }

    fn report(rows: &[(&str, bool, Option<f64>)]) -> CompareReport {
        let m = Model { version: 3, kvs: Vec::new(), tensors: rows.iter().map(|r| entry(r.0)).collect() };
        let pairs = rows
            .iter()
            .map(|&(name, identical, cos)| {
                let f = Figures {
                    cos,
                    rel_l2: cos.map(|c| 1.0 - c),
                    max_abs: 0.0,
                    theta_a: 1.0,
                    theta_b: 2.0,
                    sampled: 4,
                    dropped: 0,
                };
                PairReport::new(&entry(name), &entry(name), identical, Some(&f), None)
            })
            .collect();
        let side = Side::of("m", &m, 16);
        CompareReport::new("test", side.clone(), side, pair(&m, &m), pairs)
    }

    #[test]
    fn cells_mean_one_minus_cos_and_mark_identical_ones() {
        let r = report(&[
            ("blk.0.attn_q.weight", false, Some(1.0 - 1e-6)),
            ("blk.0.attn_k.weight", false, Some(1.0 - 3e-6)),
            ("blk.0.attn_norm.weight", true, Some(1.0)),
            ("blk.1.ffn_up.weight", false, Some(0.98)),
            ("blk.1.attn_q.weight", false, None),
            ("token_embd.weight", false, Some(0.5)),
        ]);
        let h = CompareHeatmap::of(&r);
        assert_eq!(h.layers, [0, 1]);
        assert_eq!(h.groups, [Group::Skeleton, Group::Organ, Group::Norm]);
        let c = h.cell(0, 0).unwrap();
        assert_eq!((c.pairs, c.identical), (2, 0));
        assert!((c.one_minus_cos.unwrap() - 2e-6).abs() < 1e-15);
        assert!(h.cell(0, 2).unwrap().all_identical());
        assert_eq!(h.cell(1, 0).unwrap().one_minus_cos, None);
        assert_eq!(h.cell(0, 1), None);
        // Decades around 2e-6 and 2e-2; the embedding has no layer and stays out.
        assert!(close(h.range, (1e-6, 1e-1)), "{:?}", h.range);
    }

    fn close(x: (f64, f64), y: (f64, f64)) -> bool {
        (x.0 / y.0 - 1.0).abs() < 1e-12 && (x.1 / y.1 - 1.0).abs() < 1e-12
    }

    #[test]
    fn the_scale_spans_a_decade_at_least_and_has_a_floor() {
        assert!(close(decades(3e-4, 3e-4), (1e-4, 1e-3)));
        assert_eq!(decades(f64::INFINITY, f64::NEG_INFINITY), (1e-6, 1.0));
        let r = report(&[("blk.0.attn_q.weight", false, Some(1.0 - 1e-15))]);
        assert!(close(CompareHeatmap::of(&r).range, (1e-12, 1e-11)));
        // A changed pair whose cos rounds to 1 does not stretch the scale down to the floor.
        let r = report(&[("blk.0.attn_q.weight", false, Some(1.0)), ("blk.0.attn_k.weight", false, Some(0.9995))]);
        let h = CompareHeatmap::of(&r);
        assert!(close(h.range, (1e-4, 1e-3)), "{:?}", h.range);
        assert!(!h.cell(0, 0).unwrap().all_identical());
    }
}
