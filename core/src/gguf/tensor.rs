//! Tensor infos: name, shape, type and where the bytes are.

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::limits::{MAX_DIMS, MAX_TENSOR_ELEMENTS, MAX_TENSOR_NAME_LEN};
use crate::reader::Cursor;
use alloc::format;
use alloc::string::ToString;

/// One tensor's description, borrowed from the header bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorInfo<'a> {
    /// The tensor's name (`blk.3.ffn_up.weight`).
    pub name: &'a str,
    /// ggml order: `dims[0]` is the row length (fastest-varying). Unused entries are 1.
    pub dims: [u64; MAX_DIMS as usize],
    /// How many of `dims` the file gave.
    pub n_dims: u32,
    /// The element type.
    pub ty: GgmlType,
    /// Offset of the data from the start of the data section.
    pub offset: u64,
    /// Offset of the data from the start of the file.
    pub file_offset: u64,
    /// Element count (product of dims).
    pub n_elements: u64,
    /// Bytes of data.
    pub n_bytes: u64,
    /// Where this info record starts in the file (for error messages).
    pub info_offset: u64,
}

impl<'a> TensorInfo<'a> {
    /// The dimensions the file gave, in ggml order.
    pub fn shape(&self) -> &[u64] {
        &self.dims[..self.n_dims as usize]
    }

    /// The file range `[start, end)` of the tensor's bytes.
    pub fn file_range(&self) -> core::ops::Range<u64> {
        // Both were checked against the file length at parse time.
        self.file_offset..self.file_offset + self.n_bytes
    }

    /// The tensor's bytes inside `file`, which holds the file from its first byte (a memory
    /// map, or a prefix long enough).
    ///
    /// # Errors
    /// [`Error::Truncated`] if `file` ends before the tensor does.
    pub fn data<'f>(&self, file: &'f [u8]) -> Result<&'f [u8]> {
        let r = self.file_range();
        match (usize::try_from(r.start), usize::try_from(r.end)) {
            (Ok(s), Ok(e)) if e <= file.len() => Ok(&file[s..e]),
            _ => Err(Error::Truncated {
                offset: r.start,
                what: "tensor data",
                needed: r.end,
                file_len: file.len() as u64,
            }),
        }
    }

    fn bad(&self, reason: impl Into<alloc::string::String>) -> Error {
        Error::BadTensor { tensor: self.name.to_string(), offset: self.info_offset, reason: reason.into() }
    }

    /// Reads one tensor info record (sizes are filled in by [`TensorInfo::locate`]).
    pub(crate) fn parse(c: &mut Cursor<'a>) -> Result<TensorInfo<'a>> {
        let info_offset = c.pos();
        // ggml refuses names of 64 bytes or more; a longer name is copied into every
        // record of the tensor, so it is refused before it is read.
        let len = c.u64("tensor name")?;
        if len > MAX_TENSOR_NAME_LEN {
            return Err(Error::TooLarge {
                offset: info_offset,
                what: "tensor name length",
                value: len,
                limit: MAX_TENSOR_NAME_LEN,
            });
        }
        let raw = c.bytes(len, "tensor name")?;
        let name =
            core::str::from_utf8(raw).map_err(|_| Error::BadUtf8 { offset: info_offset, what: "tensor name" })?;
        let mut t = TensorInfo {
            name,
            dims: [1; MAX_DIMS as usize],
            n_dims: 0,
            ty: GgmlType::F32,
            offset: 0,
            file_offset: 0,
            n_elements: 0,
            n_bytes: 0,
            info_offset,
        };
        let n_dims_at = c.pos();
        let n_dims = c.u32("tensor n_dims")?;
        if n_dims > MAX_DIMS {
            return Err(Error::TooLarge {
                offset: n_dims_at,
                what: "tensor dimension count",
                value: n_dims.into(),
                limit: MAX_DIMS.into(),
            });
        }
        t.n_dims = n_dims;
        for d in 0..n_dims as usize {
            t.dims[d] = c.u64("tensor dimension")?;
        }
        let code = c.u32("tensor type")?;
        t.ty = GgmlType::from_id(code).ok_or_else(|| t.bad(format!("unknown ggml type id {code}")))?;
        t.offset = c.u64("tensor offset")?;
        let mut n: u64 = 1;
        for &d in t.shape() {
            if d > i64::MAX as u64 {
                return Err(t.bad(format!("dimension {d} is larger than ggml's int64 limit")));
            }
            n = n
                .checked_mul(d)
                .filter(|&n| n <= MAX_TENSOR_ELEMENTS)
                .ok_or_else(|| t.bad(format!("shape {:?} has more than {MAX_TENSOR_ELEMENTS} elements", t.shape())))?;
        }
        t.n_elements = n;
        let block = t.ty.block_size() as u64;
        if t.dims[0] % block != 0 {
            return Err(t.bad(format!("row length {} is not a multiple of the {} block size {block}", t.dims[0], t.ty)));
        }
        // n <= 2^50 and type_size <= 2^8: no overflow.
        t.n_bytes = n / block * t.ty.type_size() as u64;
        Ok(t)
    }

    /// Places the tensor in the file: checks alignment and that its bytes lie inside.
    pub(crate) fn locate(&mut self, data_offset: u64, alignment: u64, file_len: u64) -> Result<()> {
        if self.offset % alignment != 0 {
            return Err(self.bad(format!("data offset {} is not a multiple of the alignment {alignment}", self.offset)));
        }
        let end =
            data_offset.checked_add(self.offset).and_then(|s| s.checked_add(self.n_bytes)).filter(|&e| e <= file_len);
        match end {
            Some(_) => {
                self.file_offset = data_offset + self.offset;
                Ok(())
            }
            None => Err(self.bad(format!(
                "data [{} + {}, +{} bytes) lies beyond the end of the file ({file_len} bytes)",
                data_offset, self.offset, self.n_bytes
            ))),
        }
    }
}
