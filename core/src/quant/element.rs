//! Single elements out of a quantized tensor, for samplers that read a few values from
//! each of many blocks. Fast paths decode just the element for the common types; the rest
//! dequantize the whole block (and keep it, for neighbours that land in the same block).
//! Tests check every element against the block kernels, which are the specification.

use super::float::{e8m0_to_f32_half, f16_le, f16_to_f32};
use super::legacy::{KVALUES_IQ4NL, KVALUES_MXFP4};
use super::{dequantize_block, is_plain, plain, MAX_BLOCK_SIZE};
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;

/// Reads single elements of one tensor's data.
pub struct ElementReader<'d> {
    ty: GgmlType,
    data: &'d [u8],
    n_elements: u64,
    cached_block: u64,
    cache: [f32; MAX_BLOCK_SIZE],
}

impl<'d> ElementReader<'d> {
    /// A reader over `data`, the bytes of a tensor of `n_elements` elements of type `ty`.
    ///
    /// # Errors
    /// [`Error::NotDequantizable`] for types we cannot read; [`Error::SizeMismatch`] when
    /// `data` is not the tensor's size.
    pub fn new(ty: GgmlType, data: &'d [u8], n_elements: u64) -> Result<Self> {
        if !ty.can_dequantize() {
            return Err(Error::NotDequantizable { ty: ty.name() });
        }
        let bs = ty.block_size() as u64;
        let expected = n_elements / bs * ty.type_size() as u64;
        if n_elements % bs != 0 || data.len() as u64 != expected {
            return Err(Error::SizeMismatch {
                what: "tensor data",
                expected,
                got: data.len() as u64,
            });
        }
        Ok(ElementReader {
            ty,
            data,
            n_elements,
            cached_block: u64::MAX,
            cache: [0.0; MAX_BLOCK_SIZE],
        })
    }

    /// Element `i` (ggml order), as gguf-py's `dequantize` would give it.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] if `i` is out of range.
    pub fn get(&mut self, i: u64) -> Result<f32> {
        if i >= self.n_elements {
            return Err(Error::SizeMismatch {
                what: "element index",
                expected: self.n_elements,
                got: i,
            });
        }
        let (ts, bs) = (self.ty.type_size(), self.ty.block_size());
        // i < n_elements <= data.len() / ts * bs, so these fit in usize.
        let block = (i / bs as u64) as usize;
        let j = (i % bs as u64) as usize;
        let b = &self.data[block * ts..(block + 1) * ts];
        if is_plain(self.ty) {
            return Ok(plain(self.ty, b));
        }
        if let Some(v) = fast(self.ty, b, j) {
            return Ok(v);
        }
        if self.cached_block != block as u64 {
            dequantize_block(self.ty, b, &mut self.cache)?;
            self.cached_block = block as u64;
        }
        Ok(self.cache[j])
    }
}

/// Element `j` of block `b`, for the types with a direct decoding.
#[inline]
fn fast(ty: GgmlType, b: &[u8], j: usize) -> Option<f32> {
    let d = |i: usize| f16_le([b[i], b[i + 1]]);
    // The nibble of element j in a 32-element block whose 16 quant bytes start at `at`.
    let nib = |at: usize, j: usize| (b[at + j % 16] >> (4 * (j / 16))) & 0xF;
    let bit5 = |qh: u32, j: usize| (((qh >> j) & 1) as u8) << 4;
    Some(match ty {
        GgmlType::Q4_0 => d(0) * f32::from(nib(2, j) as i8 - 8),
        GgmlType::Q4_1 => d(0) * f32::from(nib(4, j)) + d(2),
        GgmlType::Q5_0 => {
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            d(0) * f32::from((nib(6, j) | bit5(qh, j)) as i8 - 16)
        }
        GgmlType::Q5_1 => {
            let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            d(0) * f32::from(nib(8, j) | bit5(qh, j)) + d(2)
        }
        GgmlType::Q8_0 => f32::from(b[2 + j] as i8) * d(0),
        GgmlType::IQ4_NL => d(0) * f32::from(KVALUES_IQ4NL[usize::from(nib(2, j))]),
        GgmlType::MXFP4 => {
            e8m0_to_f32_half(b[0]) * f32::from(KVALUES_MXFP4[usize::from(nib(1, j))])
        }
        GgmlType::Q4_K | GgmlType::Q5_K => {
            let sub = j / 32;
            let s = &b[4..16];
            let (sc, mn) = if sub < 4 {
                (s[sub] & 0x3F, s[4 + sub] & 0x3F)
            } else {
                let k = sub - 4;
                (
                    (s[8 + k] & 0x0F) | ((s[k] >> 2) & 0x30),
                    (s[8 + k] >> 4) | ((s[4 + k] >> 2) & 0x30),
                )
            };
            let dj = d(0) * f32::from(sc);
            let mj = d(2) * f32::from(mn);
            let (c, l) = (sub / 2, j % 32);
            let q = if ty == GgmlType::Q4_K {
                (b[16 + c * 32 + l] >> (4 * (sub % 2))) & 0xF
            } else {
                ((b[48 + c * 32 + l] >> (4 * (sub % 2))) & 0xF) | (((b[16 + l] >> sub) & 1) << 4)
            };
            dj * f32::from(q) - mj
        }
        GgmlType::Q6_K => {
            let (h, r) = (j / 128, j % 128);
            let lo = (b[h * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
            let hi = (b[128 + h * 32 + r % 32] >> (2 * (r / 32))) & 3;
            let q = ((lo | (hi << 4)) as i8) - 32;
            let dl =
                f16_to_f32(u16::from_le_bytes([b[208], b[209]])) * f32::from(b[192 + j / 16] as i8);
            dl * f32::from(q)
        }
        _ => return None,
    })
}
