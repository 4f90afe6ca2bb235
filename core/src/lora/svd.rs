//! A seeded, truncated SVD of a dense matrix, for extracting an adapter from a finetune:
//! ΔW ≈ U·S·Vᵀ at rank r, returned as [`Factors`] (L = U·√S, R = V·√S, scale 1).
//!
//! Randomized range finder of Halko, Martinsson and Tropp (2011, algorithms 4.4 and 5.1):
//! a Gaussian test matrix Ω of r + [`OVERSAMPLE`] columns (from [`crate::random`], seeded,
//! so the result is reproducible bit for bit), Y = A·Ω, [`POWER_ITERATIONS`] rounds of
//! Y = A·(Aᵀ·Y) each re-orthonormalised (Gram–Schmidt twice, which keeps the columns
//! orthonormal to working precision), Q = orth(Y), and the exact SVD of the small
//! projected matrix B = Qᵀ·A by one-sided Jacobi rotations on its rows (Hestenes). The
//! passes over A are f32 with f32 accumulators in eight lanes; Gram–Schmidt's dot products
//! and the Jacobi SVD are f64.
//!
//! A holds `rows × cols` values row-major (a weight as ggml stores it: a row per output).
//! Single-threaded and deterministic, as the rest of the core: callers run tensors in
//! parallel.

use super::Factors;
use crate::error::{Error, Result};
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

/// Columns of the test matrix beyond the rank (Halko et al. suggest 5 to 10).
pub const OVERSAMPLE: usize = 8;
/// Power iterations: each sharpens the decay of the spectrum the range finder sees.
pub const POWER_ITERATIONS: usize = 2;
/// Jacobi sweeps at most (convergence is quadratic; a dozen is ample for f64).
const MAX_SWEEPS: usize = 30;

/// A truncated SVD: the factors at the kept rank, the singular values kept, and how much of
/// ‖A‖²_F they hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Truncated {
    /// A ≈ L·Rᵀ, scale 1.
    pub factors: Factors,
    /// The kept singular values, descending.
    pub singular: Vec<f64>,
    /// ‖A‖²_F, exact (f64 sum of A's squares).
    pub total: f64,
}

impl Truncated {
    /// The share of ‖A‖²_F the kept rank holds: Σ σᵢ² / ‖A‖²_F (1 for a zero matrix).
    pub fn retained(&self) -> f64 {
        if self.total <= 0.0 {
            return 1.0;
        }
        self.singular.iter().map(|s| s * s).sum::<f64>() / self.total
    }
}

