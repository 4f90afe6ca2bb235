//! `organ inspect`: metadata (long arrays summarized, like gguf-dump) and one row per
//! tensor; `--json` gives everything in full.

use crate::model::ModelFile;
use anyhow::Result;
use organ_core::anatomy::classify;
use organ_core::gguf::display::{preview, printable, value_json};
use organ_core::gguf::{MetaValue, ValueType};
use organ_core::Gguf;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;

pub fn run(path: &Path, as_json: bool, out: &mut dyn Write) -> Result<()> {
    if crate::source::split_shards(path).is_some() {
        return run_split(path, as_json, out);
    }
    let model = ModelFile::open(path)?;
    let g = model.parse()?;
    if as_json {
        serde_json::to_writer_pretty(&mut *out, &to_json(&model.file_name(), &g))?;
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

pub fn to_json(file: &str, g: &Gguf<'_>) -> Value {
    let metadata: Vec<Value> = g
        .kvs
        .iter()
        .map(|kv| {
            let mut o = json!({ "key": kv.key, "types": type_path(&kv.value), "value": value_json(&kv.value) });
            if let MetaValue::Array(a) = kv.value {
                o["len"] = json!(a.len);
            }
            o
        })
        .collect();
    let tensors: Vec<Value> = g
        .tensors
        .iter()
        .map(|t| {
            let a = classify(t.name);
            json!({
                "name": t.name, "group": a.group, "organ": a.organ, "layer": a.layer,
                "type": t.ty.name(), "shape": t.shape(), "n_elements": t.n_elements,
                "offset": t.offset, "file_offset": t.file_offset, "bytes": t.n_bytes,
            })
        })
        .collect();
    json!({
        "file": file, "version": g.version, "file_bytes": g.file_len, "alignment": g.alignment,
        "data_offset": g.data_offset, "parameters": g.parameter_count(),
        "metadata": metadata, "tensors": tensors,
    })
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
    let m = crate::source::Model::open(path)?;
    let shard_of = |t: &crate::source::Tensor| m.shards.iter().position(|s| *s == t.data.file.path).unwrap_or(0) + 1;
    let mut metadata = Vec::new();
    for (k, v) in &m.kvs {
        let v = v.view()?;
        metadata.push((k.as_str(), v));
    }
    if as_json {
        let tensors: Vec<Value> = m
            .tensors
            .iter()
            .map(|t| {
                let a = classify(&t.name);
                json!({
                    "name": t.name, "group": a.group, "organ": a.organ, "layer": a.layer, "type": t.ty.name(),
                    "shape": t.dims, "n_elements": t.dims.iter().product::<u64>(), "shard": shard_of(t),
                    "file_offset": t.data.offset, "bytes": t.n_bytes,
                })
            })
            .collect();
        let shards: Vec<String> = m.shards.iter().map(|p| p.display().to_string()).collect();
        let md: Vec<Value> =
            metadata.iter().map(|(k, v)| json!({ "key": k, "types": type_path(v), "value": value_json(v) })).collect();
        let doc = json!({
            "file": m.label, "version": m.version, "shards": shards,
            "parameters": m.tensors.iter().map(|t| t.dims.iter().product::<u64>()).sum::<u64>(),
            "metadata": md, "tensors": tensors,
        });
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
            offset: t.data.offset,
            bytes: t.n_bytes,
        })
        .collect();
    print_tensors(out, &rows)
}
