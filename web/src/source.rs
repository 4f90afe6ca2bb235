//! Models as the browser reads them: `File`s from the File API, read in byte ranges
//! (`Blob.slice`), never whole; or a file at a URL, read by range requests
//! (`crate::url_source`). The header is read in growing pieces as the core's `HeaderRead`
//! asks (it says how many more bytes it needs); the model is the core's (`organ_core::model`),
//! joined from the shards there. Only where the bytes are ([`Src`]) is the browser's own.

use crate::error::Error;
use crate::url_source::UrlFile;
use organ_core::gguf::cut::Cut;
use organ_core::gguf::display::{preview, whole_string};
use organ_core::gguf::{Gguf, MetaValue};
use organ_core::gguf::{HeaderRead, Step};
use organ_core::limits::HEADER_FIRST_READ;
use organ_core::model;
use std::ops::Deref;
use std::rc::Rc;

/// Where a model file's bytes are: a file chosen or dropped, or a file at a URL.
#[derive(Clone)]
pub enum Src {
    File(gloo_file::File),
    Url(Rc<UrlFile>),
}

impl Src {
    /// The file's name (a URL's last path segment).
    pub fn name(&self) -> String {
        match self {
            Src::File(f) => f.name(),
            Src::Url(u) => u.name.clone(),
        }
    }

    /// How errors name it: the file's name, or the URL.
    pub fn what(&self) -> String {
        match self {
            Src::File(f) => f.name(),
            Src::Url(u) => u.url.clone(),
        }
    }

    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        match self {
            Src::File(f) => f.size(),
            Src::Url(u) => u.size,
        }
    }
}

/// One metadata entry, for the model panel.
#[derive(Clone, Debug, PartialEq)]
pub struct MetaRow {
    pub key: String,
    pub ty: String,
    /// The value on one line, long strings cut and arrays summarized.
    pub value: String,
    /// The whole string, when `value` cut it (a chat template), shown on demand.
    pub whole: Option<String>,
}

/// A model: one file, or every shard of a split model, read as one. It derefs to the
/// core's model (its tensors' `file` indexes `files`).
pub struct Model {
    /// The (first shard's) file name, as reports name models.
    pub label: String,
    pub files: Vec<Src>,
    pub file_bytes: u64,
    /// The metadata as the model panel shows it.
    pub metadata: Vec<MetaRow>,
    pub model: model::Model,
}

impl Deref for Model {
    type Target = model::Model;
    fn deref(&self) -> &model::Model {
        &self.model
    }
}

/// Reads `[start, end)` of a file into a JS ArrayBuffer (`Blob.arrayBuffer()`, or a range
/// request's body), which the caller copies straight to where the bytes belong in wasm
/// memory.
pub async fn read_buffer(src: &Src, start: u64, end: u64) -> Result<js_sys::ArrayBuffer, Error> {
    let file = match src {
        Src::File(f) => f,
        Src::Url(u) => return u.read(start, end).await,
    };
    let blob = file.slice(start, end);
    let raw: &web_sys::Blob = blob.as_ref();
    let buf = wasm_bindgen_futures::JsFuture::from(raw.array_buffer())
        .await
        .map_err(|e| Error::Read(format!("{}: cannot read bytes {start}..{end}: {e:?}", file.name())))?;
    let buf = js_sys::ArrayBuffer::from(buf);
    if buf.byte_length() as u64 != end - start {
        return Err(Error::Read(format!(
            "{}: read {} bytes at {start}, expected {}",
            file.name(),
            buf.byte_length(),
            end - start
        )));
    }
    Ok(buf)
}

/// Reads `[start, end)` of a file.
pub async fn read_range(file: &Src, start: u64, end: u64) -> Result<Vec<u8>, Error> {
    let buf = read_buffer(file, start, end).await?;
    Ok(js_sys::Uint8Array::new(&buf).to_vec())
}

/// One file's header bytes, read in growing pieces as the core's [`HeaderRead`] asks
/// (`prefix`: bytes from its start already read), up to where it parses whole.
pub async fn header_bytes(file: &Src, prefix: Vec<u8>) -> Result<Vec<u8>, Error> {
    header_bytes_as(file, prefix, HeaderRead::new(file.size())).await
}

async fn header_bytes_as(file: &Src, mut prefix: Vec<u8>, header: HeaderRead) -> Result<Vec<u8>, Error> {
    if prefix.is_empty() {
        prefix = read_range(file, 0, header.first()).await?;
    }
    loop {
        let want = match header.step(&prefix).map_err(|e| Error::Read(format!("{}: {e}", file.what())))? {
            Step::Done(_) => return Ok(prefix),
            Step::Need(want) => want,
        };
        let more = read_range(file, prefix.len() as u64, want).await?;
        prefix.extend_from_slice(&more);
    }
}

