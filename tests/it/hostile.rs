//! Hostile inputs. Crafted GGUF files and organ directories, made here in a scratch
//! directory, go through `organ inspect --json`, `measure --no-cache`, `dissect` and
//! `assemble` as child processes. Whatever the input, organ must answer: exit 0, or exit 1
//! with one `organ: error:` line naming the input; never a panic (101), an abort (134) or
//! a signal, never past [`TIMEOUT`], never above [`MAX_RSS_KIB`] of memory (the child's
//! peak RSS from `wait4`), and never leaving a temp entry beside where its output would go.
//!
//! The first tests are the regressions of the hardening issue, each with the figure it
//! failed by before; `hostile_inputs` runs the whole set and prints one count line.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(30);
const MAX_RSS_KIB: u64 = 256 << 10;
/// Inputs stay under this, so that the memory bound is about organ, not the input.
const MAX_INPUT: u64 = 64 << 20;

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
        .args(["--exact", "hostile::spawn_helper", "--test-threads", "1", "--quiet"])
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

const STRING: u32 = 8;
const ARRAY: u32 = 9;
const U8: u32 = 0;
const U32: u32 = 4;
const F32_TY: u32 = 0;

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

fn put_tensor(b: &mut Vec<u8>, name: &[u8], dims: &[u64], ty: u32, offset: u64) {
    put_str(b, name);
    b.extend((dims.len() as u32).to_le_bytes());
    for d in dims {
        b.extend(d.to_le_bytes());
    }
    b.extend(ty.to_le_bytes());
    b.extend(offset.to_le_bytes());
}

fn pad(b: &mut Vec<u8>, align: usize) {
    while b.len() % align != 0 {
        b.push(0);
    }
}

/// An F32 tensor's data: `n` small floats.
fn floats(b: &mut Vec<u8>, n: usize) {
    for i in 0..n {
        b.extend((i as f32 * 0.25 - 1.0).to_le_bytes());
    }
}

