//! A weight's round trip through a type, and its error weighted by input columns.

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::quant::quantize::{can_quantize, quantize, quantize_weighted};
use alloc::format;
use alloc::vec::Vec;

/// `dequantize(quantize_ty(values))` for a weight of rows of `n_in` values, quantized by
/// organ's quantizer for `ty` (the table in `quant/table.rs`; whatever [`can_quantize`]
/// accepts) as the file would be written: with `qw`, an importance matrix's weights
/// (`n_in` per matrix: one matrix, or one per expert of a 3-D weight, whose rows are
/// split evenly between them), each matrix's rows under its row of weights
/// ([`quantize_weighted`], as `llama-quantize --imatrix`); without, the plain quantizer.
/// Blocks never cross rows.
///
/// # Errors
/// [`Error::Unwritable`] when organ has no quantizer for `ty`, when a row is not whole
/// blocks of `ty`, or when a value is not finite; [`Error::CountMismatch`] when `qw` is
/// not whole rows of `n_in` splitting the weight's rows evenly.
pub fn round_trip(ty: GgmlType, values: &[f32], n_in: usize, qw: Option<&[f32]>) -> Result<Vec<f32>> {
    if !can_quantize(ty) {
        return Err(Error::Unwritable { reason: format!("organ has no quantizer for {ty}, so cannot predict it") });
    }
    let bs = ty.block_size();
    if n_in == 0 || n_in % bs != 0 || values.len() % n_in != 0 {
        return Err(Error::Unwritable {
            reason: format!(
                "rows of {n_in} values are not whole {ty} blocks of {bs} (llama.cpp falls back to another type)"
            ),
        });
    }
    let mut bytes = Vec::new();
    match qw {
        None => quantize(ty, values, &mut bytes)?,
        Some(qw) => {
            let per_mat = per_matrix(values.len(), n_in, qw.len())?;
            for (rows, w) in values.chunks(per_mat.max(1)).zip(qw.chunks_exact(n_in)) {
                quantize_weighted(ty, rows, w, &mut bytes)?;
            }
        }
    }
    crate::quant::dequantize(ty, &bytes)
}

/// The most values of one weight a prediction round-trips through a type: a larger weight
/// is predicted from an even sample of its rows ([`sampled_rows`]). SmolLM2's largest block
/// weights (576 × 1536) are below it; a 7B's (4096 × 11008) are 21 times it.
pub const ROUND_TRIP_VALUES: usize = 1 << 21;

/// The rows of a weight of `rows` rows of `n_in` values whose round trips predict it: every
/// row when the weight holds at most [`ROUND_TRIP_VALUES`] values; else
/// `⌈ROUND_TRIP_VALUES / n_in⌉` rows (at least one), the middle row of each of as many equal
/// stretches, ascending. ggml quantizes each row alone, so a row's round trip is the same
/// in the sample as in the whole weight.
pub fn sampled_rows(rows: usize, n_in: usize) -> Vec<usize> {
    if rows.saturating_mul(n_in) <= ROUND_TRIP_VALUES || n_in == 0 {
        return (0..rows).collect();
    }
    let n = ROUND_TRIP_VALUES.div_ceil(n_in).clamp(1, rows);
    // (2i + 1)·rows / 2n: distinct (rows ≥ n), the last below rows; u128 cannot overflow.
    (0..n).map(|i| ((2 * i as u128 + 1) * rows as u128 / (2 * n as u128)) as usize).collect()
}

