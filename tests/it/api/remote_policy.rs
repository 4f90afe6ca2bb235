//! What `organ serve --allow-remote` fetches (docs/api.md, item 1 of the hardening): only
//! the schemes the operator names; stores with only the `ORGAN_API_*` credentials, never
//! the server's own nor an instance-metadata service's; no loopback, private or own
//! address, checked on the resolved address and at every redirect; no URL's credentials,
//! neither used nor repeated; and the same sentence for a closed port as for an open one.
//! And item 2: a job reading from a trickling server fails within `--remote-speed-time`.
//! Every server is the test's own, on 127.0.0.1.

use super::server::*;
use crate::common::organ;
use crate::remote_limits::{canary, recorder, redirector, trickle};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// [`start`] with variables set in the server's environment.
fn start_env(root: &Path, extra: &[&str], env: &[(&str, String)]) -> Server {
    let mut c = organ();
    c.arg("serve").arg("--root").arg(root).arg("--addr").arg("127.0.0.1:0").arg("--web").arg(root.join("no-web"));
    c.args(extra).envs(env.iter().map(|(k, v)| (k, v))).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = c.spawn().expect("spawn organ serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.split("http://").nth(1).and_then(|r| r.split_whitespace().next()).expect(&line).to_owned();
    Server { child, base: format!("http://{addr}"), root: root.canonicalize().unwrap() }
}

/// A measure job of `url`, which must be accepted and fail: its error.
fn failed_job(s: &Server, url: &str) -> String {
    let (st, job) = post(s, "/api/measure", &json!({ "paths": [url] }));
    assert_eq!(st, 202, "{url}: {job}");
    let end = follow(s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{url}: {end}");
    end["error"].as_str().unwrap().to_owned()
}

/// A request refused with 400: its error, which must say `needle`.
fn refused(s: &Server, body: Value, needle: &str) -> String {
    let (st, v) = post(s, "/api/measure", &body);
    let msg = v["error"].as_str().unwrap_or_default().to_owned();
    assert_eq!(st, 400, "{body}: {v}");
    assert!(msg.contains(needle), "{body}: {msg:?} should say {needle:?}");
    msg
}

/// The variables that point every metadata service, and the stores' endpoints, at the
/// test's listeners: what an old server used when a request named `s3://` or `gs://`. And
/// ambient keys it signed with.
fn ambient(metadata: u16, store: u16) -> Vec<(&'static str, String)> {
    let m = format!("127.0.0.1:{metadata}");
    vec![
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", format!("http://{m}")),
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{store}")),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("GCE_METADATA_HOST", m.clone()),
        ("GCE_METADATA_ROOT", m.clone()),
        ("GCE_METADATA_IP", m),
        ("GOOGLE_BASE_URL", format!("http://127.0.0.1:{store}")),
        ("GOOGLE_ALLOW_HTTP", "true".into()),
        ("HOME", "/nonexistent".into()),
    ]
}

/// Schemes, credentials, literal and resolved private addresses: refused, and nothing
/// reached. By default `s3://`, `gs://` and `hf://` are refused when the request comes;
/// with `s3` and `gs` named, a job's requests go to the operator's endpoint unsigned (no
/// `ORGAN_API_` credential given), and the metadata listener is never contacted, though
/// the server's environment points object_store's metadata lookups at it.
#[test]
fn the_api_reads_only_what_the_operator_allows() {
    let root = make_tiny_root("api-remote-policy");
    let (metadata, asked) = canary();
    let (store, heads) = recorder();
    let (target, reached) = canary();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let env = ambient(metadata, store);

    let s = start_env(&root, &["--allow-remote"], &env);
    refused(&s, json!({ "paths": ["s3://bucket/m.gguf"] }), "no s3:// URLs");
    refused(&s, json!({ "paths": ["gs://bucket/m.gguf"] }), "no gs:// URLs");
    refused(&s, json!({ "paths": ["hf://owner/repo/m.gguf"] }), "no hf:// URLs");
    for url in [
        format!("http://127.0.0.1:{target}/m.gguf"),
        format!("http://[::ffff:127.0.0.1]:{target}/m.gguf"),
        format!("http://127.1:{target}/m.gguf"),
        format!("http://[::1]:{target}/m.gguf"),
        "http://169.254.169.254/latest/meta-data/".into(),
        format!("{}/api/models", s.base),
    ] {
        refused(&s, json!({ "paths": [url] }), "--allow-remote-private");
    }
    for body in
        [json!({ "paths": ["http://alice:hunter2@example.com/m.gguf"] }), json!({ "paths": ["https://tok@h/m"] })]
    {
        let msg = refused(&s, body, "credentials");
        assert!(!msg.contains("hunter2") && !msg.contains("alice") && !msg.contains("tok@"), "{msg}");
    }
    // A name is checked on what it resolves to, when the job connects: localhost is
    // loopback. An open port and a closed one give the same sentence.
    let open = failed_job(&s, &format!("http://localhost:{target}/m.gguf"));
    let shut = failed_job(&s, &format!("http://localhost:{closed}/m.gguf"));
    assert_eq!(open.replace(&target.to_string(), "PORT"), shut.replace(&closed.to_string(), "PORT"));
    assert!(open.contains("no HTTP answer"), "{open}");
    assert_eq!(reached.load(Ordering::SeqCst), 0, "a job connected to a loopback address");
    drop(s);

    let private = ["--allow-remote", "--allow-remote-schemes", "https,http,s3,gs", "--allow-remote-private"];
    let mut env = env;
    env.extend([
        ("ORGAN_API_AWS_ENDPOINT_URL", format!("http://127.0.0.1:{store}")),
        ("ORGAN_API_AWS_ALLOW_HTTP", "true".into()),
        ("ORGAN_API_AWS_REGION", "us-east-1".into()),
        ("ORGAN_API_GOOGLE_BASE_URL", format!("http://127.0.0.1:{store}")),
        ("ORGAN_API_GOOGLE_ALLOW_HTTP", "true".into()),
    ]);
    env.extend([("AWS_ACCESS_KEY_ID", "AKIAAMBIENTKEY".into()), ("AWS_SECRET_ACCESS_KEY", "ambient".into())]);
    let s = start_env(&root, &private, &env);
    for url in ["s3://bucket/m.gguf", "gs://bucket/m.gguf"] {
        let err = failed_job(&s, url);
        assert!(err.contains(url), "{err}");
    }
    let heads = heads.lock().unwrap().clone();
    assert!(heads.len() >= 2, "the stores' endpoint was asked: {heads:?}");
    assert!(heads.iter().all(|h| !h.contains("authorization")), "a request signed with ambient keys: {heads:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 0, "a job asked the metadata service");
    // Still no credentials in a URL, and never a metadata address, private or not.
    refused(&s, json!({ "paths": ["http://a:b@127.0.0.1/m.gguf"] }), "credentials");
    refused(&s, json!({ "paths": ["http://169.254.169.254/latest/"] }), "does not read from");
}

/// A redirect is checked where it leads: a host the operator allows (`--allow-remote-to`,
/// here the test's redirector on loopback) that answers 302 to another loopback port, or
/// to `localhost`, fails the job as an unreachable host does, and the redirect's target is
/// never connected to. Allowed too, the same redirect is followed (the check is not
/// refusing everything).
#[test]
fn a_redirect_to_a_refused_address_is_not_followed() {
    let root = make_tiny_root("api-remote-redirect");
    let (target, reached) = canary();
    for to in [format!("http://127.0.0.1:{target}/m.gguf"), format!("http://localhost:{target}/m.gguf")] {
        let (hop, asked) = redirector(to.clone());
        let allow = format!("127.0.0.1:{hop}");
        let s = start(&root, &["--allow-remote", "--allow-remote-to", &allow]);
        let err = failed_job(&s, &format!("http://127.0.0.1:{hop}/m.gguf"));
        assert!(err.contains("no HTTP answer"), "{to}: {err}");
        assert!(!asked.lock().unwrap().is_empty(), "the allowed host was asked");
        assert_eq!(reached.load(Ordering::SeqCst), 0, "{to}: the redirect was followed");
    }
    let (hop, _) = redirector(format!("http://127.0.0.1:{target}/m.gguf"));
    let (a, b) = (format!("127.0.0.1:{hop}"), format!("127.0.0.1:{target}"));
    let s = start(&root, &["--allow-remote", "--allow-remote-to", &a, "--allow-remote-to", &b]);
    failed_job(&s, &format!("http://127.0.0.1:{hop}/m.gguf"));
    assert!(reached.load(Ordering::SeqCst) > 0, "an allowed redirect was not followed");
}

/// Item 2 in the API: a measure job of a URL whose server sends one byte every 2 s was
/// "running" for ever. With `--remote-speed-time 3` it fails in seconds, saying why.
#[test]
fn a_job_reading_a_trickle_fails_within_the_speed_time() {
    let root = make_tiny_root("api-remote-trickle");
    let port = trickle();
    let s = start(&root, &["--allow-remote", "--allow-remote-private", "--remote-speed-time", "3"]);
    let t0 = Instant::now();
    let err = failed_job(&s, &format!("http://127.0.0.1:{port}/m.gguf"));
    assert!(t0.elapsed() < Duration::from_secs(20), "took {:?}", t0.elapsed());
    assert!(err.contains("stalled") && err.contains("bytes/s"), "{err}");
}
