//! Regression tests for the ways a user's file could be lost or a run hang (issue 14):
//! outputs that clobbered inputs, temp names that followed planted links, FIFOs, organ
//! files used unchecked, a descriptor per tensor, temp entries of killed runs, raw names
//! on the terminal, out-of-range purify values, and shards of different split sets.

use crate::common::*;
use organ_core::gguf::writer::{plan, TensorSpec};
use organ_core::gguf::MetaValue;
use organ_core::GgmlType;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A small llama-like GGUF at `name`: `n` F32 tensors named by `names`, with values that
/// vary (so θ is measurable).
fn tiny_named(name: &str, names: &[String], dims: &[u64]) -> PathBuf {
    let p = tmp(name);
    let kvs = [("general.architecture", MetaValue::Str(b"llama")), ("general.name", MetaValue::Str(b"tiny"))];
    let specs: Vec<TensorSpec<'_>> = names.iter().map(|n| TensorSpec { name: n, dims, ty: GgmlType::F32 }).collect();
    let layout = plan(3, &kvs, &specs).unwrap();
    let mut f = layout.header.clone();
    let mut x = 0x9e37_79b9u32;
    while f.len() < layout.file_len as usize {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        f.extend_from_slice(&((x % 20_000) as f32 / 10_000.0 - 1.0).to_le_bytes());
    }
    f.truncate(layout.file_len as usize);
    std::fs::write(&p, f).unwrap();
    p
}

pub(crate) fn tiny(name: &str, n: usize) -> PathBuf {
    let names: Vec<String> = (0..n).map(|i| format!("blk.{}.ffn_up.weight", i)).collect();
    tiny_named(name, &names, &[64, 4])
}

fn run(mut c: Command) -> Output {
    c.output().expect("spawn organ")
}

/// Runs `c`, which must fail with one `organ: error:` line; returns stderr.
pub(crate) fn refused(c: Command) -> String {
    let o = run(c);
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "expected a refusal, got {:?}: {e}", o.status);
    assert!(e.contains("organ: error: "), "{e}");
    e
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn report_flags_never_overwrite_an_input_nor_an_existing_file_without_force() {
    let m = tiny("in1.gguf", 3);
    let before = bytes(&m);
    // The reproduction: the report named as the model it measures.
    for flag in ["--json", "--csv", "--html", "--ranking-csv"] {
        for force in [false, true] {
            let mut c = organ();
            c.args(["measure", "--no-cache"]).arg(&m).arg(flag).arg(&m);
            if force {
                c.arg("--force");
            }
            let e = refused(c);
            assert!(e.contains("is an input of this run"), "{flag} force={force}: {e}");
            assert_eq!(bytes(&m), before, "{flag} overwrote the model");
        }
    }
    // Through a link, too: the link's target is the input.
    let link = tmp("in1-link.json");
    std::os::unix::fs::symlink(&m, &link).unwrap();
    let mut c = organ();
    c.args(["measure", "--no-cache", "--force"]).arg(&m).arg("--json").arg(&link);
    assert!(refused(c).contains("is an input"));
    assert_eq!(bytes(&m), before);
    // purify's report, and its model output.
    let mut c = organ();
    c.args(["purify", "--method", "fractal", "--all", "--force"])
        .arg(&m)
        .arg("--out")
        .arg(tmp("p1.gguf"))
        .arg("--json")
        .arg(&m);
    assert!(refused(c).contains("is an input"));
    let mut c = organ();
    c.args(["purify", "--method", "fractal", "--all", "--force"]).arg(&m).arg("--out").arg(&m);
    assert!(refused(c).contains("is an input"));
    assert_eq!(bytes(&m), before);
    // An existing report that is no input: kept without --force, replaced with it.
    let old = tmp("old-report.json");
    std::fs::write(&old, "keep me").unwrap();
    let mut c = organ();
    c.args(["measure", "--no-cache"]).arg(&m).arg("--json").arg(&old);
    assert!(refused(c).contains("without --force"));
    assert_eq!(bytes(&old), b"keep me");
    let mut c = organ();
    c.args(["measure", "--no-cache", "--force"]).arg(&m).arg("--json").arg(&old);
    ok(c);
    assert!(serde_json::from_slice::<serde_json::Value>(&bytes(&old)).is_ok());
}

