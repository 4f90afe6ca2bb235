//! Values as text (`organ meta --set`): a type's name ([`Ty::parse`]), a `KEY=VALUE[:TYPE]`
//! spec ([`parse_set`]), the value its text makes ([`parse_value`]) and the text a value
//! reads back from ([`value_text`]).

use crate::error::{Error, Result};
use crate::gguf::metadata::encode_value;
use crate::gguf::{MetaValue, ValueType};
use crate::limits::{MAX_ARRAY_LEN, MAX_DEPTH};
use crate::model::OwnedValue;
use alloc::borrow::ToOwned;
use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// A value's type as a user names it: a scalar or string type, or an array of a type
/// (`None`: the elements' type is inferred from the JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    /// A scalar or a string.
    Scalar(ValueType),
    /// An array.
    Array(Option<Box<Ty>>),
}

/// The names a scalar type goes by: organ's short one, then gguf-py's.
const SCALAR_NAMES: [(&str, &str, ValueType); 12] = [
    ("u8", "uint8", ValueType::U8),
    ("i8", "int8", ValueType::I8),
    ("u16", "uint16", ValueType::U16),
    ("i16", "int16", ValueType::I16),
    ("u32", "uint32", ValueType::U32),
    ("i32", "int32", ValueType::I32),
    ("u64", "uint64", ValueType::U64),
    ("i64", "int64", ValueType::I64),
    ("f32", "float32", ValueType::F32),
    ("f64", "float64", ValueType::F64),
    ("bool", "bool", ValueType::Bool),
    ("str", "string", ValueType::String),
];

/// The type names, for errors.
pub const TYPE_NAMES: &str =
    "u8, i8, u16, i16, u32, i32, u64, i64, f32, f64, bool, str (or gguf-py's uint32, float32, \
                              string…), arr[TYPE] or arr";

impl Ty {
    /// Parses a type name: `u8` … `f64`, `bool`, `str` (or gguf-py's `UINT8` … `STRING`,
    /// any case), `arr[TYPE]`, or `arr` (elements inferred).
    ///
    /// # Errors
    /// [`Error::BadEdit`] naming the unknown type.
    pub fn parse(name: &str) -> Result<Ty> {
        Self::parse_at(name, 0)
    }

    fn parse_at(name: &str, depth: u32) -> Result<Ty> {
        let lower = name.to_ascii_lowercase();
        if let Some(&(_, _, t)) = SCALAR_NAMES.iter().find(|(s, l, _)| lower == *s || lower == *l) {
            return Ok(Ty::Scalar(t));
        }
        if lower == "arr" || lower == "array" {
            return Ok(Ty::Array(None));
        }
        let inner =
            lower.strip_prefix("arr[").or_else(|| lower.strip_prefix("array[")).and_then(|s| s.strip_suffix(']'));
        match inner {
            Some(inner) if depth + 1 < MAX_DEPTH => Ok(Ty::Array(Some(Box::new(Self::parse_at(inner, depth + 1)?)))),
            _ => Err(Error::BadEdit {
                key: String::new(),
                reason: format!("unknown type {name:?}; types: {TYPE_NAMES}"),
            }),
        }
    }

    /// The type of an existing value (arrays of arrays with their elements inferred).
    pub fn of(v: &MetaValue<'_>) -> Ty {
        match v {
            MetaValue::Array(a) if a.elem_type == ValueType::Array => Ty::Array(None),
            MetaValue::Array(a) => Ty::Array(Some(Box::new(Ty::Scalar(a.elem_type)))),
            v => Ty::Scalar(v.value_type()),
        }
    }
}

