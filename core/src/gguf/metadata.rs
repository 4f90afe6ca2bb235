//! GGUF metadata values, borrowed from the file bytes.
//!
//! Arrays are kept as the raw bytes of their elements and decoded on demand, so a
//! 250 000-token vocabulary costs no allocation to parse and is written back byte for byte.

use crate::error::{Error, Result};
use crate::limits::{MAX_ARRAY_LEN, MAX_DEPTH, MAX_NESTED_ARRAYS, MAX_STRING_LEN};
use crate::reader::Cursor;
use serde::Serialize;

/// The type code of a metadata value (`gguf_type` in ggml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[allow(missing_docs)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    /// The type with this code.
    pub fn from_code(code: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match code {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The code stored in the file.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// gguf-py's name for the type (`UINT32`, `STRING`, …).
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "UINT8",
            I8 => "INT8",
            U16 => "UINT16",
            I16 => "INT16",
            U32 => "UINT32",
            I32 => "INT32",
            F32 => "FLOAT32",
            Bool => "BOOL",
            String => "STRING",
            Array => "ARRAY",
            U64 => "UINT64",
            I64 => "INT64",
            F64 => "FLOAT64",
        }
    }

    /// The size of a fixed-size value, `None` for strings and arrays.
    pub fn fixed_size(self) -> Option<u64> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// The fewest bytes one value of this type can occupy (for count × size checks).
    fn min_size(self) -> u64 {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            t => t.fixed_size().unwrap_or(1),
        }
    }
}

/// One metadata value. Strings are bytes (GGUF does not promise UTF-8 for values).
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)]
pub enum MetaValue<'a> {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(&'a [u8]),
    Array(MetaArray<'a>),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// An array value: element type, count, and the elements' raw bytes (validated at parse time).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetaArray<'a> {
    /// The type of every element.
    pub elem_type: ValueType,
    /// How many elements.
    pub len: u64,
    raw: &'a [u8],
}

impl<'a> MetaValue<'a> {
    /// The value's type code.
    pub fn value_type(&self) -> ValueType {
        match self {
            MetaValue::U8(_) => ValueType::U8,
            MetaValue::I8(_) => ValueType::I8,
            MetaValue::U16(_) => ValueType::U16,
            MetaValue::I16(_) => ValueType::I16,
            MetaValue::U32(_) => ValueType::U32,
            MetaValue::I32(_) => ValueType::I32,
            MetaValue::F32(_) => ValueType::F32,
            MetaValue::Bool(_) => ValueType::Bool,
            MetaValue::Str(_) => ValueType::String,
            MetaValue::Array(_) => ValueType::Array,
            MetaValue::U64(_) => ValueType::U64,
            MetaValue::I64(_) => ValueType::I64,
            MetaValue::F64(_) => ValueType::F64,
        }
    }

    /// The value as an unsigned integer, if it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a string, if it is a UTF-8 string.
    pub fn as_str(&self) -> Option<&'a str> {
        match *self {
            MetaValue::Str(s) => core::str::from_utf8(s).ok(),
            _ => None,
        }
    }

    /// Decodes one value of type `ty` (without its type code) that fills exactly `bytes`,
    /// with the same checks as the file parser.
    ///
    /// # Errors
    /// Any parse error, or [`Error::SizeMismatch`] if bytes are left over.
    pub fn decode(ty: ValueType, bytes: &'a [u8]) -> Result<MetaValue<'a>> {
        let mut c = Cursor::new(bytes, bytes.len() as u64);
        let v = MetaValue::parse(&mut c, ty, 0, &mut Budget::default())?;
        if c.pos() != bytes.len() as u64 {
            return Err(Error::SizeMismatch {
                what: "encoded metadata value",
                expected: c.pos(),
                got: bytes.len() as u64,
            });
        }
        Ok(v)
    }

    /// Reads one value of type `ty` at the cursor. `depth` counts enclosing arrays;
    /// `budget` what the file's metadata has used so far of the caps that span all of it.
    pub(crate) fn parse(c: &mut Cursor<'a>, ty: ValueType, depth: u32, budget: &mut Budget) -> Result<MetaValue<'a>> {
        Ok(match ty {
            ValueType::U8 => MetaValue::U8(c.u8("u8 value")?),
            ValueType::I8 => MetaValue::I8(c.u8("i8 value")? as i8),
            ValueType::U16 => MetaValue::U16(c.u16("u16 value")?),
            ValueType::I16 => MetaValue::I16(c.u16("i16 value")? as i16),
            ValueType::U32 => MetaValue::U32(c.u32("u32 value")?),
            ValueType::I32 => MetaValue::I32(c.u32("i32 value")? as i32),
            ValueType::F32 => MetaValue::F32(f32::from_bits(c.u32("f32 value")?)),
            ValueType::Bool => MetaValue::Bool(c.u8("bool value")? != 0),
            ValueType::String => MetaValue::Str(read_string(c, "string value")?),
            ValueType::U64 => MetaValue::U64(c.u64("u64 value")?),
            ValueType::I64 => MetaValue::I64(c.u64("i64 value")? as i64),
            ValueType::F64 => MetaValue::F64(f64::from_bits(c.u64("f64 value")?)),
            ValueType::Array => MetaValue::Array(MetaArray::parse(c, depth, budget)?),
        })
    }
}

/// What one file's metadata has used of the caps that span all of its values.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    /// Arrays met inside other arrays so far.
    nested_arrays: u64,
}

/// Reads a GGUF string: u64 length, then that many bytes.
pub(crate) fn read_string<'a>(c: &mut Cursor<'a>, what: &'static str) -> Result<&'a [u8]> {
    let offset = c.pos();
    let len = c.u64(what)?;
    if len > MAX_STRING_LEN {
        return Err(Error::TooLarge { offset, what: "string length", value: len, limit: MAX_STRING_LEN });
    }
    c.bytes(len, what)
}

