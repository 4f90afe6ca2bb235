//! llama.cpp's tools, found and run: where `llama-perplexity` is (`--llama-cpp DIR`, then
//! `ORGAN_LLAMA_CPP`, then `PATH`), and a run of it that reads both output streams, stops
//! on Ctrl-C, and hands its text to [`output`] (the only parser of llama.cpp's text);
//! [`handed`] hands a tool its files open, and [`perplexity`] evaluates a model (against a
//! base) with them.
//!
//! A tool never gets a name to resolve: organ opens every file itself (under `organ
//! serve`, confined to the root) and hands the tool the open file ([`Handed`]), which the
//! tool inherits and opens as `/proc/self/fd/N`. A path swapped for a link after organ's
//! check changes nothing the tool reads.

pub mod handed;
pub mod logits_cache;
pub mod offload;
pub mod output;
pub mod perplexity;
pub mod quantize;

pub use handed::{inherit, Handed};

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// The environment variable that names llama.cpp's bin directory.
pub const ENV: &str = "ORGAN_LLAMA_CPP";

/// The most of each output stream kept (llama-perplexity prints a few kB; a tool that
/// prints without end is not allowed to fill memory).
const MAX_OUTPUT: u64 = 16 << 20;

/// `tool` in `dir` (or `dir/bin`), else in `ORGAN_LLAMA_CPP` (or its `bin`), else on `PATH`.
///
/// # Errors
/// Not found: one sentence saying where organ looked and how to get it.
pub fn find(tool: &str, dir: Option<&Path>) -> Result<PathBuf> {
    let in_dir = |d: &Path| [d.join(tool), d.join("bin").join(tool)].into_iter().find(|p| is_executable(p));
    if let Some(d) = dir {
        return in_dir(d)
            .with_context(|| format!("{tool} is not in {} (--llama-cpp): {}", d.display(), how_to_get(tool)));
    }
    if let Some(d) = std::env::var_os(ENV).filter(|d| !d.is_empty()) {
        let d = PathBuf::from(d);
        return in_dir(&d).with_context(|| format!("{tool} is not in {} ({ENV}): {}", d.display(), how_to_get(tool)));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| is_executable(p))
        .with_context(|| format!("{tool} was not found (no --llama-cpp, no {ENV}, not on PATH): {}", how_to_get(tool)))
}

fn how_to_get(tool: &str) -> String {
    format!(
        "build llama.cpp's tools with scripts/build-llama.sh (it prints the directory of {tool}) \
         and pass that directory with --llama-cpp or {ENV}"
    )
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Set by SIGINT or SIGTERM while a tool runs.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs (once) the handlers that turn SIGINT and SIGTERM into [`INTERRUPTED`], so that
/// a run stops its tool and its caller removes its temp files on the way out.
fn catch_interrupts() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in [rustix::process::Signal::INT, rustix::process::Signal::TERM] {
            // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
            let _ =
                unsafe { signal_hook_registry::register(sig.as_raw(), || INTERRUPTED.store(true, Ordering::SeqCst)) };
        }
    });
}

/// What a tool printed.
pub struct Printed {
    pub stdout: String,
    pub stderr: String,
}

/// Runs `c` to its end with both streams read; stops it (and fails) on Ctrl-C.
///
/// # Errors
/// It cannot start, was interrupted, or ended by a signal or with a non-zero status (the
/// error then quotes the end of its stderr).
pub fn run(c: Command) -> Result<Printed> {
    run_metered(c, &mut |_, _| {})
}

/// [`run`], telling `progress` how many chunks llama-perplexity has scored of how many, as
/// it prints them ([`output::Meter`]).
///
/// # Errors
/// As [`run`].
pub fn run_metered(mut c: Command, progress: &mut dyn FnMut(u32, u32)) -> Result<Printed> {
    catch_interrupts();
    let name = c.get_program().to_string_lossy().into_owned();
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // Killed with organ, whatever kills organ (a job cancelled under `organ serve`).
    let parent = rustix::process::getpid();
    // SAFETY: between fork and exec this runs only two raw system calls (prctl, getppid)
    // through rustix, which allocate nothing and take no lock (as serve/child.rs does).
    unsafe {
        c.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(3)); // ESRCH: organ is gone
            }
            Ok(())
        });
    }
    let mut child = c.spawn().with_context(|| format!("{name}: cannot start"))?;
    // Each stream is read whole by a thread of its own, which also passes every piece on,
    // as it comes, to this thread's meter.
    let (pieces, arrived) = mpsc::channel::<(Stream, Vec<u8>)>();
    let read = |s: Option<Box<dyn Read + Send>>, stream: Stream| {
        let pieces = pieces.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let Some(s) = s else { return String::new() };
            let mut s = s.take(MAX_OUTPUT);
            let mut piece = [0u8; 8192];
            loop {
                match s.read(&mut piece) {
                    Ok(0) => break,
                    Ok(n) => {
                        buf.extend_from_slice(&piece[..n]);
                        let _ = pieces.send((stream, piece[..n].to_vec()));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = read(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>), Stream::Out);
    let err = read(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>), Stream::Err);
    drop(pieces);
    let mut meter = output::Meter::default();
    let status = loop {
        if INTERRUPTED.load(Ordering::SeqCst) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("interrupted: {name} stopped");
        }
        if let Some(s) = child.try_wait().with_context(|| format!("{name}: cannot wait for it"))? {
            break s;
        }
        match arrived.recv_timeout(Duration::from_millis(50)) {
            Ok(p) => {
                feed(&mut meter, p);
                arrived.try_iter().for_each(|p| feed(&mut meter, p));
            }
            // Both streams closed, the tool not yet reaped.
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_millis(50)),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Some((done, total)) = meter.progress() {
            progress(done, total);
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    arrived.try_iter().for_each(|p| feed(&mut meter, p));
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted: {name} stopped");
    }
    if !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
        // An argument llama.cpp refuses is named in the line before its usage text, which
        // the tail would show instead.
        let refused = stderr.lines().find(|l| l.to_ascii_lowercase().starts_with("error while handling argument"));
        match refused {
            Some(line) => bail!("{name} failed ({status}): {line}"),
            None => bail!("{name} failed ({status}):\n{}", tail.join("\n")),
        }
    }
    if let Some((done, total)) = meter.progress() {
        progress(done, total);
    }
    Ok(Printed { stdout, stderr })
}

/// Reads a piece of a tool's output into `meter`.
fn feed(meter: &mut output::Meter, (stream, bytes): (Stream, Vec<u8>)) {
    match stream {
        Stream::Out => meter.stdout(&bytes),
        Stream::Err => meter.stderr(&bytes),
    }
}

/// Which of a tool's output streams a piece came from.
#[derive(Clone, Copy)]
enum Stream {
    Out,
    Err,
}
