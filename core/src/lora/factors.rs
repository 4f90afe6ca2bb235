//! A pair's update in one form, whatever its layout in the file: ΔW = scale · L·Rᵀ, with
//! L `rows × r` and R `cols × r`, both row-major f32. Row i of ΔW (a row of the weight as
//! ggml stores it: an output, or a token of `token_embd`) is L's row i against each row of
//! R, so every element is a dot product of two contiguous rows of r values.

use super::Pair;
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::vec;
use alloc::vec::Vec;

/// ΔW = scale · L·Rᵀ.
#[derive(Debug, Clone, PartialEq)]
pub struct Factors {
    /// ΔW's rows.
    pub rows: usize,
    /// ΔW's columns.
    pub cols: usize,
    /// The rank r.
    pub rank: usize,
    /// `rows × rank`, row-major.
    pub l: Vec<f32>,
    /// `cols × rank`, row-major.
    pub r: Vec<f32>,
    /// The factor in front: s · α / r ([`super::Adapter::scale`]).
    pub scale: f64,
}

impl Factors {
    /// The factors of `pair` from the bytes of its halves (`a` of type `a_ty`, `b` of
    /// `b_ty`), at `scale`.
    ///
    /// # Errors
    /// [`Error::NotDequantizable`] for a type without a dequantizer; [`Error::SizeMismatch`]
    /// when a half's bytes are not the size its shape and type make.
    pub fn of(pair: &Pair, a_ty: GgmlType, a: &[u8], b_ty: GgmlType, b: &[u8], scale: f64) -> Result<Factors> {
        let rank = usize::try_from(pair.rank).map_err(|_| too_large("rank", pair.rank))?;
        let rows = usize::try_from(pair.rows).map_err(|_| too_large("rows", pair.rows))?;
        let cols = usize::try_from(pair.cols).map_err(|_| too_large("columns", pair.cols))?;
        let half = |what: &'static str, ty: GgmlType, bytes: &[u8], n: usize| -> Result<Vec<f32>> {
            let v = crate::quant::dequantize(ty, bytes)?;
            if v.len() != n || bytes.len() % ty.type_size() != 0 {
                return Err(Error::SizeMismatch { what, expected: n as u64, got: v.len() as u64 });
            }
            Ok(v)
        };
        let n_a = rank.checked_mul(if pair.embedding { rows } else { cols }).ok_or(too_large("lora_a", pair.rank))?;
        let n_b = rank.checked_mul(if pair.embedding { cols } else { rows }).ok_or(too_large("lora_b", pair.rank))?;
        let a = half("lora_a values", a_ty, a, n_a)?;
        let b = half("lora_b values", b_ty, b, n_b)?;
        if pair.embedding {
            // lora_a is [r, n_vocab] in ggml order: n_vocab rows of r, L itself; lora_b
            // [r, n_embd]: R itself.
            return Ok(Factors { rows, cols, rank, l: a, r: b, scale });
        }
        // lora_b [r, n_out]: n_out rows of r, L. lora_a [n_in, r]: r rows of n_in, Rᵀ.
        Ok(Factors { rows, cols, rank, l: b, r: transpose(&a, rank, cols), scale })
    }

    /// The halves a pair of these factors is stored as, `(lora_a, lora_b)` values in
    /// file order, for a weight stored as `token_embd`'s is when `embedding` (the inverse
    /// of [`Factors::of`]; the scale is not in them: it is the adapter's α / r).
    pub fn halves(&self, embedding: bool) -> (Vec<f32>, Vec<f32>) {
        if embedding {
            (self.l.clone(), self.r.clone())
        } else {
            (transpose(&self.r, self.cols, self.rank), self.l.clone())
        }
    }

    /// The same ΔW with `scale` in front: L and R each multiplied by √(self.scale / scale),
    /// for an adapter whose α / r is `scale` (both scales positive).
    pub fn rescaled(mut self, scale: f64) -> Factors {
        let f = libm::sqrt(self.scale / scale) as f32;
        if f != 1.0 {
            self.l.iter_mut().chain(self.r.iter_mut()).for_each(|x| *x *= f);
        }
        self.scale = scale;
        self
    }

    /// Element `(i, j)` of ΔW (row i, column j), the dot product in f64 times the scale,
    /// rounded to f32 once. `i < rows`, `j < cols`.
    #[inline]
    pub fn element(&self, i: usize, j: usize) -> f32 {
        let k = self.rank;
        (self.scale * dot64(&self.l[i * k..(i + 1) * k], &self.r[j * k..(j + 1) * k])) as f32
    }

    /// ΔW's element count.
    pub fn n_elements(&self) -> u64 {
        self.rows as u64 * self.cols as u64
    }

    /// ‖ΔW‖_F without ΔW: |scale| · √(Σ (LᵀL) ∘ (RᵀR)), from the two r × r Gram matrices
    /// (‖L·Rᵀ‖²_F = tr(LᵀL · RᵀR)), in f64.
    pub fn frobenius(&self) -> f64 {
        let (gl, gr) = (gram(&self.l, self.rank), gram(&self.r, self.rank));
        let s: f64 = gl.iter().zip(&gr).map(|(x, y)| x * y).sum();
        libm::fabs(self.scale) * libm::sqrt(s.max(0.0))
    }

    /// Adds ΔW's rows `first..first + w.len() / cols` to `w` (those rows of the weight,
    /// row-major, f32): W' = W + ΔW, each element's dot product and scaling in f32.
    ///
    /// Each element's dot product sums its r terms in order from 0, as a plain loop over
    /// them would, but a row of ΔW is built as r passes of `delta += L[i][t] · Rᵀ[t]` over
    /// contiguous columns, which the compiler vectorizes (the per-element loop of r terms
    /// it cannot: f32 addition does not reassociate). Rᵀ is made once per call, so callers
    /// give many rows at a time.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] when `w` is not whole rows within ΔW.
    pub fn add_to(&self, first: usize, w: &mut [f32]) -> Result<()> {
        let (k, cols) = (self.rank, self.cols);
        let n_rows = w.len().checked_div(cols).unwrap_or(0);
        if w.len() != n_rows * cols || first + n_rows > self.rows {
            return Err(Error::SizeMismatch {
                what: "merged rows",
                expected: (self.rows * cols) as u64,
                got: w.len() as u64,
            });
        }
        let s = self.scale as f32;
        let rt = transpose(&self.r, cols, k);
        let mut delta = vec![0f32; cols];
        for (i, row) in (first..).zip(w.chunks_exact_mut(cols.max(1))) {
            delta.fill(0.0);
            for (&a, rt_t) in self.l[i * k..(i + 1) * k].iter().zip(rt.chunks_exact(cols.max(1))) {
                for (d, &b) in delta.iter_mut().zip(rt_t) {
                    *d += a * b;
                }
            }
            for (x, &d) in row.iter_mut().zip(&delta) {
                *x += s * d;
            }
        }
        Ok(())
    }
}

