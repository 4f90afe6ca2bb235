//! eval jobs on SmolLM2 and tests/data/perplexity.txt copied into the root: the job's
//! report is `organ eval --json`'s figures, llama.cpp comes from the server's environment
//! (ORGAN_LLAMA_CPP), the text is a path under the root as models are, and a server
//! without llama.cpp fails the job with the sentence saying how to get it (on a tiny
//! model: that test needs no download).

use super::server::*;
use crate::common::{llama_tool, need, ok, organ, repo};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

/// [`start`], with ORGAN_LLAMA_CPP set to `llama` in the server's environment.
fn start_with_llama(root: &Path, llama: &Path) -> Server {
    let mut c = organ();
    c.arg("serve").arg("--root").arg(root).arg("--addr").arg("127.0.0.1:0").arg("--web").arg(root.join("no-web"));
    c.env("ORGAN_LLAMA_CPP", llama).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = c.spawn().expect("spawn organ serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.split("http://").nth(1).and_then(|r| r.split_whitespace().next()).expect(&line).to_owned();
    Server { child, base: format!("http://{addr}"), root: root.canonicalize().unwrap() }
}

fn llama_bin() -> std::path::PathBuf {
    Path::new(llama_tool("llama-perplexity").get_program()).parent().unwrap().to_owned()
}

/// A root NAME holding SmolLM2 and tests/data/perplexity.txt (as text.txt), served with
/// the llama.cpp the tests build.
fn served(name: &str) -> Server {
    let root = make_root(name);
    std::fs::copy(repo().join("tests/data/perplexity.txt"), root.join("text.txt")).unwrap();
    start_with_llama(&root, &llama_bin())
}

fn output<'a>(end: &'a Value, file: &str) -> &'a str {
    let outs = end["outputs"].as_array().unwrap();
    outs.iter().filter_map(Value::as_str).find(|o| o.ends_with(&format!("/{file}"))).unwrap()
}

#[test]
fn an_eval_job_gives_organ_evals_figures() {
    let Some(_) = need::smollm2_and_llama() else { return };
    let s = served("api-eval");
    let root = &s.root;
    let body = json!({ "path": "smol.gguf", "base": "smol.gguf", "text": "text.txt", "ctx": 128, "chunks": 2 });
    let end = run_job(&s, "/api/eval", body);
    assert_eq!(end["kind"], "eval");
    let r = &end["result"];
    assert_eq!((r["ctx"].as_u64(), r["chunks"].as_u64()), (Some(128), Some(2)), "{r}");
    assert!(r["kl_divergence"]["mean"]["value"].as_f64().unwrap().abs() <= 1e-4, "{r}");
    assert_eq!(r["verdict"]["verdict"], "close");
    let text = String::from_utf8(download(&s, output(&end, "eval.txt"))).unwrap();
    assert!(text.contains("verdict: close"), "{text}");
    // The same figures as the CLI's, run by hand with the same arguments.
    let json = crate::common::tmp("cli-eval.json");
    let _ = std::fs::remove_file(&json);
    let mut c = organ();
    c.arg("eval").arg(root.join("smol.gguf")).arg("--base").arg(root.join("smol.gguf"));
    c.arg("--text").arg(root.join("text.txt")).args(["--ctx", "128", "--chunks", "2", "--json"]).arg(&json);
    c.env("ORGAN_LLAMA_CPP", llama_bin());
    ok(c);
    let cli: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["perplexity"], cli["perplexity"]);
    assert_eq!(r["kl_divergence"], cli["kl_divergence"]);
    // A text outside the root is refused as a model would be; a bad context before any job.
    let (st, v) = post(&s, "/api/eval", &json!({ "path": "smol.gguf", "text": "escape/passwd" }));
    assert_eq!(st, 404, "{v}");
    let (st, v) = post(&s, "/api/eval", &json!({ "path": "smol.gguf", "text": "text.txt", "ctx": 4 }));
    assert_eq!(st, 400, "{v}");
}

