//! `organ check OUT --derived-from SRC [--imatrix I]`: remakes OUT from SRC tensor by
//! tensor in memory, with the quantizers `organ quantize` writes with, and compares bytes;
//! nothing is written. The core pairs the tensors and words the findings
//! ([`organ_core::quantize::derived`]); this reads one tensor of each model at a time, so
//! memory is a few tensors whatever the models' size.

use crate::model::{Model, Tensor};
use anyhow::{Context, Result};
use organ_core::check::Finding;
use organ_core::ggml_type::GgmlType;
use organ_core::quantize::derived::{self, Derivation, Outcome};
use organ_core::quantize::{self, Planned, QuantImatrix};
use std::path::Path;

/// The values a slab of [`rel_l2`] dequantizes at most, per side.
const SLAB_VALUES: usize = 4 << 20;

/// The findings of OUT (`out`) against SRC (`src`) quantized with `imatrix`.
///
/// # Errors
/// A model or the importance matrix that cannot be read; an entry of the matrix of the
/// wrong size for its tensor; a tensor of SRC whose values cannot be decoded.
pub fn findings(out: &Path, src: &Path, imatrix: Option<&Path>) -> Result<Vec<Finding>> {
    let (o, s) = (Model::open_any(out)?, Model::open_any(src)?);
    let im = match imatrix {
        Some(f) => {
            let m = crate::predict::read_imatrix(f)?;
            Some(QuantImatrix::new(&m, &f.to_string_lossy(), &[], &[]))
        }
        None => None,
    };
    let d = derived::derivation(&o.model, &s.model, im, (&o.label, &s.label));
    let progress = crate::progress::tensor_bar();
    progress.set_message(format!("remaking {}", o.label));
    crate::progress::grow(&progress, d.tensors.len() as u64);
    let mut outcomes = Vec::with_capacity(d.tensors.len());
    for (oi, t) in &d.tensors {
        let (ot, st) = (&o.model.tensors[*oi], &s.model.tensors[t.input]);
        outcomes.push(remake(ot, st, t, &d, src)?);
        ot.release();
        st.release();
        crate::progress::tensor_done(&progress);
    }
    progress.finish_and_clear();
    Ok(derived::findings(&d, &outcomes))
}

/// Tensor `t` of OUT (`ot`) against SRC's (`st`) as llama-quantize makes it: copied when
/// of its type, else quantized with `d`'s settings.
fn remake(ot: &Tensor, st: &Tensor, t: &Planned, d: &Derivation, src: &Path) -> Result<Outcome> {
    use organ_core::quant::quantize::{can_quantize, can_quantize_weighted};
    let qw = quantize::weights_for(&d.params, t).with_context(|| src.display().to_string())?;
    if t.from != t.to && !(can_quantize(t.to) || (qw.is_some() && can_quantize_weighted(t.to))) {
        return Ok(Outcome::NotRemade);
    }
    let (have, src_bytes) = (ot.bytes_or_read()?, st.bytes_or_read()?);
    let n_per_row = t.dims.first().copied().unwrap_or(1) as usize;
    if t.from == t.to {
        return compare(t.to, n_per_row, &have, &src_bytes);
    }
    let mut want = Vec::with_capacity(have.len());
    super::quantize::convert(t, &src_bytes, qw, &mut want)
        .with_context(|| format!("{}: tensor {:?}", src.display(), t.name))?;
    compare(t.to, n_per_row, &have, &want)
}

/// OUT's bytes `have` against the remade `want`, both of type `ty`, rows of `n_per_row`.
fn compare(ty: GgmlType, n_per_row: usize, have: &[u8], want: &[u8]) -> Result<Outcome> {
    if have == want {
        return Ok(Outcome::Identical);
    }
    let block = ty.type_size().max(1);
    let of = (have.len().max(want.len()) / block) as u64;
    let differing = have.chunks(block).zip(want.chunks(block)).map(|(a, b)| a != b);
    let mut blocks = have.len().abs_diff(want.len()).div_ceil(block) as u64;
    let mut first = None;
    for (i, d) in differing.enumerate() {
        if d {
            blocks += 1;
            first.get_or_insert(i as u64);
        }
    }
    let first = first.unwrap_or((have.len().min(want.len()) / block) as u64);
    let rel_l2 = if have.len() == want.len() { rel_l2(ty, n_per_row, have, want)? } else { f64::NAN };
    Ok(Outcome::Differs { blocks, of, first, rel_l2 })
}

/// ‖have − want‖ / ‖want‖ over the dequantized values, a slab of rows at a time.
fn rel_l2(ty: GgmlType, n_per_row: usize, have: &[u8], want: &[u8]) -> Result<f64> {
    let n_per_row = n_per_row.max(1);
    let row = organ_core::quantize::slabs::row_bytes(ty, n_per_row);
    anyhow::ensure!(row > 0 && want.len() % row == 0, "{} bytes are not whole rows of {ty}", want.len());
    let rows = (SLAB_VALUES / n_per_row).max(1);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut diff, mut norm) = (0f64, 0f64);
    for (h, w) in have.chunks(rows * row).zip(want.chunks(rows * row)) {
        let n = w.len() / row * n_per_row;
        a.resize(n, 0f32);
        b.resize(n, 0f32);
        quantize::decode(ty, h, &mut a)?;
        quantize::decode(ty, w, &mut b)?;
        let (d, n) = organ_core::surgery::purify::l2_sums(&b, &a);
        (diff, norm) = (diff + d, norm + n);
    }
    Ok(if norm > 0.0 { (diff / norm).sqrt() } else { diff.sqrt() })
}
