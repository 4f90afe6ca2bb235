//! Models on the Hugging Face Hub (docs/remote.md, "hf://"): `HF_ENDPOINT` points organ at
//! a Hub of the test's own on loopback, which answers a resolve request as the Hub does
//! (X-Repo-Commit, X-Linked-Etag, X-Linked-Size, a 302 to a signed CDN URL), and the CDN
//! is Debian's nginx (tests/it/remote.rs), which refuses any request that carries an
//! Authorization header: the token must go to the Hub and never to the CDN.

use crate::common::*;
use crate::remote::Nginx;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const TOKEN: &str = "hf_organ_test_token";

/// What the Hub of the test was asked: each request's method and path, and its
/// Authorization header.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A Hub on a free loopback port, answering for the files in `cdn_dir`, served by nginx
/// at `cdn` (`http://…/cdn/`):
/// - `HEAD /o/r/resolve/REV/NAME`: 302 to `cdn/NAME?X-Amz-Signature=…`, with the commit
///   in `commit`, `X-Linked-Etag` and `X-Linked-Size` (any REV resolves to it);
/// - `/old/r/…`: a relative 307 to `/o/r/…` (a renamed repo);
/// - `/gated/r/…`: as `/o/r/…` with the token, 401 without;
/// - else 404, with the Hub's X-Error-Code.
///
/// Runs until the test process ends.
fn hub(cdn: String, cdn_dir: PathBuf, commit: Arc<Mutex<String>>) -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut lines = BufReader::new(conn.try_clone().unwrap()).lines().map_while(Result::ok);
            let Some(first) = lines.next() else { continue };
            let mut auth = None;
            for line in lines.by_ref() {
                if line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("authorization") {
                        auth = Some(v.trim().to_owned());
                    }
                }
            }
            let target = first.split(' ').nth(1).unwrap_or_default().to_owned();
            log.lock().unwrap().push((first.split(' ').take(2).collect::<Vec<_>>().join(" "), auth.clone()));
            let parts: Vec<&str> = target.splitn(6, '/').collect();
            let answer = match parts.as_slice() {
                ["", "old", "r", "resolve", ..] => {
                    format!("HTTP/1.1 307 Moved\r\nLocation: /o/r/{}\r\n", parts[3..].join("/"))
                }
                ["", "gated", "r", "resolve", ..] if auth.as_deref() != Some(&format!("Bearer {TOKEN}")) => {
                    "HTTP/1.1 401 Unauthorized\r\nX-Error-Code: GatedRepo\r\n".to_owned()
                }
                ["", "o" | "gated", "r", "resolve", _rev, name] if cdn_dir.join(name).is_file() => {
                    let size = std::fs::metadata(cdn_dir.join(name)).unwrap().len();
                    format!(
                        "HTTP/1.1 302 Found\r\nX-Repo-Commit: {}\r\nX-Linked-Etag: \"sha256-{name}\"\r\n\
                         X-Linked-Size: {size}\r\nETag: \"gitblob\"\r\nLocation: {cdn}{name}?X-Amz-Signature=s1g\r\n",
                        commit.lock().unwrap()
                    )
                }
                _ => "HTTP/1.1 404 Not Found\r\nX-Error-Code: EntryNotFound\r\nX-Error-Message: Entry not found\r\n"
                    .to_owned(),
            };
            let _ = conn.write_all(format!("{answer}Content-Length: 0\r\nConnection: close\r\n\r\n").as_bytes());
        }
    });
    (port, seen)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `organ` with `HF_ENDPOINT` at the test's Hub, and `HF_TOKEN` when `token`.
fn organ_at(port: u16, token: bool) -> std::process::Command {
    let mut c = organ();
    c.env("HF_ENDPOINT", format!("http://127.0.0.1:{port}")).env_remove("HF_TOKEN");
    if token {
        c.env("HF_TOKEN", TOKEN);
    }
    c
}

fn run(port: u16, args: &[&str]) -> (Vec<u8>, String) {
    let mut c = organ_at(port, true);
    c.args(args);
    let o = ok(c);
    (o.stdout, String::from_utf8(o.stderr).unwrap())
}

