//! `organ inspect --json`: a GGUF's header (a file's, or the one an organ directory
//! assembles into), a split model read as one, and a split model some of whose shards are
//! absent or cut short. Each document is serialized as it is written: nothing is built per
//! metadata element or per tensor. Fields are in the order serde_json's sorted maps gave
//! them, so the text is what it always was. The text `inspect` prints is
//! [`super::inspect_text`]'s.

use crate::anatomy::classify;
use crate::gguf::cut::Cut;
use crate::gguf::display::ValueJson;
use crate::gguf::{Gguf, MetaValue, ValueType};
use crate::lora::Adapter;
use crate::memory::Estimate;
use crate::model::{Model, TensorEntry};
use crate::surgery::select::Selection;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::borrow::Borrow;
use serde::Serialize;

/// Whose offsets a single GGUF's are: the file's own, or those of the GGUF an organ
/// directory assembles into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offsets {
    /// The file's.
    File,
    /// The assembled GGUF's (an organ directory).
    Assembled,
}

/// gguf-py's list of types for a field: `["ARRAY", "STRING"]` for an array of strings.
fn type_path(v: &MetaValue<'_>) -> Vec<&'static str> {
    let mut types = vec![v.value_type().name()];
    let mut cur = *v;
    while let MetaValue::Array(a) = cur {
        types.push(a.elem_type.name());
        match (a.elem_type, a.iter().next()) {
            (ValueType::Array, Some(first)) => cur = first,
            _ => break,
        }
    }
    types
}

/// The document of one GGUF `g` named `file`. An organ directory's adds `"offsets":
/// "assembled"`; a selection, `"selection"` (its description) and only the tensors at
/// `shown`; an estimate, `"memory"`.
pub fn document<'a>(
    file: &'a str,
    g: &'a Gguf<'a>,
    offsets: Offsets,
    sel: &Selection,
    shown: &'a [usize],
    memory: Option<Estimate>,
) -> impl Serialize + 'a {
    #[derive(Serialize)]
    struct Doc<'a, M: Serialize, T: Serialize> {
        #[serde(skip_serializing_if = "Option::is_none")]
        adapter: Option<AdapterJson<'a>>,
        alignment: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        cut: Option<Cut>,
        data_offset: u64,
        file: &'a str,
        file_bytes: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        memory: Option<Estimate>,
        metadata: M,
        #[serde(skip_serializing_if = "Option::is_none")]
        offsets: Option<&'static str>,
        parameters: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        selection: Option<String>,
        tensors: T,
        version: u32,
    }
    Doc {
        adapter: adapter_of(g).map(|a| AdapterJson::of(g, a)),
        alignment: g.alignment,
        cut: Cut::of(g),
        data_offset: g.data_offset,
        file,
        file_bytes: g.file_len,
        memory,
        metadata: Seq(move || {
            g.kvs.iter().map(|kv| MetaJson {
                key: kv.key,
                len: match kv.value {
                    MetaValue::Array(a) => Some(a.len),
                    _ => None,
                },
                types: type_path(&kv.value),
                value: ValueJson(kv.value),
            })
        }),
        offsets: (offsets == Offsets::Assembled).then_some("assembled"),
        parameters: g.parameter_count(),
        selection: (*sel != Selection::default()).then(|| sel.describe()),
        tensors: Seq(move || {
            shown.iter().filter_map(|&i| g.tensors.get(i)).map(|t| {
                let a = classify(t.name);
                TensorJson {
                    bytes: t.n_bytes,
                    file_offset: t.file_offset,
                    group: a.group,
                    layer: a.layer,
                    n_elements: t.n_elements,
                    name: t.name,
                    offset: Some(t.offset),
                    organ: a.organ,
                    shape: t.shape(),
                    shard: None,
                    ty: t.ty.name(),
                }
            })
        }),
        version: g.version,
    }
}

/// The document of a split model `m` read as one, named `label`: its merged `metadata`
/// (the first shard's, less `split.*`), its `shards`' paths, and the tensors at `shown`,
/// each with the shard (from 1) that holds it.
pub fn split_document<'a, T: Borrow<TensorEntry>>(
    label: &'a str,
    m: &'a Model<T>,
    metadata: &'a [(&'a str, MetaValue<'a>)],
    shards: Vec<String>,
    sel: &Selection,
    shown: &'a [usize],
    memory: Option<Estimate>,
) -> impl Serialize + 'a {
    #[derive(Serialize)]
    struct Doc<'a, M: Serialize, T: Serialize> {
        file: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        memory: Option<Estimate>,
        metadata: M,
        parameters: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        selection: Option<String>,
        shards: Vec<String>,
        tensors: T,
        version: u32,
    }
    Doc {
        file: label,
        memory,
        metadata: Seq(|| {
            metadata.iter().map(|(k, v)| MetaJson { key: k, len: None, types: type_path(v), value: ValueJson(*v) })
        }),
        parameters: m.tensors.iter().map(|t| t.borrow().n_elements).sum::<u64>(),
        selection: (*sel != Selection::default()).then(|| sel.describe()),
        shards,
        tensors: Seq(move || {
            shown.iter().filter_map(|&i| m.tensors.get(i)).map(|t| {
                let t = t.borrow();
                let a = classify(&t.name);
                TensorJson {
                    bytes: t.n_bytes,
                    file_offset: t.offset,
                    group: a.group,
                    layer: a.layer,
                    n_elements: t.n_elements,
                    name: &t.name,
                    offset: None,
                    organ: a.organ,
                    shape: &t.dims,
                    shard: Some(t.file + 1),
                    ty: t.ty.name(),
                }
            })
        }),
        version: m.version,
    }
}

