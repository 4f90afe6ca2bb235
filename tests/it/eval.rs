//! `organ eval` and `--judge` (docs/judge.md) on SmolLM2 and tests/data/perplexity.txt,
//! against llama.cpp's own `llama-perplexity` run directly: the perplexity it prints, a
//! model against itself, the Q8_0 requant against the Q4_1, the errors, and graft's and
//! purify's verdicts. Contexts of 128 tokens keep each run to seconds.

use crate::build::smollm2_q8_0;
use crate::common::*;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const CTX: &str = "128";

fn text() -> PathBuf {
    repo().join("tests/data/perplexity.txt")
}

/// The directory of the llama.cpp tools the tests use (need::… checked they are there).
fn llama_bin() -> PathBuf {
    let c = llama_tool("llama-perplexity");
    Path::new(c.get_program()).parent().unwrap().to_owned()
}

/// A directory whose `llama-perplexity` execs the real one with `-t LLAMA_THREADS` added,
/// made once: `--judge` has no threads flag and leaves them to llama.cpp, which takes both
/// cores and then spins at its barriers beside the other test running (see
/// [`LLAMA_THREADS`]). It execs, so the descriptors organ hands the tool stay open, as
/// eval_handed's wrapper shows.
pub(crate) fn one_thread_llama_bin() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tmp("llama-one-thread");
        std::fs::create_dir_all(&dir).unwrap();
        let (real, tool) = (llama_bin().join("llama-perplexity"), dir.join("llama-perplexity"));
        std::fs::write(&tool, format!("#!/bin/sh\nexec '{}' \"$@\" -t {LLAMA_THREADS}\n", real.display())).unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    })
    .clone()
}

/// Scored contexts per run: 4 × 63 tokens, over the 100 llama.cpp wants for statistics.
const CHUNKS: &str = "4";

/// A directory of its own for one test's outputs (temp entries are looked for there).
#[track_caller]
fn test_dir(name: &str) -> PathBuf {
    let d = tmp(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `organ eval MODEL --text TEXT --ctx 128 --chunks 4 -j 1 --llama-cpp BIN --json DIR/eval.json EXTRA…`.
fn eval(model: &Path, text: &Path, dir: &Path, extra: &[&std::ffi::OsStr]) -> Command {
    let mut c = organ();
    c.arg("eval").arg(model).arg("--text").arg(text).args(["--ctx", CTX, "--chunks", CHUNKS, "-j", LLAMA_THREADS]);
    c.arg("--llama-cpp").arg(llama_bin()).arg("--json").arg(dir.join("eval.json")).args(extra);
    c
}

/// Runs an eval that must succeed: its stdout and JSON report; no temp entry is left.
#[track_caller]
fn evaluated(c: Command, dir: &Path) -> (String, Value) {
    let out = ok(c);
    let report = serde_json::from_slice(&std::fs::read(dir.join("eval.json")).unwrap()).unwrap();
    no_temp_left(dir);
    (String::from_utf8(out.stdout).unwrap(), report)
}

/// No temp entry (the base's logits) left in `dir`.
#[track_caller]
fn no_temp_left(dir: &Path) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".organ-tmp."))
        .collect();
    assert!(left.is_empty(), "temp entries left: {left:?}");
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn perplexity_is_the_final_estimate_llama_perplexity_prints() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = test_dir("ppl");
    let (stdout, report) = evaluated(eval(&model, &text(), &dir, &[]), &dir);
    // llama-perplexity itself, with the arguments eval documents (-c N -b N -t T --chunks N -f TEXT).
    let mut c = llama_tool("llama-perplexity");
    c.arg("-m").arg(&model).arg("-f").arg(text()).args(["-c", CTX, "-b", CTX, "-t", LLAMA_THREADS, "--chunks", CHUNKS]);
    let o = ok_whole(c, "Final estimate: PPL =");
    let log = String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
    let line = &log[log.find("Final estimate: PPL = ").expect("a final estimate")..];
    let mut w = line["Final estimate: PPL = ".len()..].split_whitespace();
    let (ppl, err) = (w.next().unwrap(), w.nth(1).unwrap());
    println!("{stdout}llama-perplexity: PPL = {ppl} +/- {err}");
    assert_eq!(format!("{:.4}", f(&report["perplexity"]["value"])), ppl);
    assert_eq!(format!("{:.5}", f(&report["perplexity"]["error"])), err);
    assert_eq!((report["ctx"].as_u64(), report["chunks"].as_u64()), (Some(128), Some(4)));
    assert!(report["kl_divergence"].is_null() && report["base"].is_null());
    assert!(stdout.contains(&format!("perplexity {ppl:>17}")) || stdout.contains(ppl), "{stdout}");
}

