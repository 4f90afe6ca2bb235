//! Every endpoint on SmolLM2, each equal to the CLI's answer, and the browser app served
//! beside the API.

use super::server::*;
use crate::common::{need, ok, organ, smollm2, tmp, SMOLLM2_TENSORS};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::Stdio;

#[test]
fn every_endpoint_on_smollm2() {
    if need::smollm2().is_none() {
        return;
    }
    let s = start(&make_root("api-all"), &[]);
    let (st, h) = get(&s, "/api/health");
    assert_eq!((st, h["status"].as_str()), (200, Some("ok")));
    let (st, doc) = get(&s, "/openapi.json");
    assert_eq!(st, 200);
    for p in [
        "/api/models",
        "/api/inspect",
        "/api/measure",
        "/api/diff",
        "/api/check",
        "/api/dissect",
        "/api/assemble",
        "/api/graft",
        "/api/purify",
        "/api/eval",
        "/api/sensitivity",
        "/api/recipe",
        "/api/jobs/{id}",
        "/api/jobs/{id}/events",
        "/api/results/{path}",
        "/api/health",
    ] {
        assert!(doc["paths"][p].is_object(), "openapi.json documents {p}");
    }
    let (st, m) = get(&s, "/api/models");
    assert_eq!(st, 200);
    let paths: Vec<&str> = m["models"].as_array().unwrap().iter().map(|m| m["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"smol.gguf"), "{m}");

    // inspect equals the CLI's.
    let (st, api) = get(&s, "/api/inspect?path=smol.gguf");
    assert_eq!(st, 200);
    let cli: Value = serde_json::from_slice(
        &ok({
            let mut c = organ();
            c.arg("inspect").arg(s.root.join("smol.gguf")).arg("--json");
            c
        })
        .stdout,
    )
    .unwrap();
    assert_eq!(api, cli);

    // measure equals organ measure --json, exactly.
    let end = run_job(&s, "/api/measure", json!({ "paths": ["smol.gguf"] }));
    assert_eq!(end["progress"], json!([SMOLLM2_TENSORS, SMOLLM2_TENSORS]));
    let cli_json = tmp("api-cli-measure.json");
    ok({
        let mut c = organ();
        c.arg("measure").arg(s.root.join("smol.gguf")).arg("--summary-only").arg("--json").arg(&cli_json);
        c
    });
    let cli: Value = serde_json::from_slice(&std::fs::read(&cli_json).unwrap()).unwrap();
    assert_eq!(end["result"], cli, "the API's report is organ measure --json's");
    let downloaded: Value = serde_json::from_slice(&download(&s, end["outputs"][0].as_str().unwrap())).unwrap();
    assert_eq!(downloaded, cli);

    // dissect -> assemble gives the original bytes back.
    let d = run_job(&s, "/api/dissect", json!({ "path": "smol.gguf" }));
    let organs = d["outputs"][0].as_str().unwrap();
    assert!(s.root.join(organs).join("manifest.json").is_file());
    let a = run_job(&s, "/api/assemble", json!({ "path": organs, "out": "back.gguf" }));
    let back = download(&s, a["outputs"][0].as_str().unwrap());
    assert!(back == std::fs::read(smollm2()).unwrap(), "dissect -> assemble over HTTP is byte-identical");

    // graft and purify run and give loadable GGUFs (organ inspect reads them).
    let g = run_job(
        &s,
        "/api/graft",
        json!({ "donor": "smol.gguf", "recipient": "smol.gguf", "layers": "5-6", "types": ["organ"], "out": "g.gguf" }),
    );
    let p = run_job(
        &s,
        "/api/purify",
        json!({ "path": "smol.gguf", "method": "fractal", "layers": "5", "types": ["organ"] }),
    );
    assert!(p["result"].is_object() || p["result"].is_array(), "purify's report: {p}");
    for out in [g["outputs"][0].as_str().unwrap(), p["outputs"][0].as_str().unwrap()] {
        let (st, j) = get(&s, &format!("/api/inspect?path={out}"));
        assert_eq!(st, 200, "{out}: {j}");
        assert_eq!(j["tensors"].as_array().map(Vec::len), Some(SMOLLM2_TENSORS));
    }
    let (st, job) = get(&s, &format!("/api/jobs/{}", g["id"].as_str().unwrap()));
    assert_eq!((st, job["state"].as_str()), (200, Some("done")));
}

#[test]
fn the_browser_app_is_served_at_the_root_with_isolation_headers() {
    let root = make_tiny_root("api-web");
    let web = root.join("web");
    std::fs::create_dir_all(&web).unwrap();
    std::fs::write(web.join("index.html"), "<!doctype html><title>organ</title>").unwrap();
    let mut c = organ();
    c.arg("serve").arg("--root").arg(&root).arg("--addr").arg("127.0.0.1:0").arg("--web").arg(&web);
    c.stdout(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.split("http://").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().to_owned();
    let s = Server { child, base: format!("http://{addr}"), root: root.canonicalize().unwrap() };
    let resp = agent().get(&format!("{}/", s.base)).call().unwrap();
    assert_eq!(resp.header("cross-origin-opener-policy"), Some("same-origin"));
    assert_eq!(resp.header("cross-origin-embedder-policy"), Some("require-corp"));
    assert!(resp.into_string().unwrap().contains("<title>organ</title>"));
    assert_eq!(get(&s, "/api/health").0, 200, "the API lives beside the app");
}

/// Without the browser app, `GET /` answers with a short page naming the API and where it
/// is described, rather than an empty 404; every link on it answers.
#[test]
fn without_the_app_the_root_says_what_is_served() {
    let s = start(&make_tiny_root("api-index"), &[]);
    let (st, body) = get(&s, "/");
    let text = body.as_str().unwrap_or_default();
    assert_eq!(st, 200, "{text}");
    assert!(text.contains("organ serve") && text.contains("/api/jobs/{id}"), "{text}");
    for link in ["/openapi.json", "/report.schema.json", "/health"] {
        assert!(text.contains(&format!("href=\"{link}\"")), "{text}");
        assert_eq!(get(&s, link).0, 200, "{link}");
    }
}
