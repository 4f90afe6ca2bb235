//! What follows an edited header ([`super::Edited::pieces`]): input ranges copied as they
//! are, zero padding, tensors converted by `organ quantize`'s own code
//! ([`crate::quantize::slabs`]); and the layout of the kept tensors that makes them.

use super::tensors::TensorPlan;
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::quantize::slabs::Pieces;
use alloc::format;
use alloc::vec::Vec;
use core::ops::Range;

/// One run of the output's data section, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// The input's bytes in this range, as they are.
    Copy(Range<u64>),
    /// Zero bytes: the padding after a tensor, to the file's alignment.
    Zeros(u64),
    /// A tensor converted: its bytes in the input (this range), dequantized and quantized
    /// as [`crate::quantize::slabs::Pieces`] converts a tensor of `organ quantize`'s plan.
    Convert {
        /// The tensor's bytes in the input.
        src: Range<u64>,
        /// The conversion (name, shape, types) as `organ quantize` plans one.
        tensor: crate::quantize::Planned,
        /// Bytes it writes.
        out_len: u64,
    },
}

impl Piece {
    /// Bytes it writes.
    pub fn len(&self) -> u64 {
        match self {
            Piece::Copy(r) => r.end - r.start,
            Piece::Zeros(n) => *n,
            Piece::Convert { out_len, .. } => *out_len,
        }
    }

    /// Whether it writes nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Converts the input bytes `bytes` of a [`Piece::Convert`]'s `tensor`, slab by slab as
/// `organ quantize` does ([`Pieces`]), in one thread: the browser's writer and the tests.
/// (The CLI converts a slab's chunks in parallel; rows convert independently, so the bytes
/// are the same.)
///
/// # Errors
/// Bytes that are not the tensor's rows, a value the output's type cannot hold.
pub fn convert_tensor(tensor: &crate::quantize::Planned, bytes: &[u8]) -> Result<Vec<u8>> {
    let p = Pieces::new(tensor, false, 1 << 22)?;
    if bytes.len() as u64 != p.rows as u64 * p.row_in as u64 {
        return Err(Error::Quantize {
            reason: format!("tensor {:?}: {} bytes, not its rows", tensor.name, bytes.len()),
        });
    }
    let (mut out, mut values) = (Vec::with_capacity(p.bytes_out() as usize), Vec::new());
    for slab in p.slabs() {
        let r = p.bytes_in(&slab);
        p.convert(tensor, slab.rows.start, &bytes[r.start as usize..r.end as usize], None, &mut values, &mut out)?;
    }
    Ok(out)
}

/// What the output's data section is made of, for the tensors of `plan` laid out from
/// offset 0 with `g`'s alignment: each tensor copied or converted, then its padding. Also
/// each tensor's offset, in `plan.kept`'s order.
///
/// # Errors
/// [`Error::Unwritable`] for a data section past 2⁶⁴ bytes, [`Error::Quantize`] for a shape
/// the quantizer's schedule refuses.
pub fn lay_out(g: &Gguf<'_>, plan: &TensorPlan) -> Result<(Vec<Piece>, Vec<u64>)> {
    let mut pieces = Vec::with_capacity(plan.kept.len() * 2);
    let mut offsets = Vec::with_capacity(plan.kept.len());
    let mut at = 0u64;
    for k in &plan.kept {
        let t = &g.tensors[k.input];
        offsets.push(at);
        let piece = match k.ty == t.ty {
            true => Piece::Copy(t.file_range()),
            false => {
                let tensor = crate::quantize::Planned {
                    input: k.input,
                    name: t.name.into(),
                    dims: t.shape().to_vec(),
                    from: t.ty,
                    to: k.ty,
                    requires_imatrix: false,
                    renamed_from: None,
                };
                let out_len = Pieces::new(&tensor, false, 1)?.bytes_out();
                Piece::Convert { src: t.file_range(), tensor, out_len }
            }
        };
        let pad = crate::gguf::writer::padding(at.saturating_add(piece.len()), g.alignment);
        at = at
            .checked_add(piece.len())
            .and_then(|a| a.checked_add(pad))
            .ok_or_else(|| Error::Unwritable { reason: "data section larger than 2^64 bytes".into() })?;
        pieces.push(piece);
        if pad > 0 {
            pieces.push(Piece::Zeros(pad));
        }
    }
    Ok((pieces, offsets))
}
