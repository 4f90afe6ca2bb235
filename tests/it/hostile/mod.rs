//! Hostile inputs. Crafted GGUF files and organ directories, made here in a scratch
//! directory, go through `organ inspect --json`, `measure --no-cache`, `dissect` and
//! `assemble` as child processes. Whatever the input, organ must answer: exit 0, or exit 1
//! with one `organ: error:` line naming the input; never a panic (101), an abort (134) or
//! a signal, never past [`TIMEOUT`], never above [`MAX_RSS_KIB`] of memory (the child's
//! peak RSS from `wait4`), and never leaving a temp entry beside where its output would go.
//!
//! [`arguments`] adds hostile flags, configurations and side files, run and counted with
//! the files. [`regressions`] holds the regressions of the hardening issue, each with the figure it
//! failed by before; `hostile_inputs`, here, runs the whole set ([`gguf_cases`] and
//! [`dir_cases`], built with [`gguf_bytes`]) through [`runner`] and prints one count line.

mod arguments;
mod dir_cases;
mod gguf_bytes;
mod gguf_cases;
mod header_budget;
mod regressions;
pub(crate) mod runner;
mod shapes;

use crate::common::llama_dir;
use dir_cases::dir_cases;
use gguf_cases::gguf_cases;
use runner::{run, scratch, temps_in};
use shapes::shape_cases;
use std::path::PathBuf;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);
const MAX_RSS_KIB: u64 = 256 << 10;
/// Inputs stay under this, so that the memory bound is about organ, not the input.
const MAX_INPUT: u64 = 64 << 20;

/// One crafted input, and the commands that may accept it (the others must refuse it).
struct Case {
    name: String,
    path: PathBuf,
    ok_for: &'static [&'static str],
}

/// The commands a valid input may go through or be refused by (see `hostile_inputs`).
const LENIENT: &[&str] = &[
    "graft",
    "purify",
    "moe",
    "experts-extract",
    "experts-prune",
    "lora-merge",
    "lora-extract",
    "layers",
    "meta",
    "memory",
    "eval",
    "quantize",
    "quantize-flags",
];
/// What a valid GGUF may go through (assemble takes organ directories only).
const GGUF_OK: &[&str] = &["inspect", "measure", "dissect"];
/// What a GGUF cut in its data (a partial download: its header whole) may go through.
const CUT_OK: &[&str] = &["inspect"];
/// What a valid organ directory may go through.
const DIR_OK: &[&str] = &["inspect", "measure", "assemble"];
/// A directory that only assemble checks closely enough to refuse (digests, versions,
/// names, alignment): measure reads the tensors, which are fine.
const MEASURE_OK: &[&str] = &["measure"];
/// A directory whose organ files' digests are wrong: inspect reads no tensor byte and
/// compares no digest (docs/ux.md, point 10); measure reads the tensors, which are fine.
const DIGESTS_UNREAD_OK: &[&str] = &["inspect", "measure"];

