//! `organ serve`: every operation over HTTP (axum + tokio), safe on a shared box.
//!
//! - Paths in requests are relative to `--root` and confined to it (no `..`, no absolute
//!   paths, no symlink leading out; "missing" and "leads outside" get the same answer).
//! - Quick reads (health, models, inspect) answer at once. Long operations (measure,
//!   dissect, assemble, graft, purify) are jobs: each runs `organ` itself as a child
//!   process (argv, never a shell) under a semaphore of `--jobs` permits, writing into
//!   `ROOT/results/JOB/` through the CLI's atomic writers. Cancelling kills the child and
//!   removes the job's directory, so nothing partial remains.
//! - Each child gets `ORGAN_CONFINE=ROOT` (crate::input): every model file it opens is
//!   checked again, on the opened descriptor, to lie under the root (a file swapped for a
//!   symlink between the request and the job is refused), and the parent-death signal, so
//!   killing the server kills its children.
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

use anyhow::{bail, Context};
use axum::body::Body;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use tokio::sync::{watch, Semaphore};

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
        }
    }
}

/// Inspects running at once (each is a child process); more wait for their turn.
const MAX_INSPECTS: usize = 4;

/// The OpenAPI document, served at /openapi.json.
const OPENAPI: &str = include_str!("../../docs/openapi.json");
/// Where job outputs go, under the root.
const RESULTS: &str = "results";

#[derive(Clone, Debug, serde::Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum JobState {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

#[derive(Clone, Debug, serde::Serialize)]
struct JobStatus {
    id: String,
    kind: &'static str,
    state: JobState,
    /// Units done and total (tensors, for measure), when the operation reports them.
    progress: Option<(u64, u64)>,
    /// The operation's output files, relative to the root (download: /api/results/…).
    outputs: Vec<String>,
    /// measure: the report (the same JSON as `organ measure --json`).
    result: Option<Value>,
    error: Option<String>,
}

struct Job {
    status: watch::Sender<JobStatus>,
    cancel: tokio::sync::Notify,
}

struct AppState {
    root: PathBuf,
    token: Option<String>,
    exe: PathBuf,
    permits: Semaphore,
    jobs: Mutex<HashMap<String, Arc<Job>>>,
    /// Lowercased host names and addresses a request may name (see `guard`).
    hosts: Vec<String>,
    inspects: Semaphore,
    /// The model listing's one turn (held by the walk itself, so a hung walk blocks the
    /// next ones, which time out, rather than pinning a thread each).
    walks: Arc<Semaphore>,
    inspect_timeout: Duration,
    inspect_max_bytes: u64,
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
        let real = resolve(&self.root, rel, "no such model under the root")?;
        let meta = std::fs::metadata(&real).map_err(|_| not_found(rel, "no such model under the root"))?;
        if !meta.is_file() && !meta.is_dir() {
            return Err(bad(format!("path {rel:?}: not a regular file or directory")));
        }
        Ok(real)
    }

    /// A message with the server's root directory written as ROOT (clients name paths
    /// relative to it; where it lives on the box is none of their business).
    fn hide_root(&self, msg: &str) -> String {
        msg.replace(&self.root.display().to_string(), "ROOT")
    }

    fn job(&self, id: &str) -> ApiResult<Arc<Job>> {
        let jobs = self.jobs.lock().map_err(|_| internal("job table poisoned"))?;
        jobs.get(id).cloned().ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("no job {id:?}")))
    }
}

fn not_found(rel: &str, what: &str) -> ApiError {
    ApiError(StatusCode::NOT_FOUND, format!("path {rel:?}: {what}"))
}

/// `rel` under `base` (canonical): a relative path without `..` (else 400), that exists
/// and, symlinks resolved, lies under `base` (else 404 with `what`, the same either way).
fn resolve(base: &Path, rel: &str, what: &str) -> ApiResult<PathBuf> {
    let p = Path::new(rel);
    if rel.is_empty() || p.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
        return Err(bad(format!("path {rel:?} must be relative, without '..'")));
    }
    match base.join(p).canonicalize() {
        Ok(real) if real.starts_with(base) => Ok(real),
        _ => Err(not_found(rel, what)),
    }
}

