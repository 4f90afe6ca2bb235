//! `organ meta`: edit a GGUF's metadata and tensors (the core's
//! [`organ_core::surgery::meta`]) and write the new header, then the input's tensor data
//! copied in the kernel, never decoded: the whole data section when no tensor is removed
//! or retyped, else each kept tensor's range, a retyped tensor converted by
//! `organ quantize`'s code ([`super::quantize::convert`]). A split model is edited as one:
//! the first shard's header, the other shards copied. An organ directory is edited as the
//! GGUF it assembles into, and written as that GGUF.

use crate::atomic::Temp;
use crate::model_file::ModelFile;
use crate::write::copy_range;
use crate::write::gguf_split::shard_paths;
use anyhow::{bail, Context, Result};
use organ_core::gguf::ValueType;
use organ_core::limits::MAX_STRING_LEN;
use organ_core::report::surgery::{self, Surgery};
use organ_core::report::AnyReport;
use organ_core::surgery::meta::{self, Edit, Piece, TensorEdit, Ty};
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
    /// `KEY=VALUE:TYPE` specs whose type is required (`--set-typed`).
    pub set_typed: Vec<&'a str>,
    /// Keys and the files their values are read from.
    pub set_file: Vec<(&'a str, &'a Path)>,
    pub rm: Vec<&'a str>,
    /// (old, new).
    pub rename: Vec<(&'a str, &'a str)>,
    /// `--rename-tensor`, `--remove-tensor`, `--retype-tensor`, parsed, in that order.
    pub tensors: Vec<TensorEdit>,
    pub target: Target<'a>,
    pub json: Option<&'a Path>,
    /// Replace outputs that exist (never an input).
    pub force: bool,
}

/// A `--set-file` value's text: a regular file of UTF-8 text, at most a GGUF string's cap
/// and at most `room` bytes (what the header budget has left for it: a file that grew
/// since [`check_value_files`] measured it is read no further).
fn read_value_file(key: &str, path: &Path, room: u64) -> Result<String> {
    let f = crate::input::open(path).with_context(|| format!("--set-file {key}"))?;
    let cap = MAX_STRING_LEN.min(room);
    let mut bytes = Vec::new();
    f.take(cap + 1).read_to_end(&mut bytes).with_context(|| format!("{}: cannot read", path.display()))?;
    if bytes.len() as u64 > MAX_STRING_LEN {
        bail!("--set-file {key}: {} is more than the {MAX_STRING_LEN} bytes a GGUF string holds", path.display());
    }
    if bytes.len() as u64 > room {
        bail!(
            "--set-file {key}: {} grew past the {room} bytes the header budget (--max-header-bytes) leaves it \
             while organ read it",
            path.display()
        );
    }
    String::from_utf8(bytes).with_context(|| format!("--set-file {key}: {} is not UTF-8 text", path.display()))
}

/// Checks, before any `--set-file` is read, that the files' sizes together fit the header
/// `budget` (a string is as long in the header as in its file, a number or an array about
/// as long), as organ writes no header it would refuse to read, and holds no more of the
/// files than the header it writes.
pub fn check_value_files(o: &Options<'_>, budget: u64) -> Result<()> {
    let mut total = 0u64;
    for (key, path) in &o.set_file {
        let len = std::fs::metadata(path)
            .with_context(|| format!("--set-file {key}: {}: cannot stat", path.display()))?
            .len();
        total = total.saturating_add(len);
        if total > budget {
            bail!(
                "--set-file {key}={}: the --set-file values come to {total} bytes with this one, more than the \
                 header budget of {budget} bytes (--max-header-bytes): organ writes no header it would refuse to \
                 read",
                path.display()
            );
        }
    }
    Ok(())
}

