//! Quantizing in the browser (`organ quantize`): the core plans every tensor's type and
//! the header (`organ_core::quantize::plan`, llama-quantize's decisions) and cuts each
//! tensor into slabs of rows (`organ_core::quantize::slabs`), as the CLI does; this reads
//! each slab from the dropped file (`Blob.slice`), converts its chunks on the worker pool,
//! and writes the result, in order, to where the user chose ([`Sink`]): a file on disk
//! through the File System Access API, written as it is made, or an ordered `Blob` of
//! parts offered as a download where that API is missing. Memory stays a slab or two
//! whatever the model's size; nothing is uploaded.

use crate::error::Error;
use crate::export;
use crate::pool;
use crate::reads::{worker_gone, Meter, Progress};
use crate::source::{read_buffer, Model};
use futures_util::future::join_all;
use organ_core::imatrix::{Imatrix, MAX_BYTES as MAX_IMATRIX_BYTES};
use organ_core::quantize::report::QuantizeReport;
use organ_core::quantize::slabs::{Pieces, Slab};
use organ_core::quantize::{self, Ftype, Params, Pattern, Plan, Planned, QuantImatrix};
use organ_core::recipe::choose::choose;
use organ_core::recipe::predicted;
use organ_core::recipe::report::Recipe;
use organ_core::recipe::Target;
use organ_core::GgmlType;
use std::sync::Arc;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// The values a slab holds at most: 4 Mi values, 8 MiB of F16 (16 MiB of F32, the read
/// scheduler's longest read), cut into 256 chunks for the pool.
const SLAB_VALUES: usize = 4 << 20;

/// What to quantize to: a file type (llama-quantize's TYPE), and `--tensor-type` lines
/// (a recipe's) over it, with requantizing allowed when there are lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub ftype: Ftype,
    pub lines: Vec<String>,
}

/// An importance matrix dropped beside the model: its file name and its matrix.
pub struct DroppedImatrix {
    pub name: String,
    pub imatrix: Imatrix,
}

/// Reads a dropped importance matrix (llama-imatrix's GGUF).
///
/// # Errors
/// Too large, unreadable, not an importance matrix (the core's sentence, the file named).
pub async fn read_imatrix(file: &gloo_file::File) -> Result<DroppedImatrix, Error> {
    let name = file.name();
    if file.size() > MAX_IMATRIX_BYTES {
        return Err(Error::Refused(format!("{name}: more than {MAX_IMATRIX_BYTES} bytes, not an importance matrix")));
    }
    let bytes = gloo_file::futures::read_as_bytes(file).await.map_err(|e| Error::Read(format!("{name}: {e}")))?;
    let imatrix = Imatrix::parse(&bytes)
        .map_err(|e| Error::Refused(format!("{name}: not an importance matrix llama-imatrix wrote: {e}")))?;
    Ok(DroppedImatrix { name, imatrix })
}

/// The core's settings for `req` with `imatrix`, as `organ quantize` reads its flags
/// (`--tensor-type` for each line, `--allow-requantize` with lines).
///
/// # Errors
/// A line that does not parse, named.
pub fn params(req: &Request, imatrix: Option<&DroppedImatrix>) -> Result<Params, Error> {
    let mut p = Params::new(req.ftype);
    p.allow_requantize = !req.lines.is_empty();
    p.imatrix = imatrix.map(|m| QuantImatrix::new(&m.imatrix, &m.name, &[], &[]));
    for line in &req.lines {
        p.patterns.push(Pattern::word(line).map_err(Error::refused)?);
    }
    Ok(p)
}

/// A recipe's target as the page takes it: bits per weight (`5.5bpw`, `5.5 bpw`) or the
/// file's size (`90M`, `94263616`; K, M, G, T powers of 1024), with the words
/// `organ recipe` would have been given.
///
/// # Errors
/// Neither, in a sentence saying what is expected.
pub fn target(text: &str) -> Result<(Target, String), Error> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    if let Some(b) = lower.strip_suffix("bpw") {
        return match b.trim().parse::<f64>() {
            Ok(b) if b > 0.0 && b <= 64.0 => Ok((Target::Bpw(b), format!("--target-bpw {b}"))),
            _ => Err(Error::Refused(format!("{t:?}: give bits per weight above 0, at most 64 (5.5bpw)"))),
        };
    }
    let size = organ_core::gguf::split::parse_size(t)
        .map_err(|e| Error::Refused(format!("{e}: give bits per weight (5.5bpw) or the file's size (90M)")))?;
    Ok((Target::Size(size), format!("--target-size {t}")))
}

