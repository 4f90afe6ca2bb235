//! `organ serve`: every operation over HTTP (axum + tokio), safe on a shared box.
//!
//! - Paths in requests are relative to `--root` and confined to it (no `..`, no absolute
//!   paths, no symlink leading out; "missing" and "leads outside" get the same answer).
//! - Quick reads (health, models, inspect) answer at once. Long operations (measure,
//!   diff, check, eval, sensitivity, recipe, dissect, assemble, graft, moe, purify,
//!   experts-extract, experts-prune, layers, lora-merge, lora-extract, merge, meta) are
//!   jobs: each runs `organ` itself as a child process (argv, never a shell) under a
//!   semaphore of `--jobs` permits, writing into `ROOT/results/JOB/` through the CLI's
//!   atomic writers. Cancelling kills the child and removes the job's directory, so
//!   nothing partial remains.
//! - Each child gets `ORGAN_CONFINE=ROOT` (crate::input): every model file it opens is
//!   checked again, on the opened descriptor, to lie under the root (a file swapped for a
//!   symlink between the request and the job is refused), and the parent-death signal, so
//!   killing the server kills its children. It runs with `--progress jsonl`: its progress
//!   and its error come back as typed events (crate::progress), not as text to parse.
//! - Job ids are 128 random bits (hex): unguessable, never reused across restarts; a job's
//!   directory is created new (never reused), and only that directory is ever removed.
//! - Loopback by default; any other address needs `--token`, sent as `Authorization:
//!   Bearer T` (an empty or blank token is refused). Request bodies are capped
//!   (`--max-body`).
//! - Every request must name this server in `Host` (localhost, 127.0.0.1, [::1], the
//!   address it listens on or was reached at, or an `--allow-host` name), against DNS
//!   rebinding (421 otherwise); browser requests from another site (`Origin` not such a
//!   host, or `Sec-Fetch-Site: cross-site`) get 403.
//! - Nothing waits forever: headers, bodies and idle connections time out, connections are
//!   capped, inspect runs as a child (`organ inspect --json`) under a semaphore and a
//!   timeout, and the model listing has a timeout.
//! - A build of the browser app (`--web DIR`, default `./dist`) is served at `/` with
//!   COOP/COEP headers, so its worker pool runs.
//!
//! The modules, by what they define: [`router`] the routes and the state behind them
//! ([`app`]); [`accept`] the connection loop and its timeouts; [`auth`] the Host, Origin and
//! token checks; [`files`] paths under the root, the model listing and downloads;
//! [`inspect`] inspect as a child; [`operations`], [`quantize`], [`surgery`], [`layers`], [`lora`], [`merge`] and [`meta`]
//! requests turned into `organ` argv; [`jobs`] the job table and each job's run; [`results`] a job's
//! status and report sent (streamed from disk); [`retention`] finished jobs deleted and
//! expired; [`child`] a child `organ` process and its event stream.

mod accept;
mod auth;
mod child;
mod files;
mod flags;
mod inspect;
mod job;
mod jobs;
mod layers;
mod lora;
mod merge;
mod meta;
mod operations;
mod outputs;
mod quantize;
mod results;
mod retention;
mod router;
mod surgery;

pub use flags::run_args;
pub use router::app;

use crate::location::Location;
use anyhow::Context;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

