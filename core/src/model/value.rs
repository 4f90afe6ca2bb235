//! [`OwnedValue`]: a GGUF metadata value that owns its bytes, so a model can outlive the
//! buffer its header was parsed from (a browser's header read, a manifest's JSON text).

use crate::error::Result;
use crate::gguf::{MetaArray, MetaValue, ValueType};
use alloc::string::String;
use alloc::vec::Vec;

/// A metadata value that owns its bytes (decoded from a manifest, or added by organ).
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedValue {
    /// A number or a bool.
    Scalar(MetaValue<'static>),
    /// A string's bytes (not always UTF-8).
    Str(Vec<u8>),
    /// An array, as its GGUF encoding after the element type and count.
    Array {
        /// The elements' type.
        elem_type: ValueType,
        /// How many elements.
        len: u64,
        /// The elements' GGUF bytes.
        raw: Vec<u8>,
    },
}

impl OwnedValue {
    /// A copy of `v`.
    pub fn from_meta(v: &MetaValue<'_>) -> OwnedValue {
        match *v {
            MetaValue::Str(s) => OwnedValue::Str(s.to_vec()),
            MetaValue::Array(a) => OwnedValue::Array { elem_type: a.elem_type, len: a.len, raw: a.raw().to_vec() },
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
        OwnedValue::Str(s.as_bytes().to_vec())
    }

    /// An array of strings.
    ///
    /// # Errors
    /// A string longer than [`crate::limits::MAX_STRING_LEN`].
    pub fn strings(items: &[String]) -> Result<OwnedValue> {
        let mut raw = Vec::new();
        MetaArray::encode_strings(items, &mut raw)?;
        Ok(OwnedValue::Array { elem_type: ValueType::String, len: items.len() as u64, raw })
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
