//! URLs wherever a model is read (docs/remote.md): `diff` (either side), `dissect` and
//! graft's donor fetch a model at an http:// URL, served by nginx on loopback, through the
//! same pinned range reads as `measure`, and give what the local file gives, byte for
//! byte. Bad URLs: a clear error naming the URL, nothing written.

use crate::common::*;
use crate::remote::{run, s, Nginx};
use std::net::TcpListener;

/// `diff` of SmolLM2 at a URL against the local file (either way round) is `diff` of the
/// file against itself, text and JSON; `dissect` of the URL writes the same organ
/// directory as of the file (the manifest, which lists every file's digest, byte for
/// byte); a graft with the URL as donor writes the same bytes as with the local donor.
#[test]
fn diff_dissect_and_graft_read_urls_as_the_local_file() {
    let Some(model) = need::smollm2() else { return };
    let Some(nginx) = need::nginx() else { return };
    let srv = Nginx::start(&nginx, "ngx-urls");
    let name = model.file_name().unwrap().to_str().unwrap();
    std::os::unix::fs::symlink(&model, srv.www().join(name)).unwrap();
    let url = srv.url(name);
    let m = s(&model);

    let diff = |a: &str, b: &str, tag: &str| {
        let json = tmp(&format!("urls-diff-{tag}.json"));
        let (text, _) = run(&["diff", a, b, "--json", s(&json)]);
        (text, std::fs::read(&json).unwrap())
    };
    let local = diff(m, m, "local");
    assert!(diff(&url, m, "url-a") == local, "diff URL FILE differs from diff FILE FILE");
    assert!(diff(m, &url, "url-b") == local, "diff FILE URL differs from diff FILE FILE");

    let from_file = dissect(&model, "urls-dissect-local", &[]);
    let from_url = tmp("urls-dissect-url");
    run(&["dissect", &url, "--out", s(&from_url)]);
    let manifest = |d: &std::path::Path| std::fs::read(d.join("manifest.json")).unwrap();
    assert!(manifest(&from_file) == manifest(&from_url), "dissect of the URL: another manifest");

    let graft = |donor: &str, tag: &str| {
        let out = tmp(&format!("urls-graft-{tag}.gguf"));
        run(&["graft", "--layers", "5", "--type", "organ", "--donor", donor, "--recipient", m, "--out", s(&out)]);
        std::fs::read(&out).unwrap()
    };
    assert!(graft(&url, "url") == graft(m, "local"), "graft with the URL as donor: other bytes");
}

/// Unknown scheme, unreachable host, 404, 403, a malformed URL, a file that is not a GGUF:
/// for each command that takes URLs, a clear error naming the URL, exit 1, nothing written.
/// (`diff --fail-on-change`, whose 1 means "changed", exits 2 on an error, as diff(1) does.)
#[test]
fn bad_urls_are_refused_by_every_command_that_takes_urls() {
    let Some(model) = need::smollm2() else { return };
    let Some(nginx) = need::nginx() else { return };
    let srv = Nginx::start(&nginx, "ngx-bad-urls");
    std::fs::write(srv.www().join("text.gguf"), "not a model, only words\n".repeat(10)).unwrap();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cases = [
        ("ftp://127.0.0.1/m.gguf".to_owned(), "not ftp://"),
        (format!("http://127.0.0.1:{closed}/m.gguf"), "Connection"),
        (srv.url("missing.gguf"), "404"),
        (srv.url("forbidden/m.gguf"), "403"),
        ("http://[::1/m.gguf".to_owned(), "not a valid URL"),
        (srv.url("text.gguf"), "not a valid GGUF"),
    ];
    let m = s(&model);
    let out = tmp("bad-urls-out");
    for (url, says) in &cases {
        let u = url.as_str();
        let o = s(&out);
        let commands: [(&[&str], i32); 6] = [
            (&["diff", u, m, "--json", o], 1),
            (&["diff", m, u, "--json", o], 1),
            (&["diff", m, u, "--json", o, "--fail-on-change"], 2),
            (&["dissect", u, "--out", o], 1),
            (&["graft", "--layers", "5", "--donor", u, "--recipient", m, "--out", o], 1),
            (&["inspect", u], 1),
        ];
        for (args, code) in commands {
            let mut c = organ();
            c.args(args).args(["--remote-retries", "0"]);
            let got = c.output().unwrap();
            let err = String::from_utf8(got.stderr).unwrap();
            assert_eq!(got.status.code(), Some(code), "{args:?}: {err}");
            assert!(err.contains(u) && err.contains(says), "{args:?}: {err}");
            assert!(!out.exists(), "{args:?} wrote {}", out.display());
        }
    }
}
