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
        .map(|(r, (wr, qr))| {
            let c = &cols[r / per_mat * n_in..][..n_in];
            wr.iter().zip(qr).zip(c).map(|((&a, &b), &cw)| f64::from(cw) * sq(f64::from(b) - f64::from(a))).sum()
        })
        .collect())
}

fn sq(x: f64) -> f64 {
    x * x
}
