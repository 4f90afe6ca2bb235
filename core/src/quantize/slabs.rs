//! How a tensor of the plan is quantized piece by piece, the same in every face: in slabs
//! of whole rows, each read, converted and written before the next (memory a slab
//! whatever the tensor's size), each slab cut into chunks that convert in parallel, as
//! llama-quantize's threads take `min_chunk_size` pieces. With an importance matrix a slab
//! never crosses from one matrix (an expert of a MoE weight) to the next, as
//! llama-quantize's chunks never do, so each slab has one row of weights. Rows convert
//! independently: how a tensor is cut changes no byte.

use super::Planned;
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::format;
use alloc::vec::Vec;
use core::ops::Range;

/// The f32 values a slab holds at most (64 MiB): the native face's slab.
pub const SLAB_VALUES: usize = 16 << 20;

/// Elements each parallel piece converts at least (llama-quantize's `min_chunk_size`).
pub const CHUNK_VALUES: usize = 32 * 512;

/// `ggml_row_size`: bytes of a row of `n` values of `ty`.
pub fn row_bytes(ty: GgmlType, n: usize) -> usize {
    n / ty.block_size().max(1) * ty.type_size()
}

/// One tensor's schedule: its rows, how many a slab and a chunk hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pieces {
    /// Values a row holds (`ne[0]`).
    pub n_per_row: usize,
    /// Rows of the tensor (every dimension after the first).
    pub rows: usize,
    /// Bytes of a row in the input's type and in the output's.
    pub row_in: usize,
    /// See [`Pieces::row_in`].
    pub row_out: usize,
    /// Rows a matrix holds (`ne[1]`) with an importance matrix; every row without.
    per_matrix: usize,
    weighted: bool,
    slab_rows: usize,
    /// Rows a parallel chunk converts.
    pub chunk_rows: usize,
}

/// Rows `rows` of a tensor, converted together; `matrix`: the matrix (expert) they belong
/// to, with an importance matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slab {
    /// The rows, from the tensor's first.
    pub rows: Range<usize>,
    /// The matrix they belong to, with an importance matrix.
    pub matrix: Option<usize>,
}

impl Pieces {
    /// The schedule of `t`, its slabs at most `max_values` values (at least a row);
    /// `weighted`: with an importance matrix.
    ///
    /// # Errors
    /// A shape whose rows are not whole blocks of either type, or whose size overflows.
    pub fn new(t: &Planned, weighted: bool, max_values: usize) -> Result<Pieces> {
        let bad = |why: &str| Error::Quantize { reason: format!("tensor {:?}: {why}", t.name) };
        let n_per_row = usize::try_from(t.dims.first().copied().unwrap_or(1)).map_err(|_| bad("rows too long"))?;
        let rows = (t.dims.iter().skip(1))
            .try_fold(1usize, |a, &d| usize::try_from(d).ok().and_then(|d| a.checked_mul(d)))
            .ok_or_else(|| bad("too many rows"))?;
        for ty in [t.from, t.to] {
            if n_per_row == 0 || n_per_row % ty.block_size().max(1) != 0 {
                return Err(bad(&format!("rows of {n_per_row} values are not whole blocks of {ty}")));
            }
        }
        let (row_in, row_out) = (row_bytes(t.from, n_per_row), row_bytes(t.to, n_per_row));
        rows.checked_mul(row_in.max(row_out)).ok_or_else(|| bad("too many bytes"))?;
        let per_matrix = match weighted {
            true => usize::try_from(t.dims.get(1).copied().unwrap_or(1)).unwrap_or(usize::MAX).clamp(1, rows.max(1)),
            false => rows.max(1),
        };
        Ok(Pieces {
            n_per_row,
            rows,
            row_in,
            row_out,
            per_matrix,
            weighted,
            slab_rows: (max_values / n_per_row).clamp(1, per_matrix),
            chunk_rows: CHUNK_VALUES.div_ceil(n_per_row).max(1),
        })
    }