#[test]
fn a_model_against_itself_diverges_by_nothing() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = test_dir("self");
    let (stdout, r) = evaluated(eval(&model, &text(), &dir, &["--base".as_ref(), model.as_os_str()]), &dir);
    println!("{stdout}");
    let k = &r["kl_divergence"];
    // The base's logits are saved as 16-bit log-probabilities: not exactly 0.
    assert!(f(&k["mean"]["value"]).abs() <= 1e-4, "{k}");
    assert!(f(&k["same_top"]["value"]) >= 0.999, "{k}");
    assert_eq!(r["verdict"]["verdict"], "close");
    assert!(stdout.contains("verdict: close"), "{stdout}");
}

#[test]
fn the_q8_0_requant_against_the_q4_1_diverges_a_little() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let q8 = smollm2_q8_0(&model);
    let dir = test_dir("q8");
    let (stdout, r) = evaluated(eval(&q8, &text(), &dir, &["--base".as_ref(), model.as_os_str()]), &dir);
    println!("{stdout}");
    let k = &r["kl_divergence"];
    let (mean, median, p99) = (f(&k["mean"]["value"]), f(&k["median"]), f(&k["p99"]));
    // Two quantizations of one model: a small, positive divergence (llama.cpp's figures
    // for Q8_0 against Q4_1 are thousandths of a nat), more than the 16-bit noise above.
    assert!(mean > 1e-3 && mean < 0.05, "{k}");
    assert!(median > 0.0 && median <= p99 && p99 <= f(&k["max"]), "{k}");
    let top = f(&k["same_top"]["value"]);
    assert!(top > 0.8 && top < 1.0, "{k}");
    assert!(f(&r["base_perplexity"]["value"]) > 1.0, "{r}");
}

/// `--gpu-layers` and `--device` reach llama-perplexity's command line as given: `none`
/// with every layer runs on this CPU-only build and gives the plain run's perplexity; a
/// device it does not have fails with llama.cpp's own sentence naming it; a malformed
/// list is refused by organ before llama.cpp runs; `--judge-gpu-layers` and
/// `--judge-device` reach `--judge`'s runs. (No GPU here: what a GPU run gives is not
/// tested.)
#[test]
fn gpu_layers_and_device_reach_llama_perplexity() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = test_dir("offload");
    let (_, plain) = evaluated(eval(&model, &text(), &dir, &[]), &dir);
    let flags = ["--gpu-layers", "all", "--device", "none", "--force"].map(std::ffi::OsStr::new);
    let (_, offloaded) = evaluated(eval(&model, &text(), &dir, &flags), &dir);
    assert_eq!(offloaded["perplexity"], plain["perplexity"]);
    let flags = ["--device", "NOPE0", "--force"].map(std::ffi::OsStr::new);
    let err = fails(eval(&model, &text(), &dir, &flags));
    assert!(err.contains("invalid device: NOPE0"), "{err}");
    no_temp_left(&dir);
    // --judge's own pair reaches the judge's runs: graft's verdict on a device it lacks.
    let donor = smollm2_q8_0(&model);
    let mut c = organ();
    c.arg("graft").arg("--donor").arg(&donor).arg("--recipient").arg(&model).args(["--layers", "5", "--type", "organ"]);
    c.arg("--judge").arg(text()).args(["--judge-ctx", CTX, "--judge-threads", LLAMA_THREADS]);
    c.args(["--judge-gpu-layers", "all", "--judge-device", "NOPE1"]);
    c.arg("--llama-cpp").arg(llama_bin()).arg("--out").arg(dir.join("graft.gguf"));
    let err = fails(c);
    assert!(err.contains("invalid device: NOPE1"), "{err}");
    for (flag, bad) in [("--device", "CUDA0;rm"), ("--device", ""), ("--gpu-layers", "most")] {
        let o = eval(&model, &text(), &dir, &[flag.as_ref(), bad.as_ref()]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag} {bad}: a usage error: {err}");
        assert!(err.contains(flag) && err.contains(&format!("{bad:?}")), "{flag} {bad}: {err}");
    }
}

