//! Metadata values for people and for JSON: in full (`inspect --json`, the browser's
//! export) or summarized like gguf-dump (`inspect`, the browser's model panel).

use super::metadata::MetaValue;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde_json::{json, Value};

/// Arrays longer than this are summarized by [`preview`].
pub const ARRAY_PREVIEW: usize = 8;
/// Strings longer than this are cut by [`preview`].
pub const STRING_PREVIEW: usize = 60;

/// A metadata value as JSON: numbers, booleans, strings (lossy UTF-8), arrays in full.
pub fn value_json(v: &MetaValue<'_>) -> Value {
    match *v {
        MetaValue::U8(x) => json!(x),
        MetaValue::I8(x) => json!(x),
        MetaValue::U16(x) => json!(x),
        MetaValue::I16(x) => json!(x),
        MetaValue::U32(x) => json!(x),
        MetaValue::I32(x) => json!(x),
        MetaValue::F32(x) => json!(f64::from(x)),
        MetaValue::Bool(x) => json!(x),
        MetaValue::Str(s) => json!(String::from_utf8_lossy(s)),
        MetaValue::Array(a) => Value::Array(a.iter().map(|e| value_json(&e)).collect()),
        MetaValue::U64(x) => json!(x),
        MetaValue::I64(x) => json!(x),
        MetaValue::F64(x) => json!(x),
    }
}

/// A value on one line: strings quoted and cut after [`STRING_PREVIEW`] characters, arrays
/// cut after [`ARRAY_PREVIEW`] items.
pub fn preview(v: &MetaValue<'_>) -> String {
    match *v {
        MetaValue::Str(s) => {
            let s = String::from_utf8_lossy(s);
            let cut: String = s.chars().take(STRING_PREVIEW).collect();
            if cut.len() < s.len() {
                format!("{cut:?}… ({} bytes)", s.len())
            } else {
                format!("{cut:?}")
            }
        }
        MetaValue::Array(a) => {
            let items: Vec<String> = a.iter().take(ARRAY_PREVIEW).map(|e| preview(&e)).collect();
            let more = if a.len > ARRAY_PREVIEW as u64 { ", …" } else { "" };
            format!("[{}{more}]", items.join(", "))
        }
        _ => value_json(v).to_string(),
    }
}
