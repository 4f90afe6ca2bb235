//! `manifest.json` of an organ directory, and the lossless JSON form of GGUF metadata.
//!
//! Every metadata value keeps its GGUF type, so an organ directory assembles back to the
//! same bytes. Finite floats are JSON numbers (serde_json's `float_roundtrip` makes them
//! exact); NaN and infinities are `{"f32_bits": N}` / `{"f64_bits": N}`. Strings that are
//! not UTF-8 are `{"hex": "…"}`. Arrays are `{"elem_type": T, "values": […]}`.
//!
//! A manifest is untrusted input. Metadata is written and read as a stream, straight
//! between JSON text and GGUF bytes: no `serde_json::Value` tree is built, so an entry
//! costs what its GGUF encoding costs (12 bytes for an empty nested array, not hundreds).
//! [`parse`] enforces the caps of [`crate::limits`] (those named `MAX_MANIFEST_*` are its
//! own). Parsing is pure: the caller reads the file (and the organ files it names).

mod metadata_json;

pub use metadata_json::hex;

use super::value::OwnedValue;
use crate::error::{Error, Result};
use crate::gguf::MetaValue;
use crate::limits::{MAX_DIMS, MAX_MANIFEST_BYTES, MAX_MANIFEST_PATH_LEN, MAX_TENSOR_COUNT, MAX_TENSOR_NAME_LEN};
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// The manifest's `format`.
pub const FORMAT: &str = "organ-dir/1";

/// Parses a manifest.json's bytes with every cap checked (see the module's doc): at most
/// [`MAX_MANIFEST_BYTES`], [`crate::limits::MAX_KV_COUNT`] metadata entries (keys unique)
/// decoding to at most [`crate::limits::MAX_MANIFEST_METADATA_BYTES`], [`MAX_TENSOR_COUNT`] tensors of at
/// most [`MAX_DIMS`] dimensions, each with exactly one digest of its organ file (`blake3`, or
/// `sha256` in directories written before BLAKE3) of 64 hex digits.
///
/// # Errors
/// [`Error::BadManifest`], with the line and column where the JSON is wrong.
pub fn parse(bytes: &[u8]) -> Result<Manifest> {
    let bad = |reason: String| Error::BadManifest { reason };
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(bad(format!("{} bytes, more than the {MAX_MANIFEST_BYTES} a manifest may have", bytes.len())));
    }
    // Callers add the file's name and "not a valid manifest"; serde_json adds the line.
    let m: Manifest = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    if m.format != FORMAT {
        return Err(bad(format!("format {:?}, expected {:?}", m.format, FORMAT)));
    }
    Ok(m)
}

/// An organ directory's `manifest.json`.
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
    #[serde(deserialize_with = "metadata_json::de_metadata")]
    pub metadata: Vec<Entry>,
    /// Every tensor, in order.
    #[serde(deserialize_with = "de_tensors")]
    pub tensors: Vec<ManifestTensor>,
}

/// The file an organ directory was dissected from. Its digests cover the file's bytes
/// (every shard's bytes in order, for a split model); they are a record of identity,
/// nothing is verified against them.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Source {
    /// Its name.
    pub file: String,
    /// Its size.
    pub bytes: u64,
    /// Its BLAKE3 (absent in directories written before BLAKE3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
    /// Its sha256 (the Hub's LFS id): present only when asked for (`dissect --sha256`),
    /// and in directories written before BLAKE3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// One tensor of a manifest, held in an organ file of its own.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ManifestTensor {
    /// The tensor's name.
    pub name: String,
    /// Path of the organ file, relative to the directory.
    pub file: String,
    /// Its anatomy group.
    pub group: crate::anatomy::Group,
    /// Its organ kind, for organs.
    pub organ: Option<crate::anatomy::OrganKind>,
    /// Its layer.
    pub layer: Option<u32>,
    /// Its ggml type's name.
    #[serde(rename = "type")]
    pub ty: String,
    /// Its shape, ggml order.
    #[serde(deserialize_with = "de_shape")]
    pub shape: Vec<u64>,
    /// Bytes of tensor data (the organ file is this plus its header).
    pub bytes: u64,
    /// BLAKE3 of the whole organ file. Exactly one of `blake3` and `sha256` is present
    /// ([`ManifestTensor::digest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
    /// sha256 of the whole organ file, in directories written before BLAKE3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// θ (Z-measure v1), when dissected with `--measure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theta: Option<f64>,
}