#[test]
fn a_text_shorter_than_two_contexts_is_refused() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let short = tmp("short.txt");
    let words: String = std::fs::read_to_string(text()).unwrap().chars().take(300).collect();
    std::fs::write(&short, words).unwrap();
    let dir = test_dir("short");
    let err = fails(eval(&model, &short, &dir, &[]));
    assert!(err.contains("too short") && err.contains("at least 256 tokens"), "{err}");
    assert!(!dir.join("eval.json").exists());
    no_temp_left(&dir);
}

#[test]
fn missing_llama_cpp_says_how_to_get_it() {
    let Some(model) = need::smollm2() else { return };
    let empty = tmp("no-llama");
    std::fs::create_dir_all(&empty).unwrap();
    let mut c = organ();
    c.arg("eval").arg(&model).arg("--text").arg(text()).arg("--llama-cpp").arg(&empty);
    let err = fails(c);
    assert!(err.contains("llama-perplexity") && err.contains("scripts/build-llama.sh"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one sentence: {err}");
}

#[test]
fn a_base_with_another_vocabulary_is_refused() {
    let Some(model) = need::smollm2_oracle_and_llama() else { return };
    // SmolLM2 with 64 more tokens (and embedding rows): llama.cpp loads it.
    let wide = tmp("wide-vocab.gguf");
    let mut c = Command::new(oracle_python());
    c.arg(repo().join("tests/oracle/widen_vocab.py")).arg(&model).arg("64").arg(&wide);
    ok(c);
    let dir = test_dir("vocab");
    for (m, b) in [(&model, &wide), (&wide, &model)] {
        let err = fails(eval(m, &text(), &dir, &["--base".as_ref(), b.as_os_str()]));
        assert!(err.contains("49216") && err.contains("49152") && err.contains("vocabulary"), "{err}");
    }
}

/// A `--judge` run's verdict: printed, and in the JSON report, with the figures.
#[track_caller]
fn judged(stdout: &str, report: &Value) {
    let j = &report["judge"];
    let grade = j["verdict"].as_str().unwrap();
    assert!(["close", "changed", "degraded", "broken"].contains(&grade), "{j}");
    assert!(stdout.contains(&format!("verdict: {grade} (")), "{stdout}");
    let e = &j["evaluation"];
    assert!(f(&e["perplexity"]["value"]) > 1.0 && f(&e["base_perplexity"]["value"]) > 1.0, "{e}");
    assert!(f(&e["kl_divergence"]["mean"]["value"]) > 0.0, "{e}");
    let ratio = f(&e["kl_divergence"]["ln_ppl_ratio"]["value"]).exp();
    assert!((f(&j["ppl_ratio"]) - ratio).abs() < 1e-12, "{j}");
}

#[test]
fn graft_judge_gives_the_verdict_against_the_recipient() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let donor = smollm2_q8_0(&model);
    let dir = test_dir("graft-judged");
    let (out, json) = (dir.join("graft.gguf"), dir.join("graft.json"));
    let mut c = organ();
    c.arg("graft").arg("--donor").arg(&donor).arg("--recipient").arg(&model);
    c.args(["--layers", "5-20", "--type", "organ", "--judge"]).arg(text()).args(["--judge-ctx", CTX]);
    c.arg("--llama-cpp").arg(one_thread_llama_bin()).arg("--out").arg(&out).arg("--json").arg(&json);
    let stdout = String::from_utf8(ok(c).stdout).unwrap();
    println!("{stdout}");
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    judged(&stdout, &report);
    assert_eq!(report["judge"]["evaluation"]["base"], model.display().to_string());
    assert_eq!(report["tensors"].as_array().unwrap().len(), SMOLLM2_ORGANS_5_20);
    no_temp_left(&dir);
    // The ranking of the two shows the verdict beside the graft's θ_mean, and says what
    // θ_mean is not; the JSON keeps it in the ranking's row.
    let ranked = dir.join("ranked.json");
    let mut c = organ();
    c.arg("measure").arg(&model).arg(&out).arg("--verdict").arg(&json).arg("--json").arg(&ranked);
    let stdout = String::from_utf8(ok(c).stdout).unwrap();
    let grade = report["judge"]["verdict"].as_str().unwrap();
    let ratio = report["judge"]["ppl_ratio"].as_f64().unwrap();
    let line = stdout.lines().find(|l| l.contains("graft.gguf") && l.contains(grade)).unwrap_or_default();
    assert!(line.contains(&format!("{grade} ×{ratio:.3}")), "{stdout}");
    let words = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("Neither measures quality") && words.contains("signal: the mean of sin θ"), "{stdout}");
    let r: Value = serde_json::from_slice(&std::fs::read(&ranked).unwrap()).unwrap();
    let rows = r["ranking"].as_array().unwrap();
    let graft_row = rows.iter().find(|x| x["model"] == "graft.gguf").unwrap();
    assert_eq!(
        (graft_row["measured"]["verdict"].as_str(), graft_row["measured"]["source"].as_str()),
        (Some(grade), Some("graft.json"))
    );
    assert!(rows.iter().any(|x| x["model"] != "graft.gguf" && x.get("measured").is_none()), "{r}");
    // A verdict on a model not measured is refused, naming the models; a file with none,
    // before any work.
    let mut c = organ();
    c.arg("measure").arg(&model).arg("--verdict").arg(&json);
    let e = fails(c);
    assert!(
        e.contains("graft.json: a verdict on ") && e.contains("whose bytes are none of the models measured"),
        "{e}"
    );
    // The verdict is tied to the bytes scored (issue 50): another model under the graft's
    // name does not take it, a copy of the graft under another name does.
    let hash = blake3::hash(&std::fs::read(&out).unwrap()).to_hex().to_string();
    assert_eq!(report["judge"]["evaluation"]["model_blake3"], hash.as_str());
    let (other, copy) = (dir.join("other"), dir.join("renamed.gguf"));
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(&model, other.join("graft.gguf")).unwrap();
    std::fs::copy(&out, &copy).unwrap();
    let mut c = organ();
    c.arg("measure").arg(other.join("graft.gguf")).arg(&copy).arg("--verdict").arg(&json).arg("--json").arg(&ranked);
    c.arg("--force");
    ok(c);
    let r: Value = serde_json::from_slice(&std::fs::read(&ranked).unwrap()).unwrap();
    let row = |name: &str| r["ranking"].as_array().unwrap().iter().find(|x| x["model"] == name).unwrap().clone();
    assert_eq!(row("renamed.gguf")["measured"]["verdict"].as_str(), Some(grade), "{r}");
    assert!(row("graft.gguf").get("measured").is_none(), "{r}");
    let mut c = organ();
    c.arg("measure").arg(&model).arg("--verdict").arg(&ranked);
    let e = fails(c);
    assert!(e.contains("ranked.json: no verdict in it"), "{e}");
}

