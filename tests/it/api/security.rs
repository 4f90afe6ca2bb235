//! Who may ask and what they reach: hostile requests answered 4xx with the server still
//! up, foreign `Host`s and cross-site requests, tokens, paths confined to the root.

use super::server::*;
use crate::common::{need, organ, smollm2, tmp};
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn hostile_requests_get_a_4xx_and_the_server_stays_up() {
    let root = make_tiny_root("api-hostile");
    assert!(std::process::Command::new("mkfifo").arg(root.join("fifo.gguf")).status().unwrap().success());
    super::memory::many_tensors(&root.join("many.gguf"), 1 << 16);
    std::fs::copy(root.join("smol.gguf"), root.join("w.gguf:2")).unwrap();
    // Sparse: meta sums its --set-file values' sizes before it reads any.
    std::fs::File::create(root.join("big.txt")).unwrap().set_len(16 << 20).unwrap();
    // URLs (items 1 and 2 of the second hardening): the one host a request may name is the
    // test's trickling server, and the redirector, whose redirect leads to a loopback port.
    let (trickle, (target, reached)) = (crate::remote_limits::trickle(), crate::remote_limits::canary());
    let (hop, _) = crate::remote_limits::redirector(format!("http://127.0.0.1:{target}/m.gguf"));
    let (allow_trickle, allow_hop) = (format!("127.0.0.1:{trickle}"), format!("127.0.0.1:{hop}"));
    let remote =
        ["--allow-remote", "--allow-remote-to", allow_trickle.as_str(), "--allow-remote-to", allow_hop.as_str()];
    let flags = ["--max-body", "4096", "--job-timeout", "2", "--remote-speed-time", "2"];
    let s = start(&root, &[&flags[..], &remote].concat());
    let probes = jobs_probes(&s);
    let stalled = format!("/api/inspect?path=http://127.0.0.1:{trickle}/m.gguf");
    let redirected = format!("/api/inspect?path=http://127.0.0.1:{hop}/m.gguf");
    let long = format!("/api/inspect?path={}", "a".repeat(5000));
    let big = format!("{{\"paths\": [\"{}\"]}}", "a".repeat(10_000));
    let json = [("Content-Type", "application/json")];
    // (method, path, headers, body, status, what the error says)
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a [u8], u16, &'a str);
    let cases: Vec<Case> = vec![
        ("GET", "/api/inspect?path=../smol.gguf", &[], b"", 400, "without '..'"),
        ("GET", "/api/inspect?path=%2e%2e%2f%2e%2e%2fetc%2fpasswd", &[], b"", 400, "without '..'"),
        ("GET", "/api/inspect?path=/etc/passwd", &[], b"", 400, "must be relative"),
        ("GET", "/api/inspect?path=escape/passwd", &[], b"", 404, "no such model under the root"),
        ("GET", "/api/inspect?path=corrupt.gguf", &[], b"", 422, "corrupt.gguf"),
        ("GET", "/api/inspect?path=missing.gguf", &[], b"", 404, "no such model under the root"),
        ("GET", "/api/inspect?path=fifo.gguf", &[], b"", 400, "not a regular file"),
        ("GET", "/api/inspect?path=a%00b", &[], b"", 404, "no such model under the root"),
        ("GET", &long, &[], b"", 404, "no such model under the root"),
        ("GET", "/api/inspect", &[], b"", 400, "path"),
        ("GET", "/api/jobs/job-999", &[], b"", 404, "no job"),
        ("GET", "/api/jobs/00000000000000000000000000000000/events", &[], b"", 404, "no job"),
        ("DELETE", "/api/jobs/job-1", &[], b"", 404, "no job"),
        ("GET", "/api/results/job-1/organs/manifest.json", &[], b"", 404, ""),
        ("GET", "/api/results/../smol.gguf", &[], b"", 400, "without '..'"),
        ("GET", "/api/results/%2e%2e/smol.gguf", &[], b"", 400, "without '..'"),
        ("GET", "/api/models", &[("Host", "attacker.example")], b"", 421, "attacker.example"),
        ("GET", "/api/models", &[("Host", "127.0.0.1.attacker.example")], b"", 421, "--allow-host"),
        ("GET", "/api/models", &[("Origin", "http://attacker.example")], b"", 403, "cross-site"),
        ("GET", "/api/models", &[("Sec-Fetch-Site", "cross-site")], b"", 403, "cross-site"),
        ("POST", "/api/measure", &json, br#"{"paths": ["../../etc/passwd"]}"#, 400, "without '..'"),
        ("POST", "/api/measure", &json, br#"{"paths": ["escape/hosts"]}"#, 404, "no such model under the root"),
        ("POST", "/api/measure", &json, br#"{"paths": ["fifo.gguf"]}"#, 400, "not a regular file"),
        ("POST", "/api/measure", &json, br#"{"paths": []}"#, 400, "paths"),
        // Each repeated entry would cost the child the model's memory again.
        (
            "POST",
            "/api/measure",
            &json,
            br#"{"paths": ["smol.gguf", "smol.gguf"]}"#,
            400,
            "\"smol.gguf\" is given twice",
        ),
        ("POST", "/api/measure", &json, br#"{"pathz": ["smol.gguf"]}"#, 400, "unknown field"),
        ("POST", "/api/measure", &json, br#"{"paths": "smol.gguf"}"#, 400, "invalid type"),
        ("POST", "/api/measure", &json, br#"{"paths": ["smol.gguf""#, 400, "JSON"),
        ("POST", "/api/measure", &json, b"\xff\xfe\x00garbage\x80", 400, ""),
        ("POST", "/api/measure", &json, big.as_bytes(), 413, ""),
        ("POST", "/api/measure", &[], br#"{"paths": ["smol.gguf"]}"#, 415, "Content-Type"),
        (
            "POST",
            "/api/dissect",
            &[("Content-Type", "application/json"), ("Origin", "null")],
            br#"{"path": "smol.gguf"}"#,
            403,
            "cross-site",
        ),
        ("POST", "/api/diff", &json, br#"{"a": "../smol.gguf", "b": "smol.gguf"}"#, 400, "without '..'"),
        ("POST", "/api/diff", &json, br#"{"a": "smol.gguf", "b": "/etc/passwd"}"#, 400, "must be relative"),
        ("POST", "/api/diff", &json, br#"{"a": "smol.gguf", "b": "escape/hosts"}"#, 404, "no such model"),
        ("POST", "/api/diff", &json, br#"{"a": "missing.gguf", "b": "smol.gguf"}"#, 404, "\"missing.gguf\""),
        ("POST", "/api/diff", &json, br#"{"a": "smol.gguf", "b": "fifo.gguf"}"#, 400, "not a regular file"),
        ("POST", "/api/diff", &json, br#"{"a": "smol.gguf"}"#, 400, "missing field `b`"),
        ("POST", "/api/diff", &json, br#"{"a": "smol.gguf", "b": ["smol.gguf"]}"#, 400, "invalid type"),
        ("POST", "/api/diff", &json, br#"{"a": "smol.gguf", "b": "smol.gguf", "top": 10001}"#, 400, "top 10001"),
        ("POST", "/api/diff", &json, br#"{"a": "smol.gguf", "b": "smol.gguf", "top": -1}"#, 400, "invalid value"),
        ("POST", "/api/diff", &json, br#"{"a": "smol.gguf", "b": "smol.gguf", "json": "/x"}"#, 400, "unknown field"),
        ("POST", "/api/check", &json, br#"{"path": "../smol.gguf"}"#, 400, "without '..'"),
        ("POST", "/api/check", &json, br#"{"path": "/etc/passwd"}"#, 400, "must be relative"),
        ("POST", "/api/check", &json, br#"{"path": "escape/hosts"}"#, 404, "no such model"),
        ("POST", "/api/check", &json, br#"{"path": "fifo.gguf"}"#, 400, "not a regular file"),
        ("POST", "/api/check", &json, br#"{}"#, 400, "path: missing"),
        ("POST", "/api/check", &json, br#"{"paths": ["smol.gguf", "smol.gguf"]}"#, 400, "check takes one model"),
        ("POST", "/api/check", &json, br#"{"path": "smol.gguf", "paths": ["smol.gguf"]}"#, 400, "give one of them"),
        ("POST", "/api/check", &json, br#"{"path": "smol.gguf", "json": "/x"}"#, 400, "unknown field"),
        ("POST", "/api/purify", &json, br#"{"path": "smol.gguf", "method": "magic"}"#, 400, "fractal or spectral"),
        ("POST", "/api/purify", &json, br#"{"path": "smol.gguf", "method": "fractal"}"#, 400, "which tensors?"),
        (
            "POST",
            "/api/purify",
            &json,
            br#"{"path": "smol.gguf", "method": "fractal", "all": true, "strength": 1.5}"#,
            400,
            "strength 1.5: must be a number from 0 to 1",
        ),
        (
            "POST",
            "/api/purify",
            &json,
            br#"{"path": "smol.gguf", "method": "fractal", "all": true, "layers": "1"}"#,
            400,
            "one or the other",
        ),
        ("POST", "/api/graft", &json, br#"{"donor": "smol.gguf", "recipient": "smol.gguf"}"#, 400, "which tensors?"),
        // eval hands llama.cpp only files it opened inside the root (api::eval has the race).
        ("POST", "/api/eval", &json, br#"{"path": "escape/passwd", "text": "smol.gguf"}"#, 404, "no such model"),
        ("POST", "/api/eval", &json, br#"{"path": "smol.gguf", "text": "fifo.gguf"}"#, 400, "not a regular file"),
        ("POST", "/api/assemble", &json, br#"{"path": "smol.gguf", "out": "../../x.gguf"}"#, 400, "plain file name"),
        ("DELETE", "/api/models", &[], b"", 405, ""),
        // Item 8: a finished job deleted, entry and results; a failed job has no report.
        ("GET", "/api/jobs/job-999/result", &[], b"", 404, "no job"),
        ("GET", &probes.deleted_status, &[], b"", 404, "no job"),
        ("GET", &probes.deleted_result, &[], b"", 404, "no job"),
        ("GET", &probes.deleted_events, &[], b"", 404, "no job"),
        ("DELETE", &probes.deleted_status, &[], b"", 404, "no job"),
        ("GET", &probes.deleted_download, &[], b"", 404, "no such result"),
        ("GET", &probes.failed_result, &[], b"", 404, "no report"),
        // Item 2, for jobs: one made to run long was stopped at the server's time limit.
        ("GET", &probes.timed_out_result, &[], b"", 404, "no report"),
        ("POST", "/api/measure", &json, br#"{"paths": ["s3://bucket/m.gguf"]}"#, 400, "no s3:// URLs"),
        ("POST", "/api/diff", &json, br#"{"a": "gs://bucket/m.gguf", "b": "smol.gguf"}"#, 400, "no gs:// URLs"),
        ("POST", "/api/dissect", &json, br#"{"path": "hf://owner/repo/m.gguf"}"#, 400, "no hf:// URLs"),
        ("POST", "/api/measure", &json, br#"{"paths": ["http://127.0.0.1:8935/api/jobs"]}"#, 400, "-private"),
        ("POST", "/api/measure", &json, br#"{"paths": ["http://169.254.169.254/latest/"]}"#, 400, "does not read"),
        ("GET", "/api/inspect?path=http://%5B::ffff:127.0.0.1%5D:9/m.gguf", &[], b"", 400, "-private"),
        ("POST", "/api/dissect", &json, br#"{"path": "http://alice:hunter2@example.com/m"}"#, 400, "credentials"),
        ("POST", "/api/check", &json, br#"{"path": "http://alice:hunter2@example.com/m"}"#, 404, "no such model"),
        // Issue 46, item 7: what the server checks is what the child reads.
        (
            "POST",
            "/api/meta",
            &json,
            br#"{"path": "smol.gguf", "set_file": [{"key": "a=b", "path": "smol.gguf"}]}"#,
            400,
            "set_file \"a=b\": a key with '='",
        ),
        (
            "POST",
            "/api/meta",
            &json,
            br#"{"path": "smol.gguf", "rename": [{"from": "general.name=x", "to": "y"}]}"#,
            400,
            "rename \"general.name=x\"",
        ),
        (
            "POST",
            "/api/meta",
            &json,
            br#"{"path": "smol.gguf", "set": [{"key": "a=b", "value": 1}]}"#,
            400,
            "a key with '='",
        ),
        (
            "POST",
            "/api/merge",
            &json,
            br#"{"method": "linear", "models": [{"path": "smol.gguf"}], "parameters": {"normalize=\n- - x": true}}"#,
            400,
            "has no '='",
        ),
        (
            "POST",
            "/api/merge",
            &json,
            br#"{"method": "linear", "models": [{"path": "w.gguf:2"}, {"path": "smol.gguf"}]}"#,
            400,
            "give its weight too",
        ),
        // Issue 46, item 2: 48 MiB of values for a header of at most 32 MiB.
        (
            "POST",
            "/api/meta",
            &json,
            br#"{"path": "smol.gguf", "set_file": [{"key": "a.x", "path": "big.txt"}, {"key": "a.y", "path": "big.txt"}, {"key": "a.z", "path": "big.txt"}]}"#,
            400,
            "header budget",
        ),
        // Item 3: a FIFO as the text blocked the job until its time limit.
        ("POST", "/api/sensitivity", &json, br#"{"path": "smol.gguf", "to": "q4_0", "text": "fifo.gguf"}"#, 400, "not a regular file"),
        // Item 8: a rank past 65536 (2^64 - 1 made an adapter of cosine -0.03).
        (
            "POST",
            "/api/lora-extract",
            &json,
            br#"{"base": "smol.gguf", "tuned": "smol.gguf", "rank": 18446744073709551615}"#,
            400,
            "more than 65536",
        ),
        ("GET", &stalled, &[], b"", 422, "stalled"),
        ("GET", &redirected, &[], b"", 422, "no HTTP answer"),
    ];
    let mut refused = 0;
    for (method, path, headers, body, want, needle) in &cases {
        let (st, v) = raw(&s, method, path, headers, body);
        let msg = v["error"].as_str().unwrap_or_default().to_owned();
        let short = &path[..path.len().min(80)];
        assert_eq!(st, *want, "{method} {short} {headers:?}: {v}");
        refused += usize::from((400..500).contains(&st));
        assert!(msg.contains(needle), "{method} {short}: the message {msg:?} should say {needle:?}");
        assert!(!msg.contains(s.root.to_str().unwrap()), "{short}: the message does not reveal the root");
        assert!(!msg.contains("hunter2"), "{short}: the message repeats a URL's credentials");
        assert_eq!(get(&s, "/api/health").0, 200, "the server is still up after {method} {short}");
    }
    assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0, "a redirect to loopback was followed");
    println!("hostile requests: {} sent, {refused} refused with 4xx", cases.len());
    assert_eq!(refused, cases.len(), "hostile requests: {} sent, {refused} refused with 4xx", cases.len());
    // A corrupt model as a job fails with the reason, and leaves no output.
    let (_, job) = post(&s, "/api/dissect", &json!({ "path": "corrupt.gguf" }));
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed");
    assert!(end["error"].as_str().unwrap().contains("corrupt.gguf"), "{end}");
    assert!(!s.root.join("results").join(job["id"].as_str().unwrap()).exists());
    assert_eq!(get(&s, "/api/health").0, 200, "the server is still up");

    // With a token: missing or wrong gets 401; the right one passes.
    let t = start(&make_tiny_root("api-token"), &["--token", "s3cret"]);
    let (st, v) = get(&t, "/api/models");
    assert_eq!(st, 401);
    assert!(v["error"].as_str().unwrap().contains("missing token"));
    let (st, _) = call(agent().get(&format!("{}/api/models", t.base)).set("Authorization", "Bearer nope"), None);
    assert_eq!(st, 401);
    let (st, _) = call(agent().get(&format!("{}/api/models", t.base)).set("Authorization", "Bearer s3cret"), None);
    assert_eq!(st, 200);
    // A lost job id is found again in the job list (issue 50), which only a server with a
    // token gives: without one, an id is all that reaches a job's outputs.
    let authed = |r: ureq::Request| r.set("Authorization", "Bearer s3cret");
    let (st, job) = call(authed(agent().post(&format!("{}/api/check", t.base))), Some(r#"{"paths": ["smol.gguf"]}"#));
    assert_eq!(st, 202, "{job}");
    let (st, list) = call(authed(agent().get(&format!("{}/api/jobs", t.base))), None);
    assert_eq!(st, 200, "{list}");
    let ids: Vec<&str> = list["jobs"].as_array().unwrap().iter().map(|j| j["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&job["id"].as_str().unwrap()), "{list}");
    assert!(list["jobs"][0].get("result").is_none(), "no results in the list: {list}");
    let (st, _) = call(agent().get(&format!("{}/api/jobs", t.base)), None);
    assert_eq!(st, 401);
    let (st, v) = get(&s, "/api/jobs");
    assert_eq!(st, 403, "{v}");
    assert!(v["error"].as_str().unwrap().contains("--token"), "{v}");

    // Beyond loopback without a token, the server refuses to start.
    let out = organ()
        .arg("serve")
        .arg("--root")
        .arg(&s.root)
        .arg("--addr")
        .arg("0.0.0.0:0")
        .env_remove("ORGAN_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("requires --token"));
}

/// Issue 46: a 12 KB parameter name of nested YAML lists once overflowed the server's
/// stack (its parse of the child's --param ran in the server); keys that start with '-'
/// reached the child as flags of their own. Now the first is a 400 and the server stays
/// up, and the others are read by the child as the keys they are.
#[test]
fn deep_yaml_and_dashed_keys_reach_no_parser_unbounded() {
    let root = make_tiny_root("api-deep-yaml");
    let s = start(&root, &[]);
    let deep = format!("normalize=\n{}x", "- ".repeat(6_000));
    let body = json!({ "method": "linear", "models": [{ "path": "smol.gguf" }], "parameters": { deep: true } });
    let (st, v) = post(&s, "/api/merge", &body);
    assert_eq!(st, 400, "{v:.300}");
    assert!(v["error"].as_str().unwrap().contains("has no '='"), "{v:.300}");
    assert_eq!(get(&s, "/api/health").0, 200, "the server is still up");
    // A key that starts with '-' is a key to the child, not a flag: removing one the model
    // lacks fails with the command's reason, setting one adds it.
    let (_, job) = post(&s, "/api/meta", &json!({ "path": "smol.gguf", "rm": ["--in-place"] }));
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    let error = end["error"].as_str().unwrap();
    assert!(error.contains("--in-place") && !error.contains("--help"), "{end}");
    let end = run_job(&s, "/api/meta", json!({ "path": "smol.gguf", "set": [{ "key": "-x", "value": 1 }] }));
    assert!(end["result"].to_string().contains("\"-x\""), "{end}");
}

/// The paths item 8's and the job time limit's hostile requests aim at: a finished job,
/// deleted; a failed one; one stopped by the server's 2 s `--job-timeout` (checked here).
struct JobProbes {
    deleted_status: String,
    deleted_result: String,
    deleted_events: String,
    deleted_download: String,
    failed_result: String,
    timed_out_result: String,
}

fn jobs_probes(s: &Server) -> JobProbes {
    let end = run_job(s, "/api/measure", json!({ "paths": ["smol.gguf"] }));
    let gone = end["id"].as_str().unwrap().to_owned();
    let (st, v) = call(agent().delete(&format!("{}/api/jobs/{gone}", s.base)), None);
    assert_eq!((st, v["state"].as_str()), (200, Some("deleted")), "{v}");
    let (_, failed) = post(s, "/api/dissect", &json!({ "path": "corrupt.gguf" }));
    let failed = failed["id"].as_str().unwrap().to_owned();
    assert_eq!(follow(s, &failed)["state"], "failed");
    // A measure of 40 models of 65 536 tensors each (hard links of one) takes over ten
    // seconds; the limit is 2 s.
    let paths: Vec<String> = (0..40)
        .map(|i| {
            let rel = format!("many-{i}.gguf");
            std::fs::hard_link(s.root.join("many.gguf"), s.root.join(&rel)).unwrap();
            rel
        })
        .collect();
    let (st, slow) = post(s, "/api/measure", &json!({ "paths": paths }));
    assert_eq!(st, 202, "{slow}");
    let slow = slow["id"].as_str().unwrap().to_owned();
    let end = follow(s, &slow);
    assert!(end["error"].as_str().is_some_and(|e| e.contains("limit of 2 s")), "{end}");
    JobProbes {
        deleted_status: format!("/api/jobs/{gone}"),
        deleted_result: format!("/api/jobs/{gone}/result"),
        deleted_events: format!("/api/jobs/{gone}/events"),
        deleted_download: format!("/api/results/{gone}/report.json"),
        failed_result: format!("/api/jobs/{failed}/result"),
        timed_out_result: format!("/api/jobs/{slow}/result"),
    }
}

/// Issue 3: the server checked the path when the request came; the child opened it when
/// the job ran. A queued dissect of a regular file, swapped for a symlink to a file outside
/// the root before its turn, dissected the outside file.
#[test]
fn a_queued_job_whose_model_is_swapped_for_a_symlink_outside_fails() {
    if need::smollm2().is_none() {
        return;
    }
    let root = make_root("api-swap");
    let slow = slow_models(&root, 300);
    let victim = root.join("victim.gguf");
    std::fs::copy(root.join("corrupt.gguf"), &victim).unwrap();
    let outside = tmp("api-swap-outside.gguf");
    let _ = std::fs::remove_file(&outside);
    if std::fs::hard_link(smollm2(), &outside).is_err() {
        std::fs::copy(smollm2(), &outside).unwrap();
    }
    let s = start(&root, &["--jobs", "1"]);
    // A long job holds the only slot, so the dissect waits in the queue.
    let (st, blocker) = post(&s, "/api/measure", &json!({ "paths": slow }));
    assert_eq!(st, 202, "{blocker}");
    let bid = blocker["id"].as_str().unwrap().to_owned();
    wait_running(&s, &bid);
    let (st, job) = post(&s, "/api/dissect", &json!({ "path": "victim.gguf" }));
    assert_eq!(st, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    assert_eq!(get(&s, &format!("/api/jobs/{id}")).1["state"], "queued");
    std::fs::remove_file(&victim).unwrap();
    std::os::unix::fs::symlink(&outside, &victim).unwrap();
    let (st, c) = call(agent().delete(&format!("{}/api/jobs/{bid}", s.base)), None);
    assert_eq!((st, c["state"].as_str()), (200, Some("cancelled")), "{c}");
    let end = follow(&s, &id);
    assert_eq!(end["state"], "failed", "the dissect read the file outside the root: {end}");
    assert!(end["error"].as_str().unwrap_or_default().contains("outside"), "{end}");
    assert_eq!(end["outputs"], json!([]));
    assert!(!s.root.join("results").join(&id).exists(), "no output remains");
}

/// Issue 7: DNS rebinding. A tokenless loopback server answered any Host
/// (`Host: attacker.example` -> 200), and any cross-site browser request.
#[test]
fn foreign_hosts_and_cross_site_requests_are_refused() {
    let s = start(&make_tiny_root("api-host"), &[]);
    let port = s.base.rsplit(':').next().unwrap().to_owned();
    let (st, v) = raw(&s, "GET", "/api/models", &[("Host", "attacker.example")], b"");
    assert_eq!(st, 421, "Host: attacker.example: {v}");
    assert!(v["error"].as_str().unwrap_or_default().contains("attacker.example"), "{v}");
    let (st, _) = raw(&s, "GET", "/api/health", &[("Host", &format!("attacker.example:{port}"))], b"");
    assert_eq!(st, 421);
    for host in ["localhost", "LOCALHOST:8935", "127.0.0.1", &format!("127.0.0.1:{port}"), "[::1]", "[::1]:1"] {
        let (st, v) = raw(&s, "GET", "/api/health", &[("Host", host)], b"");
        assert_eq!(st, 200, "Host: {host}: {v}");
    }
    let cross: [&[(&str, &str)]; 4] = [
        &[("Origin", "http://attacker.example")],
        &[("Origin", "null")],
        &[("Origin", "http://localhost.attacker.example:8935")],
        &[("Sec-Fetch-Site", "cross-site")],
    ];
    for h in cross {
        let (st, v) = raw(&s, "POST", "/api/measure", h, br#"{"paths": ["smol.gguf"]}"#);
        assert_eq!(st, 403, "{h:?}: {v}");
        assert!(v["error"].is_string(), "{v}");
    }
    let same: [&[(&str, &str)]; 3] = [
        &[("Origin", &format!("http://127.0.0.1:{port}"))],
        &[("Origin", "http://localhost:5173")],
        &[("Sec-Fetch-Site", "same-origin")],
    ];
    for h in same {
        let (st, v) = raw(&s, "GET", "/api/models", h, b"");
        assert_eq!(st, 200, "{h:?}: {v}");
    }
    // --allow-host adds names.
    let t = start(&make_tiny_root("api-host2"), &["--allow-host", "organ.lan", "--allow-host", "Models.Example"]);
    for host in ["organ.lan", "organ.lan:8935", "models.example:80"] {
        assert_eq!(raw(&t, "GET", "/api/health", &[("Host", host)], b"").0, 200, "{host}");
    }
    assert_eq!(raw(&t, "GET", "/api/health", &[("Origin", "https://organ.lan")], b"").0, 200);
    assert_eq!(raw(&t, "GET", "/api/health", &[("Host", "other.lan")], b"").0, 421);
}

/// Issue 11c: `--token ""` was accepted with a public --addr (no authentication at all).
#[test]
fn an_empty_or_blank_token_is_refused() {
    let root = make_tiny_root("api-empty-token");
    for (arg, env) in [(Some(""), None), (Some("   "), None), (None, Some(""))] {
        let mut c = organ();
        c.arg("serve").arg("--root").arg(&root).arg("--addr").arg("0.0.0.0:0").env_remove("ORGAN_TOKEN");
        if let Some(t) = arg {
            c.arg("--token").arg(t);
        }
        if let Some(t) = env {
            c.env("ORGAN_TOKEN", t);
        }
        let mut child = c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break Some(st);
            }
            if t0.elapsed() > Duration::from_secs(5) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.is_some_and(|s| !s.success()), "token {arg:?} / ORGAN_TOKEN={env:?}: the server started");
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(err.contains("empty"), "{err}");
    }
}

/// Issue 11d: "missing" and "leads outside" were different answers, so a client could
/// probe what exists outside the root.
#[test]
fn missing_and_outside_paths_get_the_same_answer() {
    let s = start(&make_tiny_root("api-probe"), &[]);
    let (a, va) = get(&s, "/api/inspect?path=escape/passwd");
    let (b, vb) = get(&s, "/api/inspect?path=escape/no-such-file");
    let (c, vc) = get(&s, "/api/inspect?path=missing.gguf");
    assert_eq!((a, b, c), (404, 404, 404), "{va} {vb} {vc}");
    let msg = |v: &Value, p: &str| v["error"].as_str().unwrap_or_default().replace(p, "P");
    assert_eq!(msg(&va, "escape/passwd"), msg(&vc, "missing.gguf"));
    assert_eq!(msg(&vb, "escape/no-such-file"), msg(&vc, "missing.gguf"));
    assert!(msg(&vc, "missing.gguf").contains("no such model under the root"), "{vc}");
    let (a, va) = post(&s, "/api/measure", &json!({ "paths": ["escape/hosts"] }));
    let (b, vb) = post(&s, "/api/measure", &json!({ "paths": ["nothing/hosts"] }));
    assert_eq!((a, msg(&va, "escape/hosts")), (b, msg(&vb, "nothing/hosts")));
}
