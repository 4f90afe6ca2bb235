//! The metadata of A and B, key by key: an addition beside Compare v1 (`docs/compare.md`
//! compares tensors only), so that a removed license or a new chat template is a change.
//!
//! Keys are matched by name (a key a file holds twice, by its first occurrence, as
//! [`crate::model::Model::get`] reads it). Two values are the same when they have the same
//! type and the same bytes, compared in full where they lie: a 10 MB token list is read in
//! place, never copied. A report shows each value as `organ inspect` (like gguf-dump) does:
//! its type, arrays with their length, long strings and arrays summarized, and for a
//! summarized value the BLAKE3 of its bytes, so two values whose summaries read the same
//! are told apart.
//!
//! Besides the keys, of the GGUF header's own fields only the version is compared (a file
//! of another version is a change, as gguf-dump lists it: `GGUF.version`). The tensor
//! count is each side's, and the tensors are compared one by one; the key count follows
//! from the keys; the data offset follows from the rest. `general.alignment`, when a
//! file sets it, is a key like any other. A split model's `split.*` keys are gone once its
//! shards are joined ([`crate::model::Model::from_shards`]), so a model compares the same
//! whatever its storage.

use crate::gguf::display::{preview, type_label, ARRAY_PREVIEW, STRING_PREVIEW};
use crate::gguf::{MetaValue, ValueType};
use crate::model::{Model, OwnedValue};
use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// A value as a report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueShown {
    /// Its type as `organ inspect` writes it: `UINT32`, `STRING`, `[49152 STRING]`.
    #[serde(rename = "type")]
    pub ty: String,
    /// The value on one line: strings quoted and cut after 60 characters (with their size),
    /// arrays after 8 items.
    pub value: String,
    /// For a value shown in part (a string over 60 characters, an array): the BLAKE3 of
    /// its bytes (an array's: its element type code, then its elements' GGUF bytes), hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
}

impl ValueShown {
    /// How `v` is shown.
    pub fn of(v: &OwnedValue) -> ValueShown {
        let Ok(m) = v.view() else {
            // An array whose bytes do not hold its elements (the parser refuses those; a
            // model built by hand might not).
            let (ty, len) = match v {
                OwnedValue::Array { elem_type, len, .. } => (elem_type.name(), *len),
                _ => ("?", 0),
            };
            return ValueShown { ty: format!("[{len} {ty}]"), value: "(unreadable)".to_owned(), blake3: Some(hash(v)) };
        };
        let value = match m {
            // Nested arrays are summarized by their length only: a preview of each level
            // would grow as 8 to the power of the depth.
            MetaValue::Array(a) if a.elem_type == ValueType::Array => format!("[{} arrays]", a.len),
            m => preview(&m),
        };
        let whole = match m {
            MetaValue::Str(s) => s.len() <= STRING_PREVIEW && core::str::from_utf8(s).is_ok(),
            MetaValue::Array(a) => {
                a.elem_type != ValueType::Array && a.len <= ARRAY_PREVIEW as u64 && !value.contains('…')
            }
            _ => true,
        };
        ValueShown { ty: type_label(&m), value, blake3: (!whole).then(|| hash(v)) }
    }
}

impl ValueShown {
    /// The value on one line, as every face shows it: its type, its value (summarized),
    /// and for a summarized value the start of its BLAKE3, which tells apart two that read
    /// the same (`STRING = "{% for …"… (368 bytes)  blake3 2ff3b438de276e44`). Not escaped
    /// for a terminal: the text report passes it through `printable`.
    pub fn line(&self) -> String {
        let hash = self.blake3.as_deref().map(|h| format!("  blake3 {}", h.get(..16).unwrap_or(h))).unwrap_or_default();
        format!("{} = {}{hash}", self.ty, self.value)
    }
}

/// How a key differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyDiff {
    /// Only A has it.
    Removed,
    /// Only B has it.
    Added,
    /// Both, with different values.
    Changed,
}

