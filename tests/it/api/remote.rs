//! Model arguments that are URLs (docs/api.md): refused with a sentence unless the server
//! was started with `--allow-remote`; then a diff or measure job of a model at a URL
//! (nginx on loopback) gives the same result as of the file under the root, and a URL
//! that leads nowhere fails its job naming the URL.

use super::server::*;
use crate::common::need;
use crate::remote::Nginx;
use serde_json::json;

#[test]
fn urls_as_model_arguments_only_with_allow_remote() {
    let Some(nginx) = need::nginx() else { return };
    let root = make_tiny_root("api-remote");
    let srv = Nginx::start(&nginx, "ngx-api");
    std::os::unix::fs::symlink(root.join("smol.gguf"), srv.www().join("smol.gguf")).unwrap();
    let url = srv.url("smol.gguf");

    let closed = start(&root, &[]);
    let (st, body) = post(&closed, "/api/diff", &json!({ "a": url, "b": "smol.gguf" }));
    assert_eq!(st, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("--allow-remote"), "{body}");
    let (st, body) = post(&closed, "/api/measure", &json!({ "paths": [url] }));
    assert_eq!(st, 400, "{body}");
    drop(closed);

    // nginx is on loopback, which a server reads from only when told to.
    let open = start(&root, &["--allow-remote", "--allow-remote-private"]);
    let done = |path: &str, body: serde_json::Value| {
        let end = run_job(&open, path, body);
        assert_eq!(end["state"], "done", "{end}");
        end["result"].clone()
    };
    let local = done("/api/diff", json!({ "a": "smol.gguf", "b": "smol.gguf" }));
    assert_eq!(done("/api/diff", json!({ "a": url, "b": "smol.gguf" })), local);
    let local = done("/api/measure", json!({ "paths": ["smol.gguf"] }));
    assert_eq!(done("/api/measure", json!({ "paths": [url] })), local);
    let missing = srv.url("missing.gguf");
    let (st, job) = post(&open, "/api/diff", &json!({ "a": missing, "b": "smol.gguf" }));
    assert_eq!(st, 202, "{job}");
    let end = follow(&open, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    let err = end["error"].as_str().unwrap();
    assert!(err.contains(&missing) && err.contains("404"), "{end}");
}