/// The core's edits for the flags of `o`, read against the header `g` (of the file named
/// `label` in errors).
fn edits(o: &Options<'_>, g: &organ_core::Gguf<'_>, label: &str) -> Result<Vec<Edit>> {
    let mut edits = Vec::new();
    for key in &o.rm {
        edits.push(Edit::Remove { key: (*key).to_owned() });
    }
    for (from, to) in &o.rename {
        edits.push(Edit::Rename { from: (*from).to_owned(), to: (*to).to_owned() });
    }
    for spec in &o.set {
        let (key, text, ty) = meta::parse_set(spec).with_context(|| format!("--set {:.80}", spec))?;
        let value = meta::parse_value(key, text, ty.as_ref(), g.get(key)).with_context(|| label.to_owned())?;
        edits.push(Edit::Set { key: key.to_owned(), value });
    }
    for spec in &o.set_typed {
        let (key, text, ty) = meta::parse_set_typed(spec).with_context(|| format!("--set-typed {:.80}", spec))?;
        let value = meta::parse_value(key, text, Some(&ty), g.get(key)).with_context(|| label.to_owned())?;
        edits.push(Edit::Set { key: key.to_owned(), value });
    }
    let budget = organ_core::limits::max_header_bytes();
    check_value_files(o, budget)?;
    let mut read = 0u64;
    for (key, path) in &o.set_file {
        let text = read_value_file(key, path, budget.saturating_sub(read))?;
        read = read.saturating_add(text.len() as u64);
        let current = g.get(key);
        let ty = current.is_none().then_some(Ty::Scalar(ValueType::String));
        let value = meta::parse_value(key, &text, ty.as_ref(), current)
            .with_context(|| format!("--set-file {key}={}", path.display()))?;
        edits.push(Edit::Set { key: (*key).to_owned(), value });
    }
    Ok(edits)
}

/// An organ directory edited as the model it assembles into: the edits applied to the
/// header `organ assemble` would write, and the GGUF written as assemble writes it (every
/// organ file checked against its digest meanwhile), with the new metadata.
fn run_dir(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    let Target::Out(out) = o.target else {
        bail!(
            "{}: an organ directory has no GGUF header to edit in place; write a new file with --out",
            o.model.display()
        );
    };
    if let Some(e) = o.tensors.first() {
        bail!(
            "{} {:?}: tensor edits of an organ directory are not supported; organ assemble it into a GGUF and edit \
             that",
            e.flag(),
            e.spec()
        );
    }
    let (m, digests) = crate::model::organ_dir::open_unchecked(o.model)?;
    let layout = crate::write::plan_gguf(m.version, &m.kvs, &m.tensors, o.model)?;
    let g = organ_core::Gguf::parse(&layout.header, layout.file_len)
        .with_context(|| format!("{}: the GGUF it assembles into cannot be read back", o.model.display()))?;
    let label = m.label.clone();
    let edited =
        meta::edit(&g, &edits(o, &g, &label)?).with_context(|| format!("{label}: cannot edit its metadata"))?;
    let findings = meta::new_findings(&g, &edited).with_context(|| format!("{label}: the edited header"))?;
    let new = organ_core::Gguf::parse(&edited.header, edited.file_len())
        .with_context(|| format!("{label}: the edited header cannot be read back"))?;
    let kvs: Vec<_> =
        new.kvs.iter().map(|kv| (kv.key.to_owned(), organ_core::model::OwnedValue::from_meta(&kv.value))).collect();
    let (checked, staged) =
        rayon::join(|| digests.check(), || crate::write::stage_gguf(m.version, &kvs, &m.tensors, out, o.force));
    checked?;
    let (tmp, len) = staged.with_context(|| format!("assembling {}", o.model.display()))?;
    if len != edited.file_len() {
        bail!("{label}: assembled {len} bytes, where the edited header says {}", edited.file_len());
    }
    tmp.commit()?;
    finish(o, w, &edited, &findings, out.display().to_string(), 1, " (assembled from the organ directory)")
}

pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    if o.model.is_dir() {
        return run_dir(o, w);
    }
    // A split model is edited as one: its metadata is in the first shard (the others hold
    // only split.* keys), so the first shard gets the new header and the others are copied.
    // Model::open opens every shard and checks they are one model (the core's shard check).
    let files = match crate::paths::split_shards(o.model) {
        Some(_) => crate::model::Model::open(o.model)?.files,
        None => vec![std::sync::Arc::new(ModelFile::open(o.model)?)],
    };
    let file = &files[0];
    let g = file.parse()?;
    if files.len() == 1 {
        if let Some(why) = meta::shard_refusal(&g) {
            bail!("{}: {why}", o.model.display());
        }
    }
    if let (Some(e), 2..) = (o.tensors.first(), files.len()) {
        bail!("{}", e.split_refusal());
    }
    let label = file.file_name();
    let edits = edits(o, &g, &label)?;
    let edited = meta::edit_all(&g, &edits, &o.tensors)
        .with_context(|| format!("{label}: cannot edit {}", meta::what(&o.tensors)))?;
    let findings = meta::new_findings(&g, &edited).with_context(|| format!("{label}: the edited header"))?;
    let first_path = files[0].path.clone();
    let mut rewrote = "";
    let out_name = match o.target {
        Target::Out(out) => {
            let n = files.len();
            let paths = match crate::paths::split_shards(out) {
                _ if n == 1 => vec![out.to_owned()],
                Some(named) if named.len() == n => named,
                Some(named) => bail!("{}: names a set of {} shards; the model has {n}", out.display(), named.len()),
                None => shard_paths(out, n),
            };
            let mut staged = Vec::with_capacity(files.len());
            for (i, (f, path)) in files.iter().zip(&paths).enumerate() {
                let (tmp, mut dst) = Temp::file(path, o.force)?;
                let what = || format!("{}: copying the tensor data of {}", tmp.path.display(), f.file_name());
                if i == 0 {
                    dst.write_all(&edited.header).with_context(|| format!("{}: cannot write", tmp.path.display()))?;
                    write_pieces(f, &edited.pieces, &mut dst).with_context(what)?;
                } else {
                    f.with_file(|src| copy_range(src, 0, f.file_len(), &mut dst)).with_context(what)?;
                }
                staged.push(tmp);
            }
            for t in staged {
                t.commit()?;
            }
            paths[0].display().to_string()
        }
        Target::InPlace => {
            if edited.data().is_none() {
                bail!(
                    "{label}: --in-place rewrites the header alone, and removing or retyping a tensor moves the \
                     tensor data; write a new file with --out"
                );
            }
            if !edited.same_size() {
                bail!(
                    "{label}: --in-place needs the header to keep its length ({} bytes), and these edits make it {} \
                     bytes; write a new file with --out",
                    edited.old_header_len,
                    edited.header.len()
                );
            }
            rewrote = in_place(file, &edited)?;
            first_path.display().to_string()
        }
    };
    let others = match files.len() {
        1 => String::new(),
        n if matches!(o.target, Target::InPlace) => format!(" (the first of {n} shards; the others unchanged)"),
        n => meta::copied_shards(n),
    };
    finish(o, w, &edited, &findings, out_name, files.len(), &format!("{rewrote}{others}"))
}

/// Writes what follows the header, `pieces`, of the input `file` to the end of `dst`:
/// ranges in the kernel, padding, tensors converted a slab at a time as `organ quantize`
/// converts them (the tensor's bytes read whole, as it reads them).
fn write_pieces(file: &ModelFile, pieces: &[Piece], dst: &mut std::fs::File) -> Result<()> {
    let zeros = [0u8; 4096];
    for p in pieces {
        match p {
            Piece::Copy(r) => file.with_file(|src| copy_range(src, r.start, r.end - r.start, dst))?,
            Piece::Zeros(n) => {
                let mut left = *n;
                while left > 0 {
                    let k = left.min(zeros.len() as u64);
                    dst.write_all(&zeros[..k as usize])?;
                    left -= k;
                }
            }
            Piece::Convert { src, tensor, out_len } => {
                let len = usize::try_from(src.end - src.start).context("a tensor larger than memory")?;
                let mut bytes = vec![0u8; len];
                file.read_exact_at(&mut bytes, src.start)?;
                let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut *dst);
                let n = super::quantize::convert(tensor, &bytes, None, &mut out)
                    .with_context(|| format!("converting tensor {:?} to {}", tensor.name, tensor.to))?;
                out.flush()?;
                anyhow::ensure!(n == *out_len, "tensor {:?}: wrote {n} bytes, the plan has {out_len}", tensor.name);
            }
        }
    }
    Ok(())
}