/// One shard of a split model that is not all there.
#[derive(Clone, Copy, Debug)]
pub enum ShardState<'a> {
    /// Its file is not there.
    Absent,
    /// Every byte is there.
    Whole,
    /// Cut short: what it lacks.
    Cut(&'a Cut),
}

impl ShardState<'_> {
    /// What the text says of it: `absent`, `whole`, or what it lacks.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            ShardState::Absent => "absent".into(),
            ShardState::Whole => "whole".into(),
            ShardState::Cut(c) => c.describe(),
        }
    }
}

/// The document of a split model some of whose shards are absent or cut short, named
/// `file`: each present shard's header document (from [`document`]), every shard's path
/// and state, and the tensors it declares and has whole.
pub fn partial_document<'a, H: Serialize + 'a>(
    file: String,
    headers: Vec<H>,
    shards: &'a [(String, ShardState<'a>)],
    declared: Option<u64>,
    present: usize,
) -> impl Serialize + 'a {
    #[derive(Serialize)]
    struct ShardJson<'a> {
        cut: Option<&'a Cut>,
        path: &'a str,
        state: &'static str,
    }
    #[derive(Serialize)]
    struct Doc<'a, H: Serialize> {
        file: String,
        headers: Vec<H>,
        shards: Vec<ShardJson<'a>>,
        tensors_declared: Option<u64>,
        tensors_present: usize,
    }
    Doc {
        file,
        headers,
        shards: shards
            .iter()
            .map(|(path, s)| {
                let (state, cut) = match *s {
                    ShardState::Absent => ("absent", None),
                    ShardState::Whole => ("whole", None),
                    ShardState::Cut(c) => ("cut", Some(c)),
                };
                ShardJson { cut, path, state }
            })
            .collect(),
        tensors_declared: declared,
        tensors_present: present,
    }
}

/// The adapter a GGUF is, when its metadata says it is one (`general.type = adapter`).
#[must_use]
pub fn adapter_of(g: &Gguf<'_>) -> Option<Adapter> {
    // From the header as it is: a model's copy of the metadata (from_gguf) would hold its
    // strings twice, and a hostile header's strings are the budget's size.
    let key = crate::lora::KEY_GENERAL_TYPE;
    let is = g.kvs.iter().any(|kv| kv.key == key && kv.value.as_str() == Some(crate::lora::GENERAL_TYPE));
    is.then(|| Adapter::read(&Model::from_gguf(g, 0)))
}

/// The document's view of an adapter: what it is, its pairs, and its problems.
#[derive(Serialize)]
struct AdapterJson<'a> {
    alpha: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    invocation_tokens: Option<u64>,
    pairs: Vec<PairJson<'a>>,
    problems: Vec<crate::lora::Problem>,
    ranks: Vec<u64>,
}

/// One pair: the weight it updates, the update's shape (the weight's, ggml order), the
/// rank, and its two halves.
#[derive(Serialize)]
struct PairJson<'a> {
    a: &'a str,
    b: &'a str,
    bytes: u64,
    rank: u64,
    shape: [u64; 2],
    target: String,
}

impl<'a> AdapterJson<'a> {
    fn of(g: &'a Gguf<'a>, a: Adapter) -> AdapterJson<'a> {
        let pairs = a
            .pairs
            .iter()
            .filter_map(|p| {
                let (ta, tb) = (g.tensors.get(p.a)?, g.tensors.get(p.b)?);
                Some(PairJson {
                    a: ta.name,
                    b: tb.name,
                    bytes: ta.n_bytes + tb.n_bytes,
                    rank: p.rank,
                    shape: p.shape(),
                    target: p.target.clone(),
                })
            })
            .collect();
        AdapterJson {
            alpha: a.alpha,
            invocation_tokens: a.invocation_tokens,
            ranks: a.ranks(),
            pairs,
            problems: a.problems,
        }
    }
}

/// A JSON array of what `F` iterates, serialized as it is iterated.
struct Seq<F>(F);

impl<F, I> Serialize for Seq<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

/// One metadata entry.
#[derive(Serialize)]
struct MetaJson<'a> {
    key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    len: Option<u64>,
    types: Vec<&'static str>,
    value: ValueJson<'a>,
}

/// One tensor (`offset` for a single file, `shard` for a split).
#[derive(Serialize)]
struct TensorJson<'a> {
    bytes: u64,
    file_offset: u64,
    group: crate::anatomy::Group,
    layer: Option<u32>,
    n_elements: u64,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
    organ: Option<crate::anatomy::OrganKind>,
    shape: &'a [u64],
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<usize>,
    #[serde(rename = "type")]
    ty: &'static str,
}