/// The header `bytes` (from [`header_bytes`]) of `file`, parsed, handed to `f`.
pub fn with_header<R>(file: &Src, bytes: &[u8], f: impl FnOnce(&Gguf<'_>) -> R) -> Result<R, Error> {
    with_header_as(file, bytes, HeaderRead::new(file.size()), f)
}

fn with_header_as<R>(file: &Src, bytes: &[u8], header: HeaderRead, f: impl FnOnce(&Gguf<'_>) -> R) -> Result<R, Error> {
    match header.step(bytes).map_err(|e| Error::Read(format!("{}: {e}", file.what())))? {
        Step::Done(g) => Ok(f(&g)),
        Step::Need(want) => {
            Err(Error::Read(format!("{}: the header needs {want} bytes, {} were read", file.what(), bytes.len())))
        }
    }
}

/// One file's model, from its header.
async fn read_header(file: &Src, index: usize, prefix: Vec<u8>) -> Result<model::Model, Error> {
    let bytes = header_bytes(file, prefix).await?;
    with_header(file, &bytes, |g| model::Model::from_gguf(g, index))
}

/// One file's model from its header, the file possibly cut short (a partial download),
/// and what it lacks if it is ("NAME: cut short: …", the core's sentence).
async fn read_header_cut(file: &Src, index: usize, prefix: Vec<u8>) -> Result<(model::Model, Option<String>), Error> {
    let read = HeaderRead::cut_short(file.size());
    let bytes = header_bytes_as(file, prefix, read).await?;
    with_header_as(file, &bytes, read, |g| {
        let cut = Cut::of(g).map(|c| format!("{}: {}", file.name(), c.describe()));
        (model::Model::from_gguf(g, index), cut)
    })
}

/// The model panel's row for one metadata entry.
fn meta_row(key: &str, v: &model::OwnedValue) -> MetaRow {
    match v.view() {
        Ok(v) => MetaRow {
            key: key.to_owned(),
            ty: match v {
                MetaValue::Array(a) => format!("array of {}", a.elem_type.name()),
                v => v.value_type().name().to_owned(),
            },
            value: preview(&v),
            whole: whole_string(&v),
        },
        // Not reached: values come from a parsed header.
        Err(e) => MetaRow { key: key.to_owned(), ty: "?".into(), value: e.to_string(), whole: None },
    }
}

/// Opens the files dropped together: one GGUF, or every shard of one split model.
pub async fn open(mut files: Vec<gloo_file::File>) -> Result<Model, Error> {
    files.sort_by_key(|f| f.name());
    let files: Vec<Src> = files.into_iter().map(Src::File).collect();
    let mut parts = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        parts.push(read_header(f, i, Vec::new()).await?);
    }
    joined(files, parts)
}

/// Opens the files dropped together to be measured: a model (one GGUF, or every shard of
/// one split model), or a LoRA adapter, alone or with its base (every shard of it) beside
/// it. The second is the base, when there is one.
pub async fn open_measured(mut files: Vec<gloo_file::File>) -> Result<(Model, Option<Model>), Error> {
    files.sort_by_key(|f| f.name());
    let files: Vec<Src> = files.into_iter().map(Src::File).collect();
    let mut parts = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        parts.push(read_header(f, i, Vec::new()).await?);
    }
    let adapters: Vec<usize> = (0..parts.len()).filter(|&i| organ_core::lora::is_adapter(&parts[i])).collect();
    let [k] = adapters[..] else { return Ok((joined(files, parts)?, None)) };
    if files.len() == 1 {
        return Ok((joined(files, parts)?, None));
    }
    let (mut files, mut parts) = (files, parts);
    let mut adapter = parts.remove(k);
    // Each model's files are numbered among its own: the adapter's one is 0, the base's
    // shards follow it taken out.
    for t in &mut adapter.tensors {
        t.file = 0;
    }
    let adapter = joined(vec![files.remove(k)], vec![adapter])?;
    for (i, p) in parts.iter_mut().enumerate() {
        for t in &mut p.tensors {
            t.file = i;
        }
    }
    Ok((adapter, Some(joined(files, parts)?)))
}

/// Opens the files dropped together for their headers alone (inspect mode): one GGUF, or
/// every shard of one split model, any of them possibly cut short (a download under way).
/// The model is as the headers say; each file cut short says what it lacks.
pub async fn open_headers(mut files: Vec<gloo_file::File>) -> Result<(Model, Vec<String>), Error> {
    files.sort_by_key(|f| f.name());
    let files: Vec<Src> = files.into_iter().map(Src::File).collect();
    let (mut parts, mut cuts) = (Vec::with_capacity(files.len()), Vec::new());
    for (i, f) in files.iter().enumerate() {
        let (part, cut) = read_header_cut(f, i, Vec::new()).await?;
        parts.push(part);
        cuts.extend(cut);
    }
    Ok((joined(files, parts)?, cuts))
}

/// Opens a model at a URL, its headers read by range requests: one GGUF, or, for the URL
/// of a llama.cpp shard (`…/NAME-00002-of-00005.gguf`), every shard, its siblings by name
/// (the core's `shard_urls`, the query kept).
pub async fn open_url(url: &str) -> Result<Model, Error> {
    let url = url.trim();
    let urls = organ_core::gguf::split::shard_urls(url).unwrap_or_else(|| vec![url.to_owned()]);
    let (mut files, mut parts) = (Vec::with_capacity(urls.len()), Vec::with_capacity(urls.len()));
    for (i, u) in urls.iter().enumerate() {
        let (file, first) = UrlFile::open(u, HEADER_FIRST_READ).await?;
        let src = Src::Url(Rc::new(file));
        parts.push(read_header(&src, i, first).await?);
        files.push(src);
    }
    joined(files, parts)
}

/// The model of `files`, each one's header parsed into `parts`.
fn joined(files: Vec<Src>, parts: Vec<model::Model>) -> Result<Model, Error> {
    let model = model::Model::join(parts).map_err(|e| {
        let file = files.get(e.file).map_or_else(String::new, Src::what);
        Error::Refused(format!("{file}: {}", e.reason))
    })?;
    let file_bytes = files.iter().map(|f| f.size()).sum();
    let metadata = model.kvs.iter().map(|(k, v)| meta_row(k, v)).collect();
    Ok(Model { label: files[0].name(), files, file_bytes, metadata, model })
}
