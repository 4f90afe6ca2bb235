//! `organ inspect`: metadata (long arrays summarized, like gguf-dump) and one row per
//! tensor; `--json` gives everything in full. A GGUF file, a split GGUF (every shard as
//! one model), or an organ directory, shown as the GGUF `organ assemble` makes of it.
//! A selection (`--layers`, `--group`, `--name`) narrows the tensors shown.

use crate::location::{Location, Reach};
use anyhow::{bail, Context, Result};
use organ_core::anatomy::classify;
use organ_core::gguf::cut::Cut;
use organ_core::gguf::display::{preview, printable, ValueJson};
use organ_core::gguf::{MetaValue, ValueType};
use organ_core::lora::Adapter;
use organ_core::memory::{Estimate, Settings};
use organ_core::surgery::select::Selection;
use organ_core::Gguf;
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// What `organ inspect` shows: the model, in which form, and which tensors.
pub struct Options<'a> {
    pub model: &'a Path,
    pub json: bool,
    /// The tensors shown (every one when empty); metadata is always shown whole.
    pub selection: Selection,
    /// The memory estimate's settings, when one is asked for: the estimate then replaces
    /// the metadata and tensors in text, and is added as `memory` to the JSON.
    pub memory: Option<Settings>,
}

pub fn run(o: &Options<'_>, out: &mut dyn Write) -> Result<()> {
    let at = Location::of(o.model);
    if at.is_dir() {
        return run_dir(o, out);
    }
    if at.shards().is_some() {
        return run_split(o, out);
    }
    let model = at.open_file(o.model, Reach::Ranged)?;
    // A file cut short (a partial download) is still a header: shown, then what it lacks.
    let g = model.parse_cut_short()?;
    show(&model.file_name(), &g, Offsets::File, o, out)
}

/// What a single GGUF's offsets are: the file's own, or those of the GGUF an organ
/// directory assembles into.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Offsets {
    File,
    Assembled,
}

/// One GGUF's header (a file's, or the one an organ directory assembles into), as text or
/// JSON, its tensors narrowed to the selection.
fn show(file: &str, g: &Gguf<'_>, offsets: Offsets, o: &Options<'_>, out: &mut dyn Write) -> Result<()> {
    let shown = selected(file, g.tensors.iter().map(|t| t.name), &o.selection)?;
    let memory = match &o.memory {
        Some(s) => Some(estimate(file, &organ_core::model::Model::from_gguf(g, 0), s)?),
        None => None,
    };
    if o.json {
        serde_json::to_writer_pretty(&mut *out, &document_of(file, g, offsets, &o.selection, &shown, memory))?;
        writeln!(out)?;
        return Ok(());
    }
    if let Some(e) = memory {
        return print_memory(out, file, &e);
    }
    let cut = Cut::of(g);
    print_text(file, g, offsets, out)?;
    if let Some(a) = adapter_of(g) {
        print_adapter(out, g, &a)?;
    }
    let rows: Vec<Row<'_>> = shown
        .iter()
        .filter_map(|&i| g.tensors.get(i).map(|t| (i, t)))
        .map(|(i, t)| Row {
            index: i,
            name: t.name,
            dims: t.shape(),
            ty: t.ty,
            shard: None,
            offset: t.file_offset,
            bytes: t.n_bytes,
        })
        .collect();
    print_tensors(out, &rows, g.tensors.len(), &o.selection)?;
    if let Some(c) = cut {
        writeln!(out, "\n{file}: {}", c.describe())?;
        writeln!(out, "  (measure, diff, dissect and the surgeries need every byte: download the rest first)")?;
    }
    Ok(())
}

/// The indices of the tensors `sel` selects, of all named `names` in order (of `model`).
///
/// # Errors
/// A selection that matches no tensor, with the core's hints (the layers the model has,
/// a pattern that needs `*`).
fn selected<'a>(model: &str, names: impl Iterator<Item = &'a str> + Clone, sel: &Selection) -> Result<Vec<usize>> {
    let shown: Vec<usize> = names.clone().enumerate().filter(|(_, n)| sel.matches(n)).map(|(i, _)| i).collect();
    if shown.is_empty() && names.clone().next().is_some() {
        bail!("{model}: {}", sel.none_matched(names));
    }
    Ok(shown)
}