#[test]
fn purify_judge_gives_the_verdict_against_the_input() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = test_dir("purify-judged");
    let (out, json) = (dir.join("purified.gguf"), dir.join("purify.json"));
    let mut c = organ();
    c.arg("purify").arg(&model).args(["--method", "fractal", "--layers", "5-8", "--type", "organ"]);
    c.arg("--judge").arg(text()).args(["--judge-ctx", CTX]).arg("--llama-cpp").arg(one_thread_llama_bin());
    c.arg("--out").arg(&out).arg("--json").arg(&json);
    let stdout = String::from_utf8(ok(c).stdout).unwrap();
    println!("{stdout}");
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    judged(&stdout, &report);
    assert_eq!(report["judge"]["evaluation"]["model"], out.display().to_string());
    no_temp_left(&dir);
    // What --judge cannot evaluate is refused before any work: an organ directory.
    let mut c = organ();
    c.arg("purify").arg(&model).args(["--method", "fractal", "--layers", "5"]);
    c.arg("--judge").arg(text()).arg("--llama-cpp").arg(llama_bin()).arg("--out").arg(tmp("purify-dir"));
    let err = fails(c);
    assert!(err.contains("--judge evaluates one GGUF file"), "{err}");
    assert!(!tmp("purify-dir").exists());
}

