//! Load and limits: 200 inspects beside 4 measure jobs, FIFOs and hanging children,
//! stalled connections, the inspect output cap.

use super::server::*;
use crate::common::{need, SMOLLM2_TENSORS};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

#[test]
fn two_hundred_inspects_and_four_measure_jobs_at_once() {
    if need::smollm2().is_none() {
        return;
    }
    let s = start(&make_root("api-load"), &["--jobs", "2"]);
    let jobs: Vec<String> = (0..4)
        .map(|_| {
            let (st, j) = post(&s, "/api/measure", &json!({ "paths": ["smol.gguf"] }));
            assert_eq!(st, 202);
            j["id"].as_str().unwrap().to_owned()
        })
        .collect();
    let base = s.base.clone();
    let t0 = Instant::now();
    let handles: Vec<_> = (0..200)
        .map(|_| {
            let url = format!("{base}/api/inspect?path=smol.gguf");
            std::thread::spawn(move || {
                let (st, v) = call(agent().get(&url), None);
                (st, v["tensors"].as_array().map(Vec::len))
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), (200, Some(SMOLLM2_TENSORS)));
    }
    eprintln!("200 concurrent inspects in {:.2} s", t0.elapsed().as_secs_f64());
    let reports: Vec<Value> = jobs.iter().map(|id| follow(&s, id)).collect();
    for r in &reports {
        assert_eq!(r["state"], "done", "{r}");
        assert_eq!(r["result"], reports[0]["result"]);
    }
}

/// Issue 5: `GET /api/inspect?path=fifo.gguf` pinned a blocking thread forever; past
/// tokio's 512 blocking threads, every other inspect and listing waited forever.
#[test]
fn fifo_inspects_do_not_starve_the_server() {
    if need::smollm2().is_none() {
        return;
    }
    use std::io::{Read, Write};
    let root = make_root("api-fifo");
    let mkfifo = |p: &Path| assert!(std::process::Command::new("mkfifo").arg(p).status().unwrap().success());
    mkfifo(&root.join("fifo.gguf"));
    // A split model whose second shard is a FIFO: the server sees a regular first shard;
    // only the child that opens the second one hangs (until the inspect timeout kills it).
    std::fs::hard_link(root.join("smol.gguf"), root.join("fs-00001-of-00002.gguf")).unwrap();
    mkfifo(&root.join("fs-00002-of-00002.gguf"));
    let s = start(&root, &["--inspect-timeout-ms", "1000"]);
    let addr = s.base.trim_start_matches("http://").to_owned();

    let conns: Vec<std::net::TcpStream> = (0..520)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(&addr).unwrap();
            let req = format!("GET /api/inspect?path=fifo.gguf HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
            c.write_all(req.as_bytes()).unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let quick = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
    let t0 = Instant::now();
    let r = quick.get(&format!("{}/api/inspect?path=smol.gguf", s.base)).call();
    let ok = r.ok().and_then(|r| r.into_json::<Value>().ok()).and_then(|v| v["tensors"].as_array().map(Vec::len));
    assert_eq!(ok, Some(SMOLLM2_TENSORS), "an inspect of a real model answers while 520 FIFO inspects are pending");
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(quick.get(&format!("{}/api/models", s.base)).call().map(|r| r.status()).ok(), Some(200));
    let mut refused = 0;
    for mut c in conns {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut resp = String::new();
        let _ = c.read_to_string(&mut resp);
        let st: u16 = resp.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        refused += usize::from((400..500).contains(&st));
    }
    assert_eq!(refused, 520, "every FIFO inspect is refused with a 4xx");

    // 50 inspects whose child hangs: at most a few run at once, each is killed after the
    // timeout, and the server answers meanwhile.
    let base = s.base.clone();
    let t0 = Instant::now();
    let hung: Vec<_> = (0..50)
        .map(|_| {
            let url = format!("{base}/api/inspect?path=fs-00001-of-00002.gguf");
            std::thread::spawn(move || {
                call(ureq::AgentBuilder::new().timeout(Duration::from_secs(60)).build().get(&url), None)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let (st, _) = call(quick.get(&format!("{}/api/health", s.base)), None);
    assert_eq!(st, 200);
    assert!(t0.elapsed() < Duration::from_secs(5), "health answers within seconds");
    let running = children(s.child.id()).len();
    assert!(running <= 4, "{running} inspect children at once");
    let mut timed_out = 0;
    for h in hung {
        let (st, v) = h.join().unwrap();
        assert!(st >= 400, "{st} {v}");
        timed_out += usize::from(st == 504);
    }
    eprintln!("50 hanging inspects: {timed_out} stopped by the timeout, the rest refused while busy");
    assert!(t0.elapsed() < Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(children(s.child.id()), Vec::<u32>::new(), "every timed-out inspect child was killed");
}

/// Issue 10: slow clients were never timed out; 300 half-sent requests locked every
/// other client out.
#[test]
fn stalled_connections_are_closed_and_others_get_through() {
    use std::io::{Read, Write};
    let root = make_tiny_root("api-slow");
    let s = start(&root, &["--header-timeout-ms", "1000", "--body-timeout-ms", "1000"]);
    let addr = s.base.trim_start_matches("http://").to_owned();
    let stalled: Vec<std::net::TcpStream> = (0..300)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(&addr).unwrap();
            c.write_all(b"GET /api/hea").unwrap();
            c
        })
        .collect();
    // A body that never comes.
    let mut body = std::net::TcpStream::connect(&addr).unwrap();
    let head = format!(
        "POST /api/measure HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"pa"
    );
    body.write_all(head.as_bytes()).unwrap();
    let t0 = Instant::now();
    let quick = ureq::AgentBuilder::new().timeout(Duration::from_secs(5)).build();
    let r = quick.get(&format!("{}/api/health", s.base)).call();
    assert!(r.is_ok_and(|r| r.status() == 200), "a normal request gets through");
    assert!(t0.elapsed() < Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(10);
    let closed = |mut c: std::net::TcpStream| {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        c.set_read_timeout(Some(left)).unwrap();
        let mut buf = Vec::new();
        match c.read_to_end(&mut buf) {
            Ok(_) => true,
            Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        }
    };
    let n = stalled.into_iter().map(closed).filter(|&c| c).count();
    assert_eq!(n, 300, "the server closes stalled connections within 10 s");
    assert!(closed(body), "the server closes a connection whose body stalls");
    assert_eq!(get(&s, "/api/health").0, 200);
}

/// An inspect whose JSON is over the server's cap is refused whole (it used to be cut at
/// 1 GiB and served as 200, after holding up to 1 GiB per inspect, four at once).
#[test]
fn an_inspect_over_the_output_cap_is_refused_not_cut() {
    if need::smollm2().is_none() {
        return;
    }
    let root = make_root("api-inspect-cap");
    let s = start(&root, &["--inspect-max-bytes", "100000"]);
    let (st, v) = get(&s, "/api/inspect?path=smol.gguf");
    assert_eq!(st, 422, "{v}");
    assert!(v["error"].as_str().unwrap().contains("over 100000 bytes"), "{v}");
    // The server holds up, and no inspect child is left running.
    assert_eq!(get(&s, "/api/health").0, 200);
    assert!(children(s.child.id()).is_empty(), "an inspect child outlived its request");
    // Under the cap, the whole JSON comes back.
    let big = start(&root, &[]);
    let (st, v) = get(&big, "/api/inspect?path=smol.gguf");
    assert_eq!((st, v["tensors"].as_array().map(Vec::len)), (200, Some(SMOLLM2_TENSORS)));
}
