//! `organ._organ`: the native half of the Python package `organ` (python/organ/ is the
//! other). Each function calls the function the CLI's command calls (`organ_native::cmd`),
//! with the GIL released, and returns what the command would write: a report as its JSON
//! (and CSV) text, rendered by the same registry of formats, so that `to_json()` is the
//! file `organ measure --json` writes, byte for byte. The Python side parses it on
//! demand into rows, dicts and DataFrames.
//!
//! Work runs on a thread of its own while the calling thread waits with the GIL released,
//! waking every [`POLL`] to run Python's signal handlers (Ctrl-C raises KeyboardInterrupt
//! at once) and to pass progress to a callback.

/// See native-cli/Cargo.toml: per-tensor buffers are reused instead of faulted in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget};
use organ_core::report::formats::{AnyReport, CSV, JSON};
use organ_core::zmeasure::Mode;
use organ_native::cmd;
use organ_native::cmd::outputs::rendered;
use organ_native::model::Model;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyByteArray;
use rayon::prelude::*;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

pyo3::create_exception!(
    _organ,
    OrganError,
    PyException,
    "An error of organ's: the message names the file (and offset or tensor) and what was expected. \
     Attributes: `kind` (\"format\", \"io\" or \"other\"), `path` and `offset` when known."
);

/// How often a waiting call looks at signals and progress.
const POLL: Duration = Duration::from_millis(50);

/// Elements a dequantizing task takes at a time (a multiple of every block size).
const DEQUANTIZE_CHUNK: usize = 1 << 20;

/// `e` as an [`OrganError`], its message and the typed fields of `organ --progress
/// jsonl`'s error event (credentials in URLs redacted there).
fn organ_error(py: Python<'_>, e: &anyhow::Error) -> PyErr {
    let ev = organ_native::progress::error_event(e);
    let err = OrganError::new_err(organ_native::progress::redact(&ev.message));
    let value = err.value(py);
    let kind = match ev.kind {
        organ_native::progress::ErrorKind::Format => "format",
        organ_native::progress::ErrorKind::Io => "io",
        _ => "other",
    };
    // Setting attributes on a fresh exception instance cannot fail but for memory.
    let _ = value.setattr("kind", kind);
    let _ = value.setattr("path", ev.path);
    let _ = value.setattr("offset", ev.offset);
    err
}