/// Splits `KEY=VALUE[:TYPE]` (a `--set`): the key up to the first `=`, and a type when
/// what follows the last `:` is a type's name ([`Ty::parse`]); anything else after a `:` is
/// part of the value (`--set general.url=http://x.org:8080`). A value that itself ends in
/// `:` and a type's name is given its type explicitly (`--set k=a:str:str`).
///
/// # Errors
/// [`Error::BadEdit`]: no `=`.
pub fn parse_set(spec: &str) -> Result<(&str, &str, Option<Ty>)> {
    let Some((key, rest)) = spec.split_once('=') else {
        return Err(Error::BadEdit {
            key: spec.chars().take(80).collect(),
            reason: "expected KEY=VALUE[:TYPE]".into(),
        });
    };
    match rest.rsplit_once(':').and_then(|(value, ty)| Some((value, Ty::parse(ty).ok()?))) {
        Some((value, ty)) => Ok((key, value, Some(ty))),
        None => Ok((key, rest, None)),
    }
}

/// Splits `KEY=VALUE:TYPE` (a `--set-typed`): as [`parse_set`], but what follows the last
/// `:` must be a type's name, and is an error naming it when it is not.
///
/// # Errors
/// [`Error::BadEdit`]: no `=`, no `:`, or an unknown type name.
pub fn parse_set_typed(spec: &str) -> Result<(&str, &str, Ty)> {
    let bad = |key: &str, reason: String| Error::BadEdit { key: key.chars().take(80).collect(), reason };
    let Some((key, rest)) = spec.split_once('=') else {
        return Err(bad(spec, "expected KEY=VALUE:TYPE".into()));
    };
    let Some((value, ty)) = rest.rsplit_once(':') else {
        return Err(bad(key, "expected VALUE:TYPE: --set-typed names the value's type last".into()));
    };
    let ty = Ty::parse(ty).map_err(|e| match e {
        Error::BadEdit { reason, .. } => bad(key, reason),
        e => e,
    })?;
    Ok((key, value, ty))
}

/// The value `text` means for `key`, typed by `ty`, else by `current` (the key's value
/// now), else inferred: a JSON array (`[` first) of strings, bools, or numbers (u32 when
/// every one fits, then i32, i64, u64, f32 when any has a fraction); `true` or `false` a
/// bool; an integer u32 when it fits, else i32, i64, u64; a number with a fraction or
/// exponent f32; anything else a string.
///
/// # Errors
/// [`Error::BadEdit`] naming the key: a number out of its type's range, malformed JSON,
/// an array whose elements' type cannot be inferred (empty, mixed).
pub fn parse_value(key: &str, text: &str, ty: Option<&Ty>, current: Option<&MetaValue<'_>>) -> Result<OwnedValue> {
    let bad = |reason: String| Error::BadEdit { key: key.to_owned(), reason };
    let ty = match (ty, current) {
        (Some(t), _) => t.clone(),
        (None, Some(v)) => Ty::of(v),
        (None, None) => infer(text),
    };
    match ty {
        Ty::Scalar(ValueType::String) => Ok(OwnedValue::Str(text.as_bytes().to_vec().into())),
        Ty::Scalar(t) => Ok(OwnedValue::Scalar(scalar(t, text).map_err(|e| bad(e.to_string()))?)),
        Ty::Array(elem) => {
            let json: serde_json::Value =
                serde_json::from_str(text).map_err(|e| bad(format!("{text:.80?} is not a JSON array: {e}")))?;
            let serde_json::Value::Array(items) = json else {
                return Err(bad(format!("{text:.80?} is not a JSON array")));
            };
            array(elem.as_deref(), &items, 0).map_err(|e| bad(e.to_string()))
        }
    }
}

