//! Issue 35's terminal points: `inspect` of an organ directory and its tensor filters
//! (points 10, 17), lists summarized unless `--verbose`, the global flags under their own
//! help headings, colour only where it is wanted (point 14), and the progress bars and
//! events, eval's from llama.cpp's chunk lines (point 12).

use crate::build::*;
use crate::common::*;
use organ_core::GgmlType;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A dense llama of `layers` layers, width 64, its FFN weights in `ffn` (Q8_0 or Q4_0):
/// small enough to build in milliseconds, with as many layers as a real model.
fn llama(name: &str, layers: u32, ffn: GgmlType) -> PathBuf {
    let mut ts = vec![t("token_embd.weight", &[64, 32], GgmlType::F32, noise(1, 64 * 32))];
    for l in 0..layers {
        ts.push(t(&format!("blk.{l}.attn_norm.weight"), &[64], GgmlType::F32, noise(2, 64)));
        ts.push(t(&format!("blk.{l}.attn_q.weight"), &[64, 64], GgmlType::Q8_0, noise(5, 64 * 64)));
        for k in ["gate", "up"] {
            ts.push(t(&format!("blk.{l}.ffn_{k}.weight"), &[64, 128], ffn, noise(3, 64 * 128)));
        }
        ts.push(t(&format!("blk.{l}.ffn_down.weight"), &[128, 64], ffn, noise(4, 64 * 128)));
    }
    ts.push(t("output_norm.weight", &[64], GgmlType::F32, noise(6, 64)));
    write_model(name, "llama", &ts)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn inspect(args: &[&std::ffi::OsStr]) -> Output {
    let mut c = organ();
    c.arg("inspect").args(args);
    ok(c)
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap()
}

/// An organ directory is inspected as the GGUF `organ assemble` writes from it: the same
/// header, metadata, tensors and offsets as that file (here, the dissected original), and
/// `--json` the same document but for the name and `"offsets": "assembled"`.
#[test]
fn inspect_shows_an_organ_directory_as_the_gguf_it_assembles_into() {
    let model = llama("ux-inspect.gguf", 3, GgmlType::Q8_0);
    let dir = dissect(&model, "ux-inspect.organs", &["--force"]);
    let mut file = json(&inspect(&[model.as_os_str(), "--json".as_ref()]));
    let mut organs = json(&inspect(&[dir.as_os_str(), "--json".as_ref()]));
    assert_eq!(organs["offsets"], "assembled");
    assert_eq!(organs["file"], "ux-inspect.organs");
    assert_eq!(organs["tensors"].as_array().unwrap().len(), 17);
    for v in [&mut file, &mut organs] {
        let o = v.as_object_mut().unwrap();
        o.remove("file");
        o.remove("offsets");
    }
    assert_eq!(file, organs);
    // The text: the same lines after the header line, which says what the offsets are.
    let (f, d) = (stdout(&inspect(&[model.as_os_str()])), stdout(&inspect(&[dir.as_os_str()])));
    let head = d.lines().next().unwrap();
    assert!(
        head.starts_with("ux-inspect.organs: organ directory, as the GGUF organ assemble writes: GGUF v3"),
        "{head}"
    );
    assert_eq!(f.lines().skip(1).collect::<Vec<_>>(), d.lines().skip(1).collect::<Vec<_>>());
    // A GGUF assembled from it has those very offsets.
    let assembled = tmp("ux-inspect-assembled.gguf");
    let mut c = organ();
    c.arg("assemble").arg(&dir).arg("--out").arg(&assembled).arg("--force");
    ok(c);
    let a = stdout(&inspect(&[assembled.as_os_str()]));
    assert_eq!(a.lines().skip(1).collect::<Vec<_>>(), d.lines().skip(1).collect::<Vec<_>>());
}

/// `--layers`, `--group` and `--name` narrow the tensors shown, through graft's selection;
/// `#` keeps each tensor's place in the model; a selection of nothing says what would match.
#[test]
fn inspect_filters_tensors_by_layer_group_and_name() {
    let model = llama("ux-filter.gguf", 30, GgmlType::Q8_0);
    let m = model.as_os_str();
    let names = |o: &Output| -> Vec<String> {
        json(o)["tensors"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    };
    let o = inspect(&[m, "--json".as_ref(), "--layers".as_ref(), "5-6".as_ref(), "--group".as_ref(), "organ".as_ref()]);
    let want: Vec<String> =
        (5..=6).flat_map(|l| ["gate", "up", "down"].map(|k| format!("blk.{l}.ffn_{k}.weight"))).collect();
    let mut got = names(&o);
    got.sort();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(got, want_sorted);
    assert_eq!(json(&o)["selection"], "layers 5-6; types organ");
    // graft's and purify's spelling selects the same (issue 50).
    let t = inspect(&[m, "--json".as_ref(), "--layers".as_ref(), "5-6".as_ref(), "--type".as_ref(), "organ".as_ref()]);
    assert_eq!(json(&t)["tensors"], json(&o)["tensors"]);
    let o = inspect(&[m, "--json".as_ref(), "--name".as_ref(), "*norm*".as_ref()]);
    assert_eq!(names(&o).len(), 31);
    // The table: how many of all are shown, each row numbered by its place in the model.
    let text = stdout(&inspect(&[m, "--layers".as_ref(), "29".as_ref(), "--name".as_ref(), "*attn_q*".as_ref()]));
    assert!(text.contains("\ntensors: 1 of 152 (layers 29; names *attn_q*)\n"), "{text}");
    let row = text.lines().find(|l| l.contains("blk.29.attn_q.weight")).unwrap();
    assert_eq!(row.split_whitespace().next(), Some("148"), "{row}");
    // Nothing matched: the core's hints, exit 1.
    let mut c = organ();
    c.args(["inspect"]).arg(&model).args(["--layers", "40-50"]);
    let e = fails(c);
    assert!(e.contains("layers 40-50 matches no tensor: the model has layers 0-29"), "{e}");
    let mut c = organ();
    c.args(["inspect"]).arg(&model).args(["--name", "ffn_up"]);
    assert!(fails(c).contains("did you mean *ffn_up*?"));
    // A directory, filtered alike.
    let dir = dissect(&model, "ux-filter.organs", &["--force"]);
    let o = inspect(&[
        dir.as_os_str(),
        "--json".as_ref(),
        "--layers".as_ref(),
        "5-6".as_ref(),
        "--group".as_ref(),
        "organ".as_ref(),
    ]);
    let mut got = names(&o);
    got.sort();
    assert_eq!(got, want_sorted);
}

/// `organ moe --base B --expert E…` of donors whose FFN types differ from the base's.
fn moe(base: &Path, experts: &[&Path], out: &Path) -> Command {
    let mut c = organ();
    c.arg("moe").arg("--base").arg(base);
    for e in experts {
        c.arg("--expert").arg(e);
    }
    c.arg("--out").arg(out).arg("--force");
    c
}

/// A refusal's 90 problems alike but for their layer are 3 lines with a count; `--verbose`
/// lists each tensor (the first 50, then how many more).
#[test]
fn a_refusal_groups_problems_alike_but_for_their_layer() {
    let (a, b) = (llama("ux-moe-q8.gguf", 30, GgmlType::Q8_0), llama("ux-moe-q4.gguf", 30, GgmlType::Q4_0));
    let out = tmp("ux-moe.gguf");
    let e = fails(moe(&a, &[&a, &b], &out));
    assert!(e.contains("(90 problems)"), "{e}");
    let lines: Vec<&str> = e.lines().filter(|l| l.starts_with("  blk.")).collect();
    assert_eq!(lines.len(), 3, "{e}");
    assert!(
        lines[0].starts_with("  blk.*.ffn_gate.weight: types differ (")
            && lines[0].ends_with("; give --type to requantize ×30 (layers 0-29)"),
        "{e}"
    );
    assert!(e.contains("  (90 problems in all; --verbose lists each tensor)"), "{e}");
    let mut c = moe(&a, &[&a, &b], &out);
    c.arg("--verbose");
    let e = fails(c);
    assert!(e.contains("  blk.0.ffn_gate.weight: types differ (") && e.contains("  … and 40 more"), "{e}");
    assert!(!out.exists());
}

/// `experts extract`'s plan: 90 sliced tensors are 3 rows with a count, 90 with `-v`.
#[test]
fn an_experts_plan_is_one_row_per_kind_of_tensor() {
    let a = llama("ux-experts-dense.gguf", 30, GgmlType::Q8_0);
    let moe4 = tmp("ux-experts-moe.gguf");
    ok(moe(&a, &[&a, &a], &moe4));
    let plan = |extra: &[&str]| {
        let mut c = organ();
        c.args(["experts", "extract"]).arg(&moe4).args(["--expert", "1", "--dry-run"]).args(extra);
        stdout(&ok(c))
    };
    let short = plan(&[]);
    let rows: Vec<&str> = short.lines().filter(|l| l.starts_with("  blk.")).collect();
    assert_eq!(rows.len(), 3, "{short}");
    assert!(rows.iter().all(|r| r.starts_with("  blk.*.ffn_") && r.ends_with(" bytes ×30 (layers 0-29)")), "{short}");
    assert!(short.contains("90 tensors sliced"), "{short}");
    let long = plan(&["-v"]);
    assert_eq!(long.lines().filter(|l| l.starts_with("  blk.")).count(), 90, "{long}");
    assert!(long.contains("  blk.29.ffn_down.weight"), "{long}");
}

/// The remote and fsync options are not in a subcommand's `-h`; `--help` shows them once,
/// under one heading.
#[test]
fn global_options_are_under_their_own_headings() {
    for cmd in ["measure", "inspect", "graft"] {
        let short = stdout(&ok({
            let mut c = organ();
            c.args([cmd, "-h"]);
            c
        }));
        assert!(!short.contains("--remote-gap") && !short.contains("--fsync"), "{cmd} -h:\n{short}");
        assert!(short.contains("Global options:") && short.contains("--verbose"), "{cmd} -h:\n{short}");
        let long = stdout(&ok({
            let mut c = organ();
            c.args([cmd, "--help"]);
            c
        }));
        assert_eq!(long.matches("\nRemote models (").count(), 1, "{cmd} --help:\n{long}");
        let remote = &long[long.find("\nRemote models (").unwrap()..];
        for flag in ["--remote-gap", "--remote-concurrency", "--remote-retries", "--remote-max-whole"] {
            assert!(remote.contains(flag), "{cmd} --help: {flag} not under the remote heading");
        }
        assert!(long.contains("--fsync"), "{cmd} --help");
    }
}

/// The escape for red, as anstyle writes it.
const RED: &str = "\x1b[31m";

/// `organ: error:` is red with `CLICOLOR_FORCE=1`, plain with `NO_COLOR=1` besides, and
/// plain when stderr is a pipe (as here) without either.
#[test]
fn errors_are_coloured_only_where_wanted() {
    let run = |env: &[(&str, &str)]| {
        let mut c = organ();
        c.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE").env_remove("CLICOLOR");
        c.arg("inspect").arg(tmp("ux-no-such.gguf")).envs(env.iter().copied());
        fails(c)
    };
    let forced = run(&[("CLICOLOR_FORCE", "1")]);
    assert!(forced.starts_with(&format!("organ: \x1b[1m{RED}error\x1b[0m: ")), "{forced:?}");
    for env in [&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")][..], &[]] {
        let plain = run(env);
        assert!(plain.starts_with("organ: error: ") && !plain.contains('\x1b'), "{env:?}: {plain:?}");
    }
}

/// `check`'s BROKEN and its error findings are red on a coloured stdout, and only there.
#[test]
fn check_colours_its_verdict() {
    let mut nan = noise(7, 64 * 64);
    nan[3] = f32::NAN;
    let model = write_model(
        "ux-broken.gguf",
        "llama",
        &[
            t("blk.0.attn_q.weight", &[64, 64], GgmlType::F32, nan),
            t("output_norm.weight", &[64], GgmlType::F32, noise(6, 64)),
        ],
    );
    let run = |env: &[(&str, &str)]| {
        let mut c = organ();
        c.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE").arg("check").arg(&model).envs(env.iter().copied());
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(1));
        stdout(&o)
    };
    let forced = run(&[("CLICOLOR_FORCE", "1")]);
    assert!(forced.contains(&format!("\n\x1b[1m{RED}BROKEN\x1b[0m: ")), "{forced:?}");
    assert!(forced.contains(&format!("  \x1b[1m{RED}error\x1b[0m ")), "{forced:?}");
    for env in [&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")][..], &[]] {
        let plain = run(env);
        assert!(plain.contains("\nBROKEN: ") && !plain.contains('\x1b'), "{env:?}: {plain:?}");
    }
}

/// `cmd` run with its stdout and stderr on a terminal (util-linux `script`): what the
/// terminal showed, or `None` where `script` is missing.
fn on_terminal(cmd: &str) -> Option<String> {
    let o = Command::new("script").args(["-qec", cmd, "/dev/null"]).env("TERM", "xterm").output().ok()?;
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// On a terminal, `check`'s bar names the file, and no bar is drawn at "0/0" (a full bar
/// of no length, measure's first frame before).
#[test]
fn a_bar_names_its_file_and_starts_with_its_length() {
    let model = llama("ux-bar.gguf", 30, GgmlType::Q8_0);
    let organ_bin = env!("CARGO_BIN_EXE_organ");
    let Some(shown) = on_terminal(&format!("{organ_bin} check {} --exit-zero", shell_quote(&model))) else {
        eprintln!("skipped: no script(1)");
        return;
    };
    assert!(shown.contains(" errors, "), "{shown}");
    let frames: Vec<&str> = shown.split(['\r', '\n']).filter(|f| f.contains(" tensors, ")).collect();
    assert!(!frames.is_empty(), "no bar drawn: {shown:?}");
    assert!(frames.iter().all(|f| f.contains("ux-bar.gguf") && f.contains("/152 tensors")), "{frames:?}");
    assert!(!shown.contains("0/0"), "{shown:?}");
    // measure's bar was drawn before its model was opened: full, at "0/0".
    let shown = on_terminal(&format!("{organ_bin} measure {} --no-cache --summary-only", shell_quote(&model))).unwrap();
    let frames: Vec<&str> = shown.split(['\r', '\n']).filter(|f| f.contains(" tensors, ")).collect();
    assert!(!frames.is_empty(), "no bar drawn: {shown:?}");
    assert!(frames.iter().all(|f| f.contains("ux-bar.gguf") && f.contains("/152 tensors")), "{frames:?}");
    assert!(!shown.contains("0/0"), "{shown:?}");
}

/// `organ eval` with `--progress jsonl`: a progress event per chunk llama.cpp scored, its
/// total known before the first, the last at done = total; with a base, its run and the
/// model's counted as one (twice the chunks). The figures are those of the run without.
#[test]
fn eval_reports_progress_by_chunk() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let bin = Path::new(llama_tool("llama-perplexity").get_program()).parent().unwrap().to_owned();
    let text = repo().join("tests/data/perplexity.txt");
    let run = |base: Option<&Path>| {
        let mut c = organ();
        c.arg("eval").arg(&model).arg("--text").arg(&text).args(["--ctx", "128", "--chunks", "3", "-j", LLAMA_THREADS]);
        c.arg("--llama-cpp").arg(&bin).args(["--progress", "jsonl"]);
        if let Some(b) = base {
            c.arg("--base").arg(b);
        }
        let o = ok(c);
        let events: Vec<(u64, u64)> = String::from_utf8_lossy(&o.stderr)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == "progress")
            .map(|v| (v["done"].as_u64().unwrap(), v["total"].as_u64().unwrap()))
            .collect();
        (events, stdout(&o))
    };
    let (events, printed) = run(None);
    assert_eq!(events.last(), Some(&(3, 3)), "{events:?}");
    assert!(events.iter().all(|&(_, t)| t == 3), "{events:?}");
    assert!(events.windows(2).all(|w| w[0].0 < w[1].0), "{events:?}");
    assert!(printed.contains("perplexity"), "{printed}");
    let (events, printed) = run(Some(&model));
    assert_eq!(events.last(), Some(&(6, 6)), "{events:?}");
    assert!(events.iter().any(|&(d, _)| d == 3), "the base's run ends at 3 of 6: {events:?}");
    assert!(events.windows(2).all(|w| w[0].0 < w[1].0), "{events:?}");
    assert!(printed.contains("verdict: close"), "{printed}");
}

/// A GGUF with no tensor (llama.cpp's vocabulary files) measures, and says why its
/// figures are zeros (issue 50).
#[test]
fn a_vocabulary_only_gguf_says_it_has_nothing_to_measure() {
    use organ_core::gguf::MetaValue;
    let m = write_model_kvs("ux-vocab-only.gguf", &[("general.architecture", MetaValue::Str(b"llama"))], &[]);
    let mut c = organ();
    c.arg("measure").arg(&m).arg("--no-cache");
    let text = String::from_utf8(ok(c).stdout).unwrap();
    assert!(text.contains("0 tensors") && text.contains("no tensors: nothing to measure"), "{text}");
}