/// Runs `work` on a thread of its own, in a rayon pool of `threads` workers when given,
/// while this one waits with the GIL released. Every [`POLL`] it takes the GIL to run
/// Python's signal handlers (a KeyboardInterrupt is raised at once) and, with a `bar`
/// and a `callback`, calls `callback(done, total)` when the bar has moved.
///
/// The work's thread and the pool's are joined before this returns. A call that ends
/// early (a signal, the callback's exception) abandons the bar: work that watches it (a
/// measure) stops at its next tensor, or streaming its next read, and is waited for; the
/// exception then carries `organ_tensors_after_stop`, the tensors finished after the stop
/// (at most one per thread: those under way). Work with no bar finishes on its own
/// thread, its result dropped.
fn run<T: Send + 'static>(
    py: Python<'_>,
    threads: Option<usize>,
    bar: Option<(ProgressBar, Option<Py<PyAny>>)>,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> PyResult<T> {
    let (tx, rx) = mpsc::channel();
    // A dropped rayon pool only tells its threads to end: they are spawned here, to be
    // joined.
    let pool_threads: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
    let pool = match threads {
        Some(n) => {
            let handles = Arc::clone(&pool_threads);
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .spawn_handler(move |t| {
                    let h = std::thread::Builder::new().name("organ-pool".into()).spawn(move || t.run())?;
                    handles.lock().unwrap_or_else(PoisonError::into_inner).push(h);
                    Ok(())
                })
                .build()
                .map_err(|e| OrganError::new_err(format!("cannot start {n} threads: {e}")))?;
            Some(pool)
        }
        None => None,
    };
    let worker = std::thread::Builder::new()
        .name("organ".into())
        .spawn(move || {
            let r = match pool {
                // The pool is dropped when `install` returns, before the result is sent.
                Some(p) => p.install(work),
                None => work(),
            };
            // The receiver is gone when the caller was interrupted: nobody wants the result.
            let _ = tx.send(r);
        })
        .map_err(|e| OrganError::new_err(format!("cannot start a thread: {e}")))?;
    // The work's thread, then the pool's, which end once the pool is dropped. A thread that
    // panicked is joined all the same; the panic is reported below.
    let join = move |py: Python<'_>| {
        py.detach(move || {
            let _ = worker.join();
            let handles = std::mem::take(&mut *pool_threads.lock().unwrap_or_else(PoisonError::into_inner));
            for h in handles {
                let _ = h.join();
            }
        })
    };
    let mut shown = (u64::MAX, u64::MAX);
    let mut rx = rx;
    let early = loop {
        // The receiver is Send but not Sync: it goes into the closure and comes back.
        let (got, back) = py.detach(move || (rx.recv_timeout(POLL), rx));
        rx = back;
        match got {
            Ok(r) => {
                join(py);
                if let Some((bar, Some(callback))) = &bar {
                    report_progress(py, bar, callback, &mut shown)?;
                }
                return r.map_err(|e| organ_error(py, &e));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let looked = py.check_signals().and_then(|()| match &bar {
                    Some((bar, Some(callback))) => report_progress(py, bar, callback, &mut shown),
                    _ => Ok(()),
                });
                if let Err(e) = looked {
                    break e;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                join(py);
                return Err(OrganError::new_err("organ's worker thread panicked (a bug: please report it)"));
            }
        }
    };
    // Ended early: the work stops at its next tensor (organ_native::progress::stopped).
    if let Some((bar, _)) = &bar {
        bar.abandon();
        let at = bar.position();
        join(py);
        let after = bar.position().saturating_sub(at);
        // An exception whose type refuses new attributes goes on without it.
        let _ = early.value(py).setattr("organ_tensors_after_stop", after);
    }
    Err(early)
}

/// Calls `callback(done, total)` when `bar` has moved since `shown`.
fn report_progress(py: Python<'_>, bar: &ProgressBar, callback: &Py<PyAny>, shown: &mut (u64, u64)) -> PyResult<()> {
    let now = (bar.position(), bar.length().unwrap_or(0));
    if now != *shown && now.1 > 0 {
        *shown = now;
        callback.call1(py, now)?;
    }
    Ok(())
}

/// A bar that counts and never draws: the module's progress goes to a callback.
fn quiet_bar() -> ProgressBar {
    ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden())
}

/// `organ inspect PATH --json`: the model's metadata and tensors, as JSON text.
#[pyfunction]
fn inspect(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    run(py, None, None, move || {
        let opts = cmd::inspect::Options { model: &path, json: true, selection: Default::default(), memory: None };
        let mut out = Vec::new();
        cmd::inspect::run(&opts, &mut out)?;
        Ok(String::from_utf8(out)?)
    })
}

/// `organ measure PATH --json J --csv C`: the θ report's JSON and CSV texts.
#[pyfunction]
#[pyo3(signature = (path, sigma=false, exact=false, experts=false, stream=false, threads=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn measure(
    py: Python<'_>,
    path: PathBuf,
    sigma: bool,
    exact: bool,
    experts: bool,
    stream: bool,
    threads: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(String, String)> {
    if sigma && exact {
        return Err(OrganError::new_err("sigma and exact cannot both be asked for (as --sigma and --exact)"));
    }
    let mode = match (sigma, exact) {
        (true, _) => Mode::Sigma,
        (_, true) => Mode::Exact,
        _ => Mode::Sampled,
    };
    let opts = cmd::measure::Options {
        models: vec![path],
        files: Default::default(),
        summary_only: false,
        wells: organ_core::report::WELLS,
        all_wells: false,
        verdicts: Vec::new(),
        stream,
        cache: None,
        force: false,
        mode,
        experts,
        base: None,
    };
    let bar = quiet_bar();
    let watched = (bar.clone(), progress);
    run(py, threads, Some(watched), move || {
        let report = cmd::measure::report(&opts, &bar)?;
        let report = AnyReport::Measure(&report);
        Ok((rendered(report, &JSON)?, rendered(report, &CSV)?))
    })
}