#[test]
fn organ_directories_and_shards_are_inputs_too() {
    let m = tiny("in2.gguf", 4);
    let dir = tmp("in2.organs");
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(&dir);
    ok(c);
    let manifest = bytes(&dir.join("manifest.json"));
    // The directory itself, and a file inside it.
    let mut c = organ();
    c.args(["purify", "--method", "fractal", "--all", "--force"]).arg(&dir).arg("--out").arg(&dir);
    assert!(refused(c).contains("input"));
    let mut c = organ();
    c.args(["measure", "--no-cache", "--force"]).arg(&dir).arg("--json").arg(dir.join("manifest.json"));
    assert!(refused(c).contains("is an input"));
    assert_eq!(bytes(&dir.join("manifest.json")), manifest);
    // Every shard of a split model, whichever shard was named.
    let split = tmp("in2s.gguf");
    let mut c = organ();
    c.arg("assemble").arg(&dir).arg("--out").arg(&split).args(["--split-max-size", "1K"]);
    ok(c);
    let second = tmp("in2s-00002-of-00004.gguf");
    let shard = bytes(&second);
    let mut c = organ();
    c.args(["measure", "--no-cache", "--force"]).arg(tmp("in2s-00001-of-00004.gguf")).arg("--csv").arg(&second);
    assert!(refused(c).contains("is an input"));
    assert_eq!(bytes(&second), shard);
    // --force replaces an existing organ directory whole (tests/it/force.rs: and only one).
    let other = tmp("in2-other.organs");
    let _ = std::fs::remove_dir_all(&other);
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(&other);
    ok(c);
    std::fs::write(other.join("stale.txt"), "old").unwrap();
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(&other);
    assert!(refused(c).contains("without --force"));
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(&other).arg("--force");
    ok(c);
    assert!(other.join("manifest.json").is_file() && !other.join("stale.txt").exists());
}

/// The PID the kernel handed out last (the next process gets one of the next few).
fn last_pid() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/ns_last_pid").unwrap().trim().parse().unwrap()
}

#[test]
fn planted_links_under_temp_names_are_never_followed() {
    let m = tiny("in3.gguf", 3);
    let root = tmp("plant3");
    std::fs::create_dir_all(&root).unwrap();
    let victim = root.join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let out = root.join("out.gguf");
    let json = root.join("out.json");
    // The names the old writer used: `.NAME.organ-tmp.PID`, for the next PIDs.
    let next = last_pid();
    for pid in next + 1..next + 200 {
        for n in ["out.gguf", "out.json"] {
            std::os::unix::fs::symlink(&victim, root.join(format!(".{n}.organ-tmp.{pid}"))).unwrap();
        }
    }
    let mut c = organ();
    c.args(["purify", "--method", "fractal", "--all"]).arg(&m).arg("--out").arg(&out).arg("--json").arg(&json);
    ok(c);
    assert_eq!(bytes(&victim), b"precious", "a planted link was followed");
    for p in [&out, &json] {
        let md = std::fs::symlink_metadata(p).unwrap();
        assert!(md.file_type().is_file(), "{} is not a regular file", p.display());
    }
    // The outputs are what they should be: a GGUF and a JSON report.
    assert_eq!(&bytes(&out)[..4], b"GGUF");
    assert!(serde_json::from_slice::<serde_json::Value>(&bytes(&json)).is_ok());
}

#[test]
fn a_fifo_is_refused_at_once_not_waited_on() {
    let fifo = tmp("fifo.gguf");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success());
    // dissect's output is a name free in a directory that exists: the input is what is refused.
    let out = tmp("fifo-dissected");
    let out = out.to_str().unwrap();
    for args in [&["inspect"][..], &["measure", "--no-cache"], &["dissect", "--out", out]] {
        let t0 = Instant::now();
        let mut c = organ();
        c.args(&args[..1]).arg(&fifo).args(&args[1..]);
        let mut child = c.stderr(std::process::Stdio::piped()).spawn().unwrap();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(20) {
                child.kill().unwrap();
                panic!("organ {args:?} on a FIFO hung");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut e = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut e).unwrap();
        assert_eq!(status.code(), Some(1), "{args:?}: {e}");
        assert!(e.contains("a FIFO, not a regular file"), "{args:?}: {e}");
    }
    assert!(!Path::new(out).exists());
}