/// Per row, its error weighted by `cols` ([`row_errors`]) after `ty`'s round trip
/// ([`round_trip`], under `qw` as there), for the rows of `picked` (ascending, from
/// [`sampled_rows`]), each times `rows / picked.len()`; 0 for every other row. Any sum over
/// rows with per-row factors (the plain sum, [`super::residual::carried`]) is then an
/// unbiased estimate of the whole weight's, and exactly it when every row is picked.
///
/// # Errors
/// As [`round_trip`] and [`row_errors`]; [`Error::CountMismatch`] when `picked` is not
/// ascending rows of the weight.
pub fn sampled_row_errors(
    ty: GgmlType,
    values: &[f32],
    n_in: usize,
    qw: Option<&[f32]>,
    cols: &[f32],
    picked: &[usize],
) -> Result<Vec<f64>> {
    let rows = values.len().checked_div(n_in).unwrap_or(0);
    if picked.len() == rows {
        return round_trip(ty, values, n_in, qw).and_then(|q| row_errors(values, &q, n_in, cols));
    }
    let ascending = picked.windows(2).all(|w| w[0] < w[1]) && picked.last().is_none_or(|&r| r < rows);
    if picked.is_empty() || !ascending {
        return Err(Error::CountMismatch {
            what: "sampled rows (ascending, of the weight)",
            expected: rows as u64,
            got: picked.len() as u64,
        });
    }
    let col_rows = per_matrix(values.len(), n_in, cols.len())? / n_in;
    let qw_rows = match qw {
        Some(qw) => Some(per_matrix(values.len(), n_in, qw.len())? / n_in),
        None => None,
    };
    let scale = rows as f64 / picked.len() as f64;
    let mut out = alloc::vec![0.0; rows];
    // The picked rows of one importance-matrix matrix (all of them without one) at a time.
    let matrix = |r: usize| qw_rows.map_or(0, |per| r / per);
    let mut rest = picked;
    while let Some(&first) = rest.first() {
        let m = matrix(first);
        let run = rest.iter().take_while(|&&r| matrix(r) == m).count();
        let (group, next) = rest.split_at(run);
        rest = next;
        let mut buf = Vec::with_capacity(group.len() * n_in);
        for &r in group {
            buf.extend_from_slice(&values[r * n_in..][..n_in]);
        }
        let q = round_trip(ty, &buf, n_in, qw.map(|w| &w[m * n_in..][..n_in]))?;
        for ((&r, wr), qr) in group.iter().zip(buf.chunks_exact(n_in)).zip(q.chunks_exact(n_in)) {
            out[r] = scale * row_error(wr, qr, &cols[r / col_rows * n_in..][..n_in]);
        }
    }
    Ok(out)
}

/// The values of each matrix of a weight of `len` values in rows of `n_in`, whose
/// `n_mat × n_in` per-matrix weights are `cols` long.
fn per_matrix(len: usize, n_in: usize, cols: usize) -> Result<usize> {
    let rows = len.checked_div(n_in).unwrap_or(0);
    let n_mat = cols.checked_div(n_in).unwrap_or(0);
    if n_in == 0 || len % n_in != 0 || cols % n_in != 0 || n_mat == 0 || rows % n_mat != 0 {
        return Err(Error::CountMismatch {
            what: "column weights (n_in per matrix, rows split evenly)",
            expected: n_in as u64,
            got: cols as u64,
        });
    }
    Ok(rows / n_mat * n_in)
}

/// Per row `r`, `ε_r = Σ_j w_j (q − w)_rj²` for a weight `w` of rows of `n_in` values and
/// its round trip `q`. `cols` holds the column weights, `n_in` per matrix: one matrix, or
/// one per expert of a 3-D weight (whose rows are split evenly between its matrices).
///
/// # Errors
/// [`Error::CountMismatch`] when the lengths disagree.
pub fn row_errors(w: &[f32], q: &[f32], n_in: usize, cols: &[f32]) -> Result<Vec<f64>> {
    if q.len() != w.len() {
        return Err(Error::CountMismatch { what: "round-trip values", expected: w.len() as u64, got: q.len() as u64 });
    }
    let per_mat = per_matrix(w.len(), n_in, cols.len())? / n_in;
    Ok(w.chunks_exact(n_in)
        .zip(q.chunks_exact(n_in))
        .enumerate()
        .map(|(r, (wr, qr))| row_error(wr, qr, &cols[r / per_mat * n_in..][..n_in]))
        .collect())
}

/// `Σ_j c_j (q_j − w_j)²` for one row.
fn row_error(w: &[f32], q: &[f32], c: &[f32]) -> f64 {
    w.iter().zip(q).zip(c).map(|((&a, &b), &cw)| f64::from(cw) * sq(f64::from(b) - f64::from(a))).sum()
}

fn sq(x: f64) -> f64 {
    x * x
}