/// Reads the code of a value type.
pub(crate) fn read_value_type(c: &mut Cursor<'_>) -> Result<ValueType> {
    let offset = c.pos();
    let code = c.u32("value type")?;
    ValueType::from_code(code).ok_or(Error::BadValueType { offset, code })
}

impl<'a> MetaArray<'a> {
    fn parse(c: &mut Cursor<'a>, depth: u32, budget: &mut Budget) -> Result<MetaArray<'a>> {
        let offset = c.pos();
        if depth >= MAX_DEPTH {
            return Err(Error::TooLarge {
                offset,
                what: "array nesting depth",
                value: u64::from(depth) + 1,
                limit: u64::from(MAX_DEPTH),
            });
        }
        // An empty array inside an array takes 12 bytes of file, and every reader that
        // builds something per element (JSON, a manifest) spends far more on it: count
        // them across the whole metadata.
        if depth > 0 {
            budget.nested_arrays += 1;
            if budget.nested_arrays > MAX_NESTED_ARRAYS {
                return Err(Error::TooLarge {
                    offset,
                    what: "count of arrays nested in arrays",
                    value: budget.nested_arrays,
                    limit: MAX_NESTED_ARRAYS,
                });
            }
        }
        let elem_type = read_value_type(c)?;
        let len_offset = c.pos();
        let len = c.u64("array length")?;
        // Every element takes at least min_size bytes: refuse counts the file cannot hold
        // before looping over them.
        if len > MAX_ARRAY_LEN {
            return Err(Error::TooLarge { offset: len_offset, what: "array length", value: len, limit: MAX_ARRAY_LEN });
        }
        let remaining = c.file_remaining();
        let fits = remaining / elem_type.min_size();
        if len > fits {
            let what = "array length";
            return Err(Error::CountPastEnd { offset: len_offset, what, value: len, remaining, limit: fits });
        }
        let start = c.pos();
        match elem_type.fixed_size() {
            // len * size <= file_remaining, so no overflow.
            Some(size) => c.skip(len * size, "array elements")?,
            None => {
                for _ in 0..len {
                    MetaValue::parse(c, elem_type, depth + 1, budget)?;
                }
            }
        }
        Ok(MetaArray { elem_type, len, raw: c.since(start) })
    }

    /// The elements' raw bytes, exactly as in the file.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Decodes the elements in order.
    pub fn iter(&self) -> MetaArrayIter<'a> {
        MetaArrayIter {
            cursor: Cursor::new(self.raw, self.raw.len() as u64),
            elem_type: self.elem_type,
            left: self.len,
        }
    }

    /// Builds an array of strings (for metadata a writer adds).
    pub fn encode_strings<S: AsRef<[u8]>>(items: &[S], out: &mut alloc::vec::Vec<u8>) -> Result<()> {
        for s in items {
            let s = s.as_ref();
            if s.len() as u64 > MAX_STRING_LEN {
                return Err(Error::Unwritable { reason: alloc::format!("string of {} bytes", s.len()) });
            }
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s);
        }
        Ok(())
    }

    /// An array over already-encoded element bytes (as [`MetaArray::raw`] returns them or
    /// [`MetaArray::encode_strings`] builds them). The bytes are checked to hold exactly
    /// `len` elements of `elem_type`.
    pub fn from_raw(elem_type: ValueType, len: u64, raw: &'a [u8]) -> Result<MetaArray<'a>> {
        let mut c = Cursor::new(raw, raw.len() as u64);
        // Validate by walking the elements the same way the parser does.
        match elem_type.fixed_size() {
            Some(size) => {
                let want = len.checked_mul(size);
                if want != Some(raw.len() as u64) {
                    return Err(Error::SizeMismatch {
                        what: "array elements",
                        expected: want.unwrap_or(u64::MAX),
                        got: raw.len() as u64,
                    });
                }
            }
            None => {
                let mut budget = Budget::default();
                for _ in 0..len {
                    MetaValue::parse(&mut c, elem_type, 1, &mut budget)?;
                }
                if c.pos() != raw.len() as u64 {
                    return Err(Error::SizeMismatch {
                        what: "array elements",
                        expected: c.pos(),
                        got: raw.len() as u64,
                    });
                }
            }
        }
        Ok(MetaArray { elem_type, len, raw })
    }
}

/// Iterator over the elements of a [`MetaArray`].
pub struct MetaArrayIter<'a> {
    cursor: Cursor<'a>,
    elem_type: ValueType,
    left: u64,
}

impl<'a> Iterator for MetaArrayIter<'a> {
    type Item = MetaValue<'a>;
    fn next(&mut self) -> Option<MetaValue<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The bytes were validated when the array was parsed; a failure here cannot
        // happen, and would end the iteration rather than panic.
        MetaValue::parse(&mut self.cursor, self.elem_type, 1, &mut Budget::default()).ok()
    }
}

/// Writes a value (without its type code) in GGUF encoding.
pub(crate) fn encode_value(v: &MetaValue<'_>, out: &mut alloc::vec::Vec<u8>) {
    match *v {
        MetaValue::U8(x) => out.push(x),
        MetaValue::I8(x) => out.push(x as u8),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_bits().to_le_bytes()),
        MetaValue::Bool(x) => out.push(u8::from(x)),
        MetaValue::Str(s) => {
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s);
        }
        MetaValue::Array(a) => {
            out.extend_from_slice(&a.elem_type.code().to_le_bytes());
            out.extend_from_slice(&a.len.to_le_bytes());
            out.extend_from_slice(a.raw);
        }
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_bits().to_le_bytes()),
    }
}