/// Flips one byte of tensor data in the organ file of `dir`'s first tensor.
fn flip_first_organ(dir: &Path) -> PathBuf {
    let v: serde_json::Value = serde_json::from_slice(&bytes(&dir.join("manifest.json"))).unwrap();
    let f = dir.join(v["tensors"][0]["file"].as_str().unwrap());
    let mut b = bytes(&f);
    let last = b.len() - 1;
    b[last] ^= 0x40;
    std::fs::write(&f, b).unwrap();
    f
}

#[test]
fn every_reader_of_an_organ_directory_checks_the_hashes() {
    let m = tiny("in4.gguf", 3);
    let dir = tmp("in4.organs");
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(&dir);
    ok(c);
    let bad = flip_first_organ(&dir);
    let name = bad.file_name().unwrap().to_string_lossy().into_owned();
    let out = tmp("in4-out.gguf");
    let cases: Vec<Vec<std::ffi::OsString>> = vec![
        vec!["measure".into(), "--no-cache".into(), dir.clone().into()],
        vec![
            "graft".into(),
            "--all".into(),
            "--donor".into(),
            dir.clone().into(),
            "--recipient".into(),
            m.clone().into(),
        ],
        vec!["purify".into(), dir.clone().into(), "--method".into(), "fractal".into(), "--all".into()],
        vec!["assemble".into(), dir.clone().into()],
    ];
    for args in &cases {
        let mut c = organ();
        c.args(args);
        if args[0] != "measure" {
            c.arg("--out").arg(&out);
        }
        let e = refused(c);
        assert!(e.contains("differ from the digest their manifest records") && e.contains(&name), "{args:?}: {e}");
        assert!(!out.exists(), "{args:?} wrote an output");
    }
    // --no-verify uses the files as they are, and says so.
    let mut c = organ();
    c.args(["measure", "--no-cache", "--no-verify"]).arg(&dir);
    let o = ok(c);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--no-verify"));
}

#[test]
fn an_organ_directory_of_many_tensors_needs_few_descriptors() {
    let m = tiny("in5.gguf", 1500);
    let dir = tmp("in5.organs");
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(&dir);
    ok(c);
    let out = tmp("in5-back.gguf");
    let organ_bin = env!("CARGO_BIN_EXE_organ");
    for cmd in [
        format!("measure --no-cache --summary-only '{}'", dir.display()),
        format!("assemble '{}' --out '{}'", dir.display(), out.display()),
    ] {
        let mut c = Command::new("sh");
        c.arg("-c").arg(format!("ulimit -n 64 && exec '{organ_bin}' {cmd}"));
        ok(c);
    }
    assert_eq!(bytes(&out), bytes(&m));
}