/// SmolLM2 at `hf://o/r/NAME`: `inspect` and `measure` give the local file's output byte
/// for byte; the Hub saw the token on every request, the CDN on none (nginx would have
/// refused it); a renamed repo's redirect is followed with the token; the cache knows the
/// model by its commit; a gated repo without a token, and a missing file, are clear
/// errors naming the URL.
#[test]
fn a_model_on_the_hub_reads_as_the_local_file() {
    let Some(model) = need::smollm2() else { return };
    let Some(nginx) = need::nginx() else { return };
    let cdn = Nginx::start(&nginx, "hub-cdn");
    let cdn_dir = cdn.www().join("cdn");
    std::fs::create_dir_all(&cdn_dir).unwrap();
    let name = model.file_name().unwrap().to_str().unwrap();
    std::os::unix::fs::symlink(&model, cdn_dir.join(name)).unwrap();
    let commit = Arc::new(Mutex::new("0123456789abcdef0123456789abcdef01234567".to_owned()));
    let (port, seen) = hub(cdn.url("cdn/"), cdn_dir, commit.clone());
    let url = format!("hf://o/r/{name}");

    let (local, _) = run(port, &["inspect", "--json", s(&model)]);
    let (remote, _) = run(port, &["inspect", "--json", &url]);
    assert!(local == remote, "inspect --json differs");
    let (local, _) = run(port, &["inspect", s(&model)]);
    let (remote, _) = run(port, &["inspect", &format!("{url}@main")]);
    assert!(local == remote, "inspect differs");

    let (lj, rj) = (tmp("hub-local.json"), tmp("hub-remote.json"));
    let (local_text, _) = run(port, &["measure", s(&model), "--json", s(&lj)]);
    let (remote_text, err) = run(port, &["measure", &url, "--json", s(&rj), "--stats"]);
    assert!(std::fs::read(&lj).unwrap() == std::fs::read(&rj).unwrap(), "measure --json differs");
    assert!(local_text == remote_text, "measure's text differs");
    assert!(err.contains("stats: remote bytes fetched"), "{err}");

    let bearer = format!("Bearer {TOKEN}");
    let asked = seen.lock().unwrap().clone();
    assert!(
        !asked.is_empty() && asked.iter().all(|(r, a)| r.starts_with("HEAD ") && a.as_deref() == Some(&bearer)),
        "{asked:?}"
    );
    let served = cdn.log();
    assert!(!served.is_empty() && served.iter().all(|r| r.0 == 206), "the CDN answered {served:?}");

    // A renamed repo: the Hub's relative redirect is followed, with the token.
    let (renamed, _) = run(port, &["inspect", &format!("hf://old/r/{name}")]);
    assert!(renamed == local, "inspect of a renamed repo differs");
    let asked = seen.lock().unwrap().clone();
    let last: Vec<_> = asked.iter().rev().take(2).collect();
    assert!(last[1].0.starts_with("HEAD /old/r/") && last[0].0.starts_with("HEAD /o/r/"), "{asked:?}");
    assert!(last.iter().all(|(_, a)| a.as_deref() == Some(&bearer)), "{asked:?}");

    // The cache knows the model by its commit, ETag and size: measured again, it is taken
    // from the cache; once the revision resolves to another commit, it is measured anew.
    let cache = tmp("hub-cache");
    let cached = |want_hit: bool| {
        let (text, err) = run(port, &["measure", &url, "--cache", s(&cache)]);
        assert!(text == local_text, "measure --cache differs");
        assert_eq!(err.contains("1 of 1 models taken from the cache"), want_hit, "{err}");
    };
    cached(false);
    cached(true);
    *commit.lock().unwrap() = "89abcdef0123456789abcdef0123456789abcdef".to_owned();
    cached(false);

    // A gated repo: the token opens it; without one, a sentence says what is needed.
    let (gated, _) = run(port, &["inspect", &format!("hf://gated/r/{name}")]);
    assert!(gated == local, "inspect of a gated repo differs");
    let out = tmp("hub-bad.json");
    let cases = [
        (format!("hf://gated/r/{name}"), false, "HF_TOKEN"),
        ("hf://o/r/missing.gguf".to_owned(), true, "EntryNotFound"),
        ("hf://o/r/model.bin".to_owned(), true, "must name a .gguf file"),
    ];
    for (u, token, says) in &cases {
        for cmd in ["inspect", "measure"] {
            let mut c = organ_at(port, *token);
            c.arg(cmd).arg(u);
            if cmd == "measure" {
                c.arg("--json").arg(&out);
            }
            let err = fails(c);
            assert!(err.contains(u.as_str()) && err.contains(says), "{cmd} {u}: {err}");
            assert!(!out.exists());
        }
    }
}

/// A split SmolLM2 on the Hub by its second shard's `hf://` URL at a revision: the
/// siblings are found by name at the same revision; measure gives the local split's report.
#[test]
fn a_split_model_on_the_hub_reads_as_the_local_split() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let Some(nginx) = need::nginx() else { return };
    let cdn = Nginx::start(&nginx, "hub-split");
    let cdn_dir = cdn.www().join("cdn");
    std::fs::create_dir_all(&cdn_dir).unwrap();
    let mut c = llama_tool("llama-gguf-split");
    c.args(["--split", "--split-max-tensors", "80"]).arg(&model).arg(cdn_dir.join("sm"));
    ok(c);
    let n = SMOLLM2_TENSORS.div_ceil(80);
    let shard = |i: usize| format!("sm-{i:05}-of-{n:05}.gguf");
    let commit = Arc::new(Mutex::new("fedcba9876543210fedcba9876543210fedcba98".to_owned()));
    let (port, seen) = hub(cdn.url("cdn/"), cdn_dir.clone(), commit);
    let url = format!("hf://o/r/{}@v1.0", shard(2));

    let json = |args: &[&str]| -> Value { serde_json::from_slice(&run(port, args).0).unwrap() };
    let mut local = json(&["inspect", "--json", s(&cdn_dir.join(shard(2)))]);
    let mut remote = json(&["inspect", "--json", &url]);
    let (_, rs) = (local["shards"].take(), remote["shards"].take());
    assert_eq!(local, remote);
    let want: Vec<String> = (1..=n).map(|i| format!("hf://o/r/{}@v1.0", shard(i))).collect();
    assert_eq!(rs, serde_json::json!(want));
    let (lj, rj) = (tmp("hub-split-local.json"), tmp("hub-split-remote.json"));
    run(port, &["measure", s(&cdn_dir.join(shard(2))), "--json", s(&lj)]);
    run(port, &["measure", &url, "--json", s(&rj)]);
    assert!(std::fs::read(&lj).unwrap() == std::fs::read(&rj).unwrap(), "measure --json differs");
    let asked = seen.lock().unwrap().clone();
    assert!(asked.iter().all(|(r, _)| r.starts_with("HEAD /o/r/resolve/v1.0/sm-")), "{asked:?}");
}