/// The recipe for `model` within `target` (`asked`: its words) among `types` (and Q8_0),
/// predicted from `imatrix` (dropped beside the model) or from the weights alone: `organ
/// recipe MODEL --imatrix I` or `--data-free`, `--types … --target-…`'s table and lines,
/// the losses predicted by the core's steps on the pool (`crate::sensitivity`).
///
/// # Errors
/// A family's counts malformed, an importance matrix that lacks a weight or disagrees
/// with its shape, a target below the smallest recipe (the
/// core's sentence), a cancellation.
pub async fn recipe(
    model: &Model,
    imatrix: Option<&DroppedImatrix>,
    types: &[GgmlType],
    (target, asked): (Target, &str),
    cancelled: &dyn Fn() -> bool,
    on_progress: &dyn Fn(Progress),
) -> Result<Recipe, Error> {
    let types = predicted::prediction_types(types);
    let m = imatrix.map(|m| &m.imatrix);
    let preds = crate::sensitivity::predictions(model, m, &types, predicted::covered, cancelled, on_progress).await?;
    let source =
        predicted::Predicted::new(predicted::source(imatrix.map(|m| m.name.as_str())), imatrix.is_some(), types, preds);
    choose(&model.model, &model.label, &source, (target, asked), imatrix.is_some())
        .map_err(|e| Error::Refused(format!("{}, {asked}: {e}", model.label)))
}

/// `model`'s plan with `params`, as `organ quantize --dry-run` plans it.
///
/// # Errors
/// What the core refuses (a tensor it cannot quantize, a type that needs an importance
/// matrix), the model named.
pub fn plan(model: &Model, params: &Params) -> Result<Plan, Error> {
    quantize::plan(&model.model, params).map_err(|e| Error::Refused(format!("{}: {e}", model.label)))
}

/// The output's name: the model's, its type in place of the input's when the name says
/// it (`NAME-F16.gguf` → `NAME-Q4_K_M.gguf`), else `NAME-TYPE.gguf`.
pub fn out_name(label: &str, ty: &str) -> String {
    let stem = label.strip_suffix(".gguf").unwrap_or(label);
    let stem = match stem.rsplit_once(['-', '.']) {
        Some((s, last)) if is_type_name(last) => s,
        _ => stem,
    };
    format!("{stem}-{ty}.gguf")
}

fn is_type_name(s: &str) -> bool {
    quantize::ftype::NAMES.iter().any(|(n, _)| n.eq_ignore_ascii_case(s)) || s.eq_ignore_ascii_case("f16")
}

/// Where the output goes: a file chosen with `showSaveFilePicker`, written as it is made
/// (`FileSystemWritableFileStream`), or the parts of a `Blob` offered as a download at
/// the end.
pub enum Sink {
    Stream { writable: JsValue, name: String },
    Parts { parts: js_sys::Array, name: String },
}

/// `obj.name(args…)`, awaited when it returns a promise.
async fn call(obj: &JsValue, name: &str, args: &[JsValue]) -> Result<JsValue, JsValue> {
    let f: js_sys::Function = js_sys::Reflect::get(obj, &name.into())?.dyn_into()?;
    let r = f.apply(obj, &args.iter().collect::<js_sys::Array>())?;
    match r.dyn_ref::<js_sys::Promise>() {
        Some(p) => JsFuture::from(p.clone()).await,
        None => Ok(r),
    }
}

