//! Models in an object store (docs/remote.md, "s3://"): `inspect` and `measure` of
//! `s3://` URLs served by moto's S3 server (from PyPI, scripts/setup-moto.sh) on loopback,
//! the files uploaded by boto3, compared with the same commands on the local files.

use crate::common::*;
use crate::moto::{s, Moto};
use serde_json::Value;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// `--stats`' remote line: bytes fetched, requests, retries.
fn remote_stats(stderr: &str) -> (u64, u64, u64) {
    let line = stderr.lines().find_map(|l| l.strip_prefix("stats: remote bytes fetched ")).expect(stderr);
    let n: Vec<u64> =
        line.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    (n[0], n[1], n[2])
}

/// SmolLM2 and a split SmolLM2 (llama-gguf-split) in a bucket of moto's S3 server:
/// `inspect` and `measure` of their `s3://` URLs give the local files' output byte for
/// byte (a split's `inspect --json` but for `shards`, URLs where the local one has paths);
/// `--stats` counts what moto served, and the retries of 503s a proxy injects.
#[test]
fn a_model_in_s3_reads_as_the_local_file() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let Some(python) = need::moto() else { return };
    let moto = Moto::start(&python);
    moto.boto3("s3.create_bucket(Bucket='models')", &[]);
    let name = model.file_name().unwrap().to_str().unwrap();
    moto.put("models", &format!("smol/{name}"), &model);
    let url = format!("s3://models/smol/{name}");

    let (local, _) = moto.run(&["inspect", "--json", s(&model)]);
    let (remote, _) = moto.run(&["inspect", "--json", &url]);
    assert!(local == remote, "inspect --json differs");
    let (local, _) = moto.run(&["inspect", s(&model)]);
    let (remote, _) = moto.run(&["inspect", &url]);
    assert!(local == remote, "inspect differs");

    let (lj, rj) = (tmp("s3-local.json"), tmp("s3-remote.json"));
    let (local_text, _) = moto.run(&["measure", s(&model), "--json", s(&lj)]);
    let before = moto.requests.load(Ordering::Relaxed);
    let (remote_text, err) = moto.run(&["measure", &url, "--json", s(&rj), "--stats"]);
    assert!(std::fs::read(&lj).unwrap() == std::fs::read(&rj).unwrap(), "measure --json differs");
    assert!(local_text == remote_text, "measure's text differs");
    let (fetched, requests, retries) = remote_stats(&err);
    let size = std::fs::metadata(&model).unwrap().len();
    assert!(fetched <= size + (4 << 20) && fetched >= size / 2, "{fetched} of {size}");
    assert_eq!(retries, 0, "{err}");
    // moto logs its lines as it answers; give the last a moment.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(requests as usize, moto.requests.load(Ordering::Relaxed) - before, "{err}");
    eprintln!("s3 measure of SmolLM2 ({size} bytes): {fetched} bytes fetched in {requests} requests");

    // The split model, by its second shard's URL; siblings by name.
    let dir = tmp("s3-split");
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = llama_tool("llama-gguf-split");
    c.args(["--split", "--split-max-tensors", "80"]).arg(&model).arg(dir.join("sm"));
    ok(c);
    let n = SMOLLM2_TENSORS.div_ceil(80);
    let shard = |i: usize| format!("sm-{i:05}-of-{n:05}.gguf");
    for i in 1..=n {
        moto.put("models", &format!("split/{}", shard(i)), &dir.join(shard(i)));
    }
    let url = format!("s3://models/split/{}", shard(2));
    let json = |args: &[&str]| -> Value { serde_json::from_slice(&moto.run(args).0).unwrap() };
    let mut local = json(&["inspect", "--json", s(&dir.join(shard(2)))]);
    let mut remote = json(&["inspect", "--json", &url]);
    let (_, rs) = (local["shards"].take(), remote["shards"].take());
    assert_eq!(local, remote);
    let want: Vec<String> = (1..=n).map(|i| format!("s3://models/split/{}", shard(i))).collect();
    assert_eq!(rs, serde_json::json!(want));
    // Measured through a proxy that answers every third request 503: each is retried and
    // counted, and the report is the local split's.
    let (lj, rj) = (tmp("s3-split-local.json"), tmp("s3-split-remote.json"));
    moto.run(&["measure", s(&dir.join(shard(2))), "--json", s(&lj)]);
    let (proxy, refused) = moto.flaky();
    let mut c = moto.organ();
    c.env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{proxy}"));
    c.args(["measure", &url, "--json", s(&rj), "--stats"]);
    let err = String::from_utf8(ok(c).stderr).unwrap();
    assert!(std::fs::read(&lj).unwrap() == std::fs::read(&rj).unwrap(), "split measure --json differs");
    let (fetched, requests, retries) = remote_stats(&err);
    assert!(retries > 0 && retries as usize == refused.load(Ordering::Relaxed), "{err}");
    assert!(err.contains("503") && err.contains("retry 1 of 5"), "{err}");
    eprintln!("s3 measure of a {n}-shard SmolLM2: {fetched} bytes fetched in {requests} requests, {retries} retries");
}

/// The object replaced in the bucket while measure reads it one small range at a time: a
/// clear error naming the URL, no report written. A missing key, a missing bucket, a
/// malformed URL: each a clear error naming the URL, exit 1, nothing written.
#[test]
fn a_replaced_or_missing_object_is_an_error() {
    let Some(model) = need::smollm2() else { return };
    let Some(python) = need::moto() else { return };
    let moto = Moto::start(&python);
    moto.boto3("s3.create_bucket(Bucket='models')", &[]);
    moto.put("models", "swap.gguf", &model);
    let other = tmp("s3-other.gguf");
    let mut bytes = std::fs::read(&model).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&other, bytes).unwrap();

    let url = "s3://models/swap.gguf";
    let out = tmp("s3-swap.json");
    let mut c = moto.organ();
    c.args(["measure", url, "--json", s(&out), "--remote-gap", "0", "--remote-concurrency", "1"]);
    let child = c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    let start = moto.requests.load(Ordering::Relaxed);
    while moto.requests.load(Ordering::Relaxed) < start + 10 {
        assert!(t0.elapsed() < Duration::from_secs(60), "measure made too few requests");
        std::thread::sleep(Duration::from_millis(5));
    }
    moto.put("models", "swap.gguf", &other);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(url) && err.contains("changed in the store"), "{err}");
    assert!(!out.exists());

    let cases = [
        ("s3://models/missing.gguf", "no such object"),
        ("s3://no-such-bucket/m.gguf", "no such object"),
        ("s3://models", "not a valid object URL"),
    ];
    for (u, says) in cases {
        for cmd in ["inspect", "measure"] {
            let mut c = moto.organ();
            c.arg(cmd).arg(u);
            if cmd == "measure" {
                c.arg("--json").arg(&out);
            }
            let err = fails(c);
            assert!(err.contains(u) && err.contains(says), "{cmd} {u}: {err}");
            assert!(!out.exists());
        }
    }
}