#[test]
fn hostile_inputs() {
    let d = scratch("hostile");
    let mut cases = gguf_cases(&d);
    cases.extend(dir_cases(&d));
    cases.extend(shape_cases(&d));
    // What eval scores, and what it runs: llama.cpp's tools when they are there (when not,
    // eval refuses every input, which must hold too).
    let text = d.join("text.txt");
    std::fs::write(&text, "The quick brown fox jumps over the lazy dog. ".repeat(400)).unwrap();
    let llama = llama_dir();
    // measure-sigma and measure-exact: `measure --sigma` / `--exact` (§7), which read what
    // measure reads, nine times or whole; measure-experts: `--experts` (§6), which also cuts
    // expert tensors by their header and compares their experts' bytes.
    // check: reads every byte measure reads, and more; a verdict (0, or 1 for an error
    // finding) or a refusal (2).
    let commands = [
        "inspect",
        "measure",
        "measure-sigma",
        "measure-exact",
        "measure-experts",
        "diff",
        "check",
        // check-derived: `check --derived-from` the input itself, both sides hostile.
        "check-derived",
        "dissect",
        "assemble",
        "graft",
        "purify",
        "moe",
        "experts-extract",
        "experts-prune",
        // lora-merge: the input as the base and as its adapter; lora-extract: the input as
        // the base and as its finetune.
        "lora-merge",
        "lora-extract",
        // layers: the first layer dropped; meta: general.name set; memory: `inspect
        // --memory`, the estimate from the header alone.
        "layers",
        "meta",
        "memory",
        // eval: organ reads the model (its caps, its errors) before llama-perplexity is
        // handed the same open file.
        "eval",
        // quantize: to Q4_K_M, requantizing allowed, so every tensor is decoded and encoded;
        // quantize-flags: to Q8_0 with a layer pruned, a key overridden, a shard per input
        // shard, and the report as JSON.
        "quantize",
        "quantize-flags",
    ];
    // Each (input, command) run is a child of its own, in its own output directory: the
    // runs go to as many workers as there are cores (a run is mostly process start-up and
    // a short read, so one at a time left the cores idle: 340 s for the set on 2 cores).
    let runs: Vec<(&Case, &str)> = cases.iter().flat_map(|c| commands.iter().map(move |&cmd| (c, cmd))).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let ran: Vec<Ran> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(case, cmd)) = runs.get(i) else { break mine };
                        mine.push(run_one(&d, case, cmd, &text, &llama));
                    }
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a hostile-input worker panicked")).collect()
    });
    let argument_cases = arguments::argument_cases(&d);
    let ran: Vec<Ran> = ran.into_iter().chain(argument_cases.iter().map(|c| run_arguments(&d, c))).collect();
    let panics = ran.iter().filter(|r| r.panic).count();
    let hangs = ran.iter().filter(|r| r.hang).count();
    let peak = ran.iter().map(|r| r.peak_rss_kib).max().unwrap_or(0);
    let failures: Vec<&str> = ran.iter().flat_map(|r| r.failures.iter().map(String::as_str)).collect();
    let mut heaviest: Vec<(u64, &str)> = ran.iter().map(|r| (r.peak_rss_kib, r.label.as_str())).collect();
    println!(
        "hostile inputs: {} files x {} commands and {} argument sets, {panics} panics, {hangs} hangs, peak RSS {} MiB",
        cases.len(),
        commands.len(),
        argument_cases.len(),
        peak >> 10
    );
    heaviest.sort_by(|a, b| b.cmp(a));
    for (kib, label) in heaviest.iter().take(8) {
        println!("  {label}: peak RSS {} MiB", kib >> 10);
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Runs one hostile command line, which must be refused as [`arguments`] says.
fn run_arguments(d: &std::path::Path, case: &arguments::ArgCase) -> Ran {
    let args: Vec<&std::ffi::OsStr> = case.args.iter().map(|a| a.as_os_str()).collect();
    let o = run(&args, &d.join(format!("{}.stderr", case.label)));
    let mut r = Ran { peak_rss_kib: o.peak_rss_kib, label: case.label.to_owned(), ..Ran::default() };
    let mut fail = |why: String| r.failures.push(format!("{}: {why}", case.label));
    let first = o.stderr.lines().next().unwrap_or("");
    match o.code {
        _ if o.timed_out => fail(format!("still running after {TIMEOUT:?}")),
        Some(1) if !first.starts_with("organ: error: ") || o.stderr.lines().count() != 1 => {
            fail(format!("exit 1 without one `organ: error:` line: {:?}", o.stderr))
        }
        Some(1) if !first.contains(case.needle) => fail(format!("the error does not say {:?}: {first}", case.needle)),
        Some(1) => {}
        _ => fail(format!("exit {:?}, signal {:?}: {}", o.code, o.signal, o.stderr)),
    }
    if case.out.exists() {
        fail(format!("{} written by a refused run", case.out.display()));
    }
    if o.peak_rss_kib > MAX_RSS_KIB {
        fail(format!("peak RSS {} MiB", o.peak_rss_kib >> 10));
    }
    r.hang = o.timed_out;
    r.panic = o.signal.is_some() || matches!(o.code, Some(101 | 134));
    r
}

/// What one run of one command on one input gave.
#[derive(Default)]
struct Ran {
    label: String,
    peak_rss_kib: u64,
    panic: bool,
    hang: bool,
    failures: Vec<String>,
}

/// Runs `cmd` on `case` (outputs under `d/out`; `text` and `llama` for eval) and checks
/// what every run must keep.
fn run_one(d: &std::path::Path, case: &Case, cmd: &str, text: &std::path::Path, llama: &std::path::Path) -> Ran {
    let out_parent = d.join("out").join(format!("{}-{cmd}", case.name));
    std::fs::create_dir_all(&out_parent).unwrap();
    let out = out_parent.join(if cmd == "dissect" { "result.organs" } else { "result.gguf" });
    let json = out_parent.join("report.json");
    let input = case.path.as_os_str();
    let args: Vec<&std::ffi::OsStr> = match cmd {
        "inspect" => vec!["inspect".as_ref(), "--json".as_ref(), input],
        "measure" | "measure-sigma" | "measure-exact" | "measure-experts" => {
            let mut a: Vec<&std::ffi::OsStr> =
                vec!["measure".as_ref(), "--no-cache".as_ref(), input, "--json".as_ref(), json.as_os_str()];
            a.extend(cmd.strip_prefix("measure-").map(|m| -> &std::ffi::OsStr {
                match m {
                    "sigma" => "--sigma".as_ref(),
                    "experts" => "--experts".as_ref(),
                    _ => "--exact".as_ref(),
                }
            }));
            a
        }
        // The input against itself: both sides hostile.
        "diff" => vec!["diff".as_ref(), input, input, "--json".as_ref(), json.as_os_str()],
        "check" => vec!["check".as_ref(), input, "--json".as_ref(), json.as_os_str()],
        "check-derived" => {
            vec!["check".as_ref(), input, "--derived-from".as_ref(), input, "--json".as_ref(), json.as_os_str()]
        }
        // The input into itself, every tensor.
        "graft" => vec![
            "graft".as_ref(),
            "--donor".as_ref(),
            input,
            "--recipient".as_ref(),
            input,
            "--name".as_ref(),
            "*".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
        "purify" => {
            vec![
                "purify".as_ref(),
                input,
                "--method".as_ref(),
                "fractal".as_ref(),
                "--all".as_ref(),
                "--out".as_ref(),
                out.as_os_str(),
            ]
        }
        // The input as its own two experts.
        "moe" => vec![
            "moe".as_ref(),
            "--base".as_ref(),
            input,
            "--expert".as_ref(),
            input,
            "--expert".as_ref(),
            input,
            "--out".as_ref(),
            out.as_os_str(),
        ],
        "experts-extract" => {
            vec![
                "experts".as_ref(),
                "extract".as_ref(),
                input,
                "--expert".as_ref(),
                "0".as_ref(),
                "--out".as_ref(),
                out.as_os_str(),
            ]
        }
        "experts-prune" => {
            vec![
                "experts".as_ref(),
                "prune".as_ref(),
                input,
                "--keep".as_ref(),
                "0".as_ref(),
                "--out".as_ref(),
                out.as_os_str(),
            ]
        }
        "lora-merge" => {
            vec!["lora".as_ref(), "merge".as_ref(), input, "--lora".as_ref(), input, "--out".as_ref(), out.as_os_str()]
        }
        "lora-extract" => vec![
            "lora".as_ref(),
            "extract".as_ref(),
            "--base".as_ref(),
            input,
            "--tuned".as_ref(),
            input,
            "--rank".as_ref(),
            "2".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
        "layers" => {
            vec!["layers".as_ref(), input, "--drop".as_ref(), "0".as_ref(), "--out".as_ref(), out.as_os_str()]
        }
        "meta" => {
            vec!["meta".as_ref(), input, "--set".as_ref(), "general.name=x".as_ref(), "--out".as_ref(), out.as_os_str()]
        }
        "memory" => vec!["inspect".as_ref(), input, "--memory".as_ref()],
        "quantize" => {
            vec!["quantize".as_ref(), "--allow-requantize".as_ref(), input, out.as_os_str(), "Q4_K_M".as_ref()]
        }
        "quantize-flags" => vec![
            "quantize".as_ref(),
            "--allow-requantize".as_ref(),
            "--keep-split".as_ref(),
            "--prune-layers".as_ref(),
            "0".as_ref(),
            "--override-kv".as_ref(),
            "general.name=str:x".as_ref(),
            "--json".as_ref(),
            json.as_os_str(),
            input,
            out.as_os_str(),
            "Q8_0".as_ref(),
        ],
        "eval" => vec![
            "eval".as_ref(),
            input,
            "--text".as_ref(),
            text.as_os_str(),
            "--llama-cpp".as_ref(),
            llama.as_os_str(),
            "--json".as_ref(),
            json.as_os_str(),
        ],
        _ => vec![cmd.as_ref(), input, "--out".as_ref(), out.as_os_str()],
    };
    let o = run(&args, &d.join("out").join(format!("{}-{cmd}.stderr", case.name)));
    let label = format!("{} {cmd}", case.name);
    let mut r = Ran { peak_rss_kib: o.peak_rss_kib, label: label.clone(), ..Ran::default() };
    let mut fail = |why: String| r.failures.push(format!("{label}: {why}"));
    if o.timed_out {
        fail(format!("still running after {TIMEOUT:?}"));
        r.hang = true;
        return r;
    }
    let panicked = o.signal.is_some() || matches!(o.code, Some(101 | 134));
    // diff reads what measure reads (and compares bytes): it accepts what measure
    // accepts, and its errors exit 1 as measure's do (2 only with --fail-on-change).
    let like_measure = cmd == "diff" || cmd.starts_with("measure-");
    // The surgeries and eval take what the parser accepts, and refuse what they
    // cannot use (a model that is not an MoE, not llama, a tensor count past a
    // limit): either is an answer, on a valid input.
    let lenient = LENIENT.contains(&cmd) && !case.ok_for.is_empty();
    let ok = case.ok_for.contains(&cmd) || (like_measure && case.ok_for.contains(&"measure")) || lenient;
    let error_status = if cmd.starts_with("check") { 2 } else { 1 };
    match o.code {
        Some(0) if ok => {}
        // check's verdicts on what it could read: healthy (0) or broken (1), with its report.
        Some(0 | 1) if cmd.starts_with("check") => {
            if !json.exists() {
                fail("check gave a verdict without its report".into());
            }
        }
        Some(c) if c == error_status => {
            let first = o.stderr.lines().next().unwrap_or("");
            if !first.starts_with("organ: error: ") {
                fail(format!("exit {c} without an `organ: error:` line: {:?}", o.stderr));
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
    r.panic = panicked;
    r
}