/// The digest an organ file must have: the one its manifest entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileDigest<'a> {
    /// BLAKE3, lower- or upper-case hex (what `organ dissect` writes).
    Blake3(&'a str),
    /// sha256, hex (directories written before BLAKE3).
    Sha256(&'a str),
}

impl ManifestTensor {
    /// The organ file's recorded digest, or `None` if the entry has both or neither
    /// ([`parse`] refuses such entries).
    pub fn digest(&self) -> Option<FileDigest<'_>> {
        match (&self.blake3, &self.sha256) {
            (Some(b), None) => Some(FileDigest::Blake3(b)),
            (None, Some(s)) => Some(FileDigest::Sha256(s)),
            _ => None,
        }
    }
}

/// One metadata entry of a manifest: a key and a GGUF-typed value.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: OwnedValue,
}

/// One metadata entry of a manifest (its bytes are copied; the JSON is made only as the
/// manifest is written).
pub fn encode_kv(key: &str, v: &MetaValue<'_>) -> Entry {
    Entry { key: key.to_owned(), value: OwnedValue::from_meta(v) }
}

/// Decodes one manifest metadata entry into its key and value ([`parse`] has checked it).
///
/// # Errors
/// [`Error::BadMetadata`] if the value's bytes do not hold what its type says.
pub fn decode_kv(entry: &Entry) -> Result<(String, OwnedValue)> {
    entry.value.view().map_err(|e| Error::BadMetadata { key: entry.key.clone(), reason: e.to_string() })?;
    Ok((entry.key.clone(), entry.value.clone()))
}

/// The tensor list, with each entry's caps checked as it is read.
fn de_tensors<'de, D: Deserializer<'de>>(d: D) -> core::result::Result<Vec<ManifestTensor>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<ManifestTensor>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "a list of at most {MAX_TENSOR_COUNT} tensors")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> core::result::Result<Vec<ManifestTensor>, A::Error> {
            let mut tensors = Vec::new();
            while let Some(t) = seq.next_element::<ManifestTensor>()? {
                if tensors.len() as u64 >= MAX_TENSOR_COUNT {
                    return Err(de::Error::custom(format!("more than {MAX_TENSOR_COUNT} tensors")));
                }
                let bad = |why: String| de::Error::custom(format!("tensor {:?}: {why}", t.name));
                if t.name.len() as u64 > MAX_TENSOR_NAME_LEN {
                    return Err(bad(format!("name of {} bytes, more than {MAX_TENSOR_NAME_LEN}", t.name.len())));
                }
                if t.file.len() > MAX_MANIFEST_PATH_LEN {
                    return Err(bad(format!("file path of {} bytes, more than {MAX_MANIFEST_PATH_LEN}", t.file.len())));
                }
                let (kind, digest) = match t.digest() {
                    Some(FileDigest::Blake3(d)) => ("blake3", d),
                    Some(FileDigest::Sha256(d)) => ("sha256", d),
                    None if t.blake3.is_some() => return Err(bad("both blake3 and sha256; expected one".into())),
                    None => return Err(bad("no blake3 (or sha256) of its organ file".into())),
                };
                if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad(format!("{kind} {digest:?} is not 64 hex digits")));
                }
                tensors.push(t);
            }
            Ok(tensors)
        }
    }
    d.deserialize_seq(V)
}

