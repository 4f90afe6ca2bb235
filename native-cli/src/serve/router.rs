//! The routes, and the shared state behind them: [`app`] builds both from [`Options`].

use super::{
    auth, files, inspect, layers, lora, merge, meta, operations, quantize, results, retention, surgery, web_dir,
    AppState, Options, MAX_INSPECTS, RESULTS,
};
use anyhow::{bail, Context};
use axum::extract::DefaultBodyLimit;
use axum::http::header;
use axum::middleware;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// The OpenAPI document, served at /openapi.json.
const OPENAPI: &str = include_str!("../../../docs/openapi.json");
/// The reports' JSON Schema, served beside it at /report.schema.json (the OpenAPI document
/// refers to it by that relative name, as it does in docs/).
const REPORT_SCHEMA: &str = include_str!("../../../docs/report.schema.json");

/// The server's state and routes for `opts`, without a socket: `run` serves it, and tests
/// and the fuzz target drive it directly. Creates ROOT/results.
pub fn app(opts: &Options) -> anyhow::Result<Router> {
    if opts.token.as_ref().is_some_and(|t| t.trim().is_empty()) {
        bail!("--token (or ORGAN_TOKEN) is empty or blank: give a secret, or leave both unset to serve on loopback without one");
    }
    if !opts.addr.ip().is_loopback() && opts.token.is_none() {
        bail!("--addr {}: not a loopback address; serving beyond this machine requires --token", opts.addr);
    }
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    if !opts.addr.ip().is_unspecified() {
        hosts.push(opts.addr.ip().to_string());
    }
    for h in &opts.allow_hosts {
        let name = h.trim().to_ascii_lowercase();
        let name = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(&name).to_owned();
        let plain = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
        let plain = plain || name.parse::<std::net::Ipv6Addr>().is_ok();
        if !plain {
            bail!("--allow-host {h:?}: give a host name or address, without scheme, port or path");
        }
        hosts.push(name);
    }
    let root = opts.root.canonicalize().with_context(|| format!("--root {}: cannot resolve", opts.root.display()))?;
    if !root.is_dir() {
        bail!("--root {}: not a directory", root.display());
    }
    std::fs::create_dir_all(root.join(RESULTS))
        .with_context(|| format!("{}: cannot create {RESULTS}/", root.display()))?;
    if !std::fs::symlink_metadata(root.join(RESULTS)).is_ok_and(|m| m.is_dir()) {
        bail!("{}: {RESULTS} must be a directory, not a symlink", root.display());
    }
    let state = Arc::new(AppState {
        root,
        token: opts.token.clone(),
        exe: std::env::current_exe().context("cannot locate the organ executable")?,
        permits: Semaphore::new(opts.jobs.max(1)),
        jobs: Mutex::new(HashMap::new()),
        hosts,
        inspects: Arc::new(Semaphore::new(MAX_INSPECTS)),
        walks: Arc::new(Semaphore::new(1)),
        inspect_timeout: opts.inspect_timeout,
        inspect_max_bytes: opts.inspect_max_bytes,
        allow_remote: opts.allow_remote,
        job_timeout: opts.job_timeout.filter(|t| !t.is_zero()),
        job_retention: opts.job_retention,
        max_finished_jobs: opts.max_finished_jobs.max(1),
        sweeping: Default::default(),
        remote: opts.remote.clone(),
    });
    let api = Router::new()
        .route("/models", get(files::models))
        .route("/inspect", get(inspect::inspect))
        .route("/measure", post(operations::measure))
        .route("/diff", post(operations::diff))
        .route("/check", post(operations::check))
        .route("/dissect", post(surgery::dissect))
        .route("/assemble", post(surgery::assemble))
        .route("/graft", post(surgery::graft))
        .route("/moe", post(surgery::moe))
        .route("/purify", post(surgery::purify))
        .route("/eval", post(operations::eval))
        .route("/sensitivity", post(quantize::sensitivity))
        .route("/recipe", post(quantize::recipe))
        .route("/quantize", post(quantize::quantize))
        .route("/experts-extract", post(surgery::experts_extract))
        .route("/experts-prune", post(surgery::experts_prune))
        .route("/layers", post(layers::layers))
        .route("/lora-merge", post(lora::merge))
        .route("/lora-extract", post(lora::extract))
        .route("/merge", post(merge::merge))
        .route("/meta", post(meta::meta))
        .route("/jobs", get(results::jobs))
        .route("/jobs/{id}", get(results::job_status).delete(retention::job_delete))
        .route("/jobs/{id}/result", get(results::job_result))
        .route("/jobs/{id}/events", get(results::job_events))
        .route("/results/{*path}", get(files::download))
        .layer(middleware::from_fn_with_state(state.clone(), auth::auth));
    let mut app = Router::new()
        .route("/health", get(health))
        .route("/api/health", get(health))
        .route("/openapi.json", get(|| async { ([(header::CONTENT_TYPE, "application/json")], OPENAPI) }))
        .route("/report.schema.json", get(|| async { ([(header::CONTENT_TYPE, "application/json")], REPORT_SCHEMA) }))
        .nest("/api", api)
        .layer(DefaultBodyLimit::max(opts.max_body))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(opts.body_timeout))
        .with_state(state.clone());
    if let Some(dir) = web_dir(opts) {
        let served = tower_http::services::ServeDir::new(dir);
        app = app.fallback_service(served).layer(middleware::from_fn(auth::isolation_headers));
    } else {
        // Without the app, `GET /` says what is served here instead of an empty 404.
        app = app.route("/", get(|| async { axum::response::Html(INDEX) }));
    }
    // Last, so it wraps everything, the app's files included.
    Ok(app.layer(middleware::from_fn_with_state(state, auth::guard)))
}

