//! `organ._organ`: the native half of the Python package `organ` (python/organ/ is the
//! other). Each function runs what the CLI's command runs, with the GIL released, and
//! returns what the command would write: a report as its JSON (and CSV) text, rendered by
//! the same registry of formats, so that `to_json()` is the file `organ CMD --json`
//! writes, byte for byte. The Python side parses it on demand into rows, dicts and
//! DataFrames.
//!
//! - [`reports`]: inspect, measure, diff, check, called by the functions their commands
//!   call (`organ_native::cmd`), with a progress callback and a measure that stops.
//! - [`commands`]: every other command, as the binary runs it: an argv the Python side
//!   builds from keyword arguments (the flags' names, snake_case), parsed by the CLI's
//!   own flags and run by `organ_cli::cli::run_command`.
//! - [`tensor`]: a tensor dequantized by the core.
//!
//! Work runs on a thread of its own while the calling thread waits with the GIL released,
//! waking every [`POLL`] to run Python's signal handlers (Ctrl-C raises KeyboardInterrupt
//! at once) and to pass progress to a callback.

/// See native-cli/Cargo.toml: per-tensor buffers are reused instead of faulted in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod commands;
mod reports;
mod tensor;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

// Named in the package it is used from (`organ.OrganError` in a traceback).
pyo3::create_exception!(
    organ,
    OrganError,
    PyException,
    "An error of organ's: the message names the file (and offset or tensor) and what was expected. \
     Attributes: `kind` (\"format\", \"io\" or \"other\"), `path` and `offset` when known."
);

/// How often a waiting call looks at signals and progress.
const POLL: Duration = Duration::from_millis(50);

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

/// A progress bar [`run`] watches while the work counts on it.
pub(crate) struct Watch {
    pub bar: ProgressBar,
    /// Called with `(done, total)` when the bar has moved.
    pub callback: Option<Py<PyAny>>,
    /// The work stops soon once the bar is abandoned (a measure, at its next tensor): a call
    /// that ends early waits for it. Otherwise (a command of [`commands`]) the call returns
    /// at once and the work runs on to its end (writing nothing more: [`commands`] sets
    /// the flag of `organ_native::progress::watch`).
    pub stops: bool,
}

/// Runs `work` on a thread of its own, in a rayon pool of `threads` workers when given,
/// while this one waits with the GIL released. Every [`POLL`] it takes the GIL to run
/// Python's signal handlers (a KeyboardInterrupt is raised at once) and, with a bar
/// watched and a callback, calls `callback(done, total)` when the bar has moved.
///
/// The work's thread and the pool's are joined before this returns. A call that ends
/// early (a signal, the callback's exception) abandons the bar: work that stops on it
/// ([`Watch::stops`], a measure) stops at its next tensor, or streaming its next read,
/// and is waited for; the exception then carries `organ_tensors_after_stop`, the tensors
/// finished after the stop (at most one per thread: those under way). Other work
/// finishes on its own thread, its result dropped (and, watched, its outputs not
/// written).
pub(crate) fn run<T: Send + 'static>(
    py: Python<'_>,
    threads: Option<usize>,
    watch: Option<Watch>,
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
                if let Some(Watch { bar, callback: Some(callback), .. }) = &watch {
                    report_progress(py, bar, callback, &mut shown)?;
                }
                return r.map_err(|e| organ_error(py, &e));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let looked = py.check_signals().and_then(|()| match &watch {
                    Some(Watch { bar, callback: Some(callback), .. }) => report_progress(py, bar, callback, &mut shown),
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
    if let Some(Watch { bar, stops, .. }) = &watch {
        bar.abandon();
        if *stops {
            let at = bar.position();
            join(py);
            let after = bar.position().saturating_sub(at);
            // An exception whose type refuses new attributes goes on without it.
            let _ = early.value(py).setattr("organ_tensors_after_stop", after);
        }
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
pub(crate) fn quiet_bar() -> ProgressBar {
    ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden())
}

/// The module: the functions of [`reports`], [`commands`] and [`tensor`], and [`OrganError`].
#[pymodule]
fn _organ(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Progress goes to callbacks: the bars the commands would draw on a terminal never are.
    organ_native::progress::never_draw();
    m.add("OrganError", m.py().get_type::<OrganError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(reports::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(reports::measure, m)?)?;
    m.add_function(wrap_pyfunction!(reports::diff, m)?)?;
    m.add_function(wrap_pyfunction!(reports::check, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::tensor, m)?)?;
    m.add_function(wrap_pyfunction!(commands::command, m)?)?;
    m.add_function(wrap_pyfunction!(commands::defaults, m)?)?;
    Ok(())
}