/// A tensor's shape: at most [`MAX_DIMS`] dimensions (refused as soon as there are more).
fn de_shape<'de, D: Deserializer<'de>>(d: D) -> core::result::Result<Vec<u64>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<u64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "a shape of at most {MAX_DIMS} dimensions")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> core::result::Result<Vec<u64>, A::Error> {
            let mut dims = Vec::new();
            while let Some(x) = seq.next_element::<u64>()? {
                if dims.len() >= MAX_DIMS as usize {
                    return Err(de::Error::custom(format!("a shape of more than {MAX_DIMS} dimensions")));
                }
                dims.push(x);
            }
            Ok(dims)
        }
    }
    d.deserialize_seq(V)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::MetaValue;
    use crate::limits::{MAX_DEPTH, MAX_MANIFEST_BYTES, MAX_MANIFEST_METADATA_BYTES};
    use alloc::vec;

    fn manifest_with(metadata: &str) -> String {
        format!(
            r#"{{"format": "organ-dir/1", "source": {{"file": "m.gguf", "bytes": 0}},
            "gguf_version": 3, "alignment": 32, "metadata": [{metadata}], "tensors": []}}"#
        )
    }

    fn kvs(metadata: &str) -> Result<Vec<(String, OwnedValue)>> {
        parse(manifest_with(metadata).as_bytes())?.metadata.iter().map(decode_kv).collect()
    }

    /// Every kind of value goes to JSON and back to the same GGUF bytes.
    #[test]
    fn values_round_trip() {
        let strings = OwnedValue::strings(&["a".into(), "\u{e9}".into()]).unwrap();
        let values = [
            OwnedValue::Scalar(MetaValue::U8(200)),
            OwnedValue::Scalar(MetaValue::I64(i64::MIN)),
            OwnedValue::Scalar(MetaValue::U64(u64::MAX)),
            OwnedValue::Scalar(MetaValue::F32(0.1)),
            OwnedValue::Scalar(MetaValue::F32(f32::NAN)),
            OwnedValue::Scalar(MetaValue::F64(f64::NEG_INFINITY)),
            OwnedValue::Scalar(MetaValue::Bool(true)),
            OwnedValue::Str(b"\xff\x00not utf-8".to_vec().into()),
            strings,
        ];
        let entries: Vec<Entry> =
            values.iter().enumerate().map(|(i, v)| encode_kv(&format!("k{i}"), &v.view().unwrap())).collect();
        let text = serde_json::to_string(&entries).unwrap();
        let back = kvs(&text[1..text.len() - 1]).unwrap();
        for ((k, v), (i, want)) in back.iter().zip(values.iter().enumerate()) {
            assert_eq!(k, &format!("k{i}"));
            // Debug, so that NaN equals NaN.
            assert_eq!(format!("{v:?}"), format!("{want:?}"), "{k}");
        }
    }

    #[test]
    fn fields_in_any_order() {
        let v = kvs(r#"{"value": {"values": [[1], []], "elem_type": "ARRAY"}, "type": "ARRAY", "key": "n"}"#);
        assert!(v.is_err(), "inner arrays need their own elem_type");
        let v = kvs(
            r#"{"value": {"values": [{"values": [1, 2], "elem_type": "UINT8"}], "elem_type": "ARRAY"}, "type": "ARRAY", "key": "n"}"#,
        )
        .unwrap();
        let MetaValue::Array(a) = v[0].1.view().unwrap() else { panic!() };
        let inner: Vec<_> = a.iter().collect();
        let MetaValue::Array(i) = inner[0] else { panic!() };
        assert_eq!(i.raw(), &[1, 2]);
    }

    #[test]
    fn hostile_values_are_refused_with_their_key() {
        for (entry, want) in [
            (r#"{"key": "h", "type": "STRING", "value": {"hex": "a\u00e90"}}"#, "hex"),
            (r#"{"key": "h", "type": "STRING", "value": {"hex": "abc"}}"#, "odd length"),
            (r#"{"key": "n", "type": "UINT8", "value": 256}"#, "does not fit"),
            (r#"{"key": "n", "type": "UINT8", "value": 1.5}"#, "not an integer"),
            (r#"{"key": "n", "type": "BOOL", "value": 1}"#, "not a BOOL"),
            (r#"{"key": "n", "type": "UINT9", "value": 1}"#, "unknown metadata type"),
            (r#"{"key": "n", "type": "UINT8"}"#, "no value"),
            (r#"{"key": "f", "type": "FLOAT32", "value": {"f32_bits": 4294967296}}"#, "f"),
            (r#"{"key": "a", "type": "ARRAY", "value": {"values": []}}"#, "without elem_type"),
        ] {
            let e = format!("{:#}", kvs(entry).unwrap_err());
            assert!(e.contains(want), "{entry}: {e}");
        }
        let e = format!(
            "{:#}",
            kvs(r#"{"key": "d", "type": "UINT8", "value": 1}, {"key": "d", "type": "UINT8", "value": 2}"#).unwrap_err()
        );
        assert!(e.contains("duplicate metadata key \"d\""), "{e}");
    }

    #[test]
    fn caps_hold() {
        let mut deep = r#"{"elem_type": "UINT8", "values": []}"#.to_owned();
        for _ in 0..MAX_DEPTH {
            deep = format!(r#"{{"elem_type": "ARRAY", "values": [{deep}]}}"#);
        }
        let e = format!("{:#}", kvs(&format!(r#"{{"key": "d", "type": "ARRAY", "value": {deep}}}"#)).unwrap_err());
        assert!(e.contains("nested more than"), "{e}");
        let zeros = "0,".repeat((MAX_MANIFEST_METADATA_BYTES / 8) as usize);
        let e = format!(
            "{:#}",
            kvs(&format!(
                r#"{{"key": "z", "type": "ARRAY", "value": {{"elem_type": "UINT64", "values": [{zeros}0]}}}}"#
            ))
            .unwrap_err()
        );
        assert!(e.contains("bytes a manifest may hold"), "{e}");
        let shape = r#"{"format": "organ-dir/1", "source": {"file": "m", "bytes": 0}, "gguf_version": 3,
            "alignment": 32, "metadata": [], "tensors": [{"name": "t", "file": "t.bin", "group": "other",
            "organ": null, "layer": null, "type": "F32", "shape": [1, 1, 1, 1, 1], "bytes": 4, "blake3": ""}]}"#;
        assert!(format!("{:#}", parse(shape.as_bytes()).unwrap_err()).contains("more than 4 dimensions"));
        let huge = vec![b' '; MAX_MANIFEST_BYTES as usize + 1];
        assert!(format!("{:#}", parse(&huge).unwrap_err()).contains("more than the"));
    }

    fn one_tensor(digests: &str) -> Result<Manifest> {
        let text = format!(
            r#"{{"format": "organ-dir/1", "source": {{"file": "m", "bytes": 0}}, "gguf_version": 3,
            "alignment": 32, "metadata": [], "tensors": [{{"name": "t", "file": "t.bin", "group": "other",
            "organ": null, "layer": null, "type": "F32", "shape": [1], "bytes": 4{digests}}}]}}"#
        );
        parse(text.as_bytes())
    }

    /// An entry carries a BLAKE3, or (written before BLAKE3) a sha256: exactly one.
    #[test]
    fn each_tensor_has_exactly_one_digest() {
        let (b, s) = ("ab".repeat(32), "CD".repeat(32));
        let m = one_tensor(&format!(r#", "blake3": "{b}""#)).unwrap();
        assert_eq!(m.tensors[0].digest(), Some(FileDigest::Blake3(&b)));
        let m = one_tensor(&format!(r#", "sha256": "{s}""#)).unwrap();
        assert_eq!(m.tensors[0].digest(), Some(FileDigest::Sha256(&s)));
        for (digests, want) in [
            (format!(r#", "blake3": "{b}", "sha256": "{s}""#), "both blake3 and sha256"),
            (String::new(), "no blake3 (or sha256)"),
            (r#", "blake3": null"#.into(), "no blake3 (or sha256)"),
            (r#", "blake3": "zz""#.into(), "blake3 \"zz\" is not 64 hex digits"),
            (format!(r#", "sha256": "{}""#, "0".repeat(63)), "sha256"),
        ] {
            let e = format!("{:#}", one_tensor(&digests).unwrap_err());
            assert!(e.contains(want) && e.contains("tensor \"t\""), "{digests}: {e}");
        }
    }

    /// The source's digests are optional: BLAKE3 always written, sha256 only on request.
    #[test]
    fn source_digests_are_optional_and_absent_when_not_computed() {
        let src = Source { file: "m.gguf".into(), bytes: 1, blake3: Some("ab".repeat(32)), sha256: None };
        let text = serde_json::to_string(&src).unwrap();
        assert!(text.contains("blake3") && !text.contains("sha256"), "{text}");
    }
}
