//! Requests built from any bytes through `organ serve`'s router, in process (no socket):
//! `serve::app` is built once, over a temp root holding a tiny model and its organ
//! directory, with a token; each input is one request in a fresh current-thread runtime.
//! The router must answer every request without panicking.
//!
//! Input: line 1 the method, line 2 the path and query, then `Name: value` header lines
//! up to an empty line (`Host: 127.0.0.1:8935` is added when none is given), then the
//! body (see seeds/api).
#![no_main]

use axum::body::Body;
use axum::Router;
use libfuzzer_sys::fuzz_target;
use organ_cli::serve::{app, Options};
use std::path::PathBuf;
use std::sync::OnceLock;
use tower::ServiceExt;

/// The organ subcommands a job (or an inspect) runs as `current_exe ARGS`. Here current_exe is this fuzz
/// binary: started that way, it must not fuzz but fail at once, like organ on bad input.
const JOB_COMMANDS: &[&str] = &["inspect", "measure", "diff", "dissect", "assemble", "graft", "purify"];

struct Server {
    router: Router,
    root: PathBuf,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        // libFuzzer ends with exit(): roots of runs that have ended go here, not there.
        for e in std::fs::read_dir(std::env::temp_dir()).into_iter().flatten().flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("organ-fuzz-api-")) else { continue };
            if !std::path::Path::new("/proc").join(pid).exists() && std::path::Path::new("/proc/self").exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let root = std::env::temp_dir().join(format!("organ-fuzz-api-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let model = root.join("tiny.gguf");
        std::fs::write(&model, include_bytes!("../seeds/parse/every_value.gguf")).unwrap();
        let organs = root.join("tiny.organs");
        let dissect =
            organ_cli::cmd::dissect::Options { model: &model, out: &organs, measure: false, sha256: false, force: false };
        organ_cli::cmd::dissect::run(&dissect, &mut std::io::sink()).unwrap();
        let opts = Options {
            root: root.clone(),
            addr: "127.0.0.1:0".parse().unwrap(),
            token: Some("fuzz".into()),
            jobs: 1,
            max_body: 1 << 16,
            ..Options::default()
        };
        Server { router: app(&opts).unwrap(), root }
    })
}

const METHODS: &[&str] = &["GET", "POST", "DELETE", "PUT", "HEAD", "OPTIONS", "PATCH"];

fn request(data: &[u8]) -> Option<http::Request<Body>> {
    let mut rest = data;
    let mut line = || -> Option<&[u8]> {
        let i = rest.iter().position(|&b| b == b'\n')?;
        let l = &rest[..i];
        rest = &rest[i + 1..];
        Some(l)
    };
    let method = line()?;
    let method = METHODS.iter().find(|m| m.as_bytes() == method).copied().unwrap_or("GET");
    let uri = line()?;
    let mut b = http::Request::builder().method(method).uri(uri);
    let mut host = false;
    for _ in 0..8 {
        let h = line()?;
        if h.is_empty() {
            break;
        }
        let i = h.iter().position(|&c| c == b':')?;
        let (name, value) = (&h[..i], h[i + 1..].trim_ascii_start());
        host |= name.eq_ignore_ascii_case(b"host");
        b = b.header(name, value);
    }
    // Without a Host of its own, a request names this server, as a client would: the
    // input then reaches the handlers instead of the Host check (421) every time.
    if !host {
        b = b.header("host", "127.0.0.1:8935");
    }
    b.body(Body::from(rest.to_vec())).ok()
}

fuzz_target!(
    init: {
        if std::env::args().nth(1).is_some_and(|a| JOB_COMMANDS.contains(&a.as_str())) {
            eprintln!("organ: error: a fuzz build does not run jobs");
            std::process::exit(1);
        }
        server();
    },
    |data: &[u8]| {
        let s = server();
        let Some(req) = request(data) else { return };
        // Time is paused and jumps ahead whenever the runtime idles: a job's task goes with
        // each input's runtime, so cancelling a job (which waits up to 10 s for the task to
        // acknowledge) would otherwise stall here for real.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
        rt.block_on(async {
            let res = s.router.clone().oneshot(req).await.expect("the router's error type is Infallible");
            let sse = res.headers().get(http::header::CONTENT_TYPE).is_some_and(|v| v == "text/event-stream");
            if !sse {
                // Job events stream for as long as the job lives; everything else ends.
                let body = tokio::time::timeout(std::time::Duration::from_secs(5), axum::body::to_bytes(res.into_body(), 1 << 24));
                let _ = body.await;
            }
        });
        // Jobs only ever queue here (their tasks go with the runtime); their directories go too.
        drop(rt);
        if let Ok(entries) = std::fs::read_dir(s.root.join("results")) {
            for e in entries.flatten() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
);