/// `organ diff A B --json J --csv C`: the compare report's JSON and CSV texts.
#[pyfunction]
#[pyo3(signature = (a, b, stream=false, threads=None))]
fn diff(py: Python<'_>, a: PathBuf, b: PathBuf, stream: bool, threads: Option<usize>) -> PyResult<(String, String)> {
    run(py, threads, None, move || {
        let report = cmd::diff::compare_models(&a, &b, stream)?;
        let report = AnyReport::Compare(&report);
        Ok((rendered(report, &JSON)?, rendered(report, &CSV)?))
    })
}

/// `organ check PATH --json J`: the check report's JSON text, and whether any finding is
/// an error (the CLI's exit status 1).
#[pyfunction]
#[pyo3(signature = (path, stream=false, threads=None, derived_from=None, imatrix=None))]
fn check(
    py: Python<'_>,
    path: PathBuf,
    stream: bool,
    threads: Option<usize>,
    derived_from: Option<PathBuf>,
    imatrix: Option<PathBuf>,
) -> PyResult<(String, bool)> {
    run(py, threads, None, move || {
        anyhow::ensure!(
            imatrix.is_none() || derived_from.is_some(),
            "imatrix is the matrix a model derived from another was quantized with: give derived_from too"
        );
        let o = cmd::check::Options {
            model: path,
            files: Default::default(),
            stream,
            force: false,
            base: None,
            derived_from,
            imatrix,
        };
        let report = cmd::check::report(&o)?;
        Ok((rendered(AnyReport::Check(&report), &JSON)?, report.has_errors()))
    })
}

/// `organ quantize SRC DST TYPE [THREADS]` with llama-quantize's flags: writes DST and
/// returns each tensor's (name, type in, type out), the data bytes in and out, and how many
/// tensors fell back for their row length.
#[pyfunction]
#[pyo3(signature = (src, dst, ftype, threads=None, imatrix=None, include_weights=Vec::new(),
    exclude_weights=Vec::new(), pure=false, leave_output_tensor=false, output_tensor_type=None,
    token_embedding_type=None, tensor_types=Vec::new(), tensor_type_file=None,
    allow_requantize=false, dry_run=false, force=false, override_kv=Vec::new(), prune_layers=None,
    keep_split=false))]
#[allow(clippy::too_many_arguments)]
fn quantize(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    ftype: String,
    threads: Option<usize>,
    imatrix: Option<PathBuf>,
    include_weights: Vec<String>,
    exclude_weights: Vec<String>,
    pure: bool,
    leave_output_tensor: bool,
    output_tensor_type: Option<String>,
    token_embedding_type: Option<String>,
    tensor_types: Vec<String>,
    tensor_type_file: Option<PathBuf>,
    allow_requantize: bool,
    dry_run: bool,
    force: bool,
    override_kv: Vec<String>,
    prune_layers: Option<String>,
    keep_split: bool,
) -> PyResult<Quantized> {
    run(py, None, None, move || {
        let ftype = organ_core::quantize::Ftype::parse(&ftype)
            .with_context(|| format!("invalid type {ftype:?}: give one llama-quantize lists (Q4_K_M, Q8_0, …)"))?;
        let flags = cmd::quantize::Flags {
            imatrix: imatrix.as_deref(),
            include_weights: &include_weights,
            exclude_weights: &exclude_weights,
            pure,
            leave_output_tensor,
            allow_requantize,
            dry_run,
            output_tensor_type: output_tensor_type.as_deref(),
            token_embedding_type: token_embedding_type.as_deref(),
            tensor_types: &tensor_types,
            tensor_type_file: tensor_type_file.as_deref(),
            override_kv: &override_kv,
            prune_layers: prune_layers.as_deref(),
            keep_split,
        };
        let params = cmd::quantize::params(ftype, &flags)?;
        organ_native::input::declare(&src);
        if !dry_run && !keep_split {
            organ_native::input::check_dest(&dst, force)?;
        }
        let o =
            cmd::quantize::Options { input: &src, output: &dst, params, force, threads, reports: Default::default() };
        let r = cmd::quantize::run(&o, &mut std::io::sink())?;
        let types = r.tensors.iter().map(|t| (t.name.clone(), t.from.name(), t.to.name())).collect();
        Ok((types, r.bytes_in, r.bytes_out, r.n_fallback))
    })
}

