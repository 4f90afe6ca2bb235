//! Single elements out of a quantized tensor, for samplers that read a few values from
//! each of many blocks. Every row of the quant table has a decoder for one element, with
//! the same expressions as its block kernel; tests check every element against gguf-py's
//! vectors and the block kernels, which are the specification.

use super::table::{kernels, Kernels};
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::vec::Vec;

/// Reads single elements of one tensor's data.
pub struct ElementReader<'d> {
    kernels: &'static Kernels,
    data: &'d [u8],
    n_elements: u64,
}

impl<'d> ElementReader<'d> {
    /// A reader over `data`, the bytes of a tensor of `n_elements` elements of type `ty`.
    ///
    /// # Errors
    /// [`Error::NotDequantizable`] for types we cannot read; [`Error::SizeMismatch`] when
    /// `data` is not the tensor's size.
    pub fn new(ty: GgmlType, data: &'d [u8], n_elements: u64) -> Result<Self> {
        let Some(kernels) = kernels(ty) else {
            return Err(Error::NotDequantizable { ty: ty.name() });
        };
        let bs = kernels.block_size as u64;
        let expected = n_elements / bs * kernels.type_size as u64;
        if n_elements % bs != 0 || data.len() as u64 != expected {
            return Err(Error::SizeMismatch { what: "tensor data", expected, got: data.len() as u64 });
        }
        Ok(ElementReader { kernels, data, n_elements })
    }

    /// Element `i` (ggml order), as gguf-py's `dequantize` would give it.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] if `i` is out of range.
    pub fn get(&mut self, i: u64) -> Result<f32> {
        if i >= self.n_elements {
            return Err(Error::SizeMismatch { what: "element index", expected: self.n_elements, got: i });
        }
        let (ts, bs) = (self.kernels.type_size, self.kernels.block_size);
        // i < n_elements = data.len() / ts * bs, so these fit in usize and the block is
        // inside `data`.
        let block = (i / bs as u64) as usize;
        let j = (i % bs as u64) as usize;
        Ok((self.kernels.element)(&self.data[block * ts..(block + 1) * ts], j))
    }

    /// The elements at `indices`, in that order: the same values as [`ElementReader::get`]
    /// on each, with the type dispatched once rather than per element.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] if an index is out of range.
    pub fn gather(&mut self, indices: &[u64]) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(indices.len());
        self.gather_into(indices, &mut out)?;
        Ok(out)
    }

    /// [`ElementReader::gather`], appending to `out`: a sampler can gather its indices a
    /// chunk at a time, so they never need an array of their own.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] if an index is out of range (`out` is then unchanged).
    pub fn gather_into(&mut self, indices: &[u64], out: &mut Vec<f32>) -> Result<()> {
        if let Some(&i) = indices.iter().find(|&&i| i >= self.n_elements) {
            return Err(Error::SizeMismatch { what: "element index", expected: self.n_elements, got: i });
        }
        // Every index is below n_elements, so every block lies inside `data`.
        (self.kernels.gather)(self.data, indices, out);
        Ok(())
    }
}