/// A small valid model: an architecture, a vocabulary, two F32 tensors.
fn valid() -> Vec<u8> {
    let mut b = header(2, 2);
    put_key(&mut b, "general.architecture", STRING);
    put_str(&mut b, b"llama");
    put_key(&mut b, "tokenizer.ggml.tokens", ARRAY);
    b.extend(STRING.to_le_bytes());
    b.extend(3u64.to_le_bytes());
    for t in [&b"a"[..], b"b", b"<s>"] {
        put_str(&mut b, t);
    }
    put_tensor(&mut b, b"token_embd.weight", &[32, 2], F32_TY, 0);
    put_tensor(&mut b, b"blk.0.attn_q.weight", &[32, 2], F32_TY, 256);
    pad(&mut b, 32);
    floats(&mut b, 128);
    b
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

/// Arrays nested `depth` deep, the innermost empty.
fn deep_arrays(depth: u32) -> Vec<u8> {
    let mut b = header(0, 1);
    put_key(&mut b, "deep", ARRAY);
    for _ in 1..depth {
        b.extend(ARRAY.to_le_bytes());
        b.extend(1u64.to_le_bytes());
    }
    b.extend(U8.to_le_bytes());
    b.extend(0u64.to_le_bytes());
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

/// A one-tensor model whose tensor is described by `dims`, `ty` and `offset`, with
/// `data` bytes of data and `align` as general.alignment when given.
fn one_tensor(name: &[u8], dims: &[u64], ty: u32, offset: u64, data: usize, align: Option<u32>) -> Vec<u8> {
    let mut b = header(1, u64::from(align.is_some()));
    if let Some(a) = align {
        put_key(&mut b, "general.alignment", U32);
        b.extend(a.to_le_bytes());
    }
    put_tensor(&mut b, name, dims, ty, offset);
    let a = match align {
        Some(a) if a.is_power_of_two() && a <= 1 << 20 => a as usize,
        _ => 32,
    };
    pad(&mut b, a);
    b.resize(b.len() + data, 0x3c);
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

// --- the hostile set -----------------------------------------------------------------------

/// One crafted input, and the commands that may accept it (the others must refuse it).
struct Case {
    name: String,
    path: PathBuf,
    ok_for: &'static [&'static str],
}

/// What a valid GGUF may go through (assemble takes organ directories only).
const GGUF_OK: &[&str] = &["inspect", "measure", "dissect"];
/// What a valid organ directory may go through.
const DIR_OK: &[&str] = &["measure", "assemble"];
/// A directory that only assemble checks closely enough to refuse (sha256s, versions,
/// names, alignment): measure reads the tensors, which are fine.
const MEASURE_OK: &[&str] = &["measure"];

/// Every crafted GGUF file, written into `d`.
fn gguf_cases(d: &Path) -> Vec<Case> {
    let mut cases: Vec<(String, Vec<u8>, bool)> = Vec::new();
    let mut bad = |name: &str, b: Vec<u8>| cases.push((name.to_owned(), b, false));
    let good = valid();
    // Truncated everywhere in the header, and in the data.
    let header_len = good.len() - 512;
    for cut in (0..header_len).step_by(7).chain([header_len - 1, header_len, header_len + 100, good.len() - 1]) {
        bad(&format!("cut-at-{cut}"), good[..cut].to_vec());
    }
    bad("bad-magic", [b"GGUL".to_vec(), good[4..].to_vec()].concat());
    for (n, v) in [("v1", 1u32), ("v4", 4), ("big-endian", 3u32.swap_bytes())] {
        let mut b = good.clone();
        b[4..8].copy_from_slice(&v.to_le_bytes());
        bad(&format!("version-{n}"), b);
    }
    for (n, count) in [("max", u64::MAX), ("2p40", 1 << 40), ("cap+1", (1 << 20) + 1), ("one-more", 3)] {
        // One more tensor than written reads the padding as a valid scalar named "".
        if n != "one-more" {
            let mut b = good.clone();
            b[8..16].copy_from_slice(&count.to_le_bytes());
            bad(&format!("tensor-count-{n}"), b);
        }
        let mut b = good.clone();
        b[16..24].copy_from_slice(&count.to_le_bytes());
        bad(&format!("kv-count-{n}"), b);
    }
    for (n, len) in [("max", u64::MAX), ("2p40", 1 << 40), ("cap+1", (16 << 20) + 1), ("past-end", 10_000)] {
        let mut b = good.clone();
        b[24..32].copy_from_slice(&len.to_le_bytes());
        bad(&format!("key-len-{n}"), b);
    }
    for (n, len) in [("max", u64::MAX), ("2p32", 1 << 32), ("past-end", 1000)] {
        let mut b = header(0, 1);
        put_key(&mut b, "a", ARRAY);
        b.extend(U32.to_le_bytes());
        b.extend(len.to_le_bytes());
        b.extend([0; 64]);
        bad(&format!("array-len-{n}"), b);
        let mut b = header(0, 1);
        put_key(&mut b, "s", STRING);
        b.extend(len.to_le_bytes());
        b.extend([b'x'; 64]);
        bad(&format!("string-len-{n}"), b);
    }
    bad("value-type-13", {
        let mut b = header(0, 1);
        put_key(&mut b, "t", 13);
        b.extend([0; 8]);
        b
    });
    bad("array-of-type-99", {
        let mut b = header(0, 1);
        put_key(&mut b, "t", ARRAY);
        b.extend(99u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b
    });
    bad("key-not-utf8", {
        let mut b = header(0, 1);
        put_str(&mut b, b"\xff\xfe");
        b.extend(U8.to_le_bytes());
        b.push(1);
        b
    });
    bad("duplicate-key", {
        let mut b = header(0, 2);
        for _ in 0..2 {
            put_key(&mut b, "general.name", U8);
            b.push(1);
        }
        b
    });
    bad("nested-arrays-over-cap", nested_empty_arrays((1 << 16) + 1));
    bad("nested-arrays-4M", nested_empty_arrays(4 << 20));
    bad("arrays-9-deep", deep_arrays(9));
    cases.push(("arrays-8-deep".into(), deep_arrays(8), true));
    cases.push(("nested-arrays-at-cap".into(), nested_empty_arrays(1 << 16), true));
    cases.push(("u8-array-16M".into(), long_u8_array(16 << 20), true));
    let mut bad = |name: &str, b: Vec<u8>| cases.push((name.to_owned(), b, false));
    // Tensors.
    bad("tensor-past-end", one_tensor(b"w", &[64], F32_TY, 0, 100, None));
    bad("tensor-offset-past-end", one_tensor(b"w", &[8], F32_TY, 1 << 40, 32, None));
    bad("tensor-offset-wraps", one_tensor(b"w", &[8], F32_TY, u64::MAX - 31, 32, None));
    bad("tensor-misaligned", one_tensor(b"w", &[8], F32_TY, 4, 64, None));
    bad("alignment-0", one_tensor(b"w", &[8], F32_TY, 0, 32, Some(0)));
    bad("alignment-3", one_tensor(b"w", &[8], F32_TY, 0, 32, Some(3)));
    bad("alignment-2p30", one_tensor(b"w", &[8], F32_TY, 0, 32, Some(1 << 30)));
    bad("alignment-u8", {
        let mut b = header(1, 1);
        put_key(&mut b, "general.alignment", U8);
        b.push(32);
        put_tensor(&mut b, b"w", &[8], F32_TY, 0);
        pad(&mut b, 32);
        b.extend([0; 32]);
        b
    });
    bad("dims-overflow", one_tensor(b"w", &[1 << 40, 1 << 40], F32_TY, 0, 32, None));
    bad("dims-product-wraps", one_tensor(b"w", &[1 << 32, 1 << 32], F32_TY, 0, 32, None));
    bad("dim-over-i64", one_tensor(b"w", &[u64::MAX], F32_TY, 0, 32, None));
    bad("n-dims-5", one_tensor(b"w", &[1, 1, 1, 1, 1], F32_TY, 0, 32, None));
    bad("n-dims-max", {
        let mut b = header(1, 0);
        put_str(&mut b, b"w");
        b.extend(u32::MAX.to_le_bytes());
        b.extend([0; 64]);
        b
    });
    bad("ggml-type-99", one_tensor(b"w", &[8], 99, 0, 32, None));
    bad("row-not-whole-blocks", one_tensor(b"w", &[31], 2, 0, 32, None));
    bad("tensor-name-not-utf8", one_tensor(b"\xc3\x28", &[8], F32_TY, 0, 32, None));
    bad("duplicate-tensor", {
        let mut b = header(2, 0);
        put_tensor(&mut b, b"w", &[8], F32_TY, 0);
        put_tensor(&mut b, b"w", &[8], F32_TY, 32);
        pad(&mut b, 32);
        b.extend([0; 64]);
        b
    });
    bad("empty-file", Vec::new());
    bad("not-a-model", b"# organ\nthis is a README".to_vec());
    cases.push(("valid".into(), good.clone(), true));
    cases.push(("tensor-name-with-slashes".into(), one_tensor(b"../../etc/passwd", &[8], F32_TY, 0, 32, None), true));
    cases.push(("tensor-name-70k".into(), one_tensor(&[b'n'; 70_000], &[8], F32_TY, 0, 32, None), true));
    cases.push(("tensor-name-empty".into(), one_tensor(b"", &[8], F32_TY, 0, 32, None), true));
    cases.push((
        "tensors-overlapping".into(),
        {
            let mut b = header(2, 0);
            put_tensor(&mut b, b"a", &[8], F32_TY, 0);
            put_tensor(&mut b, b"b", &[8], F32_TY, 0);
            pad(&mut b, 32);
            floats(&mut b, 8);
            b
        },
        true,
    ));
    cases.push((
        "many-tensors".into(),
        {
            let n = 4000u64;
            let mut b = header(n, 0);
            for i in 0..n {
                put_tensor(&mut b, format!("blk.{i}.w").as_bytes(), &[8], F32_TY, 0);
            }
            pad(&mut b, 32);
            floats(&mut b, 8);
            b
        },
        true,
    ));
    cases
        .into_iter()
        .map(|(name, bytes, valid)| {
            assert!((bytes.len() as u64) < MAX_INPUT, "{name}: input of {} bytes", bytes.len());
            let path = d.join(format!("{name}.gguf"));
            std::fs::write(&path, bytes).unwrap();
            Case { name, path, ok_for: if valid { GGUF_OK } else { &[] } }
        })
        .collect()
}

/// Dissects the valid model into `d/base.organs` (the base of every organ directory case).
fn base_dir(d: &Path) -> PathBuf {
    let src = d.join("base.gguf");
    std::fs::write(&src, valid()).unwrap();
    let dir = d.join("base.organs");
    ok({
        let mut c = organ();
        c.args(["dissect".as_ref(), src.as_os_str(), "--out".as_ref(), dir.as_os_str()]);
        c
    });
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &p);
        } else {
            std::fs::copy(e.path(), p).unwrap();
        }
    }
}

