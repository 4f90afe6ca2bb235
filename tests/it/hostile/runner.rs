//! Running organ on one input: a child spawned through a fresh copy of this test binary,
//! which reaps it with `wait4` for its own peak RSS; its outcome, and the invariants every
//! run must keep.

use super::TIMEOUT;
use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a child ended.
pub(crate) struct Outcome {
    pub(crate) code: Option<i32>,
    pub(crate) signal: Option<i32>,
    pub(crate) stderr: String,
    pub(crate) peak_rss_kib: u64,
    pub(crate) timed_out: bool,
}

/// Runs organ with `args` (stdout discarded, stderr to `stderr_to`) and returns how it
/// ended, with its own peak RSS, killing it after [`TIMEOUT`].
///
/// A child's `ru_maxrss` starts from the RSS of the process that spawned it (Linux carries
/// the high-water mark across exec), and this test process holds tens of MiB of generated
/// inputs. So organ is spawned by a fresh copy of this test binary, running only
/// [`spawn_helper`], which reaps it with `wait4` and writes the figures to a file.
pub(crate) fn run(args: &[&std::ffi::OsStr], stderr_to: &Path) -> Outcome {
    let spec = stderr_to.with_extension("spec");
    let result = stderr_to.with_extension("result");
    let mut text = Vec::new();
    for a in [organ_bin_path().as_os_str(), stderr_to.as_os_str(), result.as_os_str()].iter().chain(args) {
        text.extend(a.as_encoded_bytes());
        text.push(0);
    }
    std::fs::write(&spec, text).unwrap();
    let _ = std::fs::remove_file(&result);
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "hostile::runner::spawn_helper", "--test-threads", "1", "--quiet"])
        .env("ORGAN_HOSTILE_SPEC", &spec)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the spawn helper failed for {args:?}");
    let r = std::fs::read_to_string(&result).expect("the spawn helper's result");
    let n: Vec<i64> = r.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let stderr = std::fs::read_to_string(stderr_to).unwrap_or_default();
    Outcome {
        code: (n[0] >= 0).then_some(n[0] as i32),
        signal: (n[1] >= 0).then_some(n[1] as i32),
        stderr,
        peak_rss_kib: n[2] as u64,
        timed_out: n[3] != 0,
    }
}

/// Not a test of its own: when ORGAN_HOSTILE_SPEC names a spec written by [`run`], spawns
/// organ as it says and reaps it with `wait4`, which gives the child's own peak RSS.
#[test]
fn spawn_helper() {
    let Some(spec) = std::env::var_os("ORGAN_HOSTILE_SPEC") else { return };
    let text = std::fs::read(spec).unwrap();
    let parts: Vec<&std::ffi::OsStr> = text
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        // SAFETY: these bytes came from as_encoded_bytes on this platform, in this binary.
        .map(|p| unsafe { std::ffi::OsStr::from_encoded_bytes_unchecked(p) })
        .collect();
    let (bin, stderr_to, result, args) = (parts[0], parts[1], parts[2], &parts[3..]);
    let err = std::fs::File::create(stderr_to).unwrap();
    let child = Command::new(bin).args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(err).spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let start = Instant::now();
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let mut timed_out = false;
    loop {
        // SAFETY: pid is our child; status and ru are valid for writes.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            break;
        }
        assert!(r == 0 || std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted, "wait4");
        if start.elapsed() > TIMEOUT {
            timed_out = true;
            // SAFETY: the child has not been reaped, so the pid is still ours.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            // SAFETY: as above.
            unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // The child is reaped: std must not wait for it again.
    std::mem::forget(child);
    let (code, signal) = if libc::WIFEXITED(status) {
        (libc::WEXITSTATUS(status), -1)
    } else {
        (-1, if libc::WIFSIGNALED(status) { libc::WTERMSIG(status) } else { -1 })
    };
    let line = format!("{code} {signal} {} {}", ru.ru_maxrss, u8::from(timed_out));
    std::fs::write(result, line).unwrap();
}

/// A fresh scratch directory for one test.
pub(super) fn scratch(name: &str) -> PathBuf {
    let d = tmp(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Entries of `dir` that an interrupted or failed write left behind.
pub(super) fn temps_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("organ-tmp"))
        .collect()
}

/// The organ binary under test; ORGAN_BIN runs the same checks against another build
/// (how the figures of the regressions below were taken on the code before the fix).
fn organ_bin_path() -> PathBuf {
    std::env::var_os("ORGAN_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_organ")), PathBuf::from)
}

/// Runs `organ ARGS` and checks the invariants; returns the outcome.
pub(super) fn check(label: &str, args: &[&std::ffi::OsStr], out: Option<&Path>, dir: &Path) -> Outcome {
    let o = run(args, &dir.join(format!("{label}.stderr")));
    assert!(!o.timed_out, "{label}: still running after {TIMEOUT:?}");
    assert!(o.signal.is_none(), "{label}: killed by signal {:?}\n{}", o.signal, o.stderr);
    assert!(matches!(o.code, Some(0 | 1)), "{label}: exit {:?}\n{}", o.code, o.stderr);
    if o.code == Some(1) {
        assert!(o.stderr.starts_with("organ: error: "), "{label}: {}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{label}: one line of error: {}", o.stderr);
        if let Some(out) = out {
            assert!(!out.exists(), "{label}: {} written by a failed run", out.display());
        }
    }
    if let Some(parent) = out.and_then(Path::parent) {
        assert_eq!(temps_in(parent), Vec::<String>::new(), "{label}: temp entries left behind");
    }
    o
}