/// The rank-`rank` truncated SVD of `a` (`rows × cols`, row-major), its random test matrix
/// drawn from the stream of `seed`. The kept rank is `min(rank, rows, cols)`.
///
/// # Errors
/// [`Error::CountMismatch`] when `a` is not `rows × cols` values; [`Error::Unsupported`] for
/// rank 0 or a non-finite value in `a`.
pub fn truncated(a: &[f32], rows: usize, cols: usize, rank: usize, seed: u64) -> Result<Truncated> {
    let n = rows.checked_mul(cols).ok_or(Error::SizeMismatch {
        what: "matrix values (rows × columns)",
        expected: usize::MAX as u64,
        got: rows as u64,
    })?;
    if a.len() != n {
        return Err(Error::CountMismatch { what: "matrix values", expected: n as u64, got: a.len() as u64 });
    }
    if rank == 0 {
        return Err(Error::Unsupported { reason: "rank 0: an SVD keeps at least one singular value".into() });
    }
    if let Some(i) = a.iter().position(|v| !v.is_finite()) {
        return Err(Error::Unsupported {
            reason: format!("value {i} (row {}, column {}) is not finite", i / cols.max(1), i % cols.max(1)),
        });
    }
    let total: f64 = a.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
    let kept = rank.min(rows).min(cols);
    let k = rank.saturating_add(OVERSAMPLE).min(rows).min(cols);
    if kept == 0 {
        let factors = Factors { rows, cols, rank: 0, l: Vec::new(), r: Vec::new(), scale: 1.0 };
        return Ok(Truncated { factors, singular: Vec::new(), total });
    }

    // Panels: k vectors, each a column of a tall matrix, stored one after the other.
    let omega: Vec<f32> = (0..(k * cols) as u64).map(|i| crate::random::normal(seed, i)).collect();
    let mut y = times(a, rows, cols, &omega, k);
    orthonormalize(&mut y, k, rows);
    for _ in 0..POWER_ITERATIONS {
        let mut z = transposed_times(a, rows, cols, &y, k);
        orthonormalize(&mut z, k, cols);
        y = times(a, rows, cols, &z, k);
        orthonormalize(&mut y, k, rows);
    }
    // B = Qᵀ·A: its k rows, each of `cols` values.
    let b32 = transposed_times(a, rows, cols, &y, k);
    let mut b: Vec<f64> = b32.iter().map(|&x| f64::from(x)).collect();
    let g = jacobi_rows(&mut b, k, cols);

    let norms: Vec<f64> = b.chunks_exact(cols).map(|row| libm::sqrt(row.iter().map(|x| x * x).sum())).collect();
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&i, &j| norms[j].total_cmp(&norms[i]).then(i.cmp(&j)));
    order.truncate(kept);
    let singular: Vec<f64> = order.iter().map(|&i| norms[i]).collect();

    // U's column t = Σ_l G[t][l]·Q's column l (A ≈ Q·B = Q·Gᵀ·B', B' = G·B); L = U·√σ.
    let mut l = vec![0f32; rows * kept];
    for (t, &j) in order.iter().enumerate() {
        let root = libm::sqrt(singular[t]);
        let mut u = vec![0f64; rows];
        for (q, &gjl) in y.chunks_exact(rows).zip(&g[j * k..(j + 1) * k]) {
            for (ui, &qi) in u.iter_mut().zip(q) {
                *ui += gjl * f64::from(qi);
            }
        }
        for (i, ui) in u.iter().enumerate() {
            l[i * kept + t] = (ui * root) as f32;
        }
    }
    // V's column t = B' row / σ; R = V·√σ = B' row / √σ.
    let mut r = vec![0f32; cols * kept];
    for (t, &j) in order.iter().enumerate() {
        let root = libm::sqrt(singular[t]);
        if root > 0.0 {
            for (c, &x) in b[j * cols..(j + 1) * cols].iter().enumerate() {
                r[c * kept + t] = (x / root) as f32;
            }
        }
    }
    let factors = Factors { rows, cols, rank: kept, l, r, scale: 1.0 };
    Ok(Truncated { factors, singular, total })
}

/// A·P for `p` k panels of `cols` values: k panels of `rows` values (panel j, entry i =
/// row i of A against panel j).
fn times(a: &[f32], rows: usize, cols: usize, p: &[f32], k: usize) -> Vec<f32> {
    let mut out = vec![0f32; k * rows];
    for (i, row) in a.chunks_exact(cols).enumerate().take(rows) {
        for (j, panel) in p.chunks_exact(cols).enumerate() {
            out[j * rows + i] = dot(row, panel);
        }
    }
    out
}

/// Aᵀ·P for `p` k panels of `rows` values: k panels of `cols` values (A's rows weighted by
/// the panel's entries, summed).
fn transposed_times(a: &[f32], rows: usize, cols: usize, p: &[f32], k: usize) -> Vec<f32> {
    let mut out = vec![0f32; k * cols];
    for (i, row) in a.chunks_exact(cols).enumerate().take(rows) {
        for (j, o) in out.chunks_exact_mut(cols).enumerate() {
            let w = p[j * rows + i];
            if w != 0.0 {
                for (x, &v) in o.iter_mut().zip(row) {
                    *x += w * v;
                }
            }
        }
    }
    out
}

