//! Models as the browser reads them: `File`s from the File API, read in byte ranges
//! (`Blob.slice`), never whole. The header is parsed incrementally by the core's
//! `Gguf::parse`, which says how many more bytes it needs.

use organ_core::gguf::display::preview;
use organ_core::gguf::split::{check_shards, Shard, SET_ID_KEY};
use organ_core::{GgmlType, Gguf};

/// The first read of a header; it grows to what the parser asks for.
const FIRST_READ: u64 = 1 << 20;
/// A header larger than this is refused (a 1T-parameter model's is a few tens of MB).
const MAX_HEADER: u64 = 1 << 30;

/// One metadata entry, for the model panel.
#[derive(Clone, Debug, PartialEq)]
pub struct MetaRow {
    pub key: String,
    pub ty: String,
    pub value: String,
}

/// One tensor: where its bytes are and what they hold.
#[derive(Clone, Debug)]
pub struct TensorRef {
    pub name: String,
    pub ty: GgmlType,
    pub dims: Vec<u64>,
    pub n_elements: u64,
    pub n_bytes: u64,
    /// Which file (shard) holds it.
    pub file: usize,
    /// Absolute offset of its data in that file.
    pub offset: u64,
}

/// A model: one file, or every shard of a split model, read as one.
pub struct Model {
    /// The (first shard's) file name, as reports name models.
    pub label: String,
    pub files: Vec<gloo_file::File>,
    pub file_bytes: u64,
    pub version: u32,
    pub architecture: Option<String>,
    pub name: Option<String>,
    pub metadata: Vec<MetaRow>,
    pub tensors: Vec<TensorRef>,
}

/// Reads `[start, end)` of a file into a JS ArrayBuffer (`Blob.arrayBuffer()`), which the
/// caller copies straight to where the bytes belong in wasm memory.
pub async fn read_buffer(file: &gloo_file::File, start: u64, end: u64) -> Result<js_sys::ArrayBuffer, String> {
    let blob = file.slice(start, end);
    let raw: &web_sys::Blob = blob.as_ref();
    let buf = wasm_bindgen_futures::JsFuture::from(raw.array_buffer())
        .await
        .map_err(|e| format!("{}: cannot read bytes {start}..{end}: {e:?}", file.name()))?;
    let buf = js_sys::ArrayBuffer::from(buf);
    if buf.byte_length() as u64 != end - start {
        return Err(format!("{}: read {} bytes at {start}, expected {}", file.name(), buf.byte_length(), end - start));
    }
    Ok(buf)
}

/// Reads `[start, end)` of a file.
pub async fn read_range(file: &gloo_file::File, start: u64, end: u64) -> Result<Vec<u8>, String> {
    let buf = read_buffer(file, start, end).await?;
    Ok(js_sys::Uint8Array::new(&buf).to_vec())
}

/// One file's header, owned.
struct Header {
    version: u32,
    arch: Option<String>,
    name: Option<String>,
    metadata: Vec<MetaRow>,
    /// `split.no`, `split.count`, `split.tensors.count`.
    split: (Option<u64>, Option<u64>, Option<u64>),
    /// The split set's id (`organ.split.id`), in shards organ wrote.
    set_id: Option<String>,
    tensors: Vec<TensorRef>,
}

async fn read_header(file: &gloo_file::File, index: usize) -> Result<Header, String> {
    let len = file.size();
    let mut prefix = read_range(file, 0, len.min(FIRST_READ)).await?;
    loop {
        match Gguf::parse(&prefix, len) {
            Ok(g) => {
                let num = |k: &str| g.get(k).and_then(|v| v.as_u64());
                let split = (num("split.no"), num("split.count"), num("split.tensors.count"));
                let metadata = g
                    .kvs
                    .iter()
                    .map(|kv| MetaRow {
                        key: kv.key.to_owned(),
                        ty: match kv.value {
                            organ_core::gguf::MetaValue::Array(a) => format!("array of {}", a.elem_type.name()),
                            v => v.value_type().name().to_owned(),
                        },
                        value: preview(&kv.value),
                    })
                    .collect();
                let tensors = g
                    .tensors
                    .iter()
                    .map(|t| TensorRef {
                        name: t.name.to_owned(),
                        ty: t.ty,
                        dims: t.shape().to_vec(),
                        n_elements: t.n_elements,
                        n_bytes: t.n_bytes,
                        file: index,
                        offset: t.file_offset,
                    })
                    .collect();
                return Ok(Header {
                    version: g.version,
                    arch: g.architecture().map(str::to_owned),
                    name: g.get("general.name").and_then(|v| v.as_str()).map(str::to_owned),
                    metadata,
                    split,
                    set_id: g.get(SET_ID_KEY).and_then(|v| v.as_str()).map(str::to_owned),
                    tensors,
                });
            }
            Err(e) => match e.needed_len() {
                Some(needed) if needed <= MAX_HEADER && needed <= len => {
                    // Grow at least geometrically, so a header read in pieces costs few reads.
                    let want = needed.max(prefix.len() as u64 * 2).min(len);
                    let more = read_range(file, prefix.len() as u64, want).await?;
                    prefix.extend_from_slice(&more);
                }
                Some(needed) => {
                    return Err(format!(
                        "{}: the header needs {needed} bytes, more than the {MAX_HEADER} organ reads",
                        file.name()
                    ))
                }
                None => return Err(format!("{}: {e}", file.name())),
            },
        }
    }
}

/// Opens the files dropped together: one GGUF, or every shard of one split model.
pub async fn open(mut files: Vec<gloo_file::File>) -> Result<Model, String> {
    files.sort_by_key(|f| f.name());
    let mut headers = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        headers.push(read_header(f, i).await?);
    }
    let n = files.len() as u64;
    let facts: Vec<Shard<'_>> = headers
        .iter()
        .map(|h| Shard {
            no: h.split.0,
            count: h.split.1,
            tensors_count: h.split.2,
            tensors: h.tensors.iter().map(|t| t.name.as_str()).collect(),
            version: h.version,
            set_id: h.set_id.as_deref(),
        })
        .collect();
    if let Err(e) = check_shards(&facts) {
        let file = files.get(e.file).map_or_else(String::new, |f| f.name());
        return Err(format!("{file}: {}", e.reason));
    }
    let file_bytes = files.iter().map(|f| f.size()).sum();
    let mut it = headers.into_iter();
    let first = it.next().ok_or("no file given")?;
    let mut tensors = first.tensors;
    for h in it {
        tensors.extend(h.tensors);
    }
    let metadata = first
        .metadata
        .into_iter()
        .filter(|m| n == 1 || !(m.key.starts_with("split.") || m.key == SET_ID_KEY))
        .collect();
    Ok(Model {
        label: files[0].name(),
        files,
        file_bytes,
        version: first.version,
        architecture: first.arch,
        name: first.name,
        metadata,
        tensors,
    })
}
