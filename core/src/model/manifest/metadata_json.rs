//! The lossless JSON form of GGUF metadata in a manifest, written and read as a stream
//! (see the parent module's doc): [`Entry`]'s `Serialize`, and [`de_metadata`].

use super::Entry;
use crate::error::Error;
use crate::gguf::{MetaArray, MetaValue, ValueType};
use crate::limits::{
    MAX_ARRAY_LEN, MAX_DEPTH, MAX_KV_COUNT, MAX_MANIFEST_METADATA_BYTES, MAX_NESTED_ARRAYS, MAX_STRING_LEN,
};
use crate::model::value::OwnedValue;
use alloc::borrow::Cow;
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::{self, SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::value::RawValue;

type Result<T, E> = core::result::Result<T, E>;

/// Lower-case hex of `bytes` (non-UTF-8 strings in manifests; digests in the front ends).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|b| [DIGITS[usize::from(b >> 4)] as char, DIGITS[usize::from(b & 15)] as char]).collect()
}

impl Serialize for Entry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.value.view().map_err(|e| ser::Error::custom(format!("metadata key {:?}: {e}", self.key)))?;
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("key", &self.key)?;
        m.serialize_entry("type", v.value_type().name())?;
        m.serialize_entry("value", &Enc(v))?;
        m.end()
    }
}

/// A value in the manifest's JSON form, written as it is walked.
struct Enc<'a>(MetaValue<'a>);

impl Serialize for Enc<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        fn bits<S: Serializer, T: Serialize>(s: S, key: &str, bits: T) -> Result<S::Ok, S::Error> {
            let mut m = s.serialize_map(Some(1))?;
            m.serialize_entry(key, &bits)?;
            m.end()
        }
        match self.0 {
            MetaValue::U8(x) => s.serialize_u8(x),
            MetaValue::I8(x) => s.serialize_i8(x),
            MetaValue::U16(x) => s.serialize_u16(x),
            MetaValue::I16(x) => s.serialize_i16(x),
            MetaValue::U32(x) => s.serialize_u32(x),
            MetaValue::I32(x) => s.serialize_i32(x),
            MetaValue::U64(x) => s.serialize_u64(x),
            MetaValue::I64(x) => s.serialize_i64(x),
            MetaValue::Bool(x) => s.serialize_bool(x),
            MetaValue::F32(x) if x.is_finite() => s.serialize_f64(f64::from(x)),
            MetaValue::F32(x) => bits(s, "f32_bits", x.to_bits()),
            MetaValue::F64(x) if x.is_finite() => s.serialize_f64(x),
            MetaValue::F64(x) => bits(s, "f64_bits", x.to_bits()),
            MetaValue::Str(b) => match core::str::from_utf8(b) {
                Ok(t) => s.serialize_str(t),
                Err(_) => bits(s, "hex", hex(b)),
            },
            MetaValue::Array(a) => {
                struct Elems<'a>(MetaArray<'a>);
                impl Serialize for Elems<'_> {
                    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        let mut seq = s.serialize_seq(usize::try_from(self.0.len).ok())?;
                        for e in self.0.iter() {
                            seq.serialize_element(&Enc(e))?;
                        }
                        seq.end()
                    }
                }
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("elem_type", a.elem_type.name())?;
                m.serialize_entry("values", &Elems(a))?;
                m.end()
            }
        }
    }
}

fn type_named(name: &str) -> Option<ValueType> {
    (0..13).filter_map(ValueType::from_code).find(|t| t.name() == name)
}

/// Why a `{"hex": "…"}` string does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum HexError {
    /// An odd number of digits (how many).
    #[error("hex string of odd length {0}")]
    OddLength(usize),
    /// A character that is not a hex digit, in the pair starting at this character.
    #[error("bad hex digit at character {0}")]
    BadDigit(usize),
}