/// What [`quantize`] returns: (name, type in, type out) per tensor in the order written,
/// the data bytes in and out, the tensors that fell back.
type Quantized = (Vec<(String, &'static str, &'static str)>, u64, u64, u32);

/// Tensor `name` of the model at `path`, dequantized to f32 by the core (the same bits as
/// gguf-py's `dequantize`): its values as little-endian f32 bytes, its shape (ggml's
/// order, innermost first) and its type's name.
#[pyfunction]
#[pyo3(signature = (path, name, threads=None))]
fn tensor<'py>(
    py: Python<'py>,
    path: PathBuf,
    name: String,
    threads: Option<usize>,
) -> PyResult<(Bound<'py, PyByteArray>, Vec<u64>, &'static str)> {
    let (values, dims, ty) = run(py, threads, None, move || dequantized(&path, &name))?;
    let bytes = PyByteArray::new_with(py, values.len() * 4, |b| {
        for (o, v) in b.chunks_exact_mut(4).zip(&values) {
            o.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    })?;
    Ok((bytes, dims, ty))
}

/// [`tensor`]'s work: the model opened as the commands open it, the tensor's bytes (mapped,
/// or read for a model at a URL), dequantized a chunk of whole blocks per task.
fn dequantized(path: &std::path::Path, name: &str) -> Result<(Vec<f32>, Vec<u64>, &'static str)> {
    let model = Model::open_any(path)?;
    let Some(t) = model.tensors.iter().find(|t| t.name == name) else {
        let near: Vec<&str> = model.tensors.iter().map(|t| t.name.as_str()).take(5).collect();
        anyhow::bail!(
            "{}: no tensor named {name:?} (it has {} tensors: {}{})",
            path.display(),
            model.tensors.len(),
            near.join(", "),
            if model.tensors.len() > near.len() { ", …" } else { "" }
        );
    };
    let what = || format!("{}: tensor {:?}", path.display(), t.name);
    if !t.ty.can_dequantize() {
        anyhow::bail!("{}: organ cannot dequantize type {}", what(), t.ty.name());
    }
    let bytes = t.bytes_or_read().with_context(what)?;
    let n = usize::try_from(t.n_elements).with_context(|| format!("{}: larger than memory", what()))?;
    let mut out = vec![0f32; n];
    let (bs, ts) = (t.ty.block_size(), t.ty.type_size());
    let per_chunk = DEQUANTIZE_CHUNK / bs * ts;
    out.par_chunks_mut(DEQUANTIZE_CHUNK / bs * bs)
        .zip(bytes.par_chunks(per_chunk))
        .try_for_each(|(o, b)| organ_core::quant::dequantize_into(t.ty, b, o))
        .with_context(what)?;
    Ok((out, t.dims.clone(), t.ty.name()))
}

/// The module: the functions above and [`OrganError`].
#[pymodule]
fn _organ(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("OrganError", m.py().get_type::<OrganError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(inspect, m)?)?;
    m.add_function(wrap_pyfunction!(measure, m)?)?;
    m.add_function(wrap_pyfunction!(diff, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(tensor, m)?)?;
    m.add_function(wrap_pyfunction!(quantize, m)?)?;
    Ok(())
}
