//! `organ inspect`: metadata (long arrays summarized, like gguf-dump) and one row per
//! tensor; `--json` gives everything in full. A GGUF file, a split GGUF (every shard as
//! one model), or an organ directory, shown as the GGUF `organ assemble` makes of it.
//! A selection (`--layers`, `--group`, `--name`) narrows the tensors shown.

use crate::location::{Location, Reach};
use anyhow::{bail, Context, Result};
use organ_core::gguf::cut::Cut;
use organ_core::memory::{Estimate, Settings};
use organ_core::report::inspect::{self, Offsets, ShardState};
use organ_core::report::inspect_text::{self, Row};
use organ_core::surgery::select::Selection;
use organ_core::Gguf;
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

/// One GGUF's header (a file's, or the one an organ directory assembles into), as text or
/// JSON, its tensors narrowed to the selection.
fn show(file: &str, g: &Gguf<'_>, offsets: Offsets, o: &Options<'_>, out: &mut dyn Write) -> Result<()> {
    let shown = selected(file, g.tensors.iter().map(|t| t.name), &o.selection)?;
    let memory = match &o.memory {
        Some(s) => Some(estimate(file, &organ_core::model::Model::from_gguf(g, 0), s)?),
        None => None,
    };
    if o.json {
        return json(out, &inspect::document(file, g, offsets, &o.selection, &shown, memory));
    }
    if let Some(e) = memory {
        return text(out, |w| inspect_text::memory(w, file, &e));
    }
    text(out, |w| inspect_text::header(w, file, g, offsets))?;
    if let Some(a) = inspect::adapter_of(g) {
        text(out, |w| inspect_text::adapter(w, g, &a))?;
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
    text(out, |w| inspect_text::tensors(w, &rows, g.tensors.len(), &o.selection))?;
    match Cut::of(g) {
        Some(c) => text(out, |w| inspect_text::cut(w, file, &c)),
        None => Ok(()),
    }
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
        return text(out, |w| inspect_text::memory(w, &m.label, e));
    }
    let mut metadata = Vec::new();
    for (k, v) in &m.kvs {
        let v = v.view()?;
        metadata.push((k.as_str(), v));
    }
    let shards: Vec<String> = m.shards.iter().map(|p| p.display().to_string()).collect();
    if o.json {
        return json(
            out,
            &inspect::split_document(&m.label, &m.model, &metadata, shards, &o.selection, &shown, memory),
        );
    }
    text(out, |w| inspect_text::split_header(w, &m.label, m.version, &shards, metadata.len(), m.tensors.len()))?;
    text(out, |w| inspect_text::metadata(w, metadata.iter().map(|(k, v)| (*k, *v))))?;
    let rows: Vec<Row<'_>> = shown
        .iter()
        .filter_map(|&i| m.tensors.get(i).map(|t| (i, t)))
        .map(|(i, t)| Row {
            index: i,
            name: &t.name,
            dims: &t.dims,
            ty: t.ty,
            shard: Some(t.file + 1),
            offset: t.offset,
            bytes: t.n_bytes,
        })
        .collect();
    text(out, |w| inspect_text::tensors(w, &rows, m.tensors.len(), &o.selection))
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
    let states: Vec<(String, ShardState<'_>)> = shards
        .iter()
        .zip(paths)
        .map(|(s, p)| {
            let state = match s {
                Shard::Absent => ShardState::Absent,
                Shard::Read(_, None) => ShardState::Whole,
                Shard::Read(_, Some(c)) => ShardState::Cut(c),
            };
            (p.display().to_string(), state)
        })
        .collect();
    let label = Location::of(o.model).label();
    if o.json {
        let every: Vec<Vec<usize>> = parsed.iter().map(|(_, g)| (0..g.tensors.len()).collect()).collect();
        let headers: Vec<_> = parsed
            .iter()
            .zip(&every)
            .map(|((name, g), all)| inspect::document(name, g, Offsets::File, &Selection::default(), all, None))
            .collect();
        return json(out, &inspect::partial_document(label, headers, &states, declared, present));
    }
    for (name, g) in &parsed {
        show(name, g, Offsets::File, o, out)?;
        writeln!(out)?;
    }
    text(out, |w| inspect_text::partial_tail(w, &label, &states, declared, present))
}

/// Writes what `f` renders to `out`.
fn text(out: &mut dyn Write, f: impl FnOnce(&mut String) -> std::fmt::Result) -> Result<()> {
    let mut s = String::new();
    f(&mut s)?;
    out.write_all(s.as_bytes())?;
    Ok(())
}

/// Writes `doc` to `out` as pretty JSON and a newline.
fn json(out: &mut dyn Write, doc: &impl serde::Serialize) -> Result<()> {
    serde_json::to_writer_pretty(&mut *out, doc)?;
    writeln!(out)?;
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
    organ_core::memory::estimate(m, s).map_err(|e| anyhow::anyhow!("{file}: --memory: {}", memory_error(&e)))
}

/// A memory estimate's error as the CLI and the API say it: a setting by its flag.
#[must_use]
pub fn memory_error(e: &organ_core::memory::MemoryError) -> String {
    match e {
        organ_core::memory::MemoryError::Setting(..) => format!("--{e}"),
        e => e.to_string(),
    }
}