/// The text [`parse_value`] reads back to `v` when the key keeps its type (an editor's
/// starting text): a string as it is, a scalar as Rust prints it (the shortest text of a
/// float that reads back to it), an array as JSON. `None` when no text reads back to the
/// same bytes: a string that is not UTF-8, an array holding one, or a non-finite float
/// in an array (JSON has no NaN).
pub fn value_text(v: &MetaValue<'_>) -> Option<String> {
    Some(match *v {
        MetaValue::Str(b) => core::str::from_utf8(b).ok()?.to_owned(),
        MetaValue::Array(_) => {
            let text = serde_json::to_string(&crate::gguf::display::ValueJson(*v)).ok()?;
            // What the JSON could not keep (lossy UTF-8, null for NaN) shows as a change.
            let back = parse_value("", &text, Some(&Ty::of(v)), None).ok()?;
            (back == OwnedValue::from_meta(v)).then_some(text)?
        }
        MetaValue::U8(x) => x.to_string(),
        MetaValue::I8(x) => x.to_string(),
        MetaValue::U16(x) => x.to_string(),
        MetaValue::I16(x) => x.to_string(),
        MetaValue::U32(x) => x.to_string(),
        MetaValue::I32(x) => x.to_string(),
        MetaValue::U64(x) => x.to_string(),
        MetaValue::I64(x) => x.to_string(),
        MetaValue::F32(x) => x.to_string(),
        MetaValue::F64(x) => x.to_string(),
        MetaValue::Bool(x) => x.to_string(),
    })
}

/// The type an untyped text is taken for (see [`parse_value`]).
fn infer(text: &str) -> Ty {
    if text.starts_with('[') {
        return Ty::Array(None);
    }
    if text == "true" || text == "false" {
        return Ty::Scalar(ValueType::Bool);
    }
    for t in [ValueType::U32, ValueType::I32, ValueType::I64, ValueType::U64] {
        if scalar(t, text).is_ok() {
            return Ty::Scalar(t);
        }
    }
    let numeric = text.bytes().any(|b| b.is_ascii_digit())
        && text.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'));
    if numeric && text.parse::<f32>().is_ok() {
        return Ty::Scalar(ValueType::F32);
    }
    Ty::Scalar(ValueType::String)
}

/// Why a value's text makes no value of its type: the reason of an [`Error::BadEdit`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ValueError {
    /// A scalar's text out of its type's range, or not a number of it.
    #[error("{text:.80?} is not a {what}")]
    NotA {
        /// The text.
        text: String,
        /// The type, with its range where it is short to say.
        what: &'static str,
    },
    /// A type that is not a scalar's.
    #[error("{0:?} is not a scalar type")]
    NotScalar(ValueType),
    /// An array longer than organ reads (its length).
    #[error("an array of {0} elements, more than the {MAX_ARRAY_LEN} organ reads")]
    TooLong(usize),
    /// An untyped empty array.
    #[error("an empty array has no type to infer; give it one, as in []:arr[u32]")]
    Empty,
    /// An untyped array of elements of more than one kind (the first).
    #[error("elements of more than one kind (the first is {0:.40}); give the array its type, as in :arr[f32]")]
    Mixed(serde_json::Value),
    /// An element of another kind than the array's type.
    #[error("{value:.40} is not a {}", ty_text(.ty))]
    Kind {
        /// The element.
        value: serde_json::Value,
        /// The array's element type.
        ty: Ty,
    },
    /// Arrays nested deeper than organ reads.
    #[error("arrays nested more than {MAX_DEPTH} deep")]
    TooDeep,
    /// An array element that does not encode.
    #[error("{0}")]
    Encode(Error),
    /// What is wrong with element `index`.
    #[error("element {index}: {inner}")]
    Element {
        /// The element's index.
        index: usize,
        /// What is wrong with it.
        inner: Box<ValueError>,
    },
}