    /// The slabs, in order.
    pub fn slabs(&self) -> impl Iterator<Item = Slab> + '_ {
        let weighted = self.weighted;
        (0..self.rows).step_by(self.per_matrix).flat_map(move |m| {
            let end = (m + self.per_matrix).min(self.rows);
            (m..end).step_by(self.slab_rows).map(move |first| Slab {
                rows: first..(first + self.slab_rows).min(end),
                matrix: weighted.then_some(m / self.per_matrix),
            })
        })
    }

    /// The input bytes of `slab`, from the tensor's start.
    pub fn bytes_in(&self, slab: &Slab) -> Range<u64> {
        (slab.rows.start * self.row_in) as u64..(slab.rows.end * self.row_in) as u64
    }

    /// Bytes of the tensor in the output's type.
    pub fn bytes_out(&self) -> u64 {
        (self.rows * self.row_out) as u64
    }

    /// The importance matrix's row of weights for `slab` (`qw`: a row per matrix, experts
    /// after each other).
    ///
    /// # Errors
    /// `qw` has no row for the slab's matrix.
    pub fn weights<'a>(&self, slab: &Slab, qw: Option<&'a [f32]>) -> Result<Option<&'a [f32]>> {
        let (Some(q), Some(m)) = (qw, slab.matrix) else { return Ok(None) };
        let w = m.checked_mul(self.n_per_row).and_then(|a| q.get(a..a + self.n_per_row));
        w.map(Some)
            .ok_or_else(|| Error::Quantize { reason: format!("the importance matrix has no row for matrix {m}") })
    }

    /// Converts the input bytes `bytes` of whole rows from `first_row` on (a chunk of a
    /// slab) from `t.from` to `t.to` with the slab's weights `qw`, appending to `out`;
    /// `values` is scratch.
    ///
    /// # Errors
    /// Bytes that are not whole rows, a value the output's type cannot hold (named with
    /// its rows).
    pub fn convert(
        &self,
        t: &Planned,
        first_row: usize,
        bytes: &[u8],
        qw: Option<&[f32]>,
        values: &mut Vec<f32>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if bytes.len() % self.row_in != 0 {
            return Err(Error::Quantize {
                reason: format!("{} bytes are not whole rows of {:?}", bytes.len(), t.name),
            });
        }
        let n = bytes.len() / self.row_in;
        values.clear();
        values.resize(n * self.n_per_row, 0.0);
        super::decode(t.from, bytes, values)?;
        let r = match qw {
            Some(qw) => super::convert_weighted(t.to, values, qw, out),
            None => super::convert(t.to, values, out),
        };
        r.map_err(|e| Error::Quantize {
            reason: format!("{e} (in rows {first_row}..{}, {} values a row)", first_row + n, self.n_per_row),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(dims: &[u64], from: GgmlType, to: GgmlType) -> Planned {
        Planned {
            input: 0,
            name: "blk.0.ffn_up.weight".into(),
            dims: dims.to_vec(),
            from,
            to,
            requires_imatrix: false,
            renamed_from: None,
        }
    }

    #[test]
    fn slabs_cover_every_row_once_and_never_cross_a_matrix() {
        let t = planned(&[256, 5, 3], GgmlType::F32, GgmlType::Q4_K);
        for (weighted, max) in [(false, 256 * 4), (true, 256 * 4), (true, 1), (false, usize::MAX)] {
            let p = Pieces::new(&t, weighted, max).unwrap();
            let slabs: Vec<Slab> = p.slabs().collect();
            let rows: Vec<usize> = slabs.iter().flat_map(|s| s.rows.clone()).collect();
            assert_eq!(rows, (0..15).collect::<Vec<_>>(), "weighted {weighted}, max {max}");
            for s in &slabs {
                assert!(s.rows.len() <= (max / 256).max(1));
                match (weighted, s.matrix) {
                    (true, Some(m)) => assert!(s.rows.start / 5 == m && (s.rows.end - 1) / 5 == m),
                    (false, None) => {}
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    #[test]
    fn cutting_changes_no_byte_and_bad_shapes_are_refused() {
        let t = planned(&[256, 7], GgmlType::F32, GgmlType::Q4_K);
        let values: Vec<f32> = (0..256 * 7).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut whole = Vec::new();
        super::super::convert(GgmlType::Q4_K, &values, &mut whole).unwrap();
        let p = Pieces::new(&t, false, 256 * 3).unwrap();
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        for s in p.slabs() {
            let r = p.bytes_in(&s);
            for (i, c) in bytes[r.start as usize..r.end as usize].chunks(2 * p.row_in).enumerate() {
                p.convert(&t, s.rows.start + 2 * i, c, None, &mut scratch, &mut out).unwrap();
            }
        }
        assert_eq!(out, whole);
        assert_eq!(p.bytes_out(), whole.len() as u64);
        assert!(p.convert(&t, 0, &bytes[..5], None, &mut scratch, &mut out).is_err());
        assert!(Pieces::new(&planned(&[100, 2], GgmlType::F32, GgmlType::Q4_K), false, 1 << 20).is_err());
        assert!(Pieces::new(&planned(&[256, u64::MAX, 2], GgmlType::F32, GgmlType::Q4_K), false, 1 << 20).is_err());
        let w = Pieces::new(&planned(&[256, 5, 3], GgmlType::F32, GgmlType::Q4_K), true, 1 << 20).unwrap();
        let s = w.slabs().last().unwrap();
        assert!(w.weights(&s, Some(&[1.0; 256 * 2])).is_err());
        assert_eq!(w.weights(&s, Some(&[1.0; 256 * 3])).unwrap().map(<[f32]>::len), Some(256));
    }
}