impl KeyDiff {
    /// Its word, for people and for `data-*` attributes.
    pub fn name(self) -> &'static str {
        match self {
            KeyDiff::Removed => "removed",
            KeyDiff::Added => "added",
            KeyDiff::Changed => "changed",
        }
    }
}

/// One row of a metadata table: the key, how it differs, A's value and B's.
pub type KeyRow<'a> = (&'a str, KeyDiff, Option<&'a ValueShown>, Option<&'a ValueShown>);

/// The BLAKE3 of a string's or an array's bytes (hex), from where they lie.
fn hash(v: &OwnedValue) -> String {
    let mut h = blake3::Hasher::new();
    match v {
        OwnedValue::Str(s) => {
            h.update(s);
        }
        OwnedValue::Array { elem_type, raw, .. } => {
            h.update(&elem_type.code().to_le_bytes());
            h.update(raw);
        }
        OwnedValue::Scalar(_) => {}
    }
    String::from(h.finalize().to_hex().as_str())
}

/// A key one side only has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyShown {
    /// The key.
    pub key: String,
    /// Its value.
    #[serde(flatten)]
    pub value: ValueShown,
}

/// A key both sides have, with different values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyChange {
    /// The key.
    pub key: String,
    /// A's value.
    pub a: ValueShown,
    /// B's value.
    pub b: ValueShown,
}

/// The metadata counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MetaCounts {
    /// Keys A has (each name once).
    pub keys_a: u64,
    /// Keys B has.
    pub keys_b: u64,
    /// Keys both have with the same type and bytes.
    pub same: u64,
    /// Keys both have with different values.
    pub changed: u64,
    /// Keys only A has (removed in B).
    pub only_in_a: u64,
    /// Keys only B has (added in B).
    pub only_in_b: u64,
    /// A's GGUF version (the header's field, not a key; gguf-dump lists it as
    /// `GGUF.version`). 0 in a report from before it was compared.
    #[serde(default)]
    pub gguf_version_a: u32,
    /// B's GGUF version.
    #[serde(default)]
    pub gguf_version_b: u32,
}

impl MetaCounts {
    /// Keys that differ in any way, and the GGUF version when it does (the header's
    /// entries that differ).
    pub fn differ(&self) -> u64 {
        self.changed + self.only_in_a + self.only_in_b + u64::from(self.versions_differ())
    }

    /// Whether the two files are of different GGUF versions.
    pub fn versions_differ(&self) -> bool {
        self.gguf_version_a != self.gguf_version_b
    }

    /// The summary line: `metadata: 3 keys changed (1 removed, 1 added, 1 changed)`, or
    /// `metadata: the same 24 keys`.
    pub fn line(&self) -> String {
        let n = self.changed + self.only_in_a + self.only_in_b;
        let version = match self.versions_differ() {
            true => format!("; GGUF version {} in A, {} in B", self.gguf_version_a, self.gguf_version_b),
            false => String::new(),
        };
        if n == 0 {
            return format!("metadata: the same {} keys{version}", self.keys_a);
        }
        let s = if n == 1 { "" } else { "s" };
        format!(
            "metadata: {n} key{s} changed ({} removed, {} added, {} changed){version}",
            self.only_in_a, self.only_in_b, self.changed
        )
    }
}

/// The metadata of A and B compared key by key.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MetaDiff {
    /// The counts.
    pub counts: MetaCounts,
    /// Keys only A has, in A's order.
    pub only_in_a: Vec<KeyShown>,
    /// Keys only B has, in B's order.
    pub only_in_b: Vec<KeyShown>,
    /// Keys whose values differ, in A's order.
    pub changed: Vec<KeyChange>,
}