/// An organ directory as the GGUF `organ assemble` writes from it (byte-identical to the
/// dissected original): its header is planned by the same core function the writer uses,
/// then shown as a file's. Only the manifest and the organ files' headers are read; the
/// digests are not compared (no tensor byte is shown; `check` and `assemble` compare them).
fn run_dir(o: &Options<'_>, out: &mut dyn Write) -> Result<()> {
    let (m, _unread) = crate::model::organ_dir::open_unchecked(o.model)?;
    let layout = crate::write::plan_gguf(m.version, &m.kvs, &m.tensors, o.model)?;
    let g = Gguf::parse(&layout.header, layout.file_len)
        .with_context(|| format!("{}: the GGUF it assembles into cannot be read back", o.model.display()))?;
    show(&m.label, &g, Offsets::Assembled, o, out)
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

/// `inspect --json` of one GGUF, written straight to the output as it is serialized:
/// nothing is built per metadata element or per tensor. Fields are in the order
/// serde_json's sorted maps gave them, so the text is what it always was. An organ
/// directory's adds `"offsets": "assembled"`; a selection, `"selection"` (its description)
/// and only the tensors at `shown`.
fn document_of<'a>(
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

/// The adapter a GGUF is, when its metadata says it is one (`general.type = adapter`).
fn adapter_of(g: &Gguf<'_>) -> Option<Adapter> {
    // From the header as it is: a model's copy of the metadata (from_gguf) would hold its
    // strings twice, and a hostile header's strings are the budget's size.
    let key = organ_core::lora::KEY_GENERAL_TYPE;
    let is = g.kvs.iter().any(|kv| kv.key == key && kv.value.as_str() == Some(organ_core::lora::GENERAL_TYPE));
    is.then(|| Adapter::read(&organ_core::model::Model::from_gguf(g, 0)))
}

/// `inspect --json`'s view of an adapter: what it is, its pairs, and its problems.
#[derive(Serialize)]
struct AdapterJson<'a> {
    alpha: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    invocation_tokens: Option<u64>,
    pairs: Vec<PairJson<'a>>,
    problems: Vec<organ_core::lora::Problem>,
    ranks: Vec<u64>,
}

/// One pair of `inspect --json`: the weight it updates, the update's shape (the
/// weight's, ggml order), the rank, and its two halves.
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