/// The dot product in f32, in eight lanes summed in a fixed order (the same bits on every
/// target; the lanes let the compiler vectorize a sum it may not reorder).
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (xs, ys) = (x.chunks_exact(8), y.chunks_exact(8));
    let tail: f32 = xs.remainder().iter().zip(ys.remainder()).map(|(a, b)| a * b).sum();
    for (a, b) in xs.zip(ys) {
        for l in 0..8 {
            acc[l] += a[l] * b[l];
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// Makes the k panels of `len` values orthonormal, in order (classical Gram–Schmidt, each
/// panel projected out twice, dot products in f64). A panel with nothing left is zero.
fn orthonormalize(p: &mut [f32], k: usize, len: usize) {
    for j in 0..k {
        let (done, rest) = p.split_at_mut(j * len);
        let v = &mut rest[..len];
        for _ in 0..2 {
            let coef: Vec<f64> = done.chunks_exact(len).map(|q| dot64(q, v)).collect();
            for (q, c) in done.chunks_exact(len).zip(coef) {
                for (x, &qi) in v.iter_mut().zip(q) {
                    *x = (f64::from(*x) - c * f64::from(qi)) as f32;
                }
            }
        }
        let norm = libm::sqrt(dot64(v, v));
        let inv = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        for x in v.iter_mut() {
            *x = (f64::from(*x) * inv) as f32;
        }
    }
}

fn dot64(x: &[f32], y: &[f32]) -> f64 {
    x.iter().zip(y).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum()
}

/// One-sided Jacobi on the k rows of `b` (each `len` values): rotates pairs of rows until
/// every two are orthogonal, so `b` becomes Σ·Vᵀ (row j = σⱼ·vⱼ, unsorted). Returns the
/// rotation G (k × k, row-major) with b_after = G·b_before.
fn jacobi_rows(b: &mut [f64], k: usize, len: usize) -> Vec<f64> {
    let mut g = vec![0f64; k * k];
    for i in 0..k {
        g[i * k + i] = 1.0;
    }
    for _ in 0..MAX_SWEEPS {
        let mut rotated = false;
        for p in 0..k {
            for q in p + 1..k {
                let (bp, bq) = rows_pair(b, len, p, q);
                let alpha: f64 = bp.iter().map(|x| x * x).sum();
                let beta: f64 = bq.iter().map(|x| x * x).sum();
                let gamma: f64 = bp.iter().zip(bq.iter()).map(|(x, y)| x * y).sum();
                if gamma == 0.0 || libm::fabs(gamma) <= 1e-15 * libm::sqrt(alpha * beta) {
                    continue;
                }
                rotated = true;
                let zeta = (beta - alpha) / (2.0 * gamma);
                let t = libm::copysign(1.0, zeta) / (libm::fabs(zeta) + libm::sqrt(1.0 + zeta * zeta));
                let c = 1.0 / libm::sqrt(1.0 + t * t);
                let s = c * t;
                rotate(bp, bq, c, s);
                let (gp, gq) = rows_pair(&mut g, k, p, q);
                rotate(gp, gq, c, s);
            }
        }
        if !rotated {
            break;
        }
    }
    g
}

/// Rows `p < q` of `m` (rows of `len`), both mutable.
fn rows_pair(m: &mut [f64], len: usize, p: usize, q: usize) -> (&mut [f64], &mut [f64]) {
    let (head, tail) = m.split_at_mut(q * len);
    (&mut head[p * len..(p + 1) * len], &mut tail[..len])
}

/// (x, y) ← (c·x − s·y, s·x + c·y), element by element.
fn rotate(x: &mut [f64], y: &mut [f64], c: f64, s: f64) {
    for (a, b) in x.iter_mut().zip(y.iter_mut()) {
        let (u, v) = (*a, *b);
        *a = c * u - s * v;
        *b = s * u + c * v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    /// A `rows × cols` matrix of exact rank `rank`, with singular values 2^-i.
    fn low_rank(rows: usize, cols: usize, rank: usize, seed: u64) -> Vec<f32> {
        let u: Vec<f64> = (0..(rows * rank) as u64).map(|i| f64::from(crate::random::normal(seed, i))).collect();
        let v: Vec<f64> = (0..(cols * rank) as u64).map(|i| f64::from(crate::random::normal(seed + 1, i))).collect();
        let mut a = vec![0f32; rows * cols];
        for i in 0..rows {
            for j in 0..cols {
                let s: f64 = (0..rank).map(|t| u[i * rank + t] * v[j * rank + t] / (1u64 << t) as f64).sum();
                a[i * cols + j] = s as f32;
            }
        }
        a
    }

    fn relative_error(a: &[f32], f: &Factors) -> f64 {
        let mut num = 0f64;
        let mut den = 0f64;
        for i in 0..f.rows {
            for j in 0..f.cols {
                let x = f64::from(a[i * f.cols + j]);
                let d = x - f64::from(f.element(i, j));
                num += d * d;
                den += x * x;
            }
        }
        (num / den).sqrt()
    }

    #[test]
    fn recovers_a_low_rank_matrix_at_its_rank() {
        for (rows, cols) in [(40, 70), (70, 40), (33, 33)] {
            let a = low_rank(rows, cols, 6, 7);
            let t = truncated(&a, rows, cols, 6, 42).unwrap();
            assert_eq!(t.factors.rank, 6);
            assert!(relative_error(&a, &t.factors) < 1e-5, "{rows}x{cols}: {}", relative_error(&a, &t.factors));
            assert!((t.retained() - 1.0).abs() < 1e-6);
            assert!(t.singular.windows(2).all(|w| w[0] >= w[1]));
        }
    }

    /// The singular values of a diagonal matrix are its entries: the kept share at rank 2 of
    /// diag(4, 3, 2, 1) is (16 + 9) / 30.
    #[test]
    fn keeps_the_largest_singular_values() {
        let d = [3f32, 1.0, 4.0, 2.0];
        let mut a = vec![0f32; 16];
        for (i, &x) in d.iter().enumerate() {
            a[i * 4 + i] = x;
        }
        let t = truncated(&a, 4, 4, 2, 0).unwrap();
        assert!((t.singular[0] - 4.0).abs() < 1e-6 && (t.singular[1] - 3.0).abs() < 1e-6, "{:?}", t.singular);
        assert!((t.retained() - 25.0 / 30.0).abs() < 1e-6);
        // The product is the best rank-2 approximation: 4 at (2, 2), 3 at (0, 0).
        assert!((t.factors.element(2, 2) - 4.0).abs() < 1e-5 && (t.factors.element(0, 0) - 3.0).abs() < 1e-5);
        assert!(t.factors.element(1, 1).abs() < 1e-5);
    }

    #[test]
    fn rank_is_capped_by_the_shape() {
        let a = low_rank(5, 9, 5, 3);
        let t = truncated(&a, 5, 9, 16, 1).unwrap();
        assert_eq!((t.factors.rank, t.factors.l.len(), t.factors.r.len()), (5, 25, 45));
        assert!(relative_error(&a, &t.factors) < 1e-5);
    }

    #[test]
    fn same_seed_same_bits() {
        let a = low_rank(30, 50, 10, 9);
        assert_eq!(truncated(&a, 30, 50, 4, 5).unwrap(), truncated(&a, 30, 50, 4, 5).unwrap());
    }

    #[test]
    fn a_zero_matrix_gives_zero_factors() {
        let t = truncated(&[0f32; 12], 3, 4, 2, 0).unwrap();
        assert!(t.factors.l.iter().chain(&t.factors.r).all(|&x| x == 0.0));
        assert_eq!(t.retained(), 1.0);
    }

    #[test]
    fn rejects_bad_input() {
        assert!(matches!(truncated(&[1.0; 5], 2, 3, 1, 0), Err(Error::CountMismatch { .. })));
        assert!(matches!(truncated(&[1.0; 6], 2, 3, 0, 0), Err(Error::Unsupported { .. })));
        let mut a = [1f32; 6];
        a[4] = f32::NAN;
        let e = truncated(&a, 2, 3, 1, 0).unwrap_err().to_string();
        assert!(e.contains("row 1, column 1"), "{e}");
    }
}
