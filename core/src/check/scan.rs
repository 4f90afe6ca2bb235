//! The full scan of one tensor's bytes, fed in chunks of whole blocks so memory stays
//! bounded whatever the tensor's size: non-finite values (float types) or non-finite
//! block scales (quantized types), all-zero, constant.

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::quant::{self, MAX_BLOCK_SIZE};
use alloc::vec;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// What a scan read to find non-finite numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// Every value, an IEEE float of this many bytes (2: f16, or bf16 when `bf16`).
    Floats { bytes: usize, bf16: bool },
    /// Integers: nothing can be non-finite.
    Integers,
    /// The f16 scales at these byte offsets of every block.
    Scales(&'static [usize]),
    /// MXFP4's e8m0 exponent, byte 0 of every block (0xFF is NaN).
    E8m0,
    /// Every value, dequantized (types whose scales are not plain fields).
    Dequantized,
    /// Nothing: organ cannot decode the type.
    Nothing,
}

impl How {
    fn of(ty: GgmlType) -> How {
        use GgmlType as T;
        match ty {
            T::F32 => How::Floats { bytes: 4, bf16: false },
            T::F16 => How::Floats { bytes: 2, bf16: false },
            T::BF16 => How::Floats { bytes: 2, bf16: true },
            T::F64 => How::Floats { bytes: 8, bf16: false },
            T::I8 | T::I16 | T::I32 | T::I64 => How::Integers,
            T::MXFP4 => How::E8m0,
            _ => match quant::scale_fields(ty) {
                Some((_, offsets)) => How::Scales(offsets),
                None if ty.can_dequantize() => How::Dequantized,
                None => How::Nothing,
            },
        }
    }
}

/// What the scan of one tensor found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorScan {
    /// What was read for non-finite numbers: "values", "block scales (d, m)", …, or
    /// "nothing (…)" for types organ cannot decode.
    pub scanned: alloc::string::String,
    /// How many of those numbers (values, or blocks) there were.
    pub count: u64,
    /// How many of them were NaN or infinite (values, or blocks with a non-finite scale).
    pub non_finite: u64,
    /// Every byte was zero (so every value is zero).
    pub all_zero: bool,
    /// Every value is the same: every block is byte-identical to the first, and the first
    /// block's values are all equal.
    pub constant: bool,
}

/// The scan of one tensor in progress: [`Scanner::update`] with its bytes, in order, in
/// chunks of whole blocks, then [`Scanner::finish`].
pub struct Scanner {
    ty: GgmlType,
    how: How,
    expected: u64,
    seen: u64,
    first: Vec<u8>,
    all_zero: bool,
    same_blocks: bool,
    non_finite: u64,
    out: Vec<f32>,
}

impl Scanner {
    /// A scan of a tensor of type `ty` holding `n_bytes` bytes.
    pub fn new(ty: GgmlType, n_bytes: u64) -> Scanner {
        let how = How::of(ty);
        let out = if how == How::Dequantized { vec![0f32; MAX_BLOCK_SIZE] } else { Vec::new() };
        Scanner {
            ty,
            how,
            expected: n_bytes,
            seen: 0,
            first: Vec::new(),
            all_zero: true,
            same_blocks: true,
            non_finite: 0,
            out,
        }
    }

    /// The largest multiple of the block size not above `target` (at least one block): the
    /// chunk length a caller reading from a file should use.
    pub fn chunk_len(ty: GgmlType, target: usize) -> usize {
        let ts = ty.type_size().max(1);
        (target / ts).max(1) * ts
    }