pub struct Options {
    pub root: PathBuf,
    pub addr: SocketAddr,
    pub token: Option<String>,
    pub jobs: usize,
    pub web: Option<PathBuf>,
    pub max_body: usize,
    /// Host names (besides localhost, 127.0.0.1, [::1] and the listening address) that
    /// requests may name in `Host` and `Origin`.
    pub allow_hosts: Vec<String>,
    /// The longest an inspect (or the model listing) may take, waiting for its turn included.
    pub inspect_timeout: Duration,
    /// The most of an inspect's JSON the server holds (a large vocabulary's is tens of MB);
    /// a larger answer is refused, not cut.
    pub inspect_max_bytes: u64,
    /// The longest a client may take to send a request's headers (also: how long an idle
    /// kept-alive connection stays open).
    pub header_timeout: Duration,
    /// The longest a client may take to send a request's body.
    pub body_timeout: Duration,
    /// A connection with no byte moving either way for this long is closed.
    pub idle_timeout: Duration,
    /// Connections served at once; more wait to be accepted.
    pub max_connections: usize,
    /// Model arguments may be URLs, fetched by the server (`--allow-remote`; off by
    /// default: a shared API must not fetch whatever a request names).
    pub allow_remote: bool,
    /// The longest a job may run (its wait in the queue not counted); past it its process
    /// group is killed and the job fails saying so. None: no limit.
    pub job_timeout: Option<Duration>,
    /// How long a finished job (its entry and its results) is kept.
    pub job_retention: Duration,
    /// The most finished jobs kept; beyond, the oldest go first.
    pub max_finished_jobs: usize,
    /// Which URLs, then: the schemes, and the destinations beyond the public Internet
    /// (`--allow-remote-schemes`, `--allow-remote-private`, `--allow-remote-to`).
    pub remote: crate::remote::policy::Policy,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            root: PathBuf::from("."),
            addr: SocketAddr::from(([127, 0, 0, 1], 8935)),
            token: None,
            jobs: 2,
            web: None,
            max_body: 1 << 20,
            allow_hosts: Vec::new(),
            inspect_timeout: Duration::from_secs(60),
            inspect_max_bytes: 128 << 20,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(300),
            max_connections: 512,
            allow_remote: false,
            job_timeout: Some(Duration::from_secs(48 * 3600)),
            job_retention: Duration::from_secs(24 * 3600),
            max_finished_jobs: 1000,
            remote: crate::remote::policy::Policy {
                schemes: vec!["https".into(), "http".into()],
                ..Default::default()
            },
        }
    }
}

/// Inspects running at once (each is a child process); more wait for their turn.
const MAX_INSPECTS: usize = 4;

/// Where job outputs go, under the root.
const RESULTS: &str = "results";

/// What every handler shares: the root, the token, the job table and the semaphores.
struct AppState {
    root: PathBuf,
    token: Option<String>,
    exe: PathBuf,
    permits: Semaphore,
    jobs: Mutex<HashMap<String, Arc<job::Job>>>,
    /// Lowercased host names and addresses a request may name (see `auth::guard`).
    hosts: Vec<String>,
    inspects: Arc<Semaphore>,
    /// The model listing's one turn (held by the walk itself, so a hung walk blocks the
    /// next ones, which time out, rather than pinning a thread each).
    walks: Arc<Semaphore>,
    inspect_timeout: Duration,
    inspect_max_bytes: u64,
    /// [`Options::allow_remote`].
    allow_remote: bool,
    /// [`Options::job_timeout`], [`Options::job_retention`], [`Options::max_finished_jobs`].
    job_timeout: Option<Duration>,
    job_retention: Duration,
    max_finished_jobs: usize,
    /// The periodic sweep of finished jobs has been started (retention::keep_sweeping).
    sweeping: std::sync::atomic::AtomicBool,
    /// [`Options::remote`].
    remote: crate::remote::policy::Policy,
}

/// An error answer: a status and a plain sentence, as JSON `{"error": …}`.
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

fn bad(msg: impl std::fmt::Display) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, msg.to_string())
}

/// The first 80 characters of a name from a request, for its error.
fn shown(name: &str) -> String {
    name.chars().take(80).collect()
}

fn internal(msg: impl std::fmt::Display) -> ApiError {
    ApiError(StatusCode::INTERNAL_SERVER_ERROR, msg.to_string())
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let keep = [StatusCode::PAYLOAD_TOO_LARGE, StatusCode::UNSUPPORTED_MEDIA_TYPE];
        let status = if keep.contains(&r.status()) { r.status() } else { StatusCode::BAD_REQUEST };
        ApiError(status, format!("request body: {}", r.body_text()))
    }
}

