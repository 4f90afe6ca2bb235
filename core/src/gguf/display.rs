//! Metadata values for people and for JSON: in full (`inspect --json`, the browser's
//! export) or summarized like gguf-dump (`inspect`, the browser's model panel).

use super::metadata::MetaValue;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde::ser::{Serialize, SerializeSeq, Serializer};

/// Arrays longer than this are summarized by [`preview`].
pub const ARRAY_PREVIEW: usize = 8;
/// Strings longer than this are cut by [`preview`].
pub const STRING_PREVIEW: usize = 60;

/// `s` safe to print to a terminal: control characters (escape sequences, newlines,
/// carriage returns) and bidirectional overrides are written as escapes (`\u{1b}`), so a
/// hostile tensor name or key can neither move the cursor nor reorder what follows.
pub fn printable(s: &str) -> alloc::borrow::Cow<'_, str> {
    let bad = |c: char| {
        c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !s.chars().any(bad) {
        return alloc::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if bad(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    alloc::borrow::Cow::Owned(out)
}

/// A metadata value as JSON: numbers (non-finite floats as null), booleans, strings
/// (lossy UTF-8), arrays in full. It is written straight to the serializer: no tree is
/// built, so an array costs nothing per element however long it is (`inspect --json` of
/// a vocabulary, or of a million empty nested arrays).
#[derive(Debug, Clone, Copy)]
pub struct ValueJson<'a>(pub MetaValue<'a>);

impl Serialize for ValueJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            MetaValue::U8(x) => s.serialize_u8(x),
            MetaValue::I8(x) => s.serialize_i8(x),
            MetaValue::U16(x) => s.serialize_u16(x),
            MetaValue::I16(x) => s.serialize_i16(x),
            MetaValue::U32(x) => s.serialize_u32(x),
            MetaValue::I32(x) => s.serialize_i32(x),
            // As json!(f64) does: finite values as numbers, the rest as null.
            MetaValue::F32(x) => json_f64(f64::from(x), s),
            MetaValue::Bool(x) => s.serialize_bool(x),
            MetaValue::Str(b) => s.serialize_str(&String::from_utf8_lossy(b)),
            MetaValue::Array(a) => {
                let mut seq = s.serialize_seq(usize::try_from(a.len).ok())?;
                for e in a.iter() {
                    seq.serialize_element(&ValueJson(e))?;
                }
                seq.end()
            }
            MetaValue::U64(x) => s.serialize_u64(x),
            MetaValue::I64(x) => s.serialize_i64(x),
            MetaValue::F64(x) => json_f64(x, s),
        }
    }
}

fn json_f64<S: Serializer>(x: f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        s.serialize_f64(x)
    } else {
        s.serialize_unit()
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
        _ => serde_json::to_string(&ValueJson(*v)).unwrap_or_default(),
    }
}

/// A value's type as `organ inspect` lists it (like gguf-dump): gguf-py's name
/// (`UINT32`, `STRING`), an array's with its length (`[49152 STRING]`).
pub fn type_label(v: &MetaValue<'_>) -> String {
    match v {
        MetaValue::Array(a) => format!("[{} {}]", a.len, a.elem_type.name()),
        v => String::from(v.value_type().name()),
    }
}

/// The whole of a string value that [`preview`] cuts (a chat template, a license), for a
/// face that shows it on demand; `None` for a value that [`preview`] shows whole.
pub fn whole_string(v: &MetaValue<'_>) -> Option<String> {
    let MetaValue::Str(s) = *v else { return None };
    let s = String::from_utf8_lossy(s);
    (s.chars().nth(STRING_PREVIEW).is_some()).then(|| s.into_owned())
}

#[cfg(test)]
mod preview_tests {
    use super::{preview, whole_string, MetaValue, STRING_PREVIEW};

    #[test]
    fn long_strings_are_cut_and_kept_whole_on_demand() {
        let long = "{% for m in messages %}".repeat(10);
        let v = MetaValue::Str(long.as_bytes());
        assert!(preview(&v).ends_with(&alloc::format!("… ({} bytes)", long.len())), "{}", preview(&v));
        assert_eq!(whole_string(&v).as_deref(), Some(long.as_str()));
        let edge = "x".repeat(STRING_PREVIEW);
        assert_eq!(whole_string(&MetaValue::Str(edge.as_bytes())), None, "a string preview shows whole");
        assert_eq!(whole_string(&MetaValue::Str(alloc::format!("{edge}y").as_bytes())).map(|s| s.len()), Some(61));
        assert_eq!(whole_string(&MetaValue::U32(7)), None);
    }

    #[test]
    fn scalars_preview_as_json_numbers_and_literals() {
        assert_eq!(preview(&MetaValue::U32(49152)), "49152");
        assert_eq!(preview(&MetaValue::I64(-3)), "-3");
        assert_eq!(preview(&MetaValue::F32(1e-5)), "9.999999747378752e-6");
        assert_eq!(preview(&MetaValue::F64(0.5)), "0.5");
        assert_eq!(preview(&MetaValue::F32(f32::NAN)), "null");
        assert_eq!(preview(&MetaValue::Bool(true)), "true");
        assert_eq!(preview(&MetaValue::Str(b"llama")), "\"llama\"");
    }
}

#[cfg(test)]
mod printable_tests {
    use super::printable;

    #[test]
    fn control_characters_and_bidi_overrides_are_escaped() {
        assert_eq!(printable("blk.0.attn_q.weight"), "blk.0.attn_q.weight");
        assert_eq!(printable("a\x1b[2Jb\nc\rd"), "a\\u{1b}[2Jb\\nc\\rd");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(printable("θ ünïcode"), "θ ünïcode");
    }
}
