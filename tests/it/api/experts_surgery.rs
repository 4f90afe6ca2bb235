//! experts-extract and experts-prune jobs: the model each writes is the CLI's, byte for
//! byte; a refusal fails the job with the core's reason; a keep list that does not parse
//! is a 400 before any job. Needs nothing beyond the repository.

use super::server::*;
use crate::build::{noise, t, write_model_kvs};
use crate::common::{ok, organ, tmp};
use organ_core::gguf::MetaValue;
use organ_core::GgmlType;
use serde_json::{json, Value};

#[test]
fn expert_jobs_write_what_the_cli_writes() {
    let root = make_tiny_root("api-experts-surgery");
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("llama.expert_count", MetaValue::U32(4)),
        ("llama.expert_used_count", MetaValue::U32(2)),
    ];
    let moe = write_model_kvs(
        "api-moe.gguf",
        &kvs,
        &[
            t("blk.0.ffn_gate_inp.weight", &[32, 4], GgmlType::F32, noise(1, 128)),
            t("blk.0.ffn_gate_exps.weight", &[32, 8, 4], GgmlType::Q8_0, noise(2, 1024)),
            t("blk.0.ffn_up_exps.weight", &[32, 8, 4], GgmlType::Q8_0, noise(3, 1024)),
            t("blk.0.ffn_down_exps.weight", &[32, 32, 4], GgmlType::Q8_0, noise(4, 4096)),
        ],
    );
    std::fs::copy(&moe, root.join("moe.gguf")).unwrap();
    let s = start(&root, &[]);
    let (st, doc) = get(&s, "/openapi.json");
    assert_eq!(st, 200);
    for (path, body, args) in [
        (
            "/api/experts-extract",
            json!({ "path": "moe.gguf", "expert": 3, "out": "e3.gguf" }),
            vec!["extract", "--expert", "3"],
        ),
        (
            "/api/experts-prune",
            json!({ "path": "moe.gguf", "keep": "3,1", "experts_used": 1 }),
            vec!["prune", "--keep", "3,1", "--experts-used", "1"],
        ),
    ] {
        assert!(doc["paths"][path]["post"].is_object(), "openapi.json documents {path}");
        let end = run_job(&s, path, body);
        let outs: Vec<&str> = end["outputs"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        let model = outs.iter().find(|o| o.ends_with(".gguf")).unwrap();
        let cli = tmp(&format!("api-cli-{}.gguf", args[0]));
        let mut c = organ();
        c.arg("experts").arg(args[0]).arg(root.join("moe.gguf")).args(&args[1..]).arg("--out").arg(&cli).arg("--force");
        ok(c);
        assert!(download(&s, model) == std::fs::read(&cli).unwrap(), "{path}: the CLI's bytes");
        assert_eq!(end["result"]["source"], "moe.gguf", "{end}");
    }
    let (st, job) = post(&s, "/api/experts-extract", &json!({ "path": "moe.gguf", "expert": 4 }));
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    assert!(end["error"].as_str().unwrap().contains("expert 4 is out of range"), "{end}");
    let (st, body) = post(&s, "/api/experts-prune", &json!({ "path": "moe.gguf", "keep": "1,x" }));
    assert_eq!(st, 400, "{body}");
}
