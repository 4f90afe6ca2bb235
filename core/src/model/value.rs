//! [`OwnedValue`]: a GGUF metadata value that owns its bytes, so a model can outlive the
//! buffer its header was parsed from (a browser's header read, a manifest's JSON text).
//! Its bytes ([`ValueBytes`]) are a buffer of their own, or a range of a buffer the
//! model shares ([`crate::model::Model::from_gguf_in`]): a front end that keeps the
//! file's bytes (a memory map, a header read) lends them instead of a copy, so a header's
//! values take their size in memory once, however many models and outputs hold them.

use crate::error::Result;
use crate::gguf::{MetaArray, MetaValue, ValueType};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ops::{Deref, Range};

/// A buffer values can share: a file's bytes, or a header read.
pub type SharedBuffer = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// The bytes of a string or an array value: a range of a shared buffer. Cloning one
/// shares the buffer.
#[derive(Clone)]
pub struct ValueBytes {
    buf: SharedBuffer,
    range: Range<usize>,
}

impl ValueBytes {
    /// `bytes` when they lie inside `buf` (a range of it, shared); else a copy of them.
    pub fn within(buf: &SharedBuffer, bytes: &[u8]) -> ValueBytes {
        let whole = (**buf).as_ref();
        let start = (bytes.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize);
        match start.checked_add(bytes.len()) {
            Some(end) if start <= whole.len() && end <= whole.len() => {
                ValueBytes { buf: buf.clone(), range: start..end }
            }
            _ => ValueBytes::from(bytes.to_vec()),
        }
    }
}

impl From<Vec<u8>> for ValueBytes {
    fn from(v: Vec<u8>) -> ValueBytes {
        let range = 0..v.len();
        ValueBytes { buf: Arc::new(v), range }
    }
}

impl Deref for ValueBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // The range was checked against the buffer when it was made, and buffers do not
        // shrink: a file's map or a header read is kept as it was.
        (*self.buf).as_ref().get(self.range.clone()).unwrap_or_default()
    }
}

impl PartialEq for ValueBytes {
    fn eq(&self, other: &ValueBytes) -> bool {
        **self == **other
    }
}

impl core::fmt::Debug for ValueBytes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&**self, f)
    }
}

/// A metadata value that owns its bytes (decoded from a manifest, or added by organ).
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedValue {
    /// A number or a bool.
    Scalar(MetaValue<'static>),
    /// A string's bytes (not always UTF-8).
    Str(ValueBytes),
    /// An array, as its GGUF encoding after the element type and count.
    Array {
        /// The elements' type.
        elem_type: ValueType,
        /// How many elements.
        len: u64,
        /// The elements' GGUF bytes.
        raw: ValueBytes,
    },
}

impl OwnedValue {
    /// A copy of `v`.
    pub fn from_meta(v: &MetaValue<'_>) -> OwnedValue {
        OwnedValue::of(v, |b| b.to_vec().into())
    }

    /// `v`, its bytes a range of `buf` when they lie in it (a copy when not).
    pub fn from_meta_in(v: &MetaValue<'_>, buf: &SharedBuffer) -> OwnedValue {
        OwnedValue::of(v, |b| ValueBytes::within(buf, b))
    }

    /// `v`, its string or array bytes kept by `keep`.
    fn of(v: &MetaValue<'_>, keep: impl Fn(&[u8]) -> ValueBytes) -> OwnedValue {
        match *v {
            MetaValue::Str(s) => OwnedValue::Str(keep(s)),
            MetaValue::Array(a) => OwnedValue::Array { elem_type: a.elem_type, len: a.len, raw: keep(a.raw()) },
            MetaValue::U8(x) => OwnedValue::Scalar(MetaValue::U8(x)),
            MetaValue::I8(x) => OwnedValue::Scalar(MetaValue::I8(x)),
            MetaValue::U16(x) => OwnedValue::Scalar(MetaValue::U16(x)),
            MetaValue::I16(x) => OwnedValue::Scalar(MetaValue::I16(x)),
            MetaValue::U32(x) => OwnedValue::Scalar(MetaValue::U32(x)),
            MetaValue::I32(x) => OwnedValue::Scalar(MetaValue::I32(x)),
            MetaValue::F32(x) => OwnedValue::Scalar(MetaValue::F32(x)),
            MetaValue::Bool(x) => OwnedValue::Scalar(MetaValue::Bool(x)),
            MetaValue::U64(x) => OwnedValue::Scalar(MetaValue::U64(x)),
            MetaValue::I64(x) => OwnedValue::Scalar(MetaValue::I64(x)),
            MetaValue::F64(x) => OwnedValue::Scalar(MetaValue::F64(x)),
        }
    }

    /// A string value.
    pub fn string(s: &str) -> OwnedValue {
        OwnedValue::Str(s.as_bytes().to_vec().into())
    }

    /// An array of strings.
    ///
    /// # Errors
    /// A string longer than [`crate::limits::MAX_STRING_LEN`].
    pub fn strings(items: &[String]) -> Result<OwnedValue> {
        let mut raw = Vec::new();
        MetaArray::encode_strings(items, &mut raw)?;
        Ok(OwnedValue::Array { elem_type: ValueType::String, len: items.len() as u64, raw: raw.into() })
    }

    /// A borrowed view, for the writer.
    ///
    /// # Errors
    /// An array whose raw bytes do not hold `len` elements of its type.
    pub fn view(&self) -> Result<MetaValue<'_>> {
        Ok(match self {
            OwnedValue::Scalar(v) => *v,
            OwnedValue::Str(s) => MetaValue::Str(s),
            OwnedValue::Array { elem_type, len, raw } => MetaValue::Array(MetaArray::from_raw(*elem_type, *len, raw)?),
        })
    }

    /// The string this value holds, if it is a UTF-8 string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            OwnedValue::Str(s) => core::str::from_utf8(s).ok(),
            _ => None,
        }
    }

    /// The unsigned integer this value holds (as [`MetaValue::as_u64`]).
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            OwnedValue::Scalar(v) => v.as_u64(),
            _ => None,
        }
    }
}