/// One scalar of type `t` from its text.
fn scalar(t: ValueType, text: &str) -> Result<MetaValue<'static>, ValueError> {
    let range = |what: &'static str| ValueError::NotA { text: text.into(), what };
    Ok(match t {
        ValueType::U8 => MetaValue::U8(text.parse().map_err(|_| range("u8 (0 to 255)"))?),
        ValueType::I8 => MetaValue::I8(text.parse().map_err(|_| range("i8 (-128 to 127)"))?),
        ValueType::U16 => MetaValue::U16(text.parse().map_err(|_| range("u16 (0 to 65535)"))?),
        ValueType::I16 => MetaValue::I16(text.parse().map_err(|_| range("i16 (-32768 to 32767)"))?),
        ValueType::U32 => MetaValue::U32(text.parse().map_err(|_| range("u32 (0 to 4294967295)"))?),
        ValueType::I32 => MetaValue::I32(text.parse().map_err(|_| range("i32"))?),
        ValueType::U64 => MetaValue::U64(text.parse().map_err(|_| range("u64"))?),
        ValueType::I64 => MetaValue::I64(text.parse().map_err(|_| range("i64"))?),
        ValueType::F32 => MetaValue::F32(text.parse().map_err(|_| range("f32 number"))?),
        ValueType::F64 => MetaValue::F64(text.parse().map_err(|_| range("f64 number"))?),
        ValueType::Bool => match text {
            "true" => MetaValue::Bool(true),
            "false" => MetaValue::Bool(false),
            _ => return Err(range("bool (true or false)")),
        },
        ValueType::String | ValueType::Array => return Err(ValueError::NotScalar(t)),
    })
}

/// A GGUF array of `items`, its elements of type `elem` (inferred when `None`).
fn array(elem: Option<&Ty>, items: &[serde_json::Value], depth: u32) -> Result<OwnedValue, ValueError> {
    if items.len() as u64 > MAX_ARRAY_LEN {
        return Err(ValueError::TooLong(items.len()));
    }
    let elem = match elem {
        Some(t) => t.clone(),
        None => infer_elements(items)?,
    };
    let mut raw = Vec::new();
    let elem_type = match &elem {
        Ty::Scalar(t) => *t,
        Ty::Array(_) => ValueType::Array,
    };
    for (i, item) in items.iter().enumerate() {
        let at = |e: ValueError| ValueError::Element { index: i, inner: Box::new(e) };
        match (&elem, item) {
            (Ty::Scalar(ValueType::String), serde_json::Value::String(s)) => {
                raw.extend_from_slice(&(s.len() as u64).to_le_bytes());
                raw.extend_from_slice(s.as_bytes());
            }
            (Ty::Scalar(ValueType::Bool), serde_json::Value::Bool(b)) => raw.push(u8::from(*b)),
            (Ty::Scalar(t), serde_json::Value::Number(n)) if *t != ValueType::String && *t != ValueType::Bool => {
                encode_value(&scalar(*t, &n.to_string()).map_err(at)?, &mut raw);
            }
            (Ty::Array(inner), serde_json::Value::Array(sub)) => {
                if depth + 2 >= MAX_DEPTH {
                    return Err(at(ValueError::TooDeep));
                }
                let v = array(inner.as_deref(), sub, depth + 1).map_err(at)?;
                encode_value(&v.view().map_err(|e| at(ValueError::Encode(e)))?, &mut raw);
            }
            (t, v) => return Err(at(ValueError::Kind { value: v.clone(), ty: t.clone() })),
        }
    }
    Ok(OwnedValue::Array { elem_type, len: items.len() as u64, raw: raw.into() })
}

/// The elements' type of an untyped JSON array: every element of one kind.
fn infer_elements(items: &[serde_json::Value]) -> Result<Ty, ValueError> {
    use serde_json::Value as J;
    let Some(first) = items.first() else {
        return Err(ValueError::Empty);
    };
    let same = |f: fn(&J) -> bool| items.iter().all(f);
    if same(|v| v.is_string()) {
        return Ok(Ty::Scalar(ValueType::String));
    }
    if same(|v| v.is_boolean()) {
        return Ok(Ty::Scalar(ValueType::Bool));
    }
    if same(|v| v.is_array()) {
        return Ok(Ty::Array(None));
    }
    if same(|v| v.is_number()) {
        for t in [ValueType::U32, ValueType::I32, ValueType::I64, ValueType::U64, ValueType::F32] {
            if items.iter().all(|v| scalar(t, &v.to_string()).is_ok()) {
                return Ok(Ty::Scalar(t));
            }
        }
    }
    Err(ValueError::Mixed(first.clone()))
}

