//! `organ moe` (docs/moe.md), judged by llama.cpp: four copies of SmolLM2 with the uniform
//! router behave as SmolLM2 (perplexity, greedy tokens) and measure as duplicates; SmolLM2
//! Q4_1 with its Q8_0 requant (`--type` where the types differ) under each router loads
//! and generates, the agreeing donor's bytes stacked as they are, the embed router equal to
//! NumPy's cheap_embed on llama-tokenize's ids; bad input is refused with every problem
//! named and nothing written.

use crate::build::*;
use crate::common::*;
use organ_core::{GgmlType, Gguf};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `organ moe --base BASE --expert E… --out tmp(OUT) EXTRA…`.
fn moe(base: &Path, experts: &[&Path], out: &Path, extra: &[&str]) -> Command {
    let mut c = organ();
    c.arg("moe").arg("--base").arg(base);
    for e in experts {
        c.arg("--expert").arg(e);
    }
    c.arg("--out").arg(out).arg("--force").args(extra);
    c
}

/// llama-perplexity's final estimate on tests/data/perplexity.txt, 4 contexts of 128
/// tokens (short: the MoE runs two experts per token).
fn perplexity(model: &Path) -> f64 {
    let mut c = llama_tool("llama-perplexity");
    c.arg("-m").arg(model).arg("-f").arg(repo().join("tests/data/perplexity.txt"));
    c.args(["-c", "128", "-b", "128", "-t", LLAMA_THREADS, "--chunks", "4"]);
    let out = ok_whole(c, "Final estimate: PPL =");
    let log = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let line = log.lines().find(|l| l.contains("Final estimate: PPL =")).unwrap_or_else(|| panic!("no PPL in:\n{log}"));
    line.split("PPL =").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap()
}

/// SmolLM2's own [`perplexity`], run once per test process: both MoE tests compare with it.
fn parent_perplexity(model: &Path) -> f64 {
    static PPL: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *PPL.get_or_init(|| perplexity(model))
}

/// A tensor's bytes in a GGUF file, and its type.
fn tensor_bytes(file: &[u8], name: &str) -> (GgmlType, Vec<u8>) {
    let g = Gguf::parse(file, file.len() as u64).unwrap();
    let t = g.tensors.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{name}"));
    (t.ty, t.data(file).unwrap().to_vec())
}

#[test]
fn four_copies_with_the_uniform_router_behave_as_smollm2() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let out = tmp("moe-4x.gguf");
    let text = String::from_utf8(ok(moe(&model, &[model.as_path(); 4], &out, &[])).stdout).unwrap();
    assert!(text.contains("moe plan: 4 experts (2 used per token)"), "{text}");
    let (base, mixed) = (parent_perplexity(&model), perplexity(&out));
    println!("perplexity: SmolLM2 {base}, 4 × SmolLM2 uniform {mixed}");
    assert!((mixed / base - 1.0).abs() <= 0.001, "perplexity {mixed} vs SmolLM2's {base}");
    assert_eq!(llama_generate(&out, 16), llama_generate(&model, 16), "greedy tokens");
    // Every expert is expert 0's bytes: measure flags each one a duplicate of it.
    let json = tmp("moe-4x-measure.json");
    let mut c = organ();
    c.arg("measure").arg(&out).args(["--experts", "--no-cache", "--force", "--json"]).arg(&json);
    ok(c);
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let stacks: Vec<&Value> =
        report["models"][0]["tensors"].as_array().unwrap().iter().filter(|t| t["experts"].is_array()).collect();
    assert_eq!(stacks.len(), 30 * 3, "three stacks per layer");
    for t in stacks {
        let dups: Vec<Option<u64>> =
            t["experts"].as_array().unwrap().iter().map(|e| e["duplicate_of"].as_u64()).collect();
        assert_eq!(dups, [None, Some(0), Some(0), Some(0)], "{}", t["name"]);
    }
}

/// `llama-tokenize`'s ids (no BOS added, specials parsed) for each non-empty line of
/// `text` prefixed with SmolLM2's BOS text, concatenated: the embed router's tokens.
fn llama_prompt_ids(model: &Path, text: &str, name: &str) -> Vec<u64> {
    let mut ids = Vec::new();
    for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let file = tmp(&format!("{name}-{i}.txt"));
        std::fs::write(&file, format!("<|im_start|>{line}")).unwrap();
        let mut c = llama_tool("llama-tokenize");
        c.arg("-m").arg(model).args(["--ids", "--no-escape", "--no-bos", "--log-disable", "-f"]).arg(&file);
        let out = String::from_utf8(ok(c).stdout).unwrap();
        let list = out.lines().rev().find(|l| l.starts_with('[')).unwrap_or_else(|| panic!("no ids in {out:?}"));
        let inner = list.trim().trim_start_matches('[').trim_end_matches(']');
        ids.extend(inner.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse::<u64>().unwrap()));
    }
    ids
}

