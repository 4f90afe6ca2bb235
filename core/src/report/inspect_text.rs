//! The text `organ inspect` prints: a GGUF's header line and metadata (long values
//! summarized, like gguf-dump), an adapter's pairs, the tensor table, a split model's
//! shards, what a partial download lacks, and the memory estimate. Its JSON is
//! [`super::inspect`]'s.

use super::inspect::{Offsets, ShardState};
use crate::anatomy::classify;
use crate::gguf::cut::Cut;
use crate::gguf::display::{preview, printable, type_label};
use crate::gguf::{Gguf, MetaValue};
use crate::lora::Adapter;
use crate::memory::{mib, Estimate};
use crate::surgery::select::Selection;
use crate::GgmlType;
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// The line after a model that cannot be measured yet, for what it lacks.
const NEEDS_EVERY_BYTE: &str = "  (measure, diff, dissect and the surgeries need every byte: download the rest first)";

/// One row of the tensor table.
#[derive(Clone, Copy, Debug)]
pub struct Row<'a> {
    /// Its place among all the model's tensors (the table's `#` column counts from 1).
    pub index: usize,
    /// Its name.
    pub name: &'a str,
    /// Its shape, ggml order.
    pub dims: &'a [u64],
    /// Its type.
    pub ty: GgmlType,
    /// The shard holding it (from 1), for split models.
    pub shard: Option<usize>,
    /// Where its data starts in its file.
    pub offset: u64,
    /// Bytes of data.
    pub bytes: u64,
}

/// The header line and the metadata of `g`, named `file`. An organ directory's line says
/// that its offsets are those of the GGUF it assembles into.
///
/// # Errors
/// `w` refused a write.
pub fn header(w: &mut dyn Write, file: &str, g: &Gguf<'_>, offsets: Offsets) -> fmt::Result {
    let what = match offsets {
        Offsets::File => "GGUF",
        Offsets::Assembled => "organ directory, as the GGUF organ assemble writes: GGUF",
    };
    writeln!(
        w,
        "{file}: {what} v{}, {} metadata keys, {} tensors, {} parameters, alignment {}, data at offset {}",
        g.version,
        g.kvs.len(),
        g.tensors.len(),
        g.parameter_count(),
        g.alignment,
        g.data_offset
    )?;
    metadata(w, g.kvs.iter().map(|kv| (kv.key, kv.value)))
}

/// The metadata list, one key per line, long values summarized.
///
/// # Errors
/// `w` refused a write.
pub fn metadata<'a>(w: &mut dyn Write, kvs: impl Iterator<Item = (&'a str, MetaValue<'a>)>) -> fmt::Result {
    writeln!(w, "\nmetadata:")?;
    for (i, (key, v)) in kvs.enumerate() {
        writeln!(w, "  {:>3}: {:<16} {} = {}", i + 1, type_label(&v), printable(key), preview(&v))?;
    }
    Ok(())
}