/// The bytes a hex string spells (digits of either case).
fn decode_hex(h: &str) -> Result<Vec<u8>, HexError> {
    let h = h.as_bytes();
    if h.len() % 2 != 0 {
        return Err(HexError::OddLength(h.len()));
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    h.chunks_exact(2)
        .enumerate()
        .map(|(i, p)| match (digit(p[0]), digit(p[1])) {
            (Some(a), Some(b)) => Ok(a << 4 | b),
            _ => Err(HexError::BadDigit(2 * i)),
        })
        .collect()
}

/// What the metadata of one manifest has used of the caps that span all of it.
#[derive(Default)]
struct Budget {
    /// GGUF bytes decoded so far.
    bytes: u64,
    /// Arrays met inside arrays so far.
    nested_arrays: u64,
}

impl Budget {
    /// Counts `n` more bytes of GGUF metadata, failing past [`MAX_MANIFEST_METADATA_BYTES`].
    fn charge<E: de::Error>(&mut self, n: u64) -> Result<(), E> {
        self.bytes += n;
        if self.bytes > MAX_MANIFEST_METADATA_BYTES {
            return Err(E::custom(format!(
                "metadata decodes to more than the {MAX_MANIFEST_METADATA_BYTES} bytes a manifest may hold"
            )));
        }
        Ok(())
    }
}

pub(super) fn de_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Entry>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<Entry>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "a list of at most {MAX_KV_COUNT} metadata entries")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Entry>, A::Error> {
            let mut budget = Budget::default();
            let mut entries = Vec::new();
            let mut keys = BTreeSet::new();
            while let Some(e) = seq.next_element_seed(EntrySeed(&mut budget))? {
                if entries.len() as u64 >= MAX_KV_COUNT {
                    return Err(de::Error::custom(format!("more than {MAX_KV_COUNT} metadata entries")));
                }
                if !keys.insert(e.key.clone()) {
                    return Err(de::Error::custom(format!("duplicate metadata key {:?}", e.key)));
                }
                entries.push(e);
            }
            Ok(entries)
        }
    }
    d.deserialize_seq(V)
}

/// One `{"key", "type", "value"}` entry, decoded to GGUF bytes as it is read (the value is
/// borrowed as raw JSON until its type is known, whatever the order of the fields).
struct EntrySeed<'b>(&'b mut Budget);

impl<'de> DeserializeSeed<'de> for EntrySeed<'_> {
    type Value = Entry;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_> {
    type Value = Entry;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a metadata entry {\"key\", \"type\", \"value\"}")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let (mut key, mut ty, mut value): (Option<String>, Option<ValueType>, Option<&'de RawValue>) =
            (None, None, None);
        while let Some(k) = map.next_key::<Cow<'de, str>>()? {
            match &*k {
                "key" => key = Some(map.next_value()?),
                "type" => {
                    let t: Cow<'de, str> = map.next_value()?;
                    ty = Some(type_named(&t).ok_or_else(|| de::Error::custom(format!("unknown metadata type {t:?}")))?);
                }
                "value" => value = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let key = key.ok_or_else(|| de::Error::missing_field("key"))?;
        if key.len() as u64 > MAX_STRING_LEN {
            return Err(de::Error::custom(format!("metadata key of {} bytes", key.len())));
        }
        let ty = ty.ok_or_else(|| de::Error::custom(format!("metadata key {key:?}: no type")))?;
        let raw = value.ok_or_else(|| de::Error::custom(format!("metadata key {key:?}: no value")))?;
        let bad = |e: &dyn fmt::Display| de::Error::custom(format!("metadata key {key:?}: {e}"));
        let mut out = Vec::new();
        decode_raw(raw, ty, 0, &mut out, self.0).map_err(|e| bad(&e))?;
        let value = to_owned(ty, out).map_err(|e| bad(&e))?;
        Ok(Entry { key, value })
    }
}

/// The owned value of GGUF bytes decoded from a manifest, checked as the file parser
/// would. Strings and arrays keep `raw`'s buffer (their head cut off), not a copy.
fn to_owned(ty: ValueType, mut raw: Vec<u8>) -> Result<OwnedValue, Error> {
    let v = MetaValue::decode(ty, &raw)?;
    Ok(match v {
        MetaValue::Str(_) => {
            raw.drain(..8);
            OwnedValue::Str(raw.into())
        }
        MetaValue::Array(a) => {
            let (elem_type, len) = (a.elem_type, a.len);
            raw.drain(..12);
            OwnedValue::Array { elem_type, len, raw: raw.into() }
        }
        v => OwnedValue::from_meta(&v),
    })
}

/// Decodes the JSON text `raw` as a value of type `ty` at nesting `depth`, appending its
/// GGUF encoding (without type code) to `out`.
fn decode_raw(
    raw: &RawValue,
    ty: ValueType,
    depth: u32,
    out: &mut Vec<u8>,
    budget: &mut Budget,
) -> Result<(), serde_json::Error> {
    let mut d = serde_json::Deserializer::from_str(raw.get());
    ValueSeed { ty, depth, out, budget }.deserialize(&mut d).and_then(|()| d.end())
}

/// Appends the GGUF encoding of one JSON value of type `ty` to `out`.
struct ValueSeed<'b> {
    ty: ValueType,
    depth: u32,
    out: &'b mut Vec<u8>,
    budget: &'b mut Budget,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.ty {
            // Arrays charge their head and their elements as they go.
            ValueType::Array => {
                d.deserialize_map(ArrayVisitor { depth: self.depth, out: self.out, budget: self.budget })
            }
            ty => {
                // Refused before the bytes are appended: `out` never grows past the cap.
                // (A string may take up to MAX_STRING_LEN more; its JSON text holds it.)
                self.budget.charge::<D::Error>(ty.fixed_size().unwrap_or(8))?;
                let start = self.out.len();
                d.deserialize_any(ScalarVisitor { ty, out: &mut *self.out })?;
                // A string's bytes beyond its length field.
                self.budget.charge::<D::Error>((self.out.len() - start) as u64 - ty.fixed_size().unwrap_or(8))
            }
        }
    }
}