/// mergekit's cheap_embed rows by gguf-py and NumPy: per expert, the token-embedding rows
/// of its positive ids summed, minus its negative ids', over the L2 norm floored at 1e-8.
fn numpy_cheap_embed(model: &Path, ids: &Value) -> Vec<Vec<f64>> {
    let mut c = Command::new(oracle_python());
    c.arg("-c").arg(
        "import json,sys,numpy as np\n\
         from gguf import GGUFReader\n\
         from gguf.quants import dequantize\n\
         t=[t for t in GGUFReader(sys.argv[1]).tensors if t.name=='token_embd.weight'][0]\n\
         E=dequantize(t.data,t.tensor_type).astype(np.float64)\n\
         out=[]\n\
         for pos,neg in json.loads(sys.argv[2]):\n\
         \x20   v=E[pos].sum(0)-(E[neg].sum(0) if neg else 0)\n\
         \x20   out.append((v/max(np.linalg.norm(v),1e-8)).tolist())\n\
         print(json.dumps(out))",
    );
    c.arg(model).arg(ids.to_string());
    serde_json::from_slice(&ok(c).stdout).unwrap()
}

#[test]
fn q4_1_and_its_q8_0_requant_under_each_router_load_and_generate() {
    let Some(model) = need::smollm2_oracle_and_llama() else { return };
    let q8 = smollm2_q8_0(&model);
    let out = tmp("moe-mixed.gguf");
    // Without --type: every FFN tensor named, nothing written.
    let _ = std::fs::remove_file(&out);
    let err = fails(moe(&model, &[&model, &q8], &out, &[]));
    assert!(err.contains("(90 problems)"), "{err}");
    let kind = "blk.*.ffn_down.weight: types differ (expert 0 Q4_1, expert 1 Q8_0); give --type to requantize ×30";
    assert!(err.contains(kind), "one line per kind of tensor: {err}");
    let err = fails(moe(&model, &[&model, &q8], &out, &["--verbose"]));
    assert!(err.contains("blk.0.ffn_down.weight: types differ (expert 0 Q4_1, expert 1 Q8_0); give --type"), "{err}");
    assert!(err.contains("  … and 40 more"), "the first 50 problems, then a count: {err}");
    assert!(!out.exists());
    // The embed router's prompts: one file per expert, and negative ones.
    let texts = [
        "The heart pumps blood through the body.\nArteries carry it away from the heart.",
        "def double(x):\n\n    return x * 2  # <|im_end|> parsed as a special token",
        "Stock markets fell sharply today.",
        "Roses are red, violets are blue.",
    ];
    let files: Vec<PathBuf> = (0..4)
        .map(|i| {
            let f = tmp(&format!("moe-prompts-{i}.txt"));
            std::fs::write(&f, texts[i]).unwrap();
            f
        })
        .collect();
    let embed_args = ["--prompts", files[0].to_str().unwrap(), files[1].to_str().unwrap()];
    let negative_args = ["--negative-prompts", files[2].to_str().unwrap(), files[3].to_str().unwrap()];
    let (p41, p80) = (parent_perplexity(&model), perplexity(&q8));
    let q8_bytes = std::fs::read(&q8).unwrap();
    for router in ["uniform", "random", "embed"] {
        let json = tmp(&format!("moe-mixed-{router}.json"));
        let mut c = moe(&model, &[&model, &q8], &out, &["--type", "q8_0", "--router", router, "--seed", "7"]);
        if router == "embed" {
            c.args(embed_args).args(negative_args);
        }
        c.arg("--json").arg(&json);
        ok(c);
        let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(report["requantized"].as_array().unwrap().len(), 90);
        let ppl = perplexity(&out);
        println!("perplexity, {router} router: MoE {ppl}, Q4_1 {p41}, Q8_0 {p80}");
        assert!(ppl.is_finite());
        llama_generate(&out, 12);
        // The Q8_0 donor's tensors are stacked as they are: expert 1 is its bytes.
        let file = std::fs::read(&out).unwrap();
        let (ty, stack) = tensor_bytes(&file, "blk.3.ffn_up_exps.weight");
        let (_, own) = tensor_bytes(&q8_bytes, "blk.3.ffn_up.weight");
        assert_eq!((ty, &stack[own.len()..]), (GgmlType::Q8_0, &own[..]));
        let (ty, router_bytes) = tensor_bytes(&file, "blk.3.ffn_gate_inp.weight");
        assert_eq!((ty, router_bytes.len()), (GgmlType::F32, 576 * 2 * 4));
        let v: Vec<f64> =
            router_bytes.chunks(4).map(|b| f64::from(f32::from_le_bytes(b.try_into().unwrap()))).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
        match router {
            "uniform" => assert!(v.iter().all(|x| *x == 0.0)),
            "random" => {
                assert!(mean.abs() < 0.1 && (var - 1.0).abs() < 0.15, "standard normal? mean {mean}, var {var}")
            }
            _ => {
                // cheap_embed: the same rows in every layer, equal to NumPy's on llama-tokenize's ids.
                assert_eq!(tensor_bytes(&file, "blk.0.ffn_gate_inp.weight").1, router_bytes);
                let ids: Vec<Vec<u64>> = texts
                    .iter()
                    .enumerate()
                    .map(|(i, t)| llama_prompt_ids(&model, t, &format!("moe-ids-{i}")))
                    .collect();
                let want = numpy_cheap_embed(&model, &serde_json::json!([[ids[0], ids[2]], [ids[1], ids[3]]]));
                for (e, row) in want.iter().enumerate() {
                    for (d, w) in row.iter().enumerate() {
                        let got = v[e * 576 + d];
                        assert!((got - w).abs() <= 1e-6, "expert {e} value {d}: organ {got}, NumPy {w}");
                    }
                }
            }
        }
    }
}