/// 128 random bits from the kernel, in hex: a job id nobody can guess, and no restart
/// repeats.
fn random_id() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// `organ` itself as a child for a request: argv (never a shell), confined to the root
/// (crate::input), its stdin closed, killed when dropped and when the server dies.
fn child_command(s: &AppState) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&s.exe);
    cmd.env(crate::input::CONFINE_ENV, &s.root)
        .env_remove("ORGAN_CACHE")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let parent = rustix::process::getpid();
    // SAFETY: between fork and exec this runs only two raw system calls (prctl, getppid)
    // through rustix, which allocate nothing and take no lock. The death signal follows the
    // thread that forks: a tokio worker thread, which lives as long as the server.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The server may have died before the prctl: then nobody is left to signal us.
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(3)); // ESRCH
            }
            Ok(())
        });
    }
    cmd
}

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
        inspects: Semaphore::new(MAX_INSPECTS),
        walks: Arc::new(Semaphore::new(1)),
        inspect_timeout: opts.inspect_timeout,
        inspect_max_bytes: opts.inspect_max_bytes,
    });
    let api = Router::new()
        .route("/models", get(models))
        .route("/inspect", get(inspect))
        .route("/measure", post(measure))
        .route("/dissect", post(dissect))
        .route("/assemble", post(assemble))
        .route("/graft", post(graft))
        .route("/purify", post(purify))
        .route("/jobs/{id}", get(job_status))
        .route("/jobs/{id}", delete(job_cancel))
        .route("/jobs/{id}/events", get(job_events))
        .route("/results/{*path}", get(download))
        .layer(middleware::from_fn_with_state(state.clone(), auth));
    let mut app = Router::new()
        .route("/health", get(health))
        .route("/api/health", get(health))
        .route("/openapi.json", get(|| async { ([(header::CONTENT_TYPE, "application/json")], OPENAPI) }))
        .nest("/api", api)
        .layer(DefaultBodyLimit::max(opts.max_body))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(opts.body_timeout))
        .with_state(state.clone());
    if let Some(dir) = web_dir(opts) {
        let files = tower_http::services::ServeDir::new(dir);
        app = app.fallback_service(files).layer(middleware::from_fn(isolation_headers));
    }
    // Last, so it wraps everything, the app's files included.
    Ok(app.layer(middleware::from_fn_with_state(state, guard)))
}

/// The browser app's build to serve at `/`, if there is one.
fn web_dir(opts: &Options) -> Option<PathBuf> {
    opts.web.clone().or_else(|| Some(PathBuf::from("dist"))).filter(|d| d.join("index.html").is_file())
}

pub fn run(opts: Options) -> anyhow::Result<()> {
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
        accept_loop(listener, app, &opts).await
    })
}

/// The address a connection was accepted on (a request extension), so `guard` accepts
/// `Host` naming it when the server listens on every address.
#[derive(Clone, Copy)]
struct LocalAddr(SocketAddr);

