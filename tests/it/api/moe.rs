//! The `moe` job: `organ moe` over HTTP gives the CLI's model, byte for byte, and its
//! report; a refused plan fails the job with the CLI's list and leaves no model.

use super::server::*;
use crate::common::{need, ok, organ, tmp};
use serde_json::{json, Value};

#[test]
fn the_moe_job_writes_the_clis_model_and_refuses_what_the_cli_refuses() {
    if need::smollm2().is_none() {
        return;
    }
    let s = start(&make_root("api-moe"), &[]);
    let (_, doc) = get(&s, "/openapi.json");
    assert!(doc["paths"]["/api/moe"]["post"].is_object(), "openapi.json documents /api/moe");
    let body = json!({ "base": "smol.gguf", "experts": ["smol.gguf", "smol.gguf"], "router": "random", "seed": 5 });
    let end = run_job(&s, "/api/moe", body);
    let outputs: Vec<&str> = end["outputs"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()).collect();
    assert!(outputs[0].ends_with("/moe.gguf") && outputs[1].ends_with("/moe.json"), "{outputs:?}");
    let cli_out = tmp("api-moe-cli.gguf");
    let cli_json = tmp("api-moe-cli.json");
    let mut c = organ();
    c.arg("moe").arg("--base").arg(s.root.join("smol.gguf"));
    c.arg("--expert").arg(s.root.join("smol.gguf")).arg("--expert").arg(s.root.join("smol.gguf"));
    c.args(["--router", "random", "--seed", "5", "--force", "--out"]).arg(&cli_out).arg("--json").arg(&cli_json);
    ok(c);
    assert!(download(&s, outputs[0]) == std::fs::read(&cli_out).unwrap(), "the job's model is the CLI's");
    let cli: Value = serde_json::from_slice(&std::fs::read(&cli_json).unwrap()).unwrap();
    assert_eq!((&end["result"]["experts"], &end["result"]["router"]), (&cli["experts"], &cli["router"]));
    // Bad fields: 400 before any job; a plan the core refuses: a failed job naming it.
    let (st, e) = post(&s, "/api/moe", &json!({ "base": "smol.gguf", "experts": ["smol.gguf"], "router": "psychic" }));
    assert_eq!(st, 400, "{e}");
    assert!(e["error"].as_str().unwrap().contains("router \"psychic\""), "{e}");
    let (st, e) = post(&s, "/api/moe", &json!({ "base": "smol.gguf", "experts": [] }));
    assert_eq!(st, 400, "{e}");
    let (st, job) = post(&s, "/api/moe", &json!({ "base": "smol.gguf", "experts": ["smol.gguf"], "experts_used": 3 }));
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    assert!(end.to_string().contains("3 experts used per token, of 1"), "{end}");
}