/// An adapter's summary and its pairs (the weight each updates, the update's shape, the
/// rank, the halves' types and bytes), after the metadata.
fn print_adapter(out: &mut dyn Write, g: &Gguf<'_>, a: &Adapter) -> Result<()> {
    let bytes: u64 =
        a.pairs.iter().filter_map(|p| Some(g.tensors.get(p.a)?.n_bytes + g.tensors.get(p.b)?.n_bytes)).sum();
    let updated: u64 = a.pairs.iter().map(|p| p.n_elements()).sum();
    let ranks = a.ranks().iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    writeln!(
        out,
        "\nLoRA adapter for {}: {}, rank{} {ranks}, {} pairs, {} of factors updating {} weight values \
         (ΔW = (α/r)·B·A)",
        printable(a.architecture.as_deref().unwrap_or("?")),
        a.alpha.map_or_else(|| "α missing".to_string(), |x| format!("α {x}")),
        if a.ranks().len() > 1 { "s" } else { "" },
        a.pairs.len(),
        organ_core::report::human_bytes(bytes),
        organ_core::report::human_count(updated),
    )?;
    if let Some(n) = a.invocation_tokens {
        writeln!(out, "  aLoRA: active after an invocation sequence of {n} tokens")?;
    }
    if !a.problems.is_empty() {
        writeln!(
            out,
            "  {} problems (organ check lists them), the first: {}",
            a.problems.len(),
            a.problems[0].sentence()
        )?;
    }
    writeln!(out, "  {:<36} {:<14} {:>5}  {:<6} {:<6} {:>10}", "updates", "shape", "rank", "A", "B", "bytes")?;
    for p in &a.pairs {
        let (Some(ta), Some(tb)) = (g.tensors.get(p.a), g.tensors.get(p.b)) else { continue };
        writeln!(
            out,
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
    /// Its place among all the model's tensors (the table's `#` column counts from 1).
    index: usize,
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

/// The tensor table: name, anatomy group, layer, type, shape, (shard,) file offset, bytes;
/// `#` is a tensor's place in the whole model, and a selection says how many it shows.
fn print_tensors(out: &mut dyn Write, rows: &[Row<'_>], of: usize, sel: &Selection) -> Result<()> {
    let split = rows.iter().any(|r| r.shard.is_some());
    let shard_col = |s: &str| if split { format!(" {s:>5}") } else { String::new() };
    if *sel == Selection::default() {
        writeln!(out, "\ntensors:")?;
    } else {
        writeln!(out, "\ntensors: {} of {of} ({})", rows.len(), sel.describe())?;
    }
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
    for r in rows {
        let a = classify(r.name);
        let layer = a.layer.map_or_else(|| "-".to_string(), |l| l.to_string());
        let shard = shard_col(&r.shard.map(|s| s.to_string()).unwrap_or_default());
        writeln!(
            out,
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

/// The header line and the metadata. An organ directory's line says that its offsets are
/// those of the GGUF it assembles into.
fn print_text(file: &str, g: &Gguf<'_>, offsets: Offsets, out: &mut dyn Write) -> Result<()> {
    let what = match offsets {
        Offsets::File => "GGUF",
        Offsets::Assembled => "organ directory, as the GGUF organ assemble writes: GGUF",
    };
    writeln!(
        out,
        "{file}: {what} v{}, {} metadata keys, {} tensors, {} parameters, alignment {}, data at offset {}",
        g.version,
        g.kvs.len(),
        g.tensors.len(),
        g.parameter_count(),
        g.alignment,
        g.data_offset
    )?;
    print_metadata(out, g.kvs.iter().map(|kv| (kv.key, kv.value)))
}

/// A split model as one: every shard's header line, the merged metadata (first shard's,
/// less `split.*`), and every tensor with the shard that holds it.
fn run_split(o: &Options<'_>, out: &mut dyn Write) -> Result<()> {
    let m = match crate::model::Model::open_any(o.model) {
        Ok(m) => m,
        Err(e) => return run_partial_split(o, out).unwrap_or(Err(e)),
    };
    let shown = selected(&m.label, m.tensors.iter().map(|t| t.name.as_str()), &o.selection)?;
    let memory = match &o.memory {
        Some(s) => Some(estimate(&m.label, &m.model, s)?),
        None => None,
    };
    if let (Some(e), false) = (&memory, o.json) {
        return print_memory(out, &m.label, e);
    }
    let shard_of = |t: &crate::model::Tensor| t.file + 1;
    let mut metadata = Vec::new();
    for (k, v) in &m.kvs {
        let v = v.view()?;
        metadata.push((k.as_str(), v));
    }
    if o.json {
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
        let doc = Doc {
            file: &m.label,
            memory,
            metadata: Seq(|| {
                metadata.iter().map(|(k, v)| MetaJson { key: k, len: None, types: type_path(v), value: ValueJson(*v) })
            }),
            parameters: m.tensors.iter().map(|t| t.n_elements).sum::<u64>(),
            selection: (o.selection != Selection::default()).then(|| o.selection.describe()),
            shards: m.shards.iter().map(|p| p.display().to_string()).collect(),
            tensors: Seq(|| {
                shown.iter().filter_map(|&i| m.tensors.get(i)).map(|t| {
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
    let rows: Vec<Row<'_>> = shown
        .iter()
        .filter_map(|&i| m.tensors.get(i).map(|t| (i, t)))
        .map(|(i, t)| Row {
            index: i,
            name: &t.name,
            dims: &t.dims,
            ty: t.ty,
            shard: Some(shard_of(t)),
            offset: t.offset,
            bytes: t.n_bytes,
        })
        .collect();
    print_tensors(out, &rows, m.tensors.len(), &o.selection)
}

/// One shard of a split model that is not all there.
enum Shard {
    /// Its file is not there.
    Absent,
    /// Its header, and what its data lacks (`None`: nothing).
    Read(crate::model_file::ModelFile, Option<Cut>),
}

/// A split model some of whose shards are absent or cut short (a download under way):
/// each shard that is there shown as a file, then what the model lacks. `None` when the
/// model's error was another (every shard whole; a shard that cannot be opened for another
/// reason than not being there, or whose header is broken): the caller gives it.
fn run_partial_split(o: &Options<'_>, out: &mut dyn Write) -> Option<Result<()>> {
    let at = Location::of(o.model);
    let paths = at.shards()?;
    let mut shards = Vec::with_capacity(paths.len());
    for p in &paths {
        // Only a local file that is not there is absent: a URL's failure, a FIFO or a
        // file that cannot be read is the model's error, not a download under way.
        let missing = matches!(at, Location::Local(_))
            && std::fs::symlink_metadata(p).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        if missing {
            shards.push(Shard::Absent);
            continue;
        }
        let f = at.open_file(p, Reach::Ranged).ok()?;
        let cut = Cut::of(&f.parse_cut_short().ok()?);
        shards.push(Shard::Read(f, cut));
    }
    if shards.iter().all(|s| matches!(s, Shard::Read(_, None))) {
        return None;
    }
    Some(show_partial_split(o, &paths, &shards, out))
}

fn show_partial_split(
    o: &Options<'_>,
    paths: &[std::path::PathBuf],
    shards: &[Shard],
    out: &mut dyn Write,
) -> Result<()> {
    let n = shards.len();
    let mut parsed = Vec::new();
    for s in shards {
        if let Shard::Read(f, _) = s {
            parsed.push((f.file_name(), f.parse_cut_short()?));
        }
    }
    // The first shard's split.tensors.count says how many tensors the model has.
    let declared = parsed.first().and_then(|(_, g)| g.get("split.tensors.count")).and_then(|v| v.as_u64());
    // Whole tensors: a shard's Cut counts them; a shard without one has every tensor whole.
    let cuts = shards.iter().filter_map(|s| match s {
        Shard::Read(_, c) => Some(c.as_ref()),
        Shard::Absent => None,
    });
    let present: usize = parsed.iter().zip(cuts).map(|((_, g), c)| c.map_or(g.tensors.len(), |c| c.whole)).sum();
    let state = |i: usize| match &shards[i] {
        Shard::Absent => "absent".to_owned(),
        Shard::Read(_, None) => "whole".to_owned(),
        Shard::Read(_, Some(c)) => c.describe(),
    };
    if o.json {
        #[derive(Serialize)]
        struct ShardJson<'a> {
            cut: Option<&'a Cut>,
            path: String,
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
        let every: Vec<Vec<usize>> = parsed.iter().map(|(_, g)| (0..g.tensors.len()).collect()).collect();
        let headers: Vec<_> = parsed
            .iter()
            .zip(&every)
            .map(|((name, g), all)| document_of(name, g, Offsets::File, &Selection::default(), all, None))
            .collect();
        let doc = Doc {
            file: Location::of(o.model).label(),
            headers,
            shards: shards
                .iter()
                .zip(paths)
                .map(|(s, p)| {
                    let (state, cut) = match s {
                        Shard::Absent => ("absent", None),
                        Shard::Read(_, None) => ("whole", None),
                        Shard::Read(_, Some(c)) => ("cut", Some(c)),
                    };
                    ShardJson { cut, path: p.display().to_string(), state }
                })
                .collect(),
            tensors_declared: declared,
            tensors_present: present,
        };
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
        return Ok(());
    }
    for (name, g) in &parsed {
        show(name, g, Offsets::File, o, out)?;
        writeln!(out)?;
    }
    let label = Location::of(o.model).label();
    let declared = declared.map_or_else(|| "an unknown number of".to_owned(), |d| d.to_string());
    writeln!(out, "{label}: a split model of {n} shards, incomplete: {present} of {declared} tensors are here whole")?;
    for (i, p) in paths.iter().enumerate() {
        writeln!(out, "  shard {}: {}: {}", i + 1, p.display(), state(i))?;
    }
    writeln!(out, "  (measure, diff, dissect and the surgeries need every shard whole: download the rest first)")?;
    Ok(())
}

/// The memory estimate of `m` (named `file` in errors).
///
/// # Errors
/// What the core refuses: an adapter, a header that is not a model's, settings out of range.
fn estimate<T: std::borrow::Borrow<organ_core::model::TensorEntry>>(
    file: &str,
    m: &organ_core::model::Model<T>,
    s: &Settings,
) -> Result<Estimate> {
    organ_core::memory::estimate(m, s)
        .map_err(|e| anyhow::anyhow!("{file}: --memory: {}", crate::cli::memory_error(&e)))
}

/// The memory estimate, one line per buffer and the total.
fn print_memory(out: &mut dyn Write, file: &str, e: &Estimate) -> Result<()> {
    writeln!(out, "{file}: what llama.cpp allocates at {}", e.settings_text())?;
    for l in e.lines() {
        writeln!(
            out,
            "{}",
            format!("  {:<28} {:>13}  {}", l.what, organ_core::memory::mib(l.bytes), l.note).trim_end()
        )?;
    }
    Ok(())
}