/// Serves connections as hyper's HTTP/1 (rather than axum::serve, which cannot time out a
/// client): at most `max_connections` at once (the rest wait in the kernel's backlog), a
/// header read timeout (also the keep-alive idle limit), and a watchdog closing any
/// connection on which nothing has moved for `idle_timeout`.
async fn accept_loop(listener: tokio::net::TcpListener, app: Router, opts: &Options) -> anyhow::Result<()> {
    let slots = Arc::new(Semaphore::new(opts.max_connections.max(1)));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(opts.header_timeout);
    let idle = opts.idle_timeout;
    loop {
        let slot = slots.clone().acquire_owned().await.context("connection slots closed")?;
        let (tcp, _peer) = match listener.accept().await {
            Ok(c) => c,
            Err(_) => {
                // Out of descriptors, or a connection reset before it was accepted: wait
                // a little rather than spin, and carry on.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let local = tcp.local_addr().ok();
        let last = Arc::new(AtomicU64::new(now_ms()));
        let io = hyper_util::rt::TokioIo::new(Watched { inner: tcp, last: last.clone() });
        let app = app.clone();
        let svc = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            if let Some(l) = local {
                req.extensions_mut().insert(LocalAddr(l));
            }
            tower_service::Service::call(&mut app.clone(), req)
        });
        let conn = http.serve_connection(io, svc);
        tokio::spawn(async move {
            let _slot = slot;
            tokio::pin!(conn);
            let watchdog = async {
                loop {
                    let quiet = Duration::from_millis(now_ms().saturating_sub(last.load(Ordering::Relaxed)));
                    if quiet >= idle {
                        return;
                    }
                    tokio::time::sleep(idle - quiet).await;
                }
            };
            // Either the connection ends, or it is dropped (closed) by the watchdog.
            tokio::select! {
                _ = &mut conn => {}
                () = watchdog => {}
            }
        });
    }
}

/// Milliseconds on a monotonic clock.
fn now_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_millis() as u64
}

/// A socket that notes when bytes last moved, for the idle watchdog.
struct Watched {
    inner: tokio::net::TcpStream,
    last: Arc<AtomicU64>,
}

impl tokio::io::AsyncRead for Watched {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.last.store(now_ms(), Ordering::Relaxed);
        }
        r
    }
}

impl tokio::io::AsyncWrite for Watched {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.last.store(now_ms(), Ordering::Relaxed);
        }
        r
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The host part of a `Host` header or an origin's authority, lowercased, without port or
/// IPv6 brackets; None when it is not of that form.
fn host_part(authority: &str) -> Option<String> {
    let a = authority.trim().to_ascii_lowercase();
    let host = if let Some(rest) = a.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        if !(tail.is_empty() || tail.strip_prefix(':').is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))) {
            return None;
        }
        h.to_owned()
    } else {
        match a.split_once(':') {
            Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h.to_owned(),
            Some(_) => return None,
            None => a,
        }
    };
    (!host.is_empty()).then_some(host)
}

/// Whether `host` (from host_part) names this server.
fn host_allowed(s: &AppState, host: &str, local: Option<IpAddr>) -> bool {
    if s.hosts.iter().any(|h| h == host) {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(ip) => local == Some(ip) || s.hosts.iter().any(|h| h.parse::<IpAddr>().ok() == Some(ip)),
        Err(_) => false,
    }
}

/// Against DNS rebinding and cross-site requests, on every request: `Host` must name this
/// server (else 421); a browser request from another site gets 403 (an `Origin` that is not
/// http(s)://ALLOWED-HOST[:port], or `Sec-Fetch-Site: cross-site`), except a plain
/// navigation (a link followed to the app's page, which the other site cannot read).
async fn guard(State(s): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if let Err(e) = check_site(&s, &req) {
        return e.into_response();
    }
    next.run(req).await
}

