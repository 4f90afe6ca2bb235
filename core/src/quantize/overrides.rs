//! `--override-kv` and `--prune-layers` as llama-quantize takes them (common/common.cpp
//! `string_parse_kv_override`, tools/quantize/quantize.cpp `parse_layer_prune`,
//! src/llama-quant.cpp `remap_layer`): a key set in the output's header (and read by the
//! mix's rules, as the model loader reads it), and layers removed with the ones after
//! them renumbered.

use crate::error::{Error, Result};
use crate::gguf::MetaValue;
use crate::model::OwnedValue;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// The longest key and string value llama-quantize takes (a 128-byte buffer).
const MAX_LEN: usize = 127;

/// One `KEY=TYPE:VALUE`, as the value llama-quantize writes (`gguf_set_val_*`): `int:` an
/// unsigned 32-bit integer of the value's magnitude (llama.cpp #14182), `float:` a 32-bit
/// float, `bool:` `true` or `false`, `str:` at most 127 bytes.
///
/// Numbers are read as C's `atol`/`atof` read them: the longest number at the start, 0
/// when there is none (`int:12abc` is 12, `int:x` is 0).
///
/// # Errors
/// [`Error::Quantize`] naming the text: no `=`, an empty key or one over 127 bytes (an
/// empty key would end llama-quantize's list of overrides, silently dropping the rest), an
/// unknown type, a boolean other than `true`/`false`, a string over 127 bytes.
pub fn parse_override(text: &str) -> Result<(String, OwnedValue)> {
    let bad = |why: &str| Error::Quantize { reason: format!("KV override {text:?}: {why}") };
    let (key, typed) = text.split_once('=').ok_or_else(|| bad("expected KEY=TYPE:VALUE"))?;
    if key.is_empty() || key.len() > MAX_LEN {
        return Err(bad("the key must be 1 to 127 bytes"));
    }
    let value = if let Some(v) = typed.strip_prefix("int:") {
        // (uint32_t)std::abs(val_i64): the magnitude, modulo 2³².
        MetaValue::U32(atol(v).unsigned_abs() as u32)
    } else if let Some(v) = typed.strip_prefix("float:") {
        MetaValue::F32(atof(v) as f32)
    } else if let Some(v) = typed.strip_prefix("bool:") {
        match v {
            "true" => MetaValue::Bool(true),
            "false" => MetaValue::Bool(false),
            _ => return Err(bad("a boolean is true or false")),
        }
    } else if let Some(v) = typed.strip_prefix("str:") {
        if v.len() > MAX_LEN {
            return Err(bad("a string value cannot exceed 127 bytes"));
        }
        return Ok((key.to_string(), OwnedValue::Str(v.as_bytes().to_vec().into())));
    } else {
        return Err(bad("the type is one of int, float, bool, str"));
    };
    Ok((key.to_string(), OwnedValue::Scalar(value)))
}

/// C's leading white space (`isspace`).
fn skip_space(s: &str) -> &str {
    s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c'])
}

/// The integer C's `strtol` (and so `atol`, `sscanf`'s `%d`) reads at the start of `s`:
/// white space, an optional sign, decimal digits (saturating where C's is undefined);
/// `None` without digits.
pub(crate) fn leading_int(s: &str) -> Option<i64> {
    let s = skip_space(s);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut n: Option<i64> = None;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(i64::from(b - b'0')));
    }
    n.map(|n| if neg { n.saturating_neg() } else { n })
}

/// `atol`: [`leading_int`], 0 without digits.
fn atol(s: &str) -> i64 {
    leading_int(s).unwrap_or(0)
}

