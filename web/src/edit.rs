//! The metadata editor's write (`organ meta` in the page): the file's header read again,
//! the edits read against it and applied by the core (`organ_core::surgery::meta`, as the
//! CLI applies them), and the edited model offered as a download: a `Blob` of the new
//! header and slices of the dropped `File` (the whole data section, its offsets relative
//! to the data section's start; or, with tensors removed or retyped, each kept tensor's
//! range and its padding). No tensor byte is read but a retyped tensor's, which is
//! converted here by the core's quantizer: a model of any size is written in the time its
//! header takes, and its bytes go from the disk to the download by the browser.

use crate::error::Error;
use crate::export;
use crate::source::{self, Src};
use crate::state::PendingEdit;
use organ_core::error::Error as CoreError;
use organ_core::gguf::Gguf;
use organ_core::surgery::meta::{self, Edit, Edited, Piece, TensorEdit, Ty};

/// What was written.
pub struct Written {
    /// The (first) download's bytes.
    pub bytes: u64,
    /// What `organ meta` says it wrote (`Edited::wrote`), naming the (first) download.
    pub wrote: String,
    /// Each change as `organ meta` prints it.
    pub changes: Vec<String>,
    /// What the check finds broken that was not, as `organ meta` prints it after `wrote`.
    pub findings: Vec<String>,
}

/// The download's name for an edit of `label`: `NAME-edited.gguf`.
pub fn out_name(label: &str) -> String {
    let stem = label.strip_suffix(".gguf").unwrap_or(label);
    format!("{stem}-edited.gguf")
}

/// The downloads' names for an edit of the model in files `names` (in order): one file
/// `NAME-edited.gguf`; a split model's shards named as `organ meta --out NAME-edited.gguf`
/// names them, `NAME-edited-0000i-of-0000N.gguf` (NAME: the first shard's name before its
/// `-00001-of-0000N.gguf`, or each file's own when they are not so named).
pub fn out_names(names: &[String]) -> Vec<String> {
    let n = names.len();
    let first = names.first().map(String::as_str).unwrap_or("");
    match first.strip_suffix(&organ_core::gguf::split::shard_name("", 1, n)) {
        Some(prefix) if n > 1 => {
            (1..=n).map(|i| organ_core::gguf::split::shard_name(&format!("{prefix}-edited"), i, n)).collect()
        }
        _ => names.iter().map(|l| out_name(l)).collect(),
    }
}

/// The core's edits for `pending`, read against the header `g` as `organ meta` reads its
/// flags: a value typed by its type name, else by the key's current type, else inferred;
/// the tensor edits in the order the CLI takes them (removals, retypes, renames).
fn core_edits(g: &Gguf<'_>, pending: &[PendingEdit]) -> Result<(Vec<Edit>, Vec<TensorEdit>), CoreError> {
    let mut tensors = Vec::new();
    for kind in 0..3 {
        for p in pending {
            match (kind, p) {
                (0, PendingEdit::RemoveTensors { pattern }) => tensors.push(TensorEdit::remove(pattern)?),
                (1, PendingEdit::RetypeTensors { pattern, ty }) => {
                    tensors.push(TensorEdit::retype(&format!("{pattern}={ty}"))?)
                }
                (2, PendingEdit::RenameTensors { pattern, replacement }) => {
                    tensors.push(TensorEdit::rename(&format!("{pattern}={replacement}"))?)
                }
                _ => {}
            }
        }
    }
    let edits = pending
        .iter()
        .filter(|p| !p.is_tensor_edit())
        .map(|p| {
            Ok(match p {
                PendingEdit::Remove { key } => Edit::Remove { key: key.clone() },
                PendingEdit::Rename { from, to } => Edit::Rename { from: from.clone(), to: to.clone() },
                PendingEdit::Set { key, text, ty } => {
                    let ty = match ty.trim() {
                        "" => None,
                        t => Some(Ty::parse(t).map_err(|e| match e {
                            CoreError::BadEdit { reason, .. } => CoreError::BadEdit { key: key.clone(), reason },
                            e => e,
                        })?),
                    };
                    let value = meta::parse_value(key, text, ty.as_ref(), g.get(key))?;
                    Edit::Set { key: key.clone(), value }
                }
                _ => unreachable!("tensor edits are filtered out"),
            })
        })
        .collect::<Result<_, CoreError>>()?;
    Ok((edits, tensors))
}