impl MetaDiff {
    /// Every key that differs, as the pages' tables list them: removed, added, changed.
    pub fn rows(&self) -> impl Iterator<Item = KeyRow<'_>> {
        let removed = self.only_in_a.iter().map(|k| (k.key.as_str(), KeyDiff::Removed, Some(&k.value), None));
        let added = self.only_in_b.iter().map(|k| (k.key.as_str(), KeyDiff::Added, None, Some(&k.value)));
        let changed = self.changed.iter().map(|k| (k.key.as_str(), KeyDiff::Changed, Some(&k.a), Some(&k.b)));
        removed.chain(added).chain(changed)
    }
}

/// Each key of `m` once (its first occurrence), in order.
fn keys<T>(m: &Model<T>) -> Vec<(&str, &OwnedValue)> {
    let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
    m.kvs.iter().filter(|(k, _)| seen.insert(k.as_str(), ()).is_none()).map(|(k, v)| (k.as_str(), v)).collect()
}

/// Whether two values have the same type and bytes (a NaN equals itself: the bytes decide).
pub fn same_value(x: &OwnedValue, y: &OwnedValue) -> bool {
    match (x, y) {
        (OwnedValue::Scalar(p), OwnedValue::Scalar(q)) => scalar_bits(p) == scalar_bits(q),
        (OwnedValue::Str(p), OwnedValue::Str(q)) => **p == **q,
        (OwnedValue::Array { elem_type: t, len: n, raw: p }, OwnedValue::Array { elem_type: u, len: m, raw: q }) => {
            t == u && n == m && **p == **q
        }
        _ => false,
    }
}

/// A scalar's type and bits.
fn scalar_bits(v: &MetaValue<'_>) -> Option<(ValueType, u64)> {
    Some(match *v {
        MetaValue::U8(x) => (ValueType::U8, u64::from(x)),
        MetaValue::I8(x) => (ValueType::I8, x as u8 as u64),
        MetaValue::U16(x) => (ValueType::U16, u64::from(x)),
        MetaValue::I16(x) => (ValueType::I16, x as u16 as u64),
        MetaValue::U32(x) => (ValueType::U32, u64::from(x)),
        MetaValue::I32(x) => (ValueType::I32, x as u32 as u64),
        MetaValue::F32(x) => (ValueType::F32, u64::from(x.to_bits())),
        MetaValue::Bool(x) => (ValueType::Bool, u64::from(x)),
        MetaValue::U64(x) => (ValueType::U64, x),
        MetaValue::I64(x) => (ValueType::I64, x as u64),
        MetaValue::F64(x) => (ValueType::F64, x.to_bits()),
        MetaValue::Str(_) | MetaValue::Array(_) => return None,
    })
}

/// Compares the metadata of A and B key by key.
pub fn diff_metadata<T, U>(a: &Model<T>, b: &Model<U>) -> MetaDiff {
    let (ka, kb) = (keys(a), keys(b));
    let in_b: BTreeMap<&str, &OwnedValue> = kb.iter().copied().collect();
    let in_a: BTreeMap<&str, &OwnedValue> = ka.iter().copied().collect();
    let mut d = MetaDiff::default();
    for &(k, va) in &ka {
        match in_b.get(k) {
            None => d.only_in_a.push(KeyShown { key: k.to_owned(), value: ValueShown::of(va) }),
            Some(vb) if same_value(va, vb) => d.counts.same += 1,
            Some(vb) => d.changed.push(KeyChange { key: k.to_owned(), a: ValueShown::of(va), b: ValueShown::of(vb) }),
        }
    }
    for &(k, vb) in kb.iter().filter(|(k, _)| !in_a.contains_key(k)) {
        d.only_in_b.push(KeyShown { key: k.to_owned(), value: ValueShown::of(vb) });
    }
    d.counts.keys_a = ka.len() as u64;
    d.counts.keys_b = kb.len() as u64;
    d.counts.changed = d.changed.len() as u64;
    d.counts.only_in_a = d.only_in_a.len() as u64;
    d.counts.only_in_b = d.only_in_b.len() as u64;
    (d.counts.gguf_version_a, d.counts.gguf_version_b) = (a.version, b.version);
    d
}