struct ScalarVisitor<'b> {
    ty: ValueType,
    out: &'b mut Vec<u8>,
}

impl ScalarVisitor<'_> {
    fn int<E: de::Error>(self, v: i128) -> Result<(), E> {
        let bad = || E::custom(format!("{v} does not fit {}", self.ty.name()));
        macro_rules! put {
            ($t:ty) => {
                self.out.extend_from_slice(&<$t>::try_from(v).map_err(|_| bad())?.to_le_bytes())
            };
        }
        match self.ty {
            ValueType::U8 => put!(u8),
            ValueType::I8 => put!(i8),
            ValueType::U16 => put!(u16),
            ValueType::I16 => put!(i16),
            ValueType::U32 => put!(u32),
            ValueType::I32 => put!(i32),
            ValueType::U64 => put!(u64),
            ValueType::I64 => put!(i64),
            ValueType::F32 => self.out.extend_from_slice(&(v as f32).to_bits().to_le_bytes()),
            ValueType::F64 => self.out.extend_from_slice(&(v as f64).to_bits().to_le_bytes()),
            _ => return Err(E::custom(format!("{v} is not a {}", self.ty.name()))),
        }
        Ok(())
    }
    fn string<E: de::Error>(self, b: &[u8]) -> Result<(), E> {
        if self.ty != ValueType::String {
            return Err(E::custom(format!("a string is not a {}", self.ty.name())));
        }
        if b.len() as u64 > MAX_STRING_LEN {
            return Err(E::custom(format!("string of {} bytes, more than {MAX_STRING_LEN}", b.len())));
        }
        self.out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        self.out.extend_from_slice(b);
        Ok(())
    }
}

impl<'de> Visitor<'de> for ScalarVisitor<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a {} value", self.ty.name())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.int(i128::from(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.int(i128::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        match self.ty {
            ValueType::F32 => self.out.extend_from_slice(&(v as f32).to_bits().to_le_bytes()),
            ValueType::F64 => self.out.extend_from_slice(&v.to_bits().to_le_bytes()),
            ty => return Err(E::custom(format!("{v} is not an integer ({})", ty.name()))),
        }
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        if self.ty != ValueType::Bool {
            return Err(E::custom(format!("{v} is not a {}", self.ty.name())));
        }
        self.out.push(u8::from(v));
        Ok(())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.string(v.as_bytes())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // {"f32_bits": N}, {"f64_bits": N} or {"hex": "…"}: the one key this type takes.
        let want = match self.ty {
            ValueType::F32 => "f32_bits",
            ValueType::F64 => "f64_bits",
            ValueType::String => "hex",
            ty => return Err(de::Error::custom(format!("an object is not a {}", ty.name()))),
        };
        let mut done = false;
        while let Some(k) = map.next_key::<Cow<'de, str>>()? {
            if k != want || done {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            done = true;
            match self.ty {
                ValueType::F32 => self.out.extend_from_slice(&map.next_value::<u32>()?.to_le_bytes()),
                ValueType::F64 => self.out.extend_from_slice(&map.next_value::<u64>()?.to_le_bytes()),
                _ => {
                    let h: Cow<'de, str> = map.next_value()?;
                    let b = decode_hex(&h).map_err(de::Error::custom)?;
                    if b.len() as u64 > MAX_STRING_LEN {
                        return Err(de::Error::custom(format!("string of {} bytes", b.len())));
                    }
                    self.out.extend_from_slice(&(b.len() as u64).to_le_bytes());
                    self.out.extend_from_slice(&b);
                }
            }
        }
        if !done {
            return Err(de::Error::custom(format!("an object without {want:?} is not a {}", self.ty.name())));
        }
        Ok(())
    }
}

