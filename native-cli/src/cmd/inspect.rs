//! `organ inspect`: metadata (long arrays summarized, like gguf-dump) and one row per
//! tensor; `--json` gives everything in full.

use crate::location::{Location, Reach};
use anyhow::Result;
use organ_core::anatomy::classify;
use organ_core::gguf::display::{preview, printable, ValueJson};
use organ_core::gguf::{MetaValue, ValueType};
use organ_core::Gguf;
use serde::Serialize;
use std::io::Write;
use std::path::Path;

pub fn run(path: &Path, as_json: bool, out: &mut dyn Write) -> Result<()> {
    let at = Location::of(path);
    if at.shards().is_some() {
        return run_split(path, as_json, out);
    }
    let model = at.open_file(path, Reach::Ranged)?;
    let g = model.parse()?;
    if as_json {
        let file = model.file_name();
        serde_json::to_writer_pretty(&mut *out, &document(&file, &g))?;
        writeln!(out)?;
    } else {
        print_text(&model.file_name(), &g, out)?;
    }
    Ok(())
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

/// `inspect --json` of one file, written straight to the output as it is serialized:
/// nothing is built per metadata element or per tensor. Fields are in the order
/// serde_json's sorted maps gave them, so the text is what it always was.
pub fn document<'a>(file: &'a str, g: &'a Gguf<'a>) -> impl Serialize + 'a {
    #[derive(Serialize)]
    struct Doc<'a, M: Serialize, T: Serialize> {
        alignment: u64,
        data_offset: u64,
        file: &'a str,
        file_bytes: u64,
        metadata: M,
        parameters: u64,
        tensors: T,
        version: u32,
    }
    Doc {
        alignment: g.alignment,
        data_offset: g.data_offset,
        file,
        file_bytes: g.file_len,
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
        parameters: g.parameter_count(),
        tensors: Seq(move || {
            g.tensors.iter().map(|t| {
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

/// One metadata entry of `inspect --json`.
#[derive(Serialize)]
struct MetaJson<'a> {
    key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    len: Option<u64>,
    types: Vec<&'static str>,
    value: ValueJson<'a>,
}

/// One tensor of `inspect --json` (`offset` for a single file, `shard` for a split).
#[derive(Serialize)]
struct TensorJson<'a> {
    bytes: u64,
    file_offset: u64,
    group: organ_core::anatomy::Group,
    layer: Option<u32>,
    n_elements: u64,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
    organ: Option<organ_core::anatomy::OrganKind>,
    shape: &'a [u64],
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<usize>,
    #[serde(rename = "type")]
    ty: &'static str,
}

/// One row of the tensor table.
struct Row<'a> {
    name: &'a str,
    dims: &'a [u64],
    ty: organ_core::GgmlType,
    /// The shard holding it, for split models.
    shard: Option<usize>,
    offset: u64,
    bytes: u64,
}

/// The metadata list, one key per line, long values summarized.
fn print_metadata<'a>(out: &mut dyn Write, kvs: impl Iterator<Item = (&'a str, MetaValue<'a>)>) -> Result<()> {
    writeln!(out, "\nmetadata:")?;
    for (i, (key, v)) in kvs.enumerate() {
        let ty = match v {
            MetaValue::Array(a) => format!("[{} {}]", a.len, a.elem_type.name()),
            v => v.value_type().name().to_string(),
        };
        writeln!(out, "  {:>3}: {:<16} {} = {}", i + 1, ty, printable(key), preview(&v))?;
    }
    Ok(())
}

/// The tensor table: name, anatomy group, layer, type, shape, (shard,) file offset, bytes.
fn print_tensors(out: &mut dyn Write, rows: &[Row<'_>]) -> Result<()> {
    let split = rows.iter().any(|r| r.shard.is_some());
    let shard_col = |s: &str| if split { format!(" {s:>5}") } else { String::new() };
    writeln!(out, "\ntensors:")?;
    writeln!(
        out,
        "  {:>4}  {:<36} {:<9} {:>5}  {:<8} {:<22}{} {:>12} {:>12}",
        "#",
        "name",
        "group",
        "layer",
        "type",
        "shape",
        shard_col("shard"),
        "offset",
        "bytes"
    )?;
    for (i, r) in rows.iter().enumerate() {
        let a = classify(r.name);
        let layer = a.layer.map_or_else(|| "-".to_string(), |l| l.to_string());
        let shard = shard_col(&r.shard.map(|s| s.to_string()).unwrap_or_default());
        writeln!(
            out,
            "  {:>4}  {:<36} {:<9} {:>5}  {:<8} {:<22}{shard} {:>12} {:>12}",
            i + 1,
            printable(r.name),
            a.group.name(),
            layer,
            r.ty.name(),
            format!("{:?}", r.dims),
            r.offset,
            r.bytes
        )?;
    }
    Ok(())
}

fn print_text(file: &str, g: &Gguf<'_>, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "{file}: GGUF v{}, {} metadata keys, {} tensors, {} parameters, alignment {}, data at offset {}",
        g.version,
        g.kvs.len(),
        g.tensors.len(),
        g.parameter_count(),
        g.alignment,
        g.data_offset
    )?;
    print_metadata(out, g.kvs.iter().map(|kv| (kv.key, kv.value)))?;
    let rows: Vec<Row<'_>> = g
        .tensors
        .iter()
        .map(|t| Row { name: t.name, dims: t.shape(), ty: t.ty, shard: None, offset: t.file_offset, bytes: t.n_bytes })
        .collect();
    print_tensors(out, &rows)
}

/// A split model as one: every shard's header line, the merged metadata (first shard's,
/// less `split.*`), and every tensor with the shard that holds it.
fn run_split(path: &Path, as_json: bool, out: &mut dyn Write) -> Result<()> {
    let m = crate::model::Model::open_any(path)?;
    let shard_of = |t: &crate::model::Tensor| t.file + 1;
    let mut metadata = Vec::new();
    for (k, v) in &m.kvs {
        let v = v.view()?;
        metadata.push((k.as_str(), v));
    }
    if as_json {
        #[derive(Serialize)]
        struct Doc<'a, M: Serialize, T: Serialize> {
            file: &'a str,
            metadata: M,
            parameters: u64,
            shards: Vec<String>,
            tensors: T,
            version: u32,
        }
        let doc = Doc {
            file: &m.label,
            metadata: Seq(|| {
                metadata.iter().map(|(k, v)| MetaJson { key: k, len: None, types: type_path(v), value: ValueJson(*v) })
            }),
            parameters: m.tensors.iter().map(|t| t.n_elements).sum::<u64>(),
            shards: m.shards.iter().map(|p| p.display().to_string()).collect(),
            tensors: Seq(|| {
                m.tensors.iter().map(|t| {
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
                        shard: Some(shard_of(t)),
                        ty: t.ty.name(),
                    }
                })
            }),
            version: m.version,
        };
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "{}: split GGUF v{}, {} shards, {} metadata keys, {} tensors",
        m.label,
        m.version,
        m.shards.len(),
        metadata.len(),
        m.tensors.len()
    )?;
    for (i, s) in m.shards.iter().enumerate() {
        writeln!(out, "  shard {}: {}", i + 1, s.display())?;
    }
    print_metadata(out, metadata.iter().map(|(k, v)| (*k, *v)))?;
    let rows: Vec<Row<'_>> = m
        .tensors
        .iter()
        .map(|t| Row {
            name: &t.name,
            dims: &t.dims,
            ty: t.ty,
            shard: Some(shard_of(t)),
            offset: t.offset,
            bytes: t.n_bytes,
        })
        .collect();
    print_tensors(out, &rows)
}