fn ty_text(t: &Ty) -> String {
    match t {
        Ty::Scalar(v) => v.name().to_ascii_lowercase(),
        Ty::Array(_) => "array".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::MetaArray;

    #[test]
    fn value_text_reads_back_to_the_same_value() {
        let mut raw = Vec::new();
        MetaArray::encode_strings(&["a", "b\"c", "é"], &mut raw).unwrap();
        let f32s: Vec<u8> = [0.1f32, -2.5e-7, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let values = [
            MetaValue::Str(b"{% for m in messages %}\n{{ m }}"),
            MetaValue::U32(49152),
            MetaValue::I64(-5),
            MetaValue::F32(1e-5),
            MetaValue::F64(0.1),
            MetaValue::Bool(true),
            MetaValue::U8(255),
            MetaValue::Array(MetaArray::from_raw(ValueType::String, 3, &raw).unwrap()),
            MetaValue::Array(MetaArray::from_raw(ValueType::F32, 3, &f32s).unwrap()),
        ];
        for v in &values {
            let text = value_text(v).unwrap_or_else(|| panic!("{v:?} has a text"));
            let back = parse_value("k", &text, None, Some(v)).unwrap();
            assert_eq!(back, OwnedValue::from_meta(v), "{v:?} as {text:?}");
        }
        assert_eq!(value_text(&MetaValue::Str(b"\xff")), None, "not UTF-8");
        let nan: Vec<u8> = [1.0f32, f32::NAN].iter().flat_map(|x| x.to_le_bytes()).collect();
        let nan = MetaValue::Array(MetaArray::from_raw(ValueType::F32, 2, &nan).unwrap());
        assert_eq!(value_text(&nan), None, "JSON has no NaN");
        assert_eq!(value_text(&MetaValue::F32(f32::NAN)).as_deref(), Some("NaN"), "a scalar NaN reads back");
    }

    #[test]
    fn values_of_every_type() {
        let v = |text: &str, ty: &str| parse_value("k", text, Some(&Ty::parse(ty).unwrap()), None);
        assert_eq!(v("255", "u8").unwrap(), OwnedValue::Scalar(MetaValue::U8(255)));
        assert!(v("256", "u8").is_err());
        assert_eq!(v("-128", "i8").unwrap(), OwnedValue::Scalar(MetaValue::I8(-128)));
        assert_eq!(v("65535", "UINT16").unwrap(), OwnedValue::Scalar(MetaValue::U16(65535)));
        assert_eq!(v("-2", "i16").unwrap(), OwnedValue::Scalar(MetaValue::I16(-2)));
        assert_eq!(v("7", "u32").unwrap(), OwnedValue::Scalar(MetaValue::U32(7)));
        assert_eq!(v("-7", "int32").unwrap(), OwnedValue::Scalar(MetaValue::I32(-7)));
        assert_eq!(v("18446744073709551615", "u64").unwrap(), OwnedValue::Scalar(MetaValue::U64(u64::MAX)));
        assert_eq!(v("-1", "i64").unwrap(), OwnedValue::Scalar(MetaValue::I64(-1)));
        assert_eq!(v("0.5", "f32").unwrap(), OwnedValue::Scalar(MetaValue::F32(0.5)));
        assert_eq!(v("1e300", "f64").unwrap(), OwnedValue::Scalar(MetaValue::F64(1e300)));
        assert_eq!(v("true", "bool").unwrap(), OwnedValue::Scalar(MetaValue::Bool(true)));
        assert!(v("yes", "bool").is_err());
        assert_eq!(v("12", "str").unwrap(), OwnedValue::string("12"));
        let arr = v("[[1, 2], []]", "arr[arr[i16]]").unwrap();
        let MetaValue::Array(a) = arr.view().unwrap() else { panic!() };
        let inner: Vec<_> = a.iter().collect();
        assert_eq!((a.elem_type, inner.len()), (ValueType::Array, 2));
        let MetaValue::Array(first) = inner[0] else { panic!() };
        assert_eq!(first.iter().collect::<Vec<_>>(), [MetaValue::I16(1), MetaValue::I16(2)]);
        assert!(v("[1, 2", "arr[u8]").unwrap_err().to_string().contains("not a JSON array"));
        assert!(v("[300]", "arr[u8]").unwrap_err().to_string().contains("element 0"));
        assert!(v("[\"a\"]", "arr[u32]").is_err());
    }

    #[test]
    fn untyped_values_take_the_current_type_or_are_inferred() {
        let cur = MetaValue::U64(3);
        assert_eq!(parse_value("k", "9", None, Some(&cur)).unwrap(), OwnedValue::Scalar(MetaValue::U64(9)));
        let i = |t: &str| parse_value("k", t, None, None).unwrap();
        assert_eq!(i("9"), OwnedValue::Scalar(MetaValue::U32(9)));
        assert_eq!(i("-9"), OwnedValue::Scalar(MetaValue::I32(-9)));
        assert_eq!(i("1.5"), OwnedValue::Scalar(MetaValue::F32(1.5)));
        assert_eq!(i("false"), OwnedValue::Scalar(MetaValue::Bool(false)));
        assert_eq!(i("inf"), OwnedValue::string("inf"));
        assert_eq!(i("hello"), OwnedValue::string("hello"));
        let elem = |v: OwnedValue| match v {
            OwnedValue::Array { elem_type, .. } => elem_type,
            v => panic!("{v:?}"),
        };
        assert_eq!(elem(i("[\"x\", \"y\"]")), ValueType::String);
        assert_eq!(elem(i("[1, -1]")), ValueType::I32);
        assert_eq!(elem(i("[1, 0.5]")), ValueType::F32);
        assert!(parse_value("k", "[]", None, None).unwrap_err().to_string().contains("no type to infer"));
        assert!(parse_value("k", "[1, \"a\"]", None, None).unwrap_err().to_string().contains("more than one kind"));
    }

    #[test]
    fn set_specs_split_at_the_last_colon_when_a_type_follows() {
        assert_eq!(parse_set("a=b").unwrap(), ("a", "b", None));
        assert_eq!(parse_set("a=1:u8").unwrap(), ("a", "1", Some(Ty::Scalar(ValueType::U8))));
        assert_eq!(parse_set("a=x=y:z:str").unwrap(), ("a", "x=y:z", Some(Ty::Scalar(ValueType::String))));
        assert_eq!(parse_set("a=[1]:arr[u8]").unwrap().2, Some(Ty::Array(Some(Box::new(Ty::Scalar(ValueType::U8))))));
        assert_eq!(parse_set("a=http://x/").unwrap(), ("a", "http://x/", None));
        // Only a type's name after the last ':' is a type (issue 50): a port, a typo, a
        // time of day are the value's.
        assert_eq!(parse_set("a=http://x.org:8080").unwrap(), ("a", "http://x.org:8080", None));
        assert_eq!(parse_set("a=1:u33").unwrap(), ("a", "1:u33", None));
        assert_eq!(parse_set("a=12:30").unwrap(), ("a", "12:30", None));
        assert_eq!(parse_set("a=[1]:arr[q4]").unwrap(), ("a", "[1]:arr[q4]", None));
        assert_eq!(parse_set("a=b:STRING").unwrap(), ("a", "b", Some(Ty::Scalar(ValueType::String))));
        assert_eq!(parse_set("a=x:str:str").unwrap(), ("a", "x:str", Some(Ty::Scalar(ValueType::String))));
        assert!(parse_set("novalue").unwrap_err().to_string().contains("KEY=VALUE"));
        // --set-typed: the type is required, and a typo in it is an error.
        assert_eq!(parse_set_typed("a=x:y:str").unwrap(), ("a", "x:y", Ty::Scalar(ValueType::String)));
        let e = parse_set_typed("a=1:u33").unwrap_err().to_string();
        assert!(e.contains("\"a\"") && e.contains("unknown type \"u33\""), "{e}");
        assert!(parse_set_typed("a=1").unwrap_err().to_string().contains("VALUE:TYPE"));
    }
}