#[test]
fn temp_entries_of_dead_runs_are_removed_and_live_ones_kept() {
    if need::smollm2().is_none() {
        return;
    }
    let m = tiny("in6.gguf", 2);
    let root = tmp("sweep6");
    std::fs::create_dir_all(&root).unwrap();
    // A PID that is not running (the kernel's pid_max bounds real ones), and this test
    // process's own PID with a start time that is not its own: both dead writers.
    let me = std::process::id();
    let dead = [
        format!(".a.gguf.organ-tmp.{}.{}.{:016x}", 4_194_304 + 7, 123, 1),
        format!(".b.organs.organ-tmp.{me}.{}.{:016x}", 1, 2),
    ];
    std::fs::write(root.join(&dead[0]), "partial").unwrap();
    std::fs::create_dir(root.join(&dead[1])).unwrap();
    std::fs::write(root.join(&dead[1]).join("x.bin"), "partial").unwrap();
    // This process is alive with its real start time: its entry stays.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let start: u64 = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(19).unwrap().parse().unwrap();
    let live = format!(".c.gguf.organ-tmp.{me}.{start}.{:016x}", 3);
    std::fs::write(root.join(&live), "in progress").unwrap();
    // Something that only looks like a temp entry is not touched either.
    let other = ".d.gguf.organ-tmp.notapid";
    std::fs::write(root.join(other), "mine").unwrap();
    let mut c = organ();
    c.arg("purify").arg(&m).args(["--method", "fractal", "--all", "--out"]).arg(root.join("out.gguf"));
    ok(c);
    for d in &dead {
        assert!(!root.join(d).exists(), "{d} was not removed");
    }
    assert!(root.join(&live).exists() && root.join(other).exists());

    // A real kill: whatever it leaves is gone after the next run in that directory.
    let big = smollm2();
    let kroot = tmp("sweep6k");
    std::fs::create_dir_all(&kroot).unwrap();
    for delay in [30u64, 120] {
        let mut c = organ();
        c.arg("dissect").arg(&big).arg("--out").arg(kroot.join(format!("k{delay}.organs")));
        let mut child = c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(kroot.join("after.organs"));
    ok(c);
    let left: Vec<String> = std::fs::read_dir(&kroot)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".organ-tmp."))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn hostile_names_reach_the_terminal_escaped() {
    let names =
        vec!["blk.0.ffn_up.weight\x1b[2J\x1b]0;pwned\x07".to_string(), "blk.1.ffn_up\nweight\r\u{202e}".to_string()];
    let m = tiny_named("in7.gguf", &names, &[64, 4]);
    for args in [&["inspect"][..], &["measure", "--no-cache"]] {
        let mut c = organ();
        c.args(&args[..1]).arg(&m).args(&args[1..]);
        let o = ok(c);
        let s = String::from_utf8(o.stdout).unwrap();
        assert!(!s.contains('\x1b') && !s.contains('\r') && !s.contains('\x07') && !s.contains('\u{202e}'), "{s}");
        assert!(s.contains("blk.0.ffn_up.weight\\u{1b}[2J"), "{s}");
        assert!(s.contains("blk.1.ffn_up\\nweight\\r\\u{202e}"), "{s}");
    }
}

#[test]
fn purify_refuses_out_of_range_values_by_name() {
    let m = tiny("in8.gguf", 2);
    let out = tmp("in8-out.gguf");
    for (method, flag, value) in [
        ("fractal", "--strength", "1e308"),
        ("fractal", "--strength", "-0.5"),
        ("fractal", "--strength", "NaN"),
        ("spectral", "--keep", "NaN"),
        ("spectral", "--keep", "-1"),
        ("spectral", "--keep", "inf"),
    ] {
        let mut c = organ();
        c.arg("purify").arg(&m).args(["--method", method, "--all", &format!("{flag}={value}"), "--out"]).arg(&out);
        let e = refused(c);
        assert!(e.contains(&format!("{flag} ")) && e.contains("from 0 to 1"), "{flag} {value}: {e}");
        assert!(!out.exists());
    }
}

#[test]
fn shards_of_different_split_sets_are_refused() {
    let m = tiny("in9.gguf", 4);
    let dir = tmp("in9.organs");
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(&dir);
    ok(c);
    // Two splits of the same model: every split.* key agrees, the set ids do not.
    let (a, b) = (tmp("in9a"), tmp("in9b"));
    for d in [&a, &b] {
        std::fs::create_dir_all(d).unwrap();
        let mut c = organ();
        c.arg("assemble").arg(&dir).arg("--out").arg(d.join("s.gguf")).args(["--split-max-size", "1K"]);
        ok(c);
    }
    let mut c = organ();
    c.args(["measure", "--no-cache"]).arg(a.join("s-00001-of-00004.gguf"));
    ok(c);
    std::fs::copy(b.join("s-00003-of-00004.gguf"), a.join("s-00003-of-00004.gguf")).unwrap();
    let mut c = organ();
    c.args(["measure", "--no-cache"]).arg(a.join("s-00001-of-00004.gguf"));
    let e = refused(c);
    assert!(e.contains("s-00003-of-00004.gguf") && e.contains("another split set"), "{e}");
}