/// The edits applied to the header of `file` (named `label`), and what the check finds
/// broken that was not (`organ meta`'s lines); `whole`: the file is the whole model (else
/// the first shard of a split one, all of whose shards are here).
fn edited(
    file: &Src,
    header: &[u8],
    pending: &[PendingEdit],
    whole: bool,
) -> Result<(Edited, Vec<organ_core::check::Finding>), Error> {
    let label = file.name();
    source::with_header(file, header, |g| {
        if let Some(why) = meta::shard_refusal(g).filter(|_| whole) {
            return Err(Error::Refused(format!("{label}: {why}")));
        }
        let (edits, tensors) = core_edits(g, pending).map_err(|e| Error::Refused(format!("{label}: {e}")))?;
        if let (Some(e), false) = (tensors.first(), whole) {
            return Err(Error::Refused(e.split_refusal()));
        }
        let e = meta::edit_all(g, &edits, &tensors)
            .map_err(|e| Error::Refused(format!("{label}: cannot edit {}: {e}", meta::what(&tensors))))?;
        let found = meta::new_findings(g, &e).map_err(|e| Error::Refused(format!("{label}: {e}")))?;
        Ok((e, found))
    })?
}

/// The parts of the edited file after its header, in order: slices of `file` (the blob of
/// the dropped `File`) for the bytes copied, zeros for padding, and each retyped tensor
/// read and converted by the core.
async fn data_parts(src: &Src, file: &web_sys::Blob, pieces: &[Piece]) -> Result<js_sys::Array, Error> {
    let parts = js_sys::Array::new();
    for p in pieces {
        match p {
            Piece::Copy(r) => {
                let slice = file
                    .slice_with_f64_and_f64(r.start as f64, r.end as f64)
                    .map_err(|e| Error::Browser(format!("{e:?}")))?;
                parts.push(&slice);
            }
            Piece::Zeros(n) => {
                parts.push(&js_sys::Uint8Array::new_with_length(u32::try_from(*n).unwrap_or(u32::MAX)));
            }
            Piece::Convert { src: range, tensor, out_len } => {
                let bytes = source::read_range(src, range.start, range.end).await?;
                let out = meta::convert_tensor(tensor, &bytes)
                    .map_err(|e| Error::Refused(format!("{}: tensor {:?}: {e}", src.name(), tensor.name)))?;
                if out.len() as u64 != *out_len {
                    return Err(Error::Internal("a converted tensor of another length than planned"));
                }
                parts.push(&js_sys::Uint8Array::from(&out[..]));
            }
        }
    }
    Ok(parts)
}

/// Applies `pending` to the model in `files` (one file, or every shard of a split model in
/// order) and offers the result as downloads, as `organ meta` writes it: the first file's
/// new header and its tensor data, then each other shard as it is.
///
/// # Errors
/// A model at a URL (its bytes are not here to slice), the header unreadable, an edit
/// the core refuses (the CLI's message, naming the file and the key).
pub async fn write(files: &[Src], pending: &[PendingEdit]) -> Result<Written, Error> {
    let mut blobs: Vec<web_sys::Blob> = Vec::with_capacity(files.len());
    for file in files {
        let Src::File(f) = file else {
            return Err(Error::Refused(format!(
                "{}: a model at a URL; download it and drop the file to write its edited copy",
                file.what()
            )));
        };
        let whole: &web_sys::Blob = f.as_ref();
        blobs.push(whole.clone());
    }
    let Some(file) = files.first() else { return Err(Error::Internal("no file to write")) };
    let header = source::header_bytes(file, Vec::new()).await?;
    let (e, found) = edited(file, &header, pending, files.len() == 1)?;
    let parts = data_parts(file, &blobs[0], &e.pieces).await?;
    parts.unshift(&js_sys::Uint8Array::from(&e.header[..]));
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type("application/octet-stream");
    let blob = web_sys::Blob::new_with_blob_sequence_and_options(&parts, &opts)
        .map_err(|e| Error::Browser(format!("{}: cannot compose the edited file: {e:?}", file.name())))?;
    if blob.size() as u64 != e.file_len() {
        return Err(Error::Browser(format!(
            "{}: the edited file is {} bytes, expected {}",
            file.name(),
            blob.size(),
            e.file_len()
        )));
    }
    let names = out_names(&files.iter().map(Src::name).collect::<Vec<_>>());
    blobs[0] = blob;
    for (name, blob) in names.iter().zip(&blobs) {
        export::download_blob(name, blob);
    }
    Ok(Written {
        bytes: e.file_len(),
        wrote: e.wrote(&names[0], &meta::copied_shards(files.len())),
        changes: e.lines(),
        findings: meta::findings_text(&found, &names[0]),
    })
}

/// The text the editor starts from for `key`'s value in `model` (`None`: none reads back
/// to the same bytes, see the core's `value_text`).
pub fn start_text(model: &organ_core::model::Model, key: &str) -> Option<String> {
    let v = model.kvs.iter().find(|(k, _)| k == key)?.1.view().ok()?;
    meta::value_text(&v)
}