/// A directory whose `llama-perplexity` is the real one, but whose first `cuts` runs with
/// `--kl-divergence` print only their first 8 lines of stdout and exit 0, as a run does
/// when llama.cpp loses its last lines at exit (its log thread is not waited for); every
/// such run is counted in `runs`.
fn losing_llama_bin(name: &str, cuts: u32) -> PathBuf {
    let dir = test_dir(name);
    let real = llama_bin().join("llama-perplexity");
    let (runs, tool) = (dir.join("runs"), dir.join("llama-perplexity"));
    let script = format!(
        "#!/bin/sh\n\
         case \" $* \" in *' --kl-divergence '*)\n\
           echo run >> '{runs}'\n\
           if [ \"$(wc -l < '{runs}')\" -le {cuts} ]; then\n\
             '{real}' \"$@\" > '{dir}/out'; rc=$?; head -n 8 '{dir}/out'; exit $rc\n\
           fi;;\n\
         esac\n\
         exec '{real}' \"$@\"\n",
        runs = runs.display(),
        real = real.display(),
        dir = dir.display(),
    );
    std::fs::write(&tool, script).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn a_run_whose_last_lines_were_lost_is_made_again() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let run = |bin: &Path, dir: &Path| {
        let mut c = organ();
        c.arg("eval").arg(&model).arg("--base").arg(&model).arg("--text").arg(text());
        c.args(["--ctx", CTX, "--chunks", "2", "-j", LLAMA_THREADS]).arg("--llama-cpp").arg(bin);
        c.arg("--json").arg(dir.join("eval.json"));
        c
    };
    let counted = |bin: &Path| std::fs::read_to_string(bin.join("runs")).unwrap().lines().count();
    // Lost once: the second run gives the figures, and organ said why it ran again.
    let (bin, dir) = (losing_llama_bin("lost-once", 1), test_dir("lost-once-out"));
    let o = ok(run(&bin, &dir));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("stops before its `====== KL divergence statistics ======` block"), "{said}");
    assert!(said.contains("running it again (2 of 3)"), "{said}");
    assert_eq!(counted(&bin), 2);
    let r: Value = serde_json::from_slice(&std::fs::read(dir.join("eval.json")).unwrap()).unwrap();
    assert!(f(&r["kl_divergence"]["mean"]["value"]).abs() <= 1e-4, "{r}");
    no_temp_left(&dir);
    // Lost every time: three runs, then the error says what was missing and why.
    let (bin, dir) = (losing_llama_bin("lost-always", 9), test_dir("lost-always-out"));
    let o = run(&bin, &dir).output().unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{said}");
    assert!(said.contains("running it again (3 of 3)") && !said.contains("(4 of 3)"), "{said}");
    assert!(said.contains("exited 0 with no error (llama.cpp can lose its last lines at exit)"), "{said}");
    assert_eq!(counted(&bin), 3);
    assert!(!dir.join("eval.json").exists());
    no_temp_left(&dir);
}