/// The dot product of two rows in f64, four running sums (so that it vectorizes): the
/// order of the sums differs from a plain loop's by far less than an f32's rounding.
#[inline]
fn dot64(a: &[f32], b: &[f32]) -> f64 {
    let mut acc = [0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca.remainder().iter().zip(cb.remainder()).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
    for (x, y) in ca.zip(cb) {
        for t in 0..4 {
            acc[t] += f64::from(x[t]) * f64::from(y[t]);
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// The transpose of `m`, `rows × cols` row-major.
fn transpose(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0f32; m.len()];
    for (i, row) in m.chunks_exact(cols.max(1)).enumerate().take(rows) {
        for (j, &v) in row.iter().enumerate() {
            t[j * rows + i] = v;
        }
    }
    t
}

/// MᵀM of `m` (`n × k` row-major) in f64, `k × k` row-major: each row converted once,
/// the upper triangle summed (it is symmetric), then mirrored.
fn gram(m: &[f32], k: usize) -> Vec<f64> {
    let mut g = vec![0f64; k * k];
    let mut w = vec![0f64; k];
    for row in m.chunks_exact(k.max(1)) {
        w.iter_mut().zip(row).for_each(|(w, &x)| *w = f64::from(x));
        for (a, &x) in w.iter().enumerate() {
            for (s, &y) in g[a * k + a..(a + 1) * k].iter_mut().zip(&w[a..]) {
                *s += x * y;
            }
        }
    }
    for a in 0..k {
        for b in 0..a {
            g[a * k + b] = g[b * k + a];
        }
    }
    g
}

fn too_large(what: &'static str, n: u64) -> Error {
    Error::SizeMismatch { what, expected: usize::MAX as u64, got: n }
}

#[cfg(test)]
pub(super) fn transpose_for_tests(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    transpose(m, rows, cols)
}
