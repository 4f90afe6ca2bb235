//! Shared helpers of the end-to-end tests: what a test needs beyond the repository
//! ([`need`]), where the real model and the gguf-py oracle are, and running the `organ`
//! binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn cache() -> PathBuf {
    std::env::var_os("ORGAN_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/organ"))
}

/// SmolLM2-135M-Instruct Q4_1's tensor count: what every whole-model check counts.
pub const SMOLLM2_TENSORS: usize = 272;
/// SmolLM2's organ tensors (ffn_up, ffn_gate, ffn_down) in layers 5-20: 16 × 3.
pub const SMOLLM2_ORGANS_5_20: usize = 48;
/// SmolLM2-135M-Instruct Q4_1's sha256, as scripts/fetch-model.sh checks it.
pub const SMOLLM2_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// SmolLM2-135M-Instruct Q4_1, fetched by scripts/fetch-model.sh (scripts/test.sh runs it).
/// Panics when it is missing: a test calls [`need::smollm2`] first.
pub fn smollm2() -> PathBuf {
    let p = smollm2_path();
    assert!(p.exists(), "{} is missing: guard the test with need::smollm2() (scripts/test.sh fetches it)", p.display());
    p
}

/// The python of the gguf-py 0.19.0 venv made by scripts/setup-oracle.sh.
pub fn oracle_python() -> PathBuf {
    let p = oracle_path();
    assert!(p.exists(), "{} is missing: guard the test with need::oracle() (scripts/test.sh sets it up)", p.display());
    p
}

/// The llama.cpp tools built by scripts/build-llama.sh (scripts/test.sh runs it).
pub fn llama_tool(tool: &str) -> Command {
    let p = llama_dir().join(tool);
    assert!(p.exists(), "{} is missing: guard the test with need::llama() (scripts/test.sh builds it)", p.display());
    Command::new(p)
}

fn smollm2_path() -> PathBuf {
    std::env::var_os("ORGAN_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache().join("models/SmolLM2-135M-Instruct.Q4_1.gguf"))
}

fn oracle_path() -> PathBuf {
    std::env::var_os("ORGAN_ORACLE_PY")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache().join("venv-gguf-0.19.0/bin/python"))
}

/// The llama.cpp tools the tests run.
const LLAMA_TOOLS: [&str; 7] = [
    "llama-completion",
    "llama-perplexity",
    "llama-quantize",
    "llama-gguf-split",
    "llama-tokenize",
    "llama-imatrix",
    "llama-export-lora",
];

/// Where the llama.cpp tools the tests run are (ORGAN_LLAMA_BIN, or the cache's build).
pub fn llama_dir() -> PathBuf {
    std::env::var_os("ORGAN_LLAMA_BIN").map(PathBuf::from).unwrap_or_else(|| cache().join("llama.cpp-11434.0.0/bin"))
}

/// Guards for what a test needs beyond the repository, which `scripts/test.sh` installs:
/// the model, the gguf-py oracle, llama.cpp's tools. Each call checks its prerequisites;
/// when one is missing it prints one line to the terminal (past the test harness's
/// capture), `skipped: TEST needs WHAT: run scripts/test.sh`, and returns `None`, so the
/// test returns and passes. Under `CI=true` a missing prerequisite panics instead: CI has
/// run the installers, so a missing one is a failure, never a silent skip.
///
/// ```ignore
/// let Some(model) = need::smollm2() else { return };
/// let Some(model) = need::smollm2_and_llama() else { return };
/// ```
pub mod need {
    use std::io::Write;
    use std::path::PathBuf;

    /// SmolLM2's path, if it is there.
    pub fn smollm2() -> Option<PathBuf> {
        check(&[Prereq::Model]).then(super::smollm2_path)
    }

    /// SmolLM2's path, if it and the gguf-py oracle are there.
    pub fn smollm2_and_oracle() -> Option<PathBuf> {
        check(&[Prereq::Model, Prereq::Oracle]).then(super::smollm2_path)
    }

    /// The gguf-py oracle venv's python, if it is there (for tests on test-built models;
    /// it also has jsonschema).
    pub fn oracle() -> Option<PathBuf> {
        check(&[Prereq::Oracle]).then(super::oracle_path)
    }

    /// SmolLM2's path, if it and llama.cpp's tools are there.
    pub fn smollm2_and_llama() -> Option<PathBuf> {
        check(&[Prereq::Model, Prereq::Llama]).then(super::smollm2_path)
    }

    /// SmolLM2's path, if it, the gguf-py oracle and llama.cpp's tools are there.
    pub fn smollm2_oracle_and_llama() -> Option<PathBuf> {
        check(&[Prereq::Model, Prereq::Oracle, Prereq::Llama]).then(super::smollm2_path)
    }

    /// Debian's nginx (installed once by scripts/setup-nginx.sh), if it is or can be there.
    pub fn nginx() -> Option<PathBuf> {
        check(&[Prereq::Nginx]).then(|| super::nginx_path().clone()).flatten()
    }

