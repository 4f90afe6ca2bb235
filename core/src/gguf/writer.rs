//! Writing GGUF: a header from metadata and tensor descriptions, and the layout of the data
//! section. The core produces bytes; callers stream tensor data after the header.
//!
//! Layout follows ggml's `gguf_write_to_buf` and gguf-py's `GGUFWriter`: tensors are packed
//! in order, each starting at a multiple of the alignment, and zero padding follows every
//! tensor (the last one included), so a file ggml wrote comes back byte-identical.

use super::header::{MetaKv, DEFAULT_ALIGNMENT};
use super::metadata::{encode_value, MetaValue};
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::limits::{MAX_ALIGNMENT, MAX_DIMS, MAX_STRING_LEN, MAX_TENSOR_ELEMENTS};
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::vec::Vec;

/// What the writer needs to know about a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorSpec<'s> {
    /// The name.
    pub name: &'s str,
    /// The shape, ggml order.
    pub dims: &'s [u64],
    /// The element type.
    pub ty: GgmlType,
}

impl TensorSpec<'_> {
    /// Bytes of data this tensor takes, after checking the shape fits the type.
    ///
    /// # Errors
    /// [`Error::Unwritable`] if the shape is empty of meaning for the type.
    pub fn n_bytes(&self) -> Result<u64> {
        let bad =
            |reason: alloc::string::String| Error::Unwritable { reason: format!("tensor {:?}: {reason}", self.name) };
        if self.dims.len() > MAX_DIMS as usize {
            return Err(bad(format!("{} dimensions (at most {MAX_DIMS})", self.dims.len())));
        }
        let n = self
            .dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d).filter(|&n| n <= MAX_TENSOR_ELEMENTS))
            .ok_or_else(|| bad(format!("shape {:?} is too large", self.dims)))?;
        let block = self.ty.block_size() as u64;
        let row = self.dims.first().copied().unwrap_or(1);
        if row % block != 0 {
            return Err(bad(format!("row length {row} is not a multiple of the {} block size {block}", self.ty)));
        }
        Ok(n / block * self.ty.type_size() as u64)
    }
}

/// Zero bytes needed after `len` to reach a multiple of `alignment`.
pub fn padding(len: u64, alignment: u64) -> u64 {
    let r = len % alignment;
    if r == 0 {
        0
    } else {
        alignment - r
    }
}

/// A planned GGUF file: header bytes, and where each tensor goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The header, padding included: write it first.
    pub header: Vec<u8>,
    /// Per tensor, in the order given: its offset in the data section and its size.
    /// Write each at `header.len() + offset`, followed by [`padding`] zero bytes.
    pub tensors: Vec<(u64, u64)>,
    /// The alignment used.
    pub alignment: u64,
    /// The file's total length.
    pub file_len: u64,
}

/// Plans a GGUF file: encodes the header for `kvs` and `tensors` and lays the data out.
///
/// The alignment is `general.alignment` when `kvs` has it (it must be a UINT32 power of
/// two), else 32. Keys and tensor names must be unique.
///
/// # Errors
/// [`Error::Unwritable`] (or [`Error::BadMetadata`]) naming what cannot be written.
pub fn plan(version: u32, kvs: &[(&str, MetaValue<'_>)], tensors: &[TensorSpec<'_>]) -> Result<Layout> {
    if !(2..=3).contains(&version) {
        return Err(Error::Unwritable { reason: format!("version {version} (organ writes 2 and 3)") });
    }
    let mut alignment = DEFAULT_ALIGNMENT;
    let mut h = Vec::new();
    h.extend_from_slice(b"GGUF");
    h.extend_from_slice(&version.to_le_bytes());
    h.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    h.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    let mut keys = BTreeSet::new();
    for (key, value) in kvs {
        if !keys.insert(*key) {
            return Err(Error::Unwritable { reason: format!("duplicate metadata key {key:?}") });
        }
        check_len(key.len(), key)?;
        if *key == "general.alignment" {
            match value {
                MetaValue::U32(a) if a.is_power_of_two() && u64::from(*a) <= MAX_ALIGNMENT => alignment = u64::from(*a),
                _ => {
                    return Err(Error::BadMetadata {
                        key: (*key).into(),
                        reason: format!("must be a UINT32 power of two up to {MAX_ALIGNMENT}, got {value:?}"),
                    })
                }
            }
        }
        if let MetaValue::Str(s) = value {
            check_len(s.len(), key)?;
        }
        h.extend_from_slice(&(key.len() as u64).to_le_bytes());
        h.extend_from_slice(key.as_bytes());
        h.extend_from_slice(&value.value_type().code().to_le_bytes());
        encode_value(value, &mut h);
    }
    let mut names = BTreeSet::new();
    let mut placed = Vec::with_capacity(tensors.len());
    let mut offset = 0u64;
    for t in tensors {
        if !names.insert(t.name) {
            return Err(Error::Unwritable { reason: format!("duplicate tensor name {:?}", t.name) });
        }
        check_len(t.name.len(), t.name)?;
        let n_bytes = t.n_bytes()?;
        h.extend_from_slice(&(t.name.len() as u64).to_le_bytes());
        h.extend_from_slice(t.name.as_bytes());
        h.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in t.dims {
            h.extend_from_slice(&d.to_le_bytes());
        }
        h.extend_from_slice(&t.ty.id().to_le_bytes());
        h.extend_from_slice(&offset.to_le_bytes());
        placed.push((offset, n_bytes));
        offset = offset
            .checked_add(n_bytes)
            .and_then(|o| o.checked_add(padding(o, alignment)))
            .ok_or_else(|| Error::Unwritable { reason: "data section larger than 2^64 bytes".into() })?;
    }
    let pad = padding(h.len() as u64, alignment);
    h.resize(h.len() + pad as usize, 0);
    let file_len = if tensors.is_empty() { h.len() as u64 } else { h.len() as u64 + offset };
    Ok(Layout { header: h, tensors: placed, alignment, file_len })
}

/// Plans a file with the same metadata and tensors as a parsed one (the first step of a
/// byte-identical rewrite; callers then copy each tensor's bytes to its planned offset).
///
/// # Errors
/// As [`plan`].
pub fn plan_like(version: u32, kvs: &[MetaKv<'_>], tensors: &[crate::gguf::TensorInfo<'_>]) -> Result<Layout> {
    let kvs: Vec<(&str, MetaValue<'_>)> = kvs.iter().map(|kv| (kv.key, kv.value)).collect();
    let specs: Vec<TensorSpec<'_>> =
        tensors.iter().map(|t| TensorSpec { name: t.name, dims: t.shape(), ty: t.ty }).collect();
    plan(version, &kvs, &specs)
}

fn check_len(len: usize, what: &str) -> Result<()> {
    if len as u64 > MAX_STRING_LEN {
        return Err(Error::Unwritable { reason: format!("string of {len} bytes in {what:?}") });
    }
    Ok(())
}