/// Every crafted organ directory, made in `d` from a dissected valid model.
fn dir_cases(d: &Path) -> Vec<Case> {
    let base = base_dir(d);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(base.join("manifest.json")).unwrap()).unwrap();
    let mut cases = Vec::new();
    let mut add = |name: &str,
                   ok_for: &'static [&'static str],
                   edit: &dyn Fn(&Path, &mut serde_json::Value) -> Option<Vec<u8>>| {
        let dir = d.join(format!("{name}.organs"));
        copy_dir(&base, &dir);
        let mut m = manifest.clone();
        let text = edit(&dir, &mut m).unwrap_or_else(|| serde_json::to_vec_pretty(&m).unwrap());
        assert!((text.len() as u64) < MAX_INPUT, "{name}: manifest of {} bytes", text.len());
        std::fs::write(dir.join("manifest.json"), text).unwrap();
        cases.push(Case { name: name.to_owned(), path: dir, ok_for });
    };
    use serde_json::json;
    add("dir-valid", DIR_OK, &|_, _| None);
    add("dir-no-manifest", &[], &|dir, _| {
        std::fs::remove_file(dir.join("manifest.json")).unwrap();
        Some(Vec::new())
    });
    add("dir-manifest-empty", &[], &|_, _| Some(Vec::new()));
    add("dir-manifest-not-json", &[], &|_, _| Some(b"{\"format\": \"organ-dir/1\", ".to_vec()));
    add("dir-manifest-array", &[], &|_, _| Some(b"[1, 2, 3]".to_vec()));
    add("dir-wrong-format", &[], &|_, m| {
        m["format"] = json!("organ-dir/9");
        None
    });
    add("dir-gguf-version-99", MEASURE_OK, &|_, m| {
        m["gguf_version"] = json!(99);
        None
    });
    add("dir-gguf-version-huge", &[], &|_, m| {
        m["gguf_version"] = json!(u64::MAX);
        None
    });
    add("dir-file-dotdot", &[], &|_, m| {
        m["tensors"][0]["file"] = json!("../base.organs/embed/token_embd.weight.bin");
        None
    });
    add("dir-file-absolute", &[], &|_, m| {
        m["tensors"][0]["file"] = json!("/etc/passwd");
        None
    });
    add("dir-file-empty", &[], &|_, m| {
        m["tensors"][0]["file"] = json!("");
        None
    });
    add("dir-file-huge", &[], &|_, m| {
        m["tensors"][0]["file"] = json!("a/".repeat(100_000));
        None
    });
    add("dir-file-symlink-out", &[], &|dir, m| {
        std::os::unix::fs::symlink("/etc/passwd", dir.join("other/escape.bin")).unwrap();
        m["tensors"][0]["file"] = json!("other/escape.bin");
        None
    });
    add("dir-file-missing", &[], &|_, m| {
        m["tensors"][0]["file"] = json!("organs/nothing.bin");
        None
    });
    add("dir-sha-not-hex", &[], &|_, m| {
        m["tensors"][0]["sha256"] = json!("zz");
        None
    });
    add("dir-sha-mismatch", MEASURE_OK, &|_, m| {
        m["tensors"][0]["sha256"] = json!("0".repeat(64));
        None
    });
    add("dir-bin-swapped", &[], &|_, m| {
        let (a, b) = (m["tensors"][0]["file"].clone(), m["tensors"][1]["file"].clone());
        m["tensors"][0]["file"] = b;
        m["tensors"][1]["file"] = a;
        None
    });
    add("dir-bin-header-garbage", &[], &|dir, m| {
        let f = dir.join(m["tensors"][0]["file"].as_str().unwrap());
        std::fs::write(f, [0xffu8; 64]).unwrap();
        None
    });
    add("dir-bin-truncated", &[], &|dir, m| {
        let f = dir.join(m["tensors"][1]["file"].as_str().unwrap());
        let b = std::fs::read(&f).unwrap();
        std::fs::write(f, &b[..b.len() - 5]).unwrap();
        None
    });
    add("dir-bin-other-shape", &[], &|_, m| {
        m["tensors"][0]["shape"] = json!([64, 1]);
        None
    });
    add("dir-bin-other-type", &[], &|_, m| {
        m["tensors"][0]["type"] = json!("Q4_0");
        None
    });
    add("dir-type-unknown", &[], &|_, m| {
        m["tensors"][0]["type"] = json!("Q99");
        None
    });
    add("dir-shape-5-dims", &[], &|_, m| {
        m["tensors"][0]["shape"] = json!([1, 1, 1, 1, 1]);
        None
    });
    add("dir-shape-overflow", &[], &|_, m| {
        m["tensors"][0]["shape"] = json!([u64::MAX, u64::MAX]);
        None
    });
    add("dir-shape-negative", &[], &|_, m| {
        m["tensors"][0]["shape"] = json!([-1]);
        None
    });
    add("dir-layer-negative", &[], &|_, m| {
        m["tensors"][0]["layer"] = json!(-1);
        None
    });
    add("dir-bytes-string", &[], &|_, m| {
        m["tensors"][0]["bytes"] = json!("many");
        None
    });
    add("dir-duplicate-tensor", MEASURE_OK, &|_, m| {
        let t = m["tensors"][0].clone();
        m["tensors"].as_array_mut().unwrap().push(t);
        None
    });
    add("dir-tensors-not-list", &[], &|_, m| {
        m["tensors"] = json!({"a": 1});
        None
    });
    add("dir-metadata-not-list", &[], &|_, m| {
        m["metadata"] = json!("none");
        None
    });
    let set_meta = |m: &mut serde_json::Value, entry: serde_json::Value| {
        m["metadata"].as_array_mut().unwrap().push(entry);
    };
    add("dir-meta-bad-hex", &[], &|_, m| {
        set_meta(m, json!({"key": "h", "type": "STRING", "value": {"hex": "zz"}}));
        None
    });
    add("dir-meta-odd-hex", &[], &|_, m| {
        set_meta(m, json!({"key": "h", "type": "STRING", "value": {"hex": "abc"}}));
        None
    });
    add("dir-meta-hex-multibyte", &[], &|_, m| {
        set_meta(m, json!({"key": "h", "type": "STRING", "value": {"hex": "a\u{e9}0"}}));
        None
    });
    add("dir-meta-u8-300", &[], &|_, m| {
        set_meta(m, json!({"key": "n", "type": "UINT8", "value": 300}));
        None
    });
    add("dir-meta-wrong-type", &[], &|_, m| {
        set_meta(m, json!({"key": "n", "type": "UINT32", "value": "seven"}));
        None
    });
    add("dir-meta-unknown-type", &[], &|_, m| {
        set_meta(m, json!({"key": "n", "type": "UINT128", "value": 1}));
        None
    });
    add("dir-meta-no-value", &[], &|_, m| {
        set_meta(m, json!({"key": "n", "type": "UINT32"}));
        None
    });
    add("dir-meta-duplicate-key", &[], &|_, m| {
        let e = m["metadata"][0].clone();
        set_meta(m, e);
        None
    });
    add("dir-meta-alignment-0", MEASURE_OK, &|_, m| {
        set_meta(m, json!({"key": "general.alignment", "type": "UINT32", "value": 0}));
        None
    });
    add("dir-meta-f32-bits-huge", &[], &|_, m| {
        set_meta(m, json!({"key": "f", "type": "FLOAT32", "value": {"f32_bits": u64::MAX}}));
        None
    });
    add("dir-meta-array-9-deep", &[], &|_, m| {
        let mut v = json!({"elem_type": "UINT8", "values": []});
        for _ in 0..8 {
            v = json!({"elem_type": "ARRAY", "values": [v]});
        }
        set_meta(m, json!({"key": "deep", "type": "ARRAY", "value": v}));
        None
    });
    add("dir-meta-nested-arrays-over-cap", &[], &|_, m| {
        let inner = json!({"elem_type": "UINT8", "values": []});
        let v = json!({"elem_type": "ARRAY", "values": vec![inner; (1 << 16) + 1]});
        set_meta(m, json!({"key": "nested", "type": "ARRAY", "value": v}));
        None
    });
    add("dir-meta-entries-over-cap", &[], &|_, m| {
        for i in 0..(1 << 16) {
            set_meta(m, json!({"key": format!("k{i}"), "type": "UINT8", "value": 0}));
        }
        None
    });
    add("dir-meta-u64-zeros-over-budget", &[], &|_, m| {
        // 2 bytes of JSON per element, 8 of GGUF: 18 MB of text for 72 MB of metadata.
        let zeros = "0,".repeat(9 << 20);
        let v =
            format!(r#"{{"key": "z", "type": "ARRAY", "value": {{"elem_type": "UINT64", "values": [{}0]}}}}"#, zeros);
        let text = serde_json::to_string(m).unwrap();
        let at = text.find("\"metadata\":[").unwrap() + "\"metadata\":[".len();
        Some(format!("{}{v},{}", &text[..at], &text[at..]).into_bytes())
    });
    add("dir-meta-values-before-type", DIR_OK, &|_, m| {
        let text = serde_json::to_string(m).unwrap();
        let entry = r#"{"value": {"values": [1, 2], "elem_type": "UINT8"}, "type": "ARRAY", "key": "late"}"#;
        let at = text.find("\"metadata\":[").unwrap() + "\"metadata\":[".len();
        Some(format!("{}{entry},{}", &text[..at], &text[at..]).into_bytes())
    });
    cases
}