/// A small dense model of `arch` with SmolLM2's names and other shapes (width 64).
fn small(name: &str, arch: &str) -> PathBuf {
    let mut tensors = vec![t("token_embd.weight", &[64, 32], GgmlType::F32, noise(1, 64 * 32))];
    for l in 0..2 {
        tensors.push(t(&format!("blk.{l}.attn_norm.weight"), &[64], GgmlType::F32, noise(2, 64)));
        for k in ["gate", "up"] {
            tensors.push(t(&format!("blk.{l}.ffn_{k}.weight"), &[64, 128], GgmlType::Q8_0, noise(3, 64 * 128)));
        }
        tensors.push(t(&format!("blk.{l}.ffn_down.weight"), &[128, 64], GgmlType::Q8_0, noise(4, 64 * 128)));
    }
    write_model(name, arch, &tensors)
}

#[test]
fn bad_input_is_refused_with_every_problem_and_nothing_written() {
    let Some(model) = need::smollm2() else { return };
    let out = tmp("moe-bad.gguf");
    let _ = std::fs::remove_file(&out);
    let (qwen, tiny) = (small("moe-qwen2.gguf", "qwen2"), small("moe-tiny-llama.gguf", "llama"));
    let err = fails(moe(&model, &[&model, &model], &out, &["--experts-used", "3"]));
    assert!(err.contains("--experts-used: 3 experts used per token, of 2: must be 1 to 2"), "{err}");
    let err = fails(moe(&model, &[&model, &qwen], &out, &[]));
    assert!(err.contains("general.architecture: expert 1 (moe-qwen2.gguf) is qwen2, the base llama"), "{err}");
    let err = fails(moe(&model, &[&model, &tiny], &out, &[]));
    assert!(err.contains("token_embd.weight: shape [64, 32] in expert 1 (moe-tiny-llama.gguf), [576, 49152]"), "{err}");
    // Problems alike but for their layer are one line with a count (ux_cli.rs); with
    // --verbose, the first 50 of the 272 problems are listed, then a count of the rest.
    assert!(
        err.contains("(272 problems)") && err.contains("(272 problems in all; --verbose lists each tensor)"),
        "{err}"
    );
    let err = fails(moe(&model, &[&model, &tiny], &out, &["--verbose"]));
    assert!(err.contains("(272 problems)") && err.contains("  … and 222 more"), "{err}");
    let err = fails(moe(&qwen, &[&qwen, &qwen], &out, &[]));
    assert!(err.contains("base moe-qwen2.gguf is qwen2; organ moe builds llama (Mixtral) models"), "{err}");
    // An MoE as a base or a donor.
    let moe4 = tmp("moe-as-input.gguf");
    ok(moe(&tiny, &[&tiny, &tiny], &moe4, &[]));
    let err = fails(moe(&moe4, &[&tiny], &out, &["--experts-used", "1"]));
    assert!(err.contains("moe-as-input.gguf is already a mixture of experts"), "{err}");
    let err = fails(moe(&tiny, &[&moe4], &out, &["--experts-used", "1"]));
    assert!(err.contains("expert 0 (moe-as-input.gguf) is a mixture of experts"), "{err}");
    let err = fails(moe(&model, &[&model], &out, &["--router", "mystery"]));
    assert!(err.contains("--router \"mystery\": use uniform, random or embed"), "{err}");
    let prompts = tmp("moe-bad-prompts.txt");
    std::fs::write(&prompts, "one prompt").unwrap();
    let p = prompts.to_str().unwrap();
    let err = fails(moe(&model, &[&model, &model], &out, &["--router", "embed", "--prompts", p]));
    assert!(err.contains("--router embed needs one --prompts file per expert: 1 given for 2 experts"), "{err}");
    let err = fails(moe(&model, &[&model], &out, &["--experts-used", "1", "--prompts", p]));
    assert!(err.contains("--prompts and --negative-prompts are for --router embed"), "{err}");
    assert!(!out.exists(), "a refused moe wrote {}", out.display());
}

/// `--type` settles stacks whose donors' types differ; given where every stack agrees it
/// would change nothing, and is refused by name rather than silently ignored.
#[test]
fn a_type_that_would_change_nothing_is_refused() {
    let Some(model) = need::smollm2() else { return };
    let out = tmp("moe-type-unused.gguf");
    let _ = std::fs::remove_file(&out);
    let e = fails(moe(&model, &[&model, &model], &out, &["--type", "q5_k"]));
    assert!(e.contains("(1 problem)") && e.contains("(--type): Q5_K would change nothing"), "{e}");
    assert!(!out.exists());
}
