//! `manifest.json` of an organ directory, and the lossless JSON form of GGUF metadata.
//!
//! Every metadata value keeps its GGUF type, so an organ directory assembles back to the
//! same bytes. Finite floats are JSON numbers (serde_json's `float_roundtrip` makes them
//! exact); NaN and infinities are `{"f32_bits": N}` / `{"f64_bits": N}`. Strings that are
//! not UTF-8 are `{"hex": "…"}`. Arrays are `{"elem_type": T, "values": […]}`.

use anyhow::{bail, Context, Result};
use organ_core::gguf::{MetaArray, MetaValue, ValueType};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub const FORMAT: &str = "organ-dir/1";

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Manifest {
    /// Always `organ-dir/1`.
    pub format: String,
    /// Where the tensors came from.
    pub source: Source,
    /// The GGUF version to write back.
    pub gguf_version: u32,
    /// The data alignment (also in the metadata when the source had `general.alignment`).
    pub alignment: u64,
    /// Every metadata key, in order: `{"key", "type", "value"}`.
    pub metadata: Vec<Value>,
    /// Every tensor, in order.
    pub tensors: Vec<ManifestTensor>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Source {
    pub file: String,
    pub sha256: String,
    pub bytes: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ManifestTensor {
    pub name: String,
    /// Path of the organ file, relative to the directory.
    pub file: String,
    pub group: organ_core::anatomy::Group,
    pub organ: Option<organ_core::anatomy::OrganKind>,
    pub layer: Option<u32>,
    #[serde(rename = "type")]
    pub ty: String,
    pub shape: Vec<u64>,
    /// Bytes of tensor data (the organ file is this plus its header).
    pub bytes: u64,
    /// sha256 of the whole organ file.
    pub sha256: String,
    /// θ (Z-measure v1), when dissected with `--measure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theta: Option<f64>,
}

/// A metadata value that owns its bytes (decoded from a manifest, or added by organ).
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedValue {
    Scalar(MetaValue<'static>),
    Str(Vec<u8>),
    Array { elem_type: ValueType, len: u64, raw: Vec<u8> },
}

impl OwnedValue {
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

    pub fn string(s: &str) -> OwnedValue {
        OwnedValue::Str(s.as_bytes().to_vec())
    }

    pub fn strings(items: &[String]) -> Result<OwnedValue> {
        let mut raw = Vec::new();
        MetaArray::encode_strings(items, &mut raw)?;
        Ok(OwnedValue::Array { elem_type: ValueType::String, len: items.len() as u64, raw })
    }

    /// A borrowed view, for the writer.
    pub fn view(&self) -> Result<MetaValue<'_>> {
        Ok(match self {
            OwnedValue::Scalar(v) => *v,
            OwnedValue::Str(s) => MetaValue::Str(s),
            OwnedValue::Array { elem_type, len, raw } => MetaValue::Array(MetaArray::from_raw(*elem_type, *len, raw)?),
        })
    }
}

fn encode_value(v: &MetaValue<'_>) -> Value {
    match *v {
        MetaValue::U8(x) => json!(x),
        MetaValue::I8(x) => json!(x),
        MetaValue::U16(x) => json!(x),
        MetaValue::I16(x) => json!(x),
        MetaValue::U32(x) => json!(x),
        MetaValue::I32(x) => json!(x),
        MetaValue::U64(x) => json!(x),
        MetaValue::I64(x) => json!(x),
        MetaValue::Bool(x) => json!(x),
        MetaValue::F32(x) if x.is_finite() => json!(f64::from(x)),
        MetaValue::F32(x) => json!({ "f32_bits": x.to_bits() }),
        MetaValue::F64(x) if x.is_finite() => json!(x),
        MetaValue::F64(x) => json!({ "f64_bits": x.to_bits() }),
        MetaValue::Str(s) => match std::str::from_utf8(s) {
            Ok(s) => json!(s),
            Err(_) => json!({ "hex": s.iter().map(|b| format!("{b:02x}")).collect::<String>() }),
        },
        MetaValue::Array(a) => json!({
            "elem_type": a.elem_type.name(),
            "values": a.iter().map(|e| encode_value(&e)).collect::<Vec<_>>(),
        }),
    }
}

/// One metadata entry of a manifest.
pub fn encode_kv(key: &str, v: &MetaValue<'_>) -> Value {
    json!({ "key": key, "type": v.value_type().name(), "value": encode_value(v) })
}

fn type_named(name: &str) -> Result<ValueType> {
    (0..13)
        .filter_map(ValueType::from_code)
        .find(|t| t.name() == name)
        .with_context(|| format!("unknown metadata type {name:?}"))
}

/// Appends the GGUF encoding of `v` (a value of type `ty`, without its type code).
fn encode_raw(ty: ValueType, v: &Value, out: &mut Vec<u8>) -> Result<()> {
    let int = |v: &Value| -> Result<i128> {
        v.as_i64()
            .map(i128::from)
            .or_else(|| v.as_u64().map(i128::from))
            .with_context(|| format!("{v} is not an integer"))
    };
    macro_rules! put_int {
        ($t:ty) => {{
            let x = <$t>::try_from(int(v)?).with_context(|| format!("{v} does not fit {}", ty.name()))?;
            out.extend_from_slice(&x.to_le_bytes());
        }};
    }
    match ty {
        ValueType::U8 => put_int!(u8),
        ValueType::I8 => put_int!(i8),
        ValueType::U16 => put_int!(u16),
        ValueType::I16 => put_int!(i16),
        ValueType::U32 => put_int!(u32),
        ValueType::I32 => put_int!(i32),
        ValueType::U64 => put_int!(u64),
        ValueType::I64 => put_int!(i64),
        ValueType::Bool => out.push(u8::from(v.as_bool().with_context(|| format!("{v} is not a bool"))?)),
        ValueType::F32 => {
            let bits = match v.get("f32_bits") {
                Some(b) => u32::try_from(int(b)?)?,
                None => (v.as_f64().with_context(|| format!("{v} is not a number"))? as f32).to_bits(),
            };
            out.extend_from_slice(&bits.to_le_bytes());
        }
        ValueType::F64 => {
            let bits = match v.get("f64_bits") {
                Some(b) => u64::try_from(int(b)?)?,
                None => v.as_f64().with_context(|| format!("{v} is not a number"))?.to_bits(),
            };
            out.extend_from_slice(&bits.to_le_bytes());
        }
        ValueType::String => {
            let bytes = match (v.as_str(), v.get("hex").and_then(Value::as_str)) {
                (Some(s), _) => s.as_bytes().to_vec(),
                (None, Some(h)) => decode_hex(h)?,
                _ => bail!("{v} is not a string"),
            };
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(&bytes);
        }
        ValueType::Array => {
            let (elem, values) = array_parts(v)?;
            out.extend_from_slice(&elem.code().to_le_bytes());
            out.extend_from_slice(&(values.len() as u64).to_le_bytes());
            for e in values {
                encode_raw(elem, e, out)?;
            }
        }
    }
    Ok(())
}

fn array_parts(v: &Value) -> Result<(ValueType, &Vec<Value>)> {
    let elem = type_named(v.get("elem_type").and_then(Value::as_str).context("array without elem_type")?)?;
    let values = v.get("values").and_then(Value::as_array).context("array without values")?;
    Ok((elem, values))
}

fn decode_hex(h: &str) -> Result<Vec<u8>> {
    if h.len() % 2 != 0 {
        bail!("odd-length hex string");
    }
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).context("bad hex string")).collect()
}

/// Decodes one manifest metadata entry into its key and value.
pub fn decode_kv(entry: &Value) -> Result<(String, OwnedValue)> {
    let key = entry.get("key").and_then(Value::as_str).context("metadata entry without key")?.to_owned();
    let ty = type_named(entry.get("type").and_then(Value::as_str).with_context(|| format!("{key}: no type"))?)?;
    let v = entry.get("value").with_context(|| format!("{key}: no value"))?;
    let mut raw = Vec::new();
    encode_raw(ty, v, &mut raw).with_context(|| format!("metadata key {key:?}"))?;
    let value = MetaValue::decode(ty, &raw).with_context(|| format!("metadata key {key:?}"))?;
    Ok((key, OwnedValue::from_meta(&value)))
}
