//! Hostile inputs. Crafted GGUF files and organ directories, made here in a scratch
//! directory, go through `organ inspect --json`, `measure --no-cache`, `dissect` and
//! `assemble` as child processes. Whatever the input, organ must answer: exit 0, or exit 1
//! with one `organ: error:` line naming the input; never a panic (101), an abort (134) or
//! a signal, never past [`TIMEOUT`], never above [`MAX_RSS_KIB`] of memory (the child's
//! peak RSS from `wait4`), and never leaving a temp entry beside where its output would go.
//!
//! The first tests are the regressions of the hardening issue, each with the figure it
//! failed by before; `hostile_inputs` runs the whole set and prints one count line.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(30);

/// How a child ended.
struct Outcome {
    code: Option<i32>,
    signal: Option<i32>,
    stderr: String,
    peak_rss_kib: u64,
    timed_out: bool,
}

/// Runs organ with `args` (stdout discarded, stderr to `stderr_to`) and returns how it
/// ended, with its own peak RSS, killing it after [`TIMEOUT`].
///
/// A child's `ru_maxrss` starts from the RSS of the process that spawned it (Linux carries
/// the high-water mark across exec), and this test process holds tens of MiB of generated
/// inputs. So organ is spawned by a fresh copy of this test binary, running only
/// [`spawn_helper`], which reaps it with `wait4` and writes the figures to a file.
fn run(args: &[&std::ffi::OsStr], stderr_to: &Path) -> Outcome {
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
        .args(["--exact", "spawn_helper", "--test-threads", "1", "--quiet"])
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
fn scratch(name: &str) -> PathBuf {
    let d = tmp(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Entries of `dir` that an interrupted or failed write left behind.
fn temps_in(dir: &Path) -> Vec<String> {
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

// --- GGUF bytes -------------------------------------------------------------------------

const ARRAY: u32 = 9;
const U8: u32 = 0;

fn header(tensors: u64, kvs: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(tensors.to_le_bytes());
    b.extend(kvs.to_le_bytes());
    b
}

fn put_str(b: &mut Vec<u8>, s: &[u8]) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s);
}

/// A key and its type code; the value follows.
fn put_key(b: &mut Vec<u8>, key: &str, ty: u32) {
    put_str(b, key.as_bytes());
    b.extend(ty.to_le_bytes());
}

/// One metadata key holding `n` empty arrays (an array of arrays), 12 bytes each.
fn nested_empty_arrays(n: u64) -> Vec<u8> {
    let mut b = header(0, 1);
    put_key(&mut b, "x", ARRAY);
    b.extend(ARRAY.to_le_bytes());
    b.extend(n.to_le_bytes());
    for _ in 0..n {
        b.extend(U8.to_le_bytes());
        b.extend(0u64.to_le_bytes());
    }
    b
}

/// One metadata key holding a u8 array of `n` elements.
fn long_u8_array(n: u64) -> Vec<u8> {
    let mut b = header(0, 1);
    put_key(&mut b, "long", ARRAY);
    b.extend(U8.to_le_bytes());
    b.extend(n.to_le_bytes());
    b.extend((0..n).map(|i| i as u8));
    b
}

// --- the regressions of the hardening issue ----------------------------------------------

/// Runs `organ ARGS` and checks the invariants; returns the outcome.
fn check(label: &str, args: &[&std::ffi::OsStr], out: Option<&Path>, dir: &Path) -> Outcome {
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

/// Before: `organ dissect` of this 12.6 MB file peaked at 1.5 GB (a serde_json tree per
/// empty array for the manifest) and exited 0. Now it is refused by MAX_NESTED_ARRAYS, in
/// about 10 MiB.
#[test]
fn a_million_empty_nested_arrays_are_refused_in_little_memory() {
    let d = scratch("nested-million");
    let f = d.join("nested.gguf");
    std::fs::write(&f, nested_empty_arrays(1_050_000)).unwrap();
    let out = d.join("nested.organs");
    for (label, args) in [
        ("dissect", vec!["dissect".as_ref(), f.as_os_str(), "--out".as_ref(), out.as_os_str()]),
        ("inspect", vec!["inspect".as_ref(), "--json".as_ref(), f.as_os_str()]),
        ("measure", vec!["measure".as_ref(), "--no-cache".as_ref(), f.as_os_str()]),
    ] {
        let o = check(label, &args, Some(&out), &d);
        println!("nested arrays x 1050000, {label}: exit {:?}, peak RSS {} MiB", o.code, o.peak_rss_kib >> 10);
        assert_eq!(o.code, Some(1), "{label}");
        assert!(o.stderr.contains("nested.gguf") && o.stderr.contains("arrays nested in arrays"), "{}", o.stderr);
        assert!(o.peak_rss_kib < 64 << 10, "{label}: peak RSS {} KiB", o.peak_rss_kib);
    }
}

/// Before: a 4 MB u8 array cost a serde_json value per element: `inspect --json` peaked at
/// 357 MiB, `dissect` at 362 MiB and `assemble` at 354 MiB. Now the JSON is written as the
/// array is walked (12 and 23 MiB), and the manifest read back as a stream (assemble holds
/// its ~60 MB of text); the assembled file is the original.
#[test]
fn a_long_array_streams_through_inspect_dissect_and_assemble() {
    let d = scratch("long-array");
    let f = d.join("long.gguf");
    // 52 bytes of header: the file ends aligned, so assemble adds no padding.
    let bytes = long_u8_array((4 << 20) - 20);
    std::fs::write(&f, &bytes).unwrap();
    let dir = d.join("long.organs");
    let back = d.join("back.gguf");
    for (label, args, out) in [
        ("inspect", vec!["inspect".as_ref(), "--json".as_ref(), f.as_os_str()], None),
        ("dissect", vec!["dissect".as_ref(), f.as_os_str(), "--out".as_ref(), dir.as_os_str()], Some(&dir)),
        ("assemble", vec!["assemble".as_ref(), dir.as_os_str(), "--out".as_ref(), back.as_os_str()], Some(&back)),
    ] {
        let o = check(label, &args, out.map(|p| p.as_path()), &d);
        println!("u8 array x 4Mi, {label}: exit {:?}, peak RSS {} MiB", o.code, o.peak_rss_kib >> 10);
        assert_eq!(o.code, Some(0), "{label}: {}", o.stderr);
        // assemble holds the manifest's text (~60 MB of pretty JSON for this array).
        let bound = if label == "assemble" {
            (std::fs::metadata(dir.join("manifest.json")).unwrap().len() >> 10) * 2
        } else {
            0
        };
        assert!(o.peak_rss_kib < (64 << 10) + bound, "{label}: peak RSS {} KiB", o.peak_rss_kib);
    }
    assert!(std::fs::read(&back).unwrap() == bytes, "assembled file differs from the original");
}

/// Before: a manifest was read whole up to 1 GiB before anything was checked (a 920 MB
/// one of 10^7 tensors aborted `assemble`); this 300 MiB (sparse) one cost 300 MiB of RSS.
/// Now anything over manifest::MAX_BYTES (256 MiB) is refused before it is read.
#[test]
fn an_oversized_manifest_is_refused_before_it_is_read() {
    let d = scratch("big-manifest");
    let dir = d.join("big.organs");
    std::fs::create_dir(&dir).unwrap();
    let m = std::fs::File::create(dir.join("manifest.json")).unwrap();
    m.set_len(300 << 20).unwrap();
    let out = d.join("big.gguf");
    let o =
        check("assemble", &["assemble".as_ref(), dir.as_os_str(), "--out".as_ref(), out.as_os_str()], Some(&out), &d);
    println!("manifest of 300 MiB, assemble: exit {:?}, peak RSS {} MiB", o.code, o.peak_rss_kib >> 10);
    assert_eq!(o.code, Some(1));
    assert!(o.stderr.contains("manifest.json") && o.stderr.contains("bytes, more than"), "{}", o.stderr);
    assert!(o.peak_rss_kib < 64 << 10, "peak RSS {} KiB", o.peak_rss_kib);
}