    /// The python of moto's venv (made once by scripts/setup-moto.sh), if it is or can be
    /// there: it runs moto's S3 server and has boto3.
    pub fn moto() -> Option<PathBuf> {
        check(&[Prereq::Moto]).then(|| super::moto_python().clone()).flatten()
    }

    /// The directory of Azurite and the Azure SDK for JS (installed once by
    /// scripts/setup-azurite.sh), if it is or can be there: its `node_modules` has both.
    pub fn azurite() -> Option<PathBuf> {
        check(&[Prereq::Azurite]).then(|| super::azurite_dir().clone()).flatten()
    }

    #[derive(Clone, Copy)]
    enum Prereq {
        Model,
        Oracle,
        Llama,
        Nginx,
        Moto,
        Azurite,
    }

    impl Prereq {
        fn missing(self) -> Option<String> {
            let (what, paths) = match self {
                Prereq::Model => ("the model", vec![super::smollm2_path()]),
                Prereq::Oracle => ("the gguf-py oracle", vec![super::oracle_path()]),
                Prereq::Llama => ("llama.cpp", super::LLAMA_TOOLS.iter().map(|t| super::llama_dir().join(t)).collect()),
                Prereq::Nginx => {
                    return super::nginx_path().is_none().then(|| "nginx (scripts/setup-nginx.sh failed)".into())
                }
                Prereq::Moto => {
                    return super::moto_python().is_none().then(|| "moto (scripts/setup-moto.sh failed)".into())
                }
                Prereq::Azurite => {
                    return super::azurite_dir().is_none().then(|| "Azurite (scripts/setup-azurite.sh failed)".into())
                }
            };
            let p = paths.into_iter().find(|p| !p.exists())?;
            Some(format!("{what} ({})", p.display()))
        }
    }

    /// True when every prerequisite is there; otherwise one skip line (or a panic in CI).
    fn check(what: &[Prereq]) -> bool {
        let missing: Vec<String> = what.iter().filter_map(|p| p.missing()).collect();
        if missing.is_empty() {
            return true;
        }
        let thread = std::thread::current();
        let test = thread.name().unwrap_or("a test");
        let line = format!("skipped: {test} needs {}: run scripts/test.sh", missing.join(" and "));
        if in_ci() {
            panic!("{line} (CI=true: a missing prerequisite fails)");
        }
        // Straight to the terminal: print!/eprint! would be captured, and a passing test's
        // capture is thrown away.
        let _ = writeln!(std::io::stderr().lock(), "{line}");
        false
    }

    /// `CI` set to anything but empty, `0` or `false`, as CI services set it.
    fn in_ci() -> bool {
        std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
    }
}

/// nginx's path from scripts/setup-nginx.sh (which installs it once), asked once.
fn nginx_path() -> &'static Option<PathBuf> {
    static PATH: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let out =
            Command::new(repo().join("scripts/setup-nginx.sh")).stderr(std::process::Stdio::null()).output().ok()?;
        let p = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        (out.status.success() && p.exists()).then_some(p)
    })
}

/// The python of moto's venv from scripts/setup-moto.sh (which makes it once), asked once.
fn moto_python() -> &'static Option<PathBuf> {
    static PATH: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let out =
            Command::new(repo().join("scripts/setup-moto.sh")).stderr(std::process::Stdio::null()).output().ok()?;
        let p = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        (out.status.success() && p.exists()).then_some(p)
    })
}

/// Azurite's directory from scripts/setup-azurite.sh (which installs it once), asked once.
fn azurite_dir() -> &'static Option<PathBuf> {
    static PATH: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let out =
            Command::new(repo().join("scripts/setup-azurite.sh")).stderr(std::process::Stdio::null()).output().ok()?;
        let p = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        (out.status.success() && p.exists()).then_some(p)
    })
}

/// The `organ` binary, run with a cache of its own (`ORGAN_CACHE`, empty): what a run
/// keeps there (measure's results, the base's logits of eval and `--judge`) never reaches
/// another test's run, nor a later test run's, so that a run computes what its test
/// expects it to. A test that means to share one sets `ORGAN_CACHE` (or `--cache`) itself.
pub fn organ() -> Command {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cache =
        std::env::temp_dir().join(format!("organ-test-{}", std::process::id())).join("caches").join(n.to_string());
    let mut c = Command::new(env!("CARGO_BIN_EXE_organ"));
    c.env("ORGAN_CACHE", cache);
    c
}

pub fn ok(mut c: Command) -> Output {
    let out = c.output().expect("spawn");
    assert!(out.status.success(), "{:?} failed:\n{}", c, String::from_utf8_lossy(&out.stderr));
    out
}

/// Runs a llama.cpp tool that must succeed, again while its output (stderr, then stdout)
/// lacks `last`, a line it prints at its end, up to 3 runs in all: llama.cpp's log thread is
/// not waited for at exit, and a busy machine loses the last lines (organ runs
/// llama-perplexity again for the same reason: llama_cpp::output::Error::CutShort).
#[track_caller]
pub fn ok_whole(mut c: Command, last: &str) -> Output {
    let mut run = 1;
    loop {
        let out = c.output().expect("spawn");
        assert!(out.status.success(), "{:?} failed:\n{}", c, String::from_utf8_lossy(&out.stderr));
        let has = |b: &[u8]| String::from_utf8_lossy(b).contains(last);
        if has(&out.stderr) || has(&out.stdout) || run == 3 {
            return out;
        }
        run += 1;
        eprintln!("{c:?}: no {last:?} in its output; running it again ({run} of 3)");
    }
}