/// `gpu_layers` and `device` reach llama-perplexity as `-ngl` and `--device`: `all` on
/// `none` gives the plain job's perplexity on this CPU-only build, a device it lacks fails
/// the job with llama.cpp's sentence, and a malformed value is a 400 naming its field
/// (for sensitivity jobs too) before any job starts.
#[test]
fn an_eval_jobs_gpu_layers_and_device_reach_llama_perplexity() {
    let Some(_) = need::smollm2_and_llama() else { return };
    let s = served("api-eval-offload");
    let job = |extra: Value| {
        let mut body = json!({ "path": "smol.gguf", "text": "text.txt", "ctx": 128, "chunks": 2 });
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let plain = run_job(&s, "/api/eval", job(json!({})));
    let offloaded = run_job(&s, "/api/eval", job(json!({ "gpu_layers": "all", "device": "none" })));
    assert_eq!(offloaded["result"]["perplexity"], plain["result"]["perplexity"], "{offloaded}");
    let (st, started) = post(&s, "/api/eval", &job(json!({ "device": "NOPE0" })));
    assert_eq!(st, 202, "{started}");
    let end = follow(&s, started["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    assert!(end["error"].to_string().contains("invalid device: NOPE0"), "{end}");
    for (api, bad) in [("/api/eval", json!({ "device": "CUDA0;rm" })), ("/api/eval", json!({ "gpu_layers": "most" }))] {
        let (st, v) = post(&s, api, &job(bad.clone()));
        let field = bad.as_object().unwrap().keys().next().unwrap().clone();
        assert!(st == 400 && v.to_string().contains(&field), "{bad}: {st} {v}");
    }
    let body = json!({ "path": "smol.gguf", "text": "text.txt", "to": "q8_0", "device": "a b" });
    let (st, v) = post(&s, "/api/sensitivity", &body);
    assert!(st == 400 && v.to_string().contains("device"), "{st} {v}");
    // A surgery's judge fields reach its judge's llama-perplexity: a layers job judged on
    // a device llama.cpp lacks fails with llama.cpp's own words.
    let layers = |extra: Value| {
        let mut body = json!({ "path": "smol.gguf", "drop": "29", "judge": "text.txt", "judge_ctx": 128 });
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let extra = json!({ "judge_threads": 1, "judge_gpu_layers": "all", "judge_device": "NOPE1" });
    let (st, started) = post(&s, "/api/layers", &layers(extra));
    assert_eq!(st, 202, "{started}");
    let end = follow(&s, started["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    assert!(end["error"].to_string().contains("invalid device: NOPE1"), "{end}");
    for (bad, says) in [
        (json!({ "judge_gpu_layers": "most" }), "judge_gpu_layers"),
        (json!({ "judge_device": "CUDA0;rm" }), "judge_device"),
        (json!({ "judge_threads": 0 }), "judge_threads 0"),
    ] {
        let (st, v) = post(&s, "/api/layers", &layers(bad.clone()));
        assert!(st == 400 && v.to_string().contains(says), "{bad}: {st} {v}");
    }
    let body = json!({ "path": "smol.gguf", "drop": "29", "judge_device": "none" });
    let (st, v) = post(&s, "/api/layers", &body);
    assert!(st == 400 && v.to_string().contains("judge_device without judge"), "{st} {v}");
}

#[test]
fn an_eval_job_without_llama_cpp_fails_saying_how_to_get_it() {
    // llama.cpp is looked for first: the tiny model (no download) is enough.
    let root = make_tiny_root("api-eval-no-llama");
    std::fs::copy(repo().join("tests/data/perplexity.txt"), root.join("text.txt")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    let s = start_with_llama(&root, &root.join("empty"));
    let (st, job) = post(&s, "/api/eval", &json!({ "path": "smol.gguf", "text": "text.txt" }));
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    let msg = end["error"]["message"].as_str().unwrap_or_default().to_owned() + &end["error"].to_string();
    assert!(msg.contains("scripts/build-llama.sh"), "{end}");
}

/// Before: the job's child checked the path, then handed its name to llama-perplexity,
/// which opened it later: a path swapped for a link in between made llama.cpp read a file
/// outside the root. Now llama.cpp is handed the file the child opened (inside the root).
#[test]
fn an_eval_job_reads_the_model_it_checked_even_when_the_path_is_swapped() {
    use crate::eval_handed::{logged, swapping_wrapper};
    let Some(_) = need::smollm2_and_llama() else { return };
    let root = make_root("api-eval-swap");
    std::fs::copy(repo().join("tests/data/perplexity.txt"), root.join("text.txt")).unwrap();
    let (outside, log) = (crate::common::tmp("api-eval-swap-outside.gguf"), crate::common::tmp("api-eval-swap.log"));
    std::fs::write(&outside, b"a file outside the root").unwrap();
    let bin = swapping_wrapper("api-eval-swap-bin", &root.join("smol.gguf"), &outside, &log);
    let s = start_with_llama(&root, &bin);
    let end = run_job(&s, "/api/eval", json!({ "path": "smol.gguf", "text": "text.txt", "ctx": 128, "chunks": 2 }));
    let (models, outside_read) = logged(&log);
    assert!(std::fs::symlink_metadata(root.join("smol.gguf")).unwrap().file_type().is_symlink(), "swapped");
    assert!(!outside_read, "llama-perplexity read the file outside the root");
    assert!(!models.is_empty() && models.iter().all(|m| m.starts_with("/proc/self/fd/")), "{models:?}");
    assert!(end["result"]["perplexity"]["value"].as_f64().unwrap() > 1.0, "{end}");
}