type ApiResult<T> = Result<T, ApiError>;

impl AppState {
    /// A request's model path, resolved under the root: an existing regular file or
    /// directory. Missing and leading outside the root get the same answer, so a client
    /// cannot probe what exists outside.
    fn path(&self, rel: &str) -> ApiResult<PathBuf> {
        // A URL where only a path is taken: its credentials are not repeated either.
        let redacted = |ApiError(code, msg)| ApiError(code, crate::remote::policy::redact(&msg));
        let real = files::resolve(&self.root, rel, "no such model under the root").map_err(redacted)?;
        let meta =
            std::fs::metadata(&real).map_err(|_| redacted(files::not_found(rel, "no such model under the root")))?;
        if !meta.is_file() && !meta.is_dir() {
            return Err(bad(format!("path {rel:?}: not a regular file or directory")));
        }
        Ok(real)
    }

    /// A request's model argument: a path under the root ([`Self::path`]), or a URL when
    /// the server was started with `--allow-remote`, of a scheme it allows, without
    /// credentials, and not at a literal address it does not read from (names are checked
    /// when the job connects: docs/api.md). A URL's credentials are never repeated.
    fn model(&self, rel: &str) -> ApiResult<PathBuf> {
        let p = std::path::Path::new(rel);
        if let Location::Local(_) = Location::of(p) {
            return self.path(rel);
        }
        let shown = crate::remote::policy::redact(rel);
        if !self.allow_remote {
            return Err(bad(format!(
                "path {shown:?}: a URL, and this server reads no remote models (start it with --allow-remote)"
            )));
        }
        let u = url::Url::parse(rel).map_err(|e| bad(format!("{shown}: not a valid URL ({e})")))?;
        self.remote.check_url(&u).map_err(|e| bad(format!("{shown}: {e}")))?;
        crate::remote::parse(p).map_err(|e| bad(crate::remote::policy::redact(&format!("{e:#}"))))?;
        Ok(p.to_owned())
    }

    /// A message with the server's root directory written as ROOT (clients name paths
    /// relative to it; where it lives on the box is none of their business).
    fn hide_root(&self, msg: &str) -> String {
        msg.replace(&self.root.display().to_string(), "ROOT")
    }

    fn job(&self, id: &str) -> ApiResult<Arc<job::Job>> {
        let jobs = self.jobs.lock().map_err(|_| internal("job table poisoned"))?;
        jobs.get(id).cloned().ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("no job {id:?}")))
    }
}

/// The browser app's build to serve at `/`, if there is one.
fn web_dir(opts: &Options) -> Option<PathBuf> {
    opts.web.clone().or_else(|| Some(PathBuf::from("dist"))).filter(|d| d.join("index.html").is_file())
}

/// A server lives long and works in bursts. With transparent huge pages, memory it freed
/// after a burst stays resident in 2 MiB pieces that a quiet server never gives back
/// (`api::memory`: +24 MiB over idle after 8 concurrent large inspects; +5 without). The
/// server turns them off for itself; its children turn them back on
/// ([`child::child_command`]), as measurement is faster with them.
fn no_huge_pages() {
    // SAFETY: prctl with PR_SET_THP_DISABLE takes integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

pub fn run(opts: Options) -> anyhow::Result<()> {
    no_huge_pages();
    let app = app(&opts)?;
    let web = web_dir(&opts);
    let root = opts.root.canonicalize()?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(opts.addr).await.with_context(|| format!("cannot bind {}", opts.addr))?;
        let local = listener.local_addr()?;
        // The announcement is for whoever started us; if they closed our stdout, serve anyway
        // (println! would panic on the broken pipe).
        let mut banner = format!("organ serve: listening on http://{local} (root {})\n", root.display());
        if let Some(d) = &web {
            banner += &format!("organ serve: the browser app from {} at http://{local}/\n", d.display());
        }
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(banner.as_bytes()).and_then(|()| out.flush());
        drop(out);
        accept::accept_loop(listener, app, &opts).await
    })
}