/// `{"elem_type": T, "values": [...]}`, appended as GGUF: type code, count, elements.
struct ArrayVisitor<'b> {
    depth: u32,
    out: &'b mut Vec<u8>,
    budget: &'b mut Budget,
}

impl<'de> Visitor<'de> for ArrayVisitor<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array {\"elem_type\", \"values\"}")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if self.depth >= MAX_DEPTH {
            return Err(de::Error::custom(format!("arrays nested more than {MAX_DEPTH} deep")));
        }
        if self.depth > 0 {
            self.budget.nested_arrays += 1;
            if self.budget.nested_arrays > MAX_NESTED_ARRAYS {
                return Err(de::Error::custom(format!("more than {MAX_NESTED_ARRAYS} arrays nested in arrays")));
            }
        }
        let (mut elem, mut values, mut done): (Option<ValueType>, Option<&'de RawValue>, bool) = (None, None, false);
        let head = self.out.len();
        while let Some(k) = map.next_key::<Cow<'de, str>>()? {
            match &*k {
                "elem_type" if elem.is_none() => {
                    let t: Cow<'de, str> = map.next_value()?;
                    elem =
                        Some(type_named(&t).ok_or_else(|| de::Error::custom(format!("unknown metadata type {t:?}")))?);
                }
                "values" if values.is_none() && !done => match elem {
                    // The usual order: the elements go straight to GGUF bytes.
                    Some(ty) => {
                        self.budget.charge::<A::Error>(12)?;
                        self.out.extend_from_slice(&ty.code().to_le_bytes());
                        self.out.extend_from_slice(&0u64.to_le_bytes());
                        let n = map.next_value_seed(Elems {
                            ty,
                            depth: self.depth + 1,
                            out: &mut *self.out,
                            budget: &mut *self.budget,
                        })?;
                        self.out[head + 4..head + 12].copy_from_slice(&n.to_le_bytes());
                        done = true;
                    }
                    None => values = Some(map.next_value()?),
                },
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let ty = elem.ok_or_else(|| de::Error::custom("array without elem_type"))?;
        if !done {
            let raw = values.ok_or_else(|| de::Error::custom("array without values"))?;
            self.budget.charge::<A::Error>(12)?;
            self.out.extend_from_slice(&ty.code().to_le_bytes());
            self.out.extend_from_slice(&0u64.to_le_bytes());
            let mut d = serde_json::Deserializer::from_str(raw.get());
            let n = Elems { ty, depth: self.depth + 1, out: &mut *self.out, budget: &mut *self.budget }
                .deserialize(&mut d)
                .and_then(|n| d.end().map(|()| n))
                .map_err(de::Error::custom)?;
            self.out[head + 4..head + 12].copy_from_slice(&n.to_le_bytes());
        }
        Ok(())
    }
}

/// The `values` list of an array: each element appended, the count returned.
struct Elems<'b> {
    ty: ValueType,
    depth: u32,
    out: &'b mut Vec<u8>,
    budget: &'b mut Budget,
}

impl<'de> DeserializeSeed<'de> for Elems<'_> {
    type Value = u64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Elems<'_> {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a list of {} values", self.ty.name())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        let mut n = 0u64;
        loop {
            let seed = ValueSeed { ty: self.ty, depth: self.depth, out: &mut *self.out, budget: &mut *self.budget };
            if seq.next_element_seed(seed)?.is_none() {
                return Ok(n);
            }
            n += 1;
            if n > MAX_ARRAY_LEN {
                return Err(de::Error::custom(format!("array of more than {MAX_ARRAY_LEN} elements")));
            }
        }
    }
}