impl Sink {
    /// Asks where to save `name`: the save dialog where the browser has one (call this
    /// from a click), else a download at the end.
    ///
    /// # Errors
    /// The dialog dismissed ([`Error::Cancelled`]), or the file could not be opened.
    pub async fn choose(name: &str) -> Result<Sink, Error> {
        let window: JsValue = web_sys::window().ok_or(Error::Internal("no window"))?.into();
        let has_picker = js_sys::Reflect::get(&window, &"showSaveFilePicker".into()).is_ok_and(|f| f.is_function());
        if !has_picker {
            return Ok(Sink::Parts { parts: js_sys::Array::new(), name: name.to_owned() });
        }
        let opts = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&opts, &"suggestedName".into(), &name.into());
        let handle =
            call(&window, "showSaveFilePicker", &[opts.into()]).await.map_err(|e| {
                match js_sys::Reflect::get(&e, &"name".into()).ok().and_then(|n| n.as_string()).as_deref() {
                    Some("AbortError") => Error::Cancelled,
                    _ => Error::Browser(format!("{name}: cannot choose where to save it: {e:?}")),
                }
            })?;
        let chosen = js_sys::Reflect::get(&handle, &"name".into()).ok().and_then(|n| n.as_string());
        let writable = call(&handle, "createWritable", &[])
            .await
            .map_err(|e| Error::Browser(format!("{name}: cannot open it for writing: {e:?}")))?;
        Ok(Sink::Stream { writable, name: chosen.unwrap_or_else(|| name.to_owned()) })
    }

    /// The file's name (the one chosen in the dialog).
    pub fn name(&self) -> &str {
        match self {
            Sink::Stream { name, .. } | Sink::Parts { name, .. } => name,
        }
    }

    /// Appends `bytes`.
    async fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        if bytes.is_empty() {
            return Ok(());
        }
        let chunk = js_sys::Uint8Array::from(bytes);
        match self {
            Sink::Stream { writable, name } => call(writable, "write", &[chunk.into()])
                .await
                .map(drop)
                .map_err(|e| Error::Browser(format!("{name}: cannot write: {e:?}"))),
            Sink::Parts { parts, name } => {
                let blob = web_sys::Blob::new_with_u8_array_sequence(&js_sys::Array::of1(&chunk))
                    .map_err(|e| Error::Browser(format!("{name}: cannot keep a part: {e:?}")))?;
                parts.push(&blob);
                Ok(())
            }
        }
    }

    /// Closes the file (it appears on disk whole), or offers the parts as a download.
    async fn finish(self) -> Result<(), Error> {
        match self {
            Sink::Stream { writable, name } => call(&writable, "close", &[])
                .await
                .map(drop)
                .map_err(|e| Error::Browser(format!("{name}: cannot close: {e:?}"))),
            Sink::Parts { parts, name } => {
                let opts = web_sys::BlobPropertyBag::new();
                opts.set_type("application/octet-stream");
                let blob = web_sys::Blob::new_with_blob_sequence_and_options(&parts, &opts)
                    .map_err(|e| Error::Browser(format!("{name}: cannot compose the file: {e:?}")))?;
                export::download_blob(&name, &blob);
                Ok(())
            }
        }
    }

    /// Lets go of a file not written whole (the stream's file is left as it was).
    async fn abort(self) {
        if let Sink::Stream { writable, .. } = self {
            let _ = call(&writable, "abort", &[]).await;
        }
    }
}

/// A finished quantization: the report (`organ quantize --json`'s), bytes read, threads.
pub struct Outcome {
    pub report: QuantizeReport,
    pub bytes_read: u64,
    pub threads: usize,
}

/// Quantizes `model` with `params` as `plan` (from [`plan`]) says into `sink`. `cancelled`
/// stops it between slabs (the file is then let go); `on_progress` is called as tensors
/// finish.
///
/// # Errors
/// A read that fails, a value a type cannot hold (the tensor and
/// rows named), a write that fails, a cancellation.
pub async fn quantize(
    model: &Model,
    params: Params,
    plan: &Plan,
    mut sink: Sink,
    cancelled: &dyn Fn() -> bool,
    on_progress: &dyn Fn(Progress),
) -> Result<Outcome, Error> {
    let t0 = pool::now_ms();
    let threads = pool::start().await?;
    let params = Arc::new(params);
    let mut meter = Meter::new(plan.tensors.len(), t0, on_progress);
    meter.progress.bytes_total = plan.bytes_in;
    let name = sink.name().to_owned();
    match write(model, plan, &params, &mut sink, threads, cancelled, &mut meter).await {
        Ok(()) => sink.finish().await?,
        Err(e) => {
            sink.abort().await;
            return Err(e);
        }
    }
    meter.show_now();
    let n_elements = model.tensors.iter().map(|t| t.n_elements).sum();
    let report = QuantizeReport::new(plan, &params, model.label.clone(), vec![name], n_elements);
    Ok(Outcome { report, bytes_read: meter.progress.bytes_read, threads })
}