/// The tensor table: name, anatomy group, layer, type, shape, (shard,) file offset, bytes;
/// `#` is a tensor's place in the whole model of `of` tensors, and a selection says how
/// many it shows.
///
/// # Errors
/// `w` refused a write.
pub fn tensors(w: &mut dyn Write, rows: &[Row<'_>], of: usize, sel: &Selection) -> fmt::Result {
    let split = rows.iter().any(|r| r.shard.is_some());
    let shard_col = |s: &str| if split { format!(" {s:>5}") } else { String::new() };
    if *sel == Selection::default() {
        writeln!(w, "\ntensors:")?;
    } else {
        writeln!(w, "\ntensors: {} of {of} ({})", rows.len(), sel.describe())?;
    }
    writeln!(
        w,
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
    for r in rows {
        let a = classify(r.name);
        let layer = a.layer.map_or_else(|| "-".to_string(), |l| l.to_string());
        let shard = shard_col(&r.shard.map(|s| s.to_string()).unwrap_or_default());
        writeln!(
            w,
            "  {:>4}  {:<36} {:<9} {:>5}  {:<8} {:<22}{shard} {:>12} {:>12}",
            r.index + 1,
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

/// An adapter's summary and its pairs (the weight each updates, the update's shape, the
/// rank, the halves' types and bytes), after the metadata.
///
/// # Errors
/// `w` refused a write.
pub fn adapter(w: &mut dyn Write, g: &Gguf<'_>, a: &Adapter) -> fmt::Result {
    let bytes: u64 =
        a.pairs.iter().filter_map(|p| Some(g.tensors.get(p.a)?.n_bytes + g.tensors.get(p.b)?.n_bytes)).sum();
    let updated: u64 = a.pairs.iter().map(|p| p.n_elements()).sum();
    let ranks = a.ranks().iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    writeln!(
        w,
        "\nLoRA adapter for {}: {}, rank{} {ranks}, {} pairs, {} of factors updating {} weight values \
         (ΔW = (α/r)·B·A)",
        printable(a.architecture.as_deref().unwrap_or("?")),
        a.alpha.map_or_else(|| "α missing".to_string(), |x| format!("α {x}")),
        if a.ranks().len() > 1 { "s" } else { "" },
        a.pairs.len(),
        super::human_bytes(bytes),
        super::human_count(updated),
    )?;
    if let Some(n) = a.invocation_tokens {
        writeln!(w, "  aLoRA: active after an invocation sequence of {n} tokens")?;
    }
    if !a.problems.is_empty() {
        writeln!(
            w,
            "  {} problems (organ check lists them), the first: {}",
            a.problems.len(),
            a.problems[0].sentence()
        )?;
    }
    writeln!(w, "  {:<36} {:<14} {:>5}  {:<6} {:<6} {:>10}", "updates", "shape", "rank", "A", "B", "bytes")?;
    for p in &a.pairs {
        let (Some(ta), Some(tb)) = (g.tensors.get(p.a), g.tensors.get(p.b)) else { continue };
        writeln!(
            w,
            "  {:<36} {:<14} {:>5}  {:<6} {:<6} {:>10}",
            printable(&p.target),
            format!("{:?}", p.shape()),
            p.rank,
            ta.ty.name(),
            tb.ty.name(),
            ta.n_bytes + tb.n_bytes
        )?;
    }
    Ok(())
}

/// What a file cut short (a partial download) lacks, after its tables.
///
/// # Errors
/// `w` refused a write.
pub fn cut(w: &mut dyn Write, file: &str, c: &Cut) -> fmt::Result {
    writeln!(w, "\n{file}: {}", c.describe())?;
    writeln!(w, "{NEEDS_EVERY_BYTE}")
}

/// A split model's first lines: what it is, then each shard's path.
///
/// # Errors
/// `w` refused a write.
pub fn split_header(
    w: &mut dyn Write,
    label: &str,
    version: u32,
    shards: &[String],
    keys: usize,
    tensors: usize,
) -> fmt::Result {
    writeln!(w, "{label}: split GGUF v{version}, {} shards, {keys} metadata keys, {tensors} tensors", shards.len())?;
    for (i, s) in shards.iter().enumerate() {
        writeln!(w, "  shard {}: {s}", i + 1)?;
    }
    Ok(())
}

/// A partial split model's last lines (after each present shard's header): how many
/// tensors are here whole of the `declared` count, and each shard's state.
///
/// # Errors
/// `w` refused a write.
pub fn partial_tail(
    w: &mut dyn Write,
    label: &str,
    shards: &[(String, ShardState<'_>)],
    declared: Option<u64>,
    present: usize,
) -> fmt::Result {
    let declared = declared.map_or_else(|| "an unknown number of".to_owned(), |d| d.to_string());
    writeln!(
        w,
        "{label}: a split model of {} shards, incomplete: {present} of {declared} tensors are here whole",
        shards.len()
    )?;
    for (i, (path, s)) in shards.iter().enumerate() {
        writeln!(w, "  shard {}: {path}: {}", i + 1, s.describe())?;
    }
    writeln!(w, "  (measure, diff, dissect and the surgeries need every shard whole: download the rest first)")
}

/// The memory estimate of `file`: one line per buffer, and the total.
///
/// # Errors
/// `w` refused a write.
pub fn memory(w: &mut dyn Write, file: &str, e: &Estimate) -> fmt::Result {
    writeln!(w, "{file}: what llama.cpp allocates at {}", e.settings_text())?;
    for l in e.lines() {
        writeln!(w, "{}", format!("  {:<28} {:>13}  {}", l.what, mib(l.bytes), l.note).trim_end())?;
    }
    Ok(())
}