/// `atof` for decimal numbers and `inf`/`infinity`/`nan` (hexadecimal floats read as 0x…
/// are not: the `0`): the longest prefix that is a number, 0 without one.
fn atof(s: &str) -> f64 {
    let s = skip_space(s);
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let sign = if b.first() == Some(&b'-') { -1.0 } else { 1.0 };
    let rest = s[i..].to_ascii_lowercase();
    if rest.starts_with("inf") {
        return sign * f64::INFINITY;
    }
    if rest.starts_with("nan") {
        return f64::NAN;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut n = digits(&mut i);
    if b.get(i) == Some(&b'.') {
        i += 1;
        n += digits(&mut i);
    }
    if n == 0 {
        return 0.0;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1 + usize::from(matches!(b.get(i + 1), Some(b'+' | b'-')));
        if digits(&mut j) > 0 {
            i = j;
        }
    }
    s[..i].parse().unwrap_or(0.0)
}

/// `--prune-layers`' list: comma-separated layer numbers (each `std::stoi`'s, so a
/// leading number with anything after it counts), sorted, each once.
///
/// # Errors
/// [`Error::Quantize`] naming the item that is not a layer number.
pub fn parse_prune(text: &str) -> Result<Vec<u32>> {
    let mut layers = Vec::new();
    for item in text.split(',') {
        let t = skip_space(item);
        let digits = t.strip_prefix('+').unwrap_or(t);
        let end = digits.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
        let n = digits[..end].parse::<u32>().ok().filter(|&n| n <= i32::MAX as u32);
        layers.push(n.ok_or_else(|| Error::Quantize { reason: format!("invalid layer id {item:?}") })?);
    }
    layers.sort_unstable();
    layers.dedup();
    Ok(layers)
}

/// The first `blk.N.` in `name` (`std::regex_search` of `blk\.(\d+)\.`): where N's digits
/// are, and N.
fn block_number(name: &str) -> Option<(core::ops::Range<usize>, u64)> {
    let mut from = 0;
    while let Some(at) = name[from..].find("blk.") {
        let start = from + at + 4;
        let len = name[start..].bytes().take_while(u8::is_ascii_digit).count();
        if len > 0 && name.as_bytes().get(start + len) == Some(&b'.') {
            let n = name[start..start + len].parse().unwrap_or(u64::MAX);
            return Some((start..start + len, n));
        }
        from = from + at + 1;
    }
    None
}

/// `remap_layer` over a model's tensors in the order written: the layers of `prune`
/// dropped, those after the first pruned renumbered in order.
#[derive(Debug, Default)]
pub struct Renumber {
    mapped: BTreeMap<u64, Option<u64>>,
    next: u64,
}

impl Renumber {
    /// `name` in the output (`None`: pruned). Called in the order tensors are written.
    pub fn name(&mut self, name: &str, prune: &[u32]) -> Option<String> {
        let Some(first) = prune.first() else { return Some(name.to_string()) };
        let Some((digits, blk)) = block_number(name) else { return Some(name.to_string()) };
        let next = &mut self.next;
        let new = (*self.mapped.entry(blk).or_insert_with(|| {
            if prune.iter().any(|&p| u64::from(p) == blk) {
                None
            } else if blk < u64::from(*first) {
                *next = blk + 1;
                Some(blk)
            } else {
                *next += 1;
                Some(*next - 1)
            }
        }))?;
        let mut out = String::with_capacity(name.len());
        out.push_str(&name[..digits.start]);
        out.push_str(&format!("{new}"));
        out.push_str(&name[digits.end..]);
        Some(out)
    }

    /// The layer count written (`block_count`): one past the last layer numbered.
    pub fn block_count(&self) -> u64 {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_are_read_as_llama_quantize_reads_them() {
        let v = |t: &str| parse_override(t).unwrap().1;
        assert_eq!(v("a=int:-7"), OwnedValue::Scalar(MetaValue::U32(7)));
        assert_eq!(v("a=int:12abc"), OwnedValue::Scalar(MetaValue::U32(12)));
        assert_eq!(v("a=int:x"), OwnedValue::Scalar(MetaValue::U32(0)));
        assert_eq!(v("a=int:4294967297"), OwnedValue::Scalar(MetaValue::U32(1)));
        assert_eq!(v("a=float: 2.5e1x"), OwnedValue::Scalar(MetaValue::F32(25.0)));
        assert_eq!(v("a=float:1e"), OwnedValue::Scalar(MetaValue::F32(1.0)));
        assert_eq!(v("a=float:-.5"), OwnedValue::Scalar(MetaValue::F32(-0.5)));
        assert_eq!(v("a=bool:true"), OwnedValue::Scalar(MetaValue::Bool(true)));
        assert_eq!(v("general.url=str:http://x.org:8080"), OwnedValue::Str(b"http://x.org:8080".to_vec().into()));
        for bad in ["a", "=int:1", "a=bool:yes", "a=u8:1", &format!("a=str:{}", "x".repeat(128))] {
            assert!(parse_override(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn prune_lists_and_renumbering_follow_remap_layer() {
        assert_eq!(parse_prune("5, 3,5,+2x").unwrap(), [2, 3, 5]);
        assert!(parse_prune("1,-1").is_err() && parse_prune("").is_err());
        let mut r = Renumber::default();
        let prune = [1, 3];
        let names = ["blk.0.a", "blk.1.a", "blk.2.a", "blk.2.b", "blk.3.a", "blk.4.a", "output", "x.blk.7y.blk.4.z"];
        let got: Vec<Option<String>> = names.iter().map(|n| r.name(n, &prune)).collect();
        let want = [Some("blk.0.a"), None, Some("blk.1.a"), Some("blk.1.b"), None, Some("blk.2.a"), Some("output")];
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g.as_deref(), w);
        }
        assert_eq!(got[7].as_deref(), Some("x.blk.7y.blk.2.z"));
        assert_eq!(r.block_count(), 3);
    }
}