    /// Scans the next `bytes` of the tensor (whole blocks).
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] when `bytes` is not whole blocks or runs past the tensor.
    pub fn update(&mut self, bytes: &[u8]) -> Result<()> {
        let ts = self.ty.type_size();
        let end = self.seen.checked_add(bytes.len() as u64).filter(|&e| e <= self.expected);
        if ts == 0 || bytes.len() % ts != 0 || end.is_none() {
            return Err(Error::SizeMismatch {
                what: "a scanned chunk (whole blocks, inside the tensor)",
                expected: (bytes.len() / ts.max(1) * ts) as u64,
                got: bytes.len() as u64,
            });
        }
        let mut rest = bytes;
        if self.first.is_empty() {
            let Some((b, tail)) = rest.split_at_checked(ts) else { return Ok(()) };
            self.first = b.to_vec();
            self.all_zero = b.iter().all(|&x| x == 0);
            rest = tail;
        }
        if self.all_zero {
            self.all_zero = rest.iter().all(|&x| x == 0);
        }
        if self.same_blocks {
            self.same_blocks = rest.chunks_exact(ts).all(|b| b == self.first.as_slice());
        }
        self.count_non_finite(bytes);
        self.seen += bytes.len() as u64;
        Ok(())
    }

    fn count_non_finite(&mut self, bytes: &[u8]) {
        let n = match self.how {
            How::Floats { bytes: 4, .. } => bytes
                .chunks_exact(4)
                .filter(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) & 0x7F80_0000 == 0x7F80_0000)
                .count(),
            How::Floats { bytes: 2, bf16 } => {
                let mask = if bf16 { 0x7F80 } else { 0x7C00 };
                bytes.chunks_exact(2).filter(|b| u16::from_le_bytes([b[0], b[1]]) & mask == mask).count()
            }
            How::Floats { .. } => bytes
                .chunks_exact(8)
                .filter(|b| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    !f64::from_le_bytes(a).is_finite()
                })
                .count(),
            How::Scales(offsets) => bytes
                .chunks_exact(self.ty.type_size())
                .filter(|b| offsets.iter().any(|&o| b.get(o..o + 2).is_some_and(|h| h[1] & 0x7C == 0x7C)))
                .count(),
            How::E8m0 => bytes.chunks_exact(self.ty.type_size()).filter(|b| b[0] == 0xFF).count(),
            How::Dequantized => {
                let bs = self.ty.block_size();
                let mut n = 0;
                for b in bytes.chunks_exact(self.ty.type_size()) {
                    if quant::dequantize_block(self.ty, b, &mut self.out).is_ok() {
                        n += self.out[..bs].iter().filter(|v| !v.is_finite()).count();
                    }
                }
                n
            }
            How::Integers | How::Nothing => 0,
        };
        self.non_finite += n as u64;
    }

    /// The scan's result.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] when fewer bytes than the tensor's were scanned.
    pub fn finish(mut self) -> Result<TensorScan> {
        if self.seen != self.expected {
            return Err(Error::SizeMismatch { what: "scanned tensor bytes", expected: self.expected, got: self.seen });
        }
        let ts = self.ty.type_size() as u64;
        let blocks = self.seen / ts.max(1);
        let (scanned, count) = match self.how {
            How::Floats { .. } => ("values".into(), blocks),
            How::Integers => ("values (integers: always finite)".into(), blocks),
            How::Scales(_) => {
                (alloc::format!("block scales ({})", quant::scale_fields(self.ty).map_or("", |s| s.0)), blocks)
            }
            How::E8m0 => ("block scales (e8m0 exponent)".into(), blocks),
            How::Dequantized => ("values (dequantized)".into(), blocks * self.ty.block_size() as u64),
            How::Nothing => (alloc::format!("nothing ({} is not decoded by organ)", self.ty.name()), 0),
        };
        let constant = self.same_blocks && blocks > 0 && self.first_block_constant();
        Ok(TensorScan { scanned, count, non_finite: self.non_finite, all_zero: self.all_zero && blocks > 0, constant })
    }

    /// Whether the first block's values are all equal (a one-value block always is).
    fn first_block_constant(&mut self) -> bool {
        let bs = self.ty.block_size();
        if bs == 1 {
            return true;
        }
        if self.out.len() < bs {
            self.out = vec![0f32; MAX_BLOCK_SIZE];
        }
        if quant::dequantize_block(self.ty, &self.first, &mut self.out).is_err() {
            return false;
        }
        let v = &self.out[..bs];
        v.iter().all(|x| x.to_bits() == v[0].to_bits())
    }
}

/// Scans a tensor whose bytes are all in memory, in one call.
///
/// # Errors
/// As [`Scanner::update`] and [`Scanner::finish`].
pub fn scan_tensor(ty: GgmlType, bytes: &[u8]) -> Result<TensorScan> {
    let mut s = Scanner::new(ty, bytes.len() as u64);
    s.update(bytes)?;
    s.finish()
}
