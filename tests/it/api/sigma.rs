//! measure jobs with `sigma` and `exact` (Z-measure §7): the job's report is `organ measure
//! --sigma` / `--exact`'s exactly, its CSV carries σ, and the two together are refused.

use super::server::*;
use crate::common::{need, ok, organ, tmp};
use serde_json::{json, Value};

/// `organ measure --summary-only --no-cache FLAG --json` on the server's SmolLM2.
fn cli(s: &Server, flag: &str, name: &str) -> Value {
    let json = tmp(name);
    ok({
        let mut c = organ();
        c.arg("measure").arg(s.root.join("smol.gguf")).args(["--summary-only", "--no-cache", "--force", flag]);
        c.arg("--json").arg(&json);
        c
    });
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

#[test]
fn measure_jobs_take_sigma_and_exact() {
    if need::smollm2().is_none() {
        return;
    }
    let s = start(&make_root("api-sigma"), &[]);
    let end = run_job(&s, "/api/measure", json!({ "paths": ["smol.gguf"], "sigma": true }));
    let want = cli(&s, "--sigma", "api-cli-sigma.json");
    assert!(want["models"][0]["summary"]["theta_mean_sigma"].as_f64().unwrap() > 0.0);
    assert_eq!(end["result"], want, "the API's σ report is organ measure --sigma --json's");
    let csv_out = end["outputs"].as_array().unwrap().iter().find(|o| o.as_str().unwrap().ends_with(".csv")).unwrap();
    let csv = String::from_utf8(download(&s, csv_out.as_str().unwrap())).unwrap();
    assert!(
        csv.lines().next().unwrap().ends_with(",sigma"),
        "the CSV has a sigma column: {}",
        csv.lines().next().unwrap()
    );

    let end = run_job(&s, "/api/measure", json!({ "paths": ["smol.gguf"], "exact": true }));
    let want = cli(&s, "--exact", "api-cli-exact.json");
    assert_eq!(want["measure"], "z1-exact");
    assert_eq!(end["result"], want, "the API's exact report is organ measure --exact --json's");

    let (st, e) = post(&s, "/api/measure", &json!({ "paths": ["smol.gguf"], "sigma": true, "exact": true }));
    assert_eq!(st, 400, "{e}");
    assert!(e["error"].as_str().unwrap().contains("sigma and exact"), "{e}");
    let (st, e) = post(&s, "/api/measure", &json!({ "paths": ["smol.gguf"], "sigma": "yes" }));
    assert_eq!(st, 400, "a sigma that is not a boolean: {e}");
}