/// The `fsync` calls of `organ ARGS` (with `env`), counted by strace. Outside CI a missing
/// strace skips (None); under CI it fails.
fn fsyncs(args: &[&std::ffi::OsStr], env: &[(&str, &str)]) -> Option<usize> {
    if Command::new("strace").arg("-V").output().is_err() {
        let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
        assert!(!ci, "strace is needed to count organ's fsync calls");
        println!("skipped: no strace (CI=true fails instead)");
        return None;
    }
    use std::sync::atomic::{AtomicU64, Ordering};
    static RUN: AtomicU64 = AtomicU64::new(0);
    let log = tmp(&format!("strace.{}", RUN.fetch_add(1, Ordering::Relaxed)));
    let mut c = Command::new("strace");
    c.args(["-f", "-qq", "-e", "trace=fsync", "-o"]).arg(&log).arg(env!("CARGO_BIN_EXE_organ")).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    Some(std::fs::read_to_string(&log).unwrap().lines().filter(|l| l.contains("fsync(")).count())
}

/// New outputs are renamed into place unflushed, as cp writes (the dissect/assemble speed
/// target); an output that replaces an existing one is flushed, file by file, before the
/// rename, and so is every output with --fsync or ORGAN_FSYNC=1.
#[test]
fn outputs_are_flushed_when_they_replace_something_or_when_asked() {
    let Some(model) = need::smollm2() else { return };
    let (dir, gguf) = (tmp("flush.organs"), tmp("flush.gguf"));
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let dissect = |extra: &[&std::ffi::OsStr], env: &[(&str, &str)]| {
        let mut a = vec![os("dissect"), model.as_os_str(), os("--out"), dir.as_os_str()];
        a.extend_from_slice(extra);
        fsyncs(&a, env)
    };
    let Some(new) = dissect(&[], &[]) else { return };
    assert_eq!(new, 0, "a new organ directory is not flushed");
    let organ_files = manifest(&dir)["tensors"].as_array().unwrap().len();
    let replaced = dissect(&[os("--force")], &[]).unwrap();
    assert!(replaced > organ_files, "replacing: {replaced} fsyncs for {organ_files} organ files");
    std::fs::remove_dir_all(&dir).unwrap();
    let asked = dissect(&[os("--fsync")], &[]).unwrap();
    assert!(asked > organ_files, "--fsync: {asked} fsyncs for {organ_files} organ files");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(dissect(&[], &[("ORGAN_FSYNC", "1")]).unwrap() > organ_files);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(dissect(&[], &[("ORGAN_FSYNC", "0")]).unwrap(), 0);

    let assemble = |extra: &[&std::ffi::OsStr]| {
        let mut a = vec![os("assemble"), dir.as_os_str(), os("--out"), gguf.as_os_str()];
        a.extend_from_slice(extra);
        fsyncs(&a, &[]).unwrap()
    };
    assert_eq!(assemble(&[]), 0, "a new GGUF is not flushed");
    // The file, then its directory after the rename.
    assert_eq!(assemble(&[os("--force")]), 2, "a replacing GGUF is flushed, and its directory");
    assert_eq!(bytes(&gguf), bytes(&model));
}

/// `--judge TEXT --json TEXT`: the judge's text is an input, refused as the report before
/// any work (before: the model was written, then the collision found, or the text lost).
#[test]
fn a_judge_text_named_as_an_output_is_refused_before_any_work() {
    let m = tiny("judged.gguf", 2);
    let other = tiny("judged-other.gguf", 2);
    let text = tmp("judge-text.txt");
    std::fs::write(&text, "The quick brown fox. ".repeat(50)).unwrap();
    let before = bytes(&text);
    let out = tmp("judged-out.gguf");
    let runs: [&[&str]; 3] = [
        &["purify", "MODEL", "--method", "fractal", "--all", "--out", "OUT"],
        &["layers", "MODEL", "--drop", "1", "--out", "OUT"],
        &["merge", "--method", "linear", "--model", "MODEL", "--model", "OTHER", "--out", "OUT"],
    ];
    for args in runs {
        let _ = std::fs::remove_file(&out);
        let mut c = organ();
        for a in args {
            match *a {
                "MODEL" => c.arg(&m),
                "OTHER" => c.arg(&other),
                "OUT" => c.arg(&out),
                a => c.arg(a),
            };
        }
        c.arg("--judge").arg(&text).arg("--json").arg(&text).arg("--force");
        let e = refused(c);
        assert!(e.contains("is an input of this run") && e.contains("judge-text.txt"), "{args:?}: {e}");
        assert!(!out.exists(), "{args:?}: wrote the model before refusing");
        assert_eq!(bytes(&text), before, "{args:?}");
    }
}