/// A path in this test process's scratch directory, `$TMPDIR/organ-test-PID/MODULE`, where
/// MODULE is the file of the caller (`api`, `surgery`…), so modules never share a name.
/// The first call also removes the scratch directories of test processes that have ended
/// (their PID is gone from /proc), so runs do not pile up gigabytes of models.
#[track_caller]
pub fn tmp(name: &str) -> PathBuf {
    let module = Path::new(std::panic::Location::caller().file()).file_stem().unwrap().to_owned();
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(|| {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("organ-test-")) else { continue };
            if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() && Path::new("/proc/self").exists()
            {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
    let d = std::env::temp_dir().join(format!("organ-test-{}", std::process::id())).join(module);
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Runs an oracle script with the gguf-py venv: `script ARGS... OUT`, and parses OUT.
#[track_caller]
pub fn oracle_json(script: &Path, args: &[&std::ffi::OsStr], out_name: &str) -> serde_json::Value {
    let out = tmp(out_name);
    let mut c = Command::new(oracle_python());
    c.arg(script).args(args).arg(&out);
    ok(c);
    serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap()
}

/// The threads of every llama.cpp tool a test runs: one. The test binary runs two tests at
/// once on CI's two cores, and llama.cpp's threads meet at a barrier after every node of the
/// graph (hundreds per token) by spinning, never sleeping (`ggml_barrier`): a 2-thread run
/// beside another test's work waits at a barrier whenever one of its threads has lost its
/// core, for up to a scheduler time slice instead of microseconds. On one thread there is
/// no barrier, and two tests use a core each. Every figure a test compares with another is
/// made with this same count.
pub const LLAMA_THREADS: &str = "1";

/// `n` greedy tokens after a fixed prompt, from llama.cpp; at least n/3 words of text.
pub fn llama_generate(model: &Path, n: usize) -> String {
    let mut c = llama_tool("llama-completion");
    c.arg("-m").arg(model).args(["-p", "The human heart has four chambers:", "-n", &n.to_string()]);
    c.args(["--temp", "0", "--seed", "1", "-no-cnv", "--no-display-prompt", "-t", LLAMA_THREADS]);
    // common_perf_print's `total time` line follows the text.
    let text = String::from_utf8_lossy(&ok_whole(c, "total time =").stdout).trim().to_owned();
    assert!(text.split_whitespace().count() >= n / 3, "{}: too little text: {text:?}", model.display());
    text
}

/// llama-perplexity's final estimate on tests/data/perplexity.txt (context 128).
pub fn llama_perplexity(model: &Path) -> f64 {
    let mut c = llama_tool("llama-perplexity");
    c.arg("-m").arg(model).arg("-f").arg(repo().join("tests/data/perplexity.txt"));
    c.args(["-c", "128", "-b", "128", "-t", LLAMA_THREADS]);
    let out = ok_whole(c, "Final estimate: PPL =");
    let log = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let line = log.lines().find(|l| l.contains("Final estimate: PPL =")).unwrap_or_else(|| panic!("no PPL in:\n{log}"));
    line.split("PPL =").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap()
}

/// SmolLM2's own [`llama_perplexity`], run once per test process: the parent's figure that
/// llama.rs's graft and purify.rs's outputs are each held against.
pub fn smollm2_perplexity(model: &Path) -> f64 {
    static PPL: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *PPL.get_or_init(|| llama_perplexity(model))
}

/// Runs a command that must fail with exit status 1; returns its stderr.
pub fn fails(mut c: Command) -> String {
    let o = c.output().expect("spawn");
    assert_eq!(o.status.code(), Some(1), "{c:?} should fail");
    String::from_utf8(o.stderr).unwrap()
}

/// `organ dissect MODEL --out tmp(NAME) EXTRA…`, which must succeed: the directory.
pub fn dissect(model: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let dir = tmp(name);
    let mut c = organ();
    c.arg("dissect").arg(model).arg("--out").arg(&dir).args(extra);
    ok(c);
    dir
}

/// An organ directory's manifest.json, parsed.
pub fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// SmolLM2 requantized to F16 by llama.cpp (`llama-quantize --allow-requantize … F16`),
/// made once per test process: the base of the sensitivity, prediction and recipe tests
/// (`tests/data/sensitivity/smollm2-f16-*.json` were measured on it).
pub fn smollm2_f16(model: &Path) -> PathBuf {
    static F16: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    F16.get_or_init(|| {
        let out = tmp("smollm2-f16.gguf");
        let mut q = llama_tool("llama-quantize");
        q.arg("--allow-requantize").arg(model).arg(&out).arg("F16");
        ok(q);
        out
    })
    .clone()
}