#[test]
fn hostile_inputs() {
    let d = scratch("hostile");
    let mut cases = gguf_cases(&d);
    cases.extend(dir_cases(&d));
    let commands = ["inspect", "measure", "dissect", "assemble"];
    let (mut panics, mut hangs, mut peak, mut failures) = (0, 0, 0u64, Vec::new());
    let mut heaviest = Vec::new();
    for case in &cases {
        for cmd in commands {
            let out_parent = d.join("out").join(format!("{}-{cmd}", case.name));
            std::fs::create_dir_all(&out_parent).unwrap();
            let out = out_parent.join(if cmd == "dissect" { "result.organs" } else { "result.gguf" });
            let json = out_parent.join("report.json");
            let input = case.path.as_os_str();
            let args: Vec<&std::ffi::OsStr> = match cmd {
                "inspect" => vec!["inspect".as_ref(), "--json".as_ref(), input],
                "measure" => {
                    vec!["measure".as_ref(), "--no-cache".as_ref(), input, "--json".as_ref(), json.as_os_str()]
                }
                _ => vec![cmd.as_ref(), input, "--out".as_ref(), out.as_os_str()],
            };
            let o = run(&args, &d.join("out").join(format!("{}-{cmd}.stderr", case.name)));
            peak = peak.max(o.peak_rss_kib);
            let label = format!("{} {cmd}", case.name);
            heaviest.push((o.peak_rss_kib, label.clone()));
            let mut fail = |why: String| failures.push(format!("{label}: {why}"));
            if o.timed_out {
                hangs += 1;
                fail(format!("still running after {TIMEOUT:?}"));
                continue;
            }
            if o.signal.is_some() || matches!(o.code, Some(101 | 134)) {
                panics += 1;
            }
            match o.code {
                Some(0) if case.ok_for.contains(&cmd) => {}
                Some(1) => {
                    let first = o.stderr.lines().next().unwrap_or("");
                    if !first.starts_with("organ: error: ") {
                        fail(format!("exit 1 without an `organ: error:` line: {:?}", o.stderr));
                    } else if !o.stderr.contains(&case.name) {
                        fail(format!("the error does not name the input: {first}"));
                    }
                    if out.exists() || json.exists() {
                        fail("an output was written by a failed run".into());
                    }
                }
                _ => fail(format!("exit {:?}, signal {:?}: {}", o.code, o.signal, o.stderr)),
            }
            if o.peak_rss_kib > MAX_RSS_KIB {
                fail(format!("peak RSS {} MiB", o.peak_rss_kib >> 10));
            }
            let temps = temps_in(&out_parent);
            if !temps.is_empty() {
                fail(format!("temp entries left: {temps:?}"));
            }
            // Outputs can be large (a manifest of the 16 Mi-element array is ~200 MB).
            let _ = std::fs::remove_dir_all(&out_parent);
        }
    }
    println!(
        "hostile inputs: {} files x {} commands, {panics} panics, {hangs} hangs, peak RSS {} MiB",
        cases.len(),
        commands.len(),
        peak >> 10
    );
    heaviest.sort_by(|a, b| b.cmp(a));
    for (kib, label) in heaviest.iter().take(5) {
        println!("  {label}: peak RSS {} MiB", kib >> 10);
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