fn check_site(s: &AppState, req: &Request) -> ApiResult<()> {
    let local = req.extensions().get::<LocalAddr>().map(|l| l.0.ip());
    let header = |name: &str| req.headers().get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let host = header("host").or_else(|| req.uri().authority().map(|a| a.to_string()));
    let Some(host) = host else {
        return Err(ApiError(StatusCode::MISDIRECTED_REQUEST, "no Host header: name this server in Host".into()));
    };
    if !host_part(&host).is_some_and(|h| host_allowed(s, &h, local)) {
        let msg = format!(
            "Host {host:?} does not name this server: use localhost, 127.0.0.1 or [::1], or start it with --allow-host NAME"
        );
        return Err(ApiError(StatusCode::MISDIRECTED_REQUEST, msg));
    }
    let navigation = matches!(req.method(), &axum::http::Method::GET | &axum::http::Method::HEAD)
        && header("sec-fetch-mode").as_deref() == Some("navigate");
    if navigation {
        return Ok(());
    }
    if let Some(origin) = header("origin") {
        let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
        let ok = authority.filter(|a| !a.contains('/')).and_then(host_part).is_some_and(|h| host_allowed(s, &h, local));
        if !ok {
            let msg = format!("cross-site request refused: Origin {origin:?} is not this server");
            return Err(ApiError(StatusCode::FORBIDDEN, msg));
        }
    }
    if header("sec-fetch-site").as_deref() == Some("cross-site") {
        return Err(ApiError(StatusCode::FORBIDDEN, "cross-site request refused (Sec-Fetch-Site: cross-site)".into()));
    }
    Ok(())
}

async fn health() -> Json<Value> {
    Json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

/// COOP/COEP on every answer, so the app's page is cross-origin isolated (threads).
async fn isolation_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-embedder-policy", HeaderValue::from_static("require-corp"));
    res
}

async fn auth(State(s): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if let Some(token) = &s.token {
        let given = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let ok = given
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes()));
        if !ok {
            let msg = if given.is_none() { "missing token: send Authorization: Bearer TOKEN" } else { "wrong token" };
            return ApiError(StatusCode::UNAUTHORIZED, msg.into()).into_response();
        }
    }
    next.run(req).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Every model under the root (split models once, organ directories whole), excluding
/// job outputs.
///
/// The walk runs on a blocking thread, one at a time, and the answer gives up after the
/// inspect timeout (a walk stuck on a hung filesystem holds one thread, not the server).
async fn models(State(s): State<Arc<AppState>>) -> ApiResult<Json<Value>> {
    let root = s.root.clone();
    let limit = s.inspect_timeout;
    let busy = || ApiError(StatusCode::SERVICE_UNAVAILABLE, format!("listing the models took longer than {limit:?}"));
    let deadline = tokio::time::Instant::now() + limit;
    let turn = tokio::time::timeout_at(deadline, s.walks.clone().acquire_owned())
        .await
        .map_err(|_| busy())?
        .map_err(internal)?;
    let walk = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        // No model at all is an empty list, not an error.
        let paths = crate::cmd::measure::discover(&root).unwrap_or_default();
        let mut out = Vec::new();
        for p in paths {
            let rel = p.strip_prefix(&root).unwrap_or(&p);
            if rel.starts_with(RESULTS) || p == root {
                continue;
            }
            let (kind, files) = if p.is_dir() {
                ("organ_dir", vec![p.join("manifest.json")])
            } else if let Some(sh) = crate::source::split_shards(&p) {
                ("split", sh)
            } else {
                ("gguf", vec![p.clone()])
            };
            let bytes: u64 = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
            out.push(json!({ "path": rel.to_string_lossy(), "kind": kind, "files": files.len(), "bytes": bytes }));
        }
        out
    });
    let found = tokio::time::timeout_at(deadline, walk).await.map_err(|_| busy())?.map_err(internal)?;
    Ok(Json(json!({ "models": found })))
}

#[derive(Deserialize)]
struct PathQuery {
    path: String,
}