/// `GET /` when the browser app is not served (`--web`): what this server is, and where its
/// API is described.
const INDEX: &str = concat!(
    "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><title>organ serve</title>",
    "<h1>organ serve ",
    env!("CARGO_PKG_VERSION"),
    "</h1><p>The HTTP API of organ: POST a job under <code>/api/</code> (measure, diff, check, eval, ",
    "sensitivity, recipe, dissect, assemble, graft, moe, purify, experts-extract, experts-prune, layers, lora-merge, lora-extract, merge, ",
    "meta), then ",
    "follow it at <code>/api/jobs/{id}</code>. Every route and field: <a href=\"/openapi.json\">/openapi.json</a>; ",
    "the reports' schema: <a href=\"/report.schema.json\">/report.schema.json</a>; health: ",
    "<a href=\"/health\">/health</a>.</p><p>The browser app is served here with <code>organ serve --web DIR</code>.</p>",
    "</html>\n"
);

async fn health() -> Json<Value> {
    Json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

#[cfg(test)]
mod tests {
    /// Every `/api` route the router serves, with its methods, is in docs/openapi.json, and
    /// every `/api` path there is served: a new endpoint cannot go undocumented.
    #[test]
    fn openapi_documents_every_route() {
        let doc: serde_json::Value = serde_json::from_str(super::OPENAPI).unwrap();
        let src = include_str!("router.rs");
        let start = src.find("let api = Router::new()").unwrap();
        let end = start + src[start..].find(".layer(").unwrap();
        let routes = |text: &str, prefix: &str| -> Vec<(String, Vec<&'static str>)> {
            (text.lines().filter_map(|l| l.trim().strip_prefix(".route(\"")))
                .map(|l| {
                    let path = format!("{prefix}{}", &l[..l.find('"').unwrap()]).replace("{*", "{");
                    let methods =
                        ["get", "post", "delete"].into_iter().filter(|m| l.contains(&format!("{m}("))).collect();
                    (path, methods)
                })
                .collect()
        };
        let mut routed = routes(&src[start..end], "/api");
        routed.extend(routes(&src[end..], ""));
        routed.retain(|(p, _)| p.starts_with("/api/"));
        assert!(routed.len() > 10, "the routes are read from router.rs: {routed:?}");
        for (path, methods) in &routed {
            assert!(!methods.is_empty(), "{path}: no method read");
            for m in methods {
                assert!(doc["paths"][path][m].is_object(), "docs/openapi.json does not document {m} {path}");
            }
        }
        let paths = doc["paths"].as_object().unwrap();
        for p in paths.keys().filter(|p| p.starts_with("/api/")) {
            assert!(routed.iter().any(|(r, _)| r == p), "docs/openapi.json documents {p}, which is not routed");
        }
    }
}
