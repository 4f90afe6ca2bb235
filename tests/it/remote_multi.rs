//! Many ranges in one request (docs/remote.md): a server of the test's own that answers
//! them in a `multipart/byteranges` body, honestly or with one lie, or with one range
//! covering them all. Each lie is refused with the URL and what was wrong, nothing
//! written; the covering answer gives the local report. (nginx's own multipart answers are
//! read in `remote::a_model_at_a_url_reads_as_the_local_file`.)

use crate::common::*;
use crate::remote::{remote_framing, run, s, serve, Fault};
use std::os::unix::fs::FileExt;

/// How [`answer`] answers a request for many ranges.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Multi {
    /// A part per range, as asked.
    Honest,
    /// The first part names (and carries) the range one byte on from the one asked.
    Stray,
    /// The first part carries one byte less than its Content-Range says.
    Truncated,
    /// Content-Type `multipart/byteranges` without a boundary.
    NoBoundary,
    /// Not multipart: one range from the first asked to the end of the last.
    Covering,
}

/// The whole HTTP answer (206) to a request for `ranges` (inclusive ends) of `f`, of
/// `size` bytes, as `how` says.
pub(crate) fn answer(f: &std::fs::File, ranges: &[(u64, u64)], size: u64, how: Multi) -> Vec<u8> {
    let bytes = |a: u64, b: u64| {
        let mut v = vec![0; (b - a + 1) as usize];
        f.read_at(&mut v, a).unwrap();
        v
    };
    let (ctype, body) = if let Multi::Covering = how {
        let (a, b) = (ranges[0].0, ranges[ranges.len() - 1].1);
        (format!("application/octet-stream\r\nContent-Range: bytes {a}-{b}/{size}"), bytes(a, b))
    } else {
        let mut body = Vec::new();
        for (i, &(a, b)) in ranges.iter().enumerate() {
            let (a, b) = if matches!(how, Multi::Stray) && i == 0 { (a + 1, b + 1) } else { (a, b) };
            let mut part = bytes(a, b);
            if matches!(how, Multi::Truncated) && i == 0 {
                part.pop();
            }
            let head = format!(
                "\r\n--XyZ\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes {a}-{b}/{size}\r\n\r\n"
            );
            body.extend(head.into_bytes().into_iter().chain(part));
        }
        body.extend(b"\r\n--XyZ--\r\n");
        let boundary = if matches!(how, Multi::NoBoundary) { "" } else { "; boundary=XyZ" };
        (format!("multipart/byteranges{boundary}"), body)
    };
    let head = format!(
        "HTTP/1.1 206 Partial Content\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nETag: \"liar\"\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    [head.into_bytes(), body].concat()
}

/// A multipart answer with a part not asked for, a part cut short, or no boundary: each
/// refused, naming the URL and the lie, no report written (never a wrong θ). An honest
/// one, and one range covering all those asked, give the local report.
#[test]
fn multipart_answers_are_read_strictly() {
    let Some(model) = need::smollm2() else { return };
    let name = model.file_name().unwrap().to_str().unwrap();
    let lj = tmp("multi-local.json");
    run(&["measure", s(&model), "--json", s(&lj)]);
    for (how, says) in [
        (Multi::Stray, "which organ did not ask for"),
        (Multi::Truncated, "is not followed by the boundary"),
        (Multi::NoBoundary, "without a valid boundary"),
    ] {
        let url = format!("http://127.0.0.1:{}/{name}", serve(&model, Fault::Multi(how)));
        let out = tmp("multi-liar.json");
        let mut c = organ();
        c.args(["measure", &url, "--json", s(&out), "--remote-retries", "0"]);
        let err = fails(c);
        assert!(err.contains(&url) && err.contains(says), "{how:?}: {err}");
        assert!(!out.exists(), "{how:?}");
    }
    for how in [Multi::Honest, Multi::Covering] {
        let url = format!("http://127.0.0.1:{}/{name}", serve(&model, Fault::Multi(how)));
        let rj = tmp("multi-remote.json");
        let _ = std::fs::remove_file(&rj);
        let (_, err) = run(&["measure", &url, "--json", s(&rj), "--stats"]);
        assert!(std::fs::read(&lj).unwrap() == std::fs::read(&rj).unwrap(), "{how:?}: measure --json differs");
        assert_eq!(remote_framing(&err) > 0, matches!(how, Multi::Honest), "{how:?}: {err}");
    }
}
