//! The organ file format: one tensor per file,
//! `[name_len:u32][name][n_dims:u32][dims:u64 × n_dims][dtype:u32][data]`, little-endian,
//! `dtype` being the ggml type id and `data` the tensor's bytes exactly as in the GGUF.

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::gguf::writer::TensorSpec;
use crate::limits::{MAX_DIMS, MAX_STRING_LEN};
use crate::reader::Cursor;
use alloc::string::ToString;
use alloc::vec::Vec;

/// A parsed organ file header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganHeader<'a> {
    /// The tensor's name.
    pub name: &'a str,
    /// Its shape, ggml order.
    pub dims: Vec<u64>,
    /// Its type.
    pub ty: GgmlType,
    /// Where the data starts in the file.
    pub data_offset: u64,
    /// How many bytes of data follow.
    pub n_bytes: u64,
}

/// The header bytes of the organ file for a tensor.
///
/// # Errors
/// [`Error::Unwritable`] if the name is longer than a u32 length can say or the shape has
/// more than [`MAX_DIMS`] dimensions.
pub fn encode_header(name: &str, dims: &[u64], ty: GgmlType) -> Result<Vec<u8>> {
    let len = u32::try_from(name.len())
        .ok()
        .filter(|&l| u64::from(l) <= MAX_STRING_LEN)
        .ok_or_else(|| Error::Unwritable { reason: alloc::format!("tensor name of {} bytes", name.len()) })?;
    if dims.len() > MAX_DIMS as usize {
        return Err(Error::Unwritable { reason: alloc::format!("tensor {name:?} has {} dimensions", dims.len()) });
    }
    let mut h = Vec::with_capacity(16 + name.len() + 8 * dims.len());
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(name.as_bytes());
    h.extend_from_slice(&(dims.len() as u32).to_le_bytes());
    for d in dims {
        h.extend_from_slice(&d.to_le_bytes());
    }
    h.extend_from_slice(&ty.id().to_le_bytes());
    Ok(h)
}

/// Parses an organ file header from `prefix` (the file's first bytes) for a file of
/// `file_len` bytes, and checks that exactly the tensor's bytes follow it.
///
/// # Errors
/// [`Error::Incomplete`] if `prefix` is too short; otherwise any error names the offset.
pub fn parse_header(prefix: &[u8], file_len: u64) -> Result<OrganHeader<'_>> {
    let mut c = Cursor::new(prefix, file_len);
    let len = c.u32("organ name length")?;
    if u64::from(len) > MAX_STRING_LEN {
        return Err(Error::TooLarge { offset: 0, what: "organ name length", value: len.into(), limit: MAX_STRING_LEN });
    }
    let raw = c.bytes(len.into(), "organ name")?;
    let name = core::str::from_utf8(raw).map_err(|_| Error::BadUtf8 { offset: 4, what: "organ name" })?;
    let at = c.pos();
    let n_dims = c.u32("organ n_dims")?;
    if n_dims > MAX_DIMS {
        return Err(Error::TooLarge {
            offset: at,
            what: "organ dimension count",
            value: n_dims.into(),
            limit: MAX_DIMS.into(),
        });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        dims.push(c.u64("organ dimension")?);
    }
    let at = c.pos();
    let code = c.u32("organ dtype")?;
    let bad = |reason: alloc::string::String| Error::BadTensor { tensor: name.to_string(), offset: at, reason };
    let ty = GgmlType::from_id(code).ok_or_else(|| bad(alloc::format!("unknown ggml type id {code}")))?;
    let n_bytes = TensorSpec { name, dims: &dims, ty }.n_bytes().map_err(|e| bad(e.to_string()))?;
    let data_offset = c.pos();
    if file_len - data_offset != n_bytes {
        return Err(bad(alloc::format!(
            "organ file holds {} data bytes, the shape {dims:?} of {ty} needs {n_bytes}",
            file_len - data_offset
        )));
    }
    Ok(OrganHeader { name, dims, ty, data_offset, n_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_sizes_are_checked() {
        let h = encode_header("blk.0.ffn_up.weight", &[64, 2], GgmlType::Q8_0).unwrap();
        let mut f = h.clone();
        f.extend_from_slice(&[0u8; 2 * 2 * 34]);
        let p = parse_header(&f, f.len() as u64).unwrap();
        assert_eq!(
            (p.name, p.dims.as_slice(), p.ty, p.n_bytes),
            ("blk.0.ffn_up.weight", &[64u64, 2][..], GgmlType::Q8_0, 136)
        );
        assert_eq!(p.data_offset, h.len() as u64);
        // One byte too few or too many: refused, naming the tensor.
        assert!(parse_header(&f[..f.len() - 1], f.len() as u64 - 1).is_err());
        f.push(0);
        let e = parse_header(&f, f.len() as u64).unwrap_err();
        assert!(alloc::format!("{e}").contains("blk.0.ffn_up.weight"));
        assert!(encode_header("x", &[1, 1, 1, 1, 1], GgmlType::F32).is_err());
    }
}