/// Writes the plan's one file into `sink`: the header, then each tensor and its padding.
async fn write(
    model: &Model,
    plan: &Plan,
    params: &Arc<Params>,
    sink: &mut Sink,
    threads: usize,
    cancelled: &dyn Fn() -> bool,
    meter: &mut Meter<'_>,
) -> Result<(), Error> {
    let [shard] = &plan.shards[..] else { return Err(Error::Internal("a plan of one file was asked for")) };
    sink.write(&shard.layout.header).await?;
    let zeros = [0u8; quantize::ALIGNMENT as usize];
    for (t, &(_, n)) in plan.tensors.iter().zip(&shard.layout.tensors) {
        let entry = &model.tensors[t.input];
        let file = model.files.get(entry.file).ok_or(Error::Internal("a tensor in no file"))?;
        let at = |e: Error| e.at(format!("{}: tensor {:?}", model.label, t.name));
        let mut written = 0u64;
        if t.from == t.to {
            let mut start = 0;
            while start < entry.n_bytes {
                if cancelled() {
                    return Err(Error::Cancelled);
                }
                let end = (start + crate::reads::MAX_READ).min(entry.n_bytes);
                let buf = read_buffer(file, entry.offset + start, entry.offset + end).await.map_err(at)?;
                sink.write(&js_sys::Uint8Array::new(&buf).to_vec()).await?;
                meter.read_more(end - start);
                (written, start) = (written + end - start, end);
            }
        } else {
            let weighted = quantize::weights_for(params, t).map_err(|e| at(Error::refused(e)))?.is_some();
            let pieces = Arc::new(Pieces::new(t, weighted, SLAB_VALUES).map_err(|e| at(Error::refused(e)))?);
            if pieces.bytes_out() != n || (pieces.rows * pieces.row_in) as u64 != entry.n_bytes {
                return Err(at(Error::Refused(format!("{} bytes, the plan has {n}", pieces.bytes_out()))));
            }
            let t = Arc::new(t.clone());
            for slab in pieces.slabs() {
                if cancelled() {
                    return Err(Error::Cancelled);
                }
                let r = pieces.bytes_in(&slab);
                let buf = read_buffer(file, entry.offset + r.start, entry.offset + r.end).await.map_err(at)?;
                let bytes = Arc::new(js_sys::Uint8Array::new(&buf).to_vec());
                let out = convert_slab(&t, &pieces, &slab, &bytes, params, threads).await.map_err(at)?;
                sink.write(&out).await.map_err(at)?;
                meter.read_more(r.end - r.start);
                written += out.len() as u64;
            }
        }
        if written != n {
            return Err(at(Error::Refused(format!("wrote {written} bytes, the plan has {n}"))));
        }
        sink.write(&zeros[..organ_core::gguf::writer::padding(n, quantize::ALIGNMENT) as usize]).await?;
        meter.tick();
    }
    Ok(())
}

/// Converts one slab on the pool: its chunks shared among `threads` jobs, each a run of
/// whole chunks; their outputs joined in order.
async fn convert_slab(
    t: &Arc<Planned>,
    pieces: &Arc<Pieces>,
    slab: &Slab,
    bytes: &Arc<Vec<u8>>,
    params: &Arc<Params>,
    threads: usize,
) -> Result<Vec<u8>, Error> {
    let chunks = slab.rows.len().div_ceil(pieces.chunk_rows);
    let per_job = chunks.div_ceil(threads.max(1)) * pieces.chunk_rows;
    let jobs = (0..slab.rows.len()).step_by(per_job.max(1)).map(|first| {
        let (t, p, b, params, slab) = (t.clone(), pieces.clone(), bytes.clone(), params.clone(), slab.clone());
        let rows = first..(first + per_job).min(slab.rows.len());
        pool::spawn(move || -> Result<Vec<u8>, Error> {
            let qw = quantize::weights_for(&params, &t).map_err(Error::refused)?;
            let qw = p.weights(&slab, qw).map_err(Error::refused)?;
            let (mut values, mut out) = (Vec::new(), Vec::new());
            for c in rows.clone().step_by(p.chunk_rows) {
                let end = (c + p.chunk_rows).min(rows.end);
                let src = &b[c * p.row_in..end * p.row_in];
                p.convert(&t, slab.rows.start + c, src, qw, &mut values, &mut out).map_err(Error::refused)?;
            }
            Ok(out)
        })
    });
    let mut out = Vec::with_capacity(slab.rows.len() * pieces.row_out);
    for r in join_all(jobs.collect::<Vec<_>>()).await {
        out.extend_from_slice(&r.map_err(worker_gone)??);
    }
    Ok(out)
}
