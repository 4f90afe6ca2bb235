//! `organ meta`: edit a GGUF's metadata (the core's [`organ_core::surgery::meta`]) and
//! write the new header, then the input's tensor data copied in the kernel, never decoded.

use crate::atomic::Temp;
use crate::model_file::ModelFile;
use crate::write::copy_range;
use anyhow::{bail, Context, Result};
use organ_core::gguf::ValueType;
use organ_core::limits::MAX_STRING_LEN;
use organ_core::surgery::meta::{self, Change, Edit, Ty};
use serde::Serialize;
use std::io::{Read, Write};
use std::path::Path;

/// Where the edited model goes.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    /// A new file.
    Out(&'a Path),
    /// Over the input's header, which must keep its length.
    InPlace,
}

pub struct Options<'a> {
    pub model: &'a Path,
    /// `KEY=VALUE[:TYPE]`.
    pub set: Vec<&'a str>,
    /// Keys and the files their values are read from.
    pub set_file: Vec<(&'a str, &'a Path)>,
    pub rm: Vec<&'a str>,
    /// (old, new).
    pub rename: Vec<(&'a str, &'a str)>,
    pub target: Target<'a>,
    pub json: Option<&'a Path>,
    /// Replace outputs that exist (never an input).
    pub force: bool,
}

/// The JSON report: what was edited, and the files' sizes.
#[derive(Serialize)]
struct Report<'a> {
    model: String,
    out: String,
    in_place: bool,
    header_bytes_before: u64,
    header_bytes_after: u64,
    file_bytes: u64,
    changes: &'a [Change],
}

/// A `--set-file` value's text: a regular file of UTF-8 text, at most a GGUF string's cap.
fn read_value_file(key: &str, path: &Path) -> Result<String> {
    let f = crate::input::open(path).with_context(|| format!("--set-file {key}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_STRING_LEN + 1).read_to_end(&mut bytes).with_context(|| format!("{}: cannot read", path.display()))?;
    if bytes.len() as u64 > MAX_STRING_LEN {
        bail!("--set-file {key}: {} is more than the {MAX_STRING_LEN} bytes a GGUF string holds", path.display());
    }
    String::from_utf8(bytes).with_context(|| format!("--set-file {key}: {} is not UTF-8 text", path.display()))
}

pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    if crate::source::split_shards(o.model).is_some() {
        bail!(
            "{}: a shard of a split model; organ meta edits one GGUF file (join the shards with llama-gguf-split \
             --merge, edit, and split again)",
            o.model.display()
        );
    }
    if o.model.is_dir() {
        bail!("{}: an organ directory; organ meta edits a GGUF file (organ assemble makes one)", o.model.display());
    }
    let file = ModelFile::open(o.model)?;
    let g = file.parse()?;
    if let Some(why) = meta::shard_refusal(&g) {
        bail!("{}: {why}", o.model.display());
    }
    let label = file.file_name();
    let mut edits = Vec::new();
    for key in &o.rm {
        edits.push(Edit::Remove { key: (*key).to_owned() });
    }
    for (from, to) in &o.rename {
        edits.push(Edit::Rename { from: (*from).to_owned(), to: (*to).to_owned() });
    }
    for spec in &o.set {
        let (key, text, ty) = meta::parse_set(spec).with_context(|| format!("--set {:.80}", spec))?;
        let value = meta::parse_value(key, text, ty.as_ref(), g.get(key)).with_context(|| label.clone())?;
        edits.push(Edit::Set { key: key.to_owned(), value });
    }
    for (key, path) in &o.set_file {
        let text = read_value_file(key, path)?;
        let current = g.get(key);
        let ty = current.is_none().then_some(Ty::Scalar(ValueType::String));
        let value = meta::parse_value(key, &text, ty.as_ref(), current)
            .with_context(|| format!("--set-file {key}={}", path.display()))?;
        edits.push(Edit::Set { key: (*key).to_owned(), value });
    }
    let edited = meta::edit(&g, &edits).with_context(|| format!("{label}: cannot edit its metadata"))?;
    let len = edited.data.end - edited.data.start;
    let out_name = match o.target {
        Target::Out(out) => {
            let (tmp, mut f) = Temp::file(out, o.force)?;
            f.write_all(&edited.header).with_context(|| format!("{}: cannot write", tmp.path.display()))?;
            file.with_file(|src| copy_range(src, edited.data.start, len, &mut f))
                .with_context(|| format!("{}: copying the tensor data of {label}", tmp.path.display()))?;
            tmp.commit()?;
            out.display().to_string()
        }
        Target::InPlace => {
            if !edited.same_size() {
                bail!(
                    "{label}: --in-place needs the header to keep its length ({} bytes), and these edits make it {} \
                     bytes; write a new file with --out",
                    edited.old_header_len,
                    edited.header.len()
                );
            }
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(o.model)
                .with_context(|| format!("{}: cannot open to write its header", o.model.display()))?;
            std::os::unix::fs::FileExt::write_all_at(&f, &edited.header, 0)
                .and_then(|()| f.sync_data())
                .with_context(|| format!("{}: cannot write its header", o.model.display()))?;
            o.model.display().to_string()
        }
    };
    for c in &edited.changes {
        writeln!(w, "{}", c.line())?;
    }
    writeln!(
        w,
        "wrote {out_name} ({} bytes): header {} → {} bytes, tensor data copied as is",
        edited.file_len(),
        edited.old_header_len,
        edited.header.len()
    )?;
    if let Some(path) = o.json {
        let report = Report {
            model: o.model.display().to_string(),
            out: out_name,
            in_place: matches!(o.target, Target::InPlace),
            header_bytes_before: edited.old_header_len,
            header_bytes_after: edited.header.len() as u64,
            file_bytes: edited.file_len(),
            changes: &edited.changes,
        };
        crate::atomic::write_json(path, o.force, &report)?;
    }
    Ok(())
}