/// `organ inspect --json PATH`, run as a child: at most MAX_INSPECTS at once, and killed
/// after the inspect timeout (waiting for a turn counts), so a file that blocks its reader
/// (a FIFO, a hung mount) costs one child for a while, never a server thread for ever.
async fn inspect(
    State(s): State<Arc<AppState>>,
    q: Result<Query<PathQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = q.map_err(|e| bad(format!("query: {}", e.body_text())))?;
    let path = s.path(&q.path)?;
    let rel = q.path;
    let limit = s.inspect_timeout;
    let deadline = tokio::time::Instant::now() + limit;
    let _turn = tokio::time::timeout_at(deadline, s.inspects.acquire()).await.map_err(|_| {
        ApiError(StatusCode::SERVICE_UNAVAILABLE, format!("{rel}: too many inspects waiting; try again later"))
    })?;
    let mut cmd = child_command(&s);
    cmd.arg("inspect").arg("--json").arg(&path);
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| internal(format!("cannot start organ: {e}")))?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(internal("organ inspect: no output pipes"));
    };
    let max = s.inspect_max_bytes;
    let run = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (mut stdout, mut stderr) = (stdout.take(max.saturating_add(1)), stderr.take(1 << 16));
        let read_out = async {
            let r = stdout.read_to_end(&mut out).await;
            // Over the cap, the child would block on its next write: stop it now.
            if out.len() as u64 > max {
                let _ = child.start_kill();
            }
            r
        };
        let (o, _) = tokio::join!(read_out, stderr.read_to_end(&mut err));
        let st = child.wait().await;
        (o.and(st), out, err)
    };
    let (status, out, err) = match tokio::time::timeout_at(deadline, run).await {
        Ok(r) => r,
        Err(_) => {
            let _ = child.kill().await;
            let msg = format!("{rel}: inspect took longer than {limit:?} and was stopped");
            return Err(ApiError(StatusCode::GATEWAY_TIMEOUT, msg));
        }
    };
    if out.len() as u64 > max {
        let msg = format!("{rel}: its inspect JSON is over {max} bytes, more than this server returns; run organ inspect --json on the machine itself");
        return Err(ApiError(StatusCode::UNPROCESSABLE_ENTITY, msg));
    }
    match status {
        Ok(st) if st.success() => Ok(([(header::CONTENT_TYPE, "application/json")], out).into_response()),
        Ok(_) => {
            let err = String::from_utf8_lossy(&err);
            let line = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("organ inspect failed");
            let msg = line.strip_prefix("organ: error: ").unwrap_or(line);
            Err(ApiError(StatusCode::UNPROCESSABLE_ENTITY, s.hide_root(&format!("{rel}: {msg}"))))
        }
        Err(e) => Err(internal(format!("{rel}: organ inspect: {e}"))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MeasureReq {
    paths: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DissectReq {
    path: String,
    #[serde(default)]
    measure: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AssembleReq {
    path: String,
    /// Output file name (inside the job's results directory).
    #[serde(default)]
    out: Option<String>,
    #[serde(default)]
    split_max_size: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Select {
    #[serde(default)]
    layers: Option<String>,
    #[serde(default)]
    types: Vec<String>,
    #[serde(default)]
    names: Vec<String>,
}

impl Select {
    /// Appends --layers, --type and --name as the CLI takes them.
    fn args(&self, a: &mut Vec<std::ffi::OsString>) {
        flag(a, "--layers", self.layers.as_ref());
        for t in &self.types {
            flag(a, "--type", Some(t));
        }
        for n in &self.names {
            flag(a, "--name", Some(n));
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GraftReq {
    donor: String,
    recipient: String,
    #[serde(default)]
    out: Option<String>,
    #[serde(flatten)]
    select: Select,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    split_max_size: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PurifyReq {
    path: String,
    method: String,
    #[serde(default)]
    out: Option<String>,
    #[serde(flatten)]
    select: Select,
    #[serde(default)]
    strength: Option<f64>,
    #[serde(default)]
    keep: Option<f64>,
    #[serde(default, rename = "as")]
    as_type: Option<String>,
    #[serde(default)]
    only_if_improves: bool,
    #[serde(default)]
    split_max_size: Option<String>,
}

/// An output name for a job's directory: one plain file name.
fn out_name(name: Option<&str>, default: &str) -> ApiResult<String> {
    let n = name.unwrap_or(default);
    let ok = !n.is_empty()
        && n.len() <= 200
        && !n.starts_with('.')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if !ok {
        return Err(bad(format!("out {n:?}: a plain file name of letters, digits, '.', '-' and '_'")));
    }
    Ok(n.to_owned())
}

/// Starts a job running `organ ARGS`; `outputs` are its output paths relative to the job
/// directory; `report` names a JSON file whose content becomes the job's result.
fn start_job(
    s: &Arc<AppState>,
    kind: &'static str,
    args: impl FnOnce(&Path) -> Vec<std::ffi::OsString>,
    outputs: Vec<String>,
    report: Option<&str>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let id = format!("job-{}", random_id().map_err(|e| internal(format!("cannot draw a job id: {e}")))?);
    let dir = s.root.join(RESULTS).join(&id);
    // New, or an error: a job never writes into (or later removes) a directory it did not
    // create itself.
    std::fs::create_dir(&dir).map_err(|e| internal(format!("{RESULTS}/{id}: cannot create: {e}")))?;
    let argv = args(&dir);
    let status = JobStatus {
        id: id.clone(),
        kind,
        state: JobState::Queued,
        progress: None,
        outputs: Vec::new(),
        result: None,
        error: None,
    };
    let (tx, _) = watch::channel(status.clone());
    let job = Arc::new(Job { status: tx, cancel: tokio::sync::Notify::new() });
    let table = s.jobs.lock().map_err(|_| internal("job table poisoned"));
    match table {
        Ok(mut t) => t.insert(id.clone(), job.clone()),
        Err(e) => {
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
    };
    let s2 = s.clone();
    let report = report.map(|r| dir.join(r));
    tokio::spawn(async move {
        let cancelled = async {
            job.cancel.notified().await;
        };
        tokio::pin!(cancelled);
        let permit = tokio::select! {
            p = s2.permits.acquire() => p.ok(),
            () = &mut cancelled => None,
        };
        let Some(_permit) = permit else {
            let _ = std::fs::remove_dir_all(&dir);
            job.status.send_modify(|st| st.state = JobState::Cancelled);
            return;
        };
        job.status.send_modify(|st| st.state = JobState::Running);
        let mut cmd = child_command(&s2);
        cmd.args(&argv)
            .env("ORGAN_PROGRESS_LINES", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                job.status.send_modify(|st| {
                    st.state = JobState::Failed;
                    st.error = Some(format!("cannot start organ: {e}"));
                });
                return;
            }
        };
        let mut lines = child.stderr.take().map(|e| tokio::io::BufReader::new(e).lines());
        let mut last_error = String::new();
        let exit = loop {
            tokio::select! {
                line = async { match &mut lines { Some(l) => l.next_line().await, None => std::future::pending().await } } => {
                    match line {
                        Ok(Some(l)) => {
                            if let Some(p) = l.strip_prefix("progress ") {
                                let mut it = p.split('/').map(|x| x.trim().parse::<u64>().ok());
                                if let (Some(Some(d)), Some(Some(t))) = (it.next(), it.next()) {
                                    job.status.send_modify(|st| st.progress = Some((d, t)));
                                }
                            } else if !l.trim().is_empty() {
                                last_error = l;
                            }
                        }
                        _ => lines = None,
                    }
                }
                st = child.wait() => break st.ok(),
                () = &mut cancelled => {
                    let _ = child.kill().await;
                    let _ = std::fs::remove_dir_all(&dir);
                    job.status.send_modify(|st| { st.state = JobState::Cancelled; st.outputs.clear(); });
                    return;
                }
            }
        };
        // The process ended: read what is left of its stderr (the error line comes last).
        if let Some(l) = &mut lines {
            while let Ok(Some(line)) = l.next_line().await {
                if !line.trim().is_empty() && !line.starts_with("progress ") {
                    last_error = line;
                }
            }
        }
        if exit.is_some_and(|e| e.success()) {
            let result = match &report {
                Some(p) => std::fs::read(p).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok()),
                None => None,
            };
            let rel = |o: &String| format!("{RESULTS}/{id}/{o}", id = job.status.borrow().id);
            let outs: Vec<String> = outputs.iter().filter(|o| dir.join(o).exists()).map(rel).collect();
            job.status.send_modify(|st| {
                st.state = JobState::Done;
                st.outputs = outs;
                st.result = result;
            });
        } else {
            let _ = std::fs::remove_dir_all(&dir);
            let msg = s2.hide_root(last_error.strip_prefix("organ: error: ").unwrap_or(&last_error));
            job.status.send_modify(|st| {
                st.state = JobState::Failed;
                st.error = Some(if msg.is_empty() { "organ failed".into() } else { msg });
            });
        }
    });
    Ok((StatusCode::ACCEPTED, Json(status)))
}

fn os(p: impl AsRef<std::ffi::OsStr>) -> std::ffi::OsString {
    p.as_ref().to_owned()
}

/// Appends `NAME VALUE` to an argv when there is a value.
fn flag(a: &mut Vec<std::ffi::OsString>, name: &str, value: Option<impl AsRef<std::ffi::OsStr>>) {
    if let Some(v) = value {
        a.extend([os(name), os(v)]);
    }
}

async fn measure(
    State(s): State<Arc<AppState>>,
    body: Result<Json<MeasureReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    if r.paths.is_empty() || r.paths.len() > 1000 {
        return Err(bad("paths: give 1 to 1000 model paths"));
    }
    let paths = r.paths.iter().map(|p| s.path(p)).collect::<ApiResult<Vec<_>>>()?;
    start_job(
        &s,
        "measure",
        |dir| {
            let mut a = vec![os("measure")];
            a.extend(paths.iter().map(os));
            a.extend([os("--summary-only"), os("--no-cache"), os("--json"), os(dir.join("report.json"))]);
            a.extend([os("--csv"), os(dir.join("report.csv")), os("--html"), os(dir.join("report.html"))]);
            a
        },
        vec!["report.json".into(), "report.csv".into(), "report.html".into()],
        Some("report.json"),
    )
}

async fn dissect(
    State(s): State<Arc<AppState>>,
    body: Result<Json<DissectReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let model = s.path(&r.path)?;
    start_job(
        &s,
        "dissect",
        |dir| {
            let mut a = vec![os("dissect"), os(&model), os("--out"), os(dir.join("organs"))];
            if r.measure {
                a.push(os("--measure"));
            }
            a
        },
        vec!["organs".into()],
        None,
    )
}

async fn assemble(
    State(s): State<Arc<AppState>>,
    body: Result<Json<AssembleReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let src = s.path(&r.path)?;
    let out = out_name(r.out.as_deref(), "model.gguf")?;
    let o2 = out.clone();
    start_job(
        &s,
        "assemble",
        move |dir| {
            let mut a = vec![os("assemble"), os(&src), os("--out"), os(dir.join(&o2))];
            flag(&mut a, "--split-max-size", r.split_max_size.as_ref());
            a
        },
        vec![out],
        None,
    )
}

async fn graft(
    State(s): State<Arc<AppState>>,
    body: Result<Json<GraftReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let (donor, recipient) = (s.path(&r.donor)?, s.path(&r.recipient)?);
    let out = out_name(r.out.as_deref(), "graft.gguf")?;
    let o2 = out.clone();
    start_job(
        &s,
        "graft",
        move |dir| {
            let mut a = vec![os("graft"), os("--donor"), os(&donor), os("--recipient"), os(&recipient)];
            if r.dry_run {
                a.push(os("--dry-run"));
            } else {
                a.extend([os("--out"), os(dir.join(&o2))]);
            }
            flag(&mut a, "--split-max-size", r.split_max_size.as_ref());
            r.select.args(&mut a);
            a
        },
        vec![out],
        None,
    )
}

async fn purify(
    State(s): State<Arc<AppState>>,
    body: Result<Json<PurifyReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let model = s.path(&r.path)?;
    if !matches!(r.method.as_str(), "fractal" | "spectral") {
        return Err(bad(format!("method {:?}: use fractal or spectral", r.method)));
    }
    let out = out_name(r.out.as_deref(), "purified.gguf")?;
    let o2 = out.clone();
    start_job(
        &s,
        "purify",
        move |dir| {
            let mut a = vec![os("purify"), os(&model), os("--method"), os(&r.method), os("--out"), os(dir.join(&o2))];
            a.extend([os("--json"), os(dir.join("purify.json"))]);
            flag(&mut a, "--strength", r.strength.map(|x| x.to_string()));
            flag(&mut a, "--keep", r.keep.map(|x| x.to_string()));
            flag(&mut a, "--as", r.as_type.as_ref());
            if r.only_if_improves {
                a.push(os("--only-if-improves"));
            }
            flag(&mut a, "--split-max-size", r.split_max_size.as_ref());
            r.select.args(&mut a);
            a
        },
        vec![out, "purify.json".into()],
        Some("purify.json"),
    )
}

async fn job_status(State(s): State<Arc<AppState>>, UrlPath(id): UrlPath<String>) -> ApiResult<Json<JobStatus>> {
    let job = s.job(&id)?;
    let st = job.status.borrow().clone();
    Ok(Json(st))
}

async fn job_cancel(State(s): State<Arc<AppState>>, UrlPath(id): UrlPath<String>) -> ApiResult<Json<JobStatus>> {
    let job = s.job(&id)?;
    let state = job.status.borrow().state.clone();
    if matches!(state, JobState::Queued | JobState::Running) {
        job.cancel.notify_one();
        // Wait (briefly) for the job to acknowledge, so the answer shows the final state.
        let mut rx = job.status.subscribe();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            rx.wait_for(|st| !matches!(st.state, JobState::Queued | JobState::Running)),
        )
        .await;
    }
    let st = job.status.borrow().clone();
    Ok(Json(st))
}

/// Server-Sent Events: the job's status each time it changes, until it ends.
async fn job_events(State(s): State<Arc<AppState>>, UrlPath(id): UrlPath<String>) -> ApiResult<impl IntoResponse> {
    let rx = s.job(&id)?.status.subscribe();
    let stream = futures_util::stream::unfold((rx, false), |(mut rx, done)| async move {
        if done {
            return None;
        }
        let st = rx.borrow_and_update().clone();
        let end = !matches!(st.state, JobState::Queued | JobState::Running);
        if !end && rx.changed().await.is_err() {
            return None;
        }
        let ev = Event::default().event("status").json_data(&st).unwrap_or_default();
        Some((Ok::<_, std::convert::Infallible>(ev), (rx, end)))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// A job output, streamed from under ROOT/results. Reaching one needs its job's id (128
/// random bits) or, with --token, the token.
async fn download(State(s): State<Arc<AppState>>, UrlPath(rel): UrlPath<String>) -> ApiResult<Response> {
    let results = s.root.join(RESULTS);
    let path = resolve(&results, &rel, "no such result")?;
    // Opened without blocking (a FIFO put there would otherwise hold a thread), then
    // checked on the descriptor: a regular file that really lies under results/.
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&path)
        .map_err(|_| not_found(&rel, "no such result"))?;
    let inside = crate::input::opened_path(&file).is_ok_and(|p| p.starts_with(&results));
    let meta = file.metadata().map_err(|_| not_found(&rel, "no such result"))?;
    if !inside {
        return Err(not_found(&rel, "no such result"));
    }
    if !meta.is_file() {
        return Err(not_found(&rel, "not a file (directories: download their files)"));
    }
    let len = meta.len();
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file)));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_LENGTH, len.to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{}\"", name.replace('"', ""))),
        ],
        body,
    )
        .into_response())
}