/// Writes `edited` over `file`, its header keeping its length, so that a kill at any
/// instant leaves the old model or the new one, never a mix (a reader of a mix may find a
/// string's length where a value's bytes were). The bytes that change, when they lie in
/// one page, are one write that the kernel copies whole or not at all (a kill is taken
/// between pages); any other edit rewrites the file through a temp file renamed over it.
fn in_place(file: &ModelFile, edited: &meta::Edited) -> Result<&'static str> {
    let path = &file.path;
    let mut old = vec![0u8; edited.header.len()];
    file.read_exact_at(&mut old, 0).with_context(|| format!("{}: cannot read its header", path.display()))?;
    let differ = |(a, b): (&u8, &u8)| a != b;
    let Some(first) = old.iter().zip(&edited.header).position(differ) else {
        return Ok("");
    };
    let last = old.iter().zip(&edited.header).rposition(differ).unwrap_or(first);
    if first / PAGE == last / PAGE {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("{}: cannot open to write its header", path.display()))?;
        std::os::unix::fs::FileExt::write_all_at(&f, &edited.header[first..=last], first as u64)
            .and_then(|()| f.sync_data())
            .with_context(|| format!("{}: cannot write its header", path.display()))?;
        return Ok("");
    }
    // Through a link (a hub snapshot's, say) the file it names is replaced, as the one-page
    // write above writes through it; the link stays. A hard link to the old file keeps
    // the old model.
    let real = std::fs::canonicalize(path).with_context(|| format!("{}: cannot resolve", path.display()))?;
    let (tmp, mut dst) = Temp::over_input(&real)?;
    dst.write_all(&edited.header).with_context(|| format!("{}: cannot write", tmp.path.display()))?;
    write_pieces(file, &edited.pieces, &mut dst)
        .with_context(|| format!("{}: copying the tensor data of {}", tmp.path.display(), file.file_name()))?;
    tmp.commit()?;
    Ok(" (rewritten through a temp file: the edits change more than one page of its header)")
}

/// The page a write of [`in_place`] must stay in to be made whole or not at all: the
/// smallest page Linux has (a larger one holds it).
const PAGE: usize = 4096;

/// Says what was changed and written (`others`: what follows the sentence) and what the
/// check finds broken that was not before, and writes the JSON report.
fn finish(
    o: &Options<'_>,
    w: &mut dyn Write,
    edited: &meta::Edited,
    findings: &[organ_core::check::Finding],
    out_name: String,
    shards: usize,
    others: &str,
) -> Result<()> {
    for line in edited.lines() {
        writeln!(w, "{line}")?;
    }
    writeln!(w, "{}", edited.wrote(&out_name, others))?;
    for line in meta::findings_text(findings, &out_name) {
        writeln!(w, "{line}")?;
    }
    if let Some(path) = o.json {
        let report = surgery::Meta {
            model: o.model.display().to_string(),
            out: out_name,
            in_place: matches!(o.target, Target::InPlace),
            shards,
            header_bytes_before: edited.old_header_len,
            header_bytes_after: edited.header.len() as u64,
            file_bytes: edited.file_len(),
            changes: &edited.changes,
            tensor_changes: &edited.tensor_changes,
            findings,
        };
        super::outputs::write_json(AnyReport::Surgery(&Surgery::Meta(report)), path, o.force)?;
    }
    Ok(())
}
