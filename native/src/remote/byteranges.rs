//! HTTP answers to range requests, read strictly as they stream: organ's own transport
//! ([`Transport`] for `ureq::Agent`). A request for one range is answered by 206 with
//! exactly that range; a request for many ([`super::multi`]) with `multipart/byteranges`
//! (RFC 9110, 14.6), with one range covering those asked (the bytes between are read and
//! dropped), or refused (200 and the whole body, not read; 400, 413, 416, 431).
//!
//! A multipart answer: the boundary from Content-Type; every part's Content-Range one of
//! the ranges asked (each once, of the pinned size), its bytes exactly that long and
//! followed by a boundary; a line of framing at most 1 KiB. Nothing is buffered but the
//! asked bytes, straight into the caller's buffers.

use super::fetch::{
    answer, broke, check_pin, content_range, fatal, paced, parse_content_range, request, with_retries, Fail,
};
use super::multi::{held, Answer, Span, Transport};
use super::{Config, Remote, BYTES_FETCHED, FRAMING};
use anyhow::{anyhow, Result};
use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::Ordering;

/// The longest `Range` value organ sends: nginx takes a header line of up to 8 KiB by
/// default (`large_client_header_buffers`), as do most servers.
const HEADER_BUDGET: usize = 6 << 10;
/// The longest line of multipart framing (a boundary, a part's header line).
const MAX_LINE: u64 = 1024;
/// The most header lines one part may have.
const MAX_PART_HEADERS: usize = 16;
/// Bytes after the closing boundary read and dropped, at most.
const MAX_EPILOGUE: u64 = 1024;

/// organ's own range requests: many ranges a request, up to the header budget, until the
/// server is seen not to serve them.
impl Transport for ureq::Agent {
    fn range(&self, r: &Remote, offset: u64, buf: &mut [u8], cfg: &Config) -> Result<()> {
        super::fetch::range(self, &r.url, offset, buf, r.size, &r.pin, cfg)
    }

    fn budget(&self) -> Option<usize> {
        Some(HEADER_BUDGET)
    }

    fn many(&self, r: &Remote, spans: &[Span], parts: &mut [(u64, &mut [u8])], cfg: &Config) -> Result<Answer> {
        multi(r, self, spans, parts, cfg)
    }

    fn covering(&self, r: &Remote, start: u64, end: u64, parts: &mut [(u64, &mut [u8])], cfg: &Config) -> Result<()> {
        covering(r, self, start, end, parts, cfg)
    }
}

/// Reads bytes `[start, end)` by one range, each of `parts` (inside) into its buffer.
fn covering(
    r: &Remote,
    agent: &ureq::Agent,
    start: u64,
    end: u64,
    parts: &mut [(u64, &mut [u8])],
    cfg: &Config,
) -> Result<()> {
    with_retries(cfg, || {
        let resp = answer(request(agent, &r.url, &format!("bytes={start}-{}", end - 1), Some(&r.pin)).call())?;
        if resp.status() != 206 {
            return Err(fatal(format!(
                "HTTP {} {} to a range request (the server no longer honours Range)",
                resp.status(),
                resp.status_text()
            )));
        }
        check_pin(&r.pin, &resp)?;
        let (a, b, total) = content_range(&resp)?;
        if (a, b, total) != (start, end, r.size) {
            return Err(fatal(format!("the server sent bytes {a}-{} of {total}", b - 1)));
        }
        length_is(&resp, end - start)?;
        let mut body = paced(resp, cfg);
        fill(&mut body, start, end, parts)?;
        end_of_body(&mut body, end - start)
    })
    .map_err(|e| e.context(format!("{}: bytes {start}-{} of {}", r.url, end - 1, r.size)))
}

/// Asks for every span of `spans` in one request, and reads the answer if it is one organ
/// can use.
fn multi(
    r: &Remote,
    agent: &ureq::Agent,
    spans: &[Span],
    parts: &mut [(u64, &mut [u8])],
    cfg: &Config,
) -> Result<Answer> {
    let specs: Vec<String> = spans.iter().map(Span::spec).collect();
    let spec = format!("bytes={}", specs.join(","));
    let (first, last) = (spans[0].start, spans[spans.len() - 1].end);
    let held = held(spans);
    with_retries(cfg, || {
        let resp = match request(agent, &r.url, &spec, Some(&r.pin)).call() {
            Err(ureq::Error::Status(400 | 413 | 416 | 431, _)) => return Ok(Answer::Refused),
            other => answer(other)?,
        };
        match resp.status() {
            206 => {}
            // The whole body: dropped unread (the connection with it).
            200 => return Ok(Answer::Refused),
            s => return Err(fatal(format!("HTTP {s} {} to a range request", resp.status_text()))),
        }
        check_pin(&r.pin, &resp)?;
        let ct = resp.header("content-type").unwrap_or_default().to_owned();
        if !is_multipart(&ct) {
            let (a, b, total) = content_range(&resp)?;
            if total != r.size || a > first || b < last {
                return Err(fatal(format!(
                    "asked for {} ranges in bytes {first}-{}, the server sent bytes {a}-{} of {total}",
                    spans.len(),
                    last - 1,
                    b - 1
                )));
            }
            length_is(&resp, b - a)?;
            let mut body = paced(resp, cfg);
            fill(&mut body, a, b, &mut parts[held.clone()])?;
            end_of_body(&mut body, b - a)?;
            return Ok(Answer::Covering);
        }
        let boundary = boundary(&ct)
            .ok_or_else(|| fatal(format!("a multipart answer without a valid boundary (Content-Type {ct:?})")))?;
        let mut body = BufReader::with_capacity(64 << 10, paced(resp, cfg));
        parts_of(&mut body, &boundary, spans, parts, r.size)?;
        Ok(Answer::Multipart)
    })
    .map_err(|e| e.context(format!("{}: {} ranges in bytes {first}-{} of {}", r.url, spans.len(), last - 1, r.size)))
}

/// Whether a Content-Type is `multipart/byteranges`.
fn is_multipart(ct: &str) -> bool {
    ct.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("multipart/byteranges"))
}

/// The `boundary` parameter of a Content-Type (quotes taken off): 1 to 70 characters
/// (RFC 2046, 5.1.1).
fn boundary(ct: &str) -> Option<String> {
    ct.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        let v = v.trim();
        let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(v);
        (k.trim().eq_ignore_ascii_case("boundary") && (1..=70).contains(&v.len())).then(|| v.to_owned())
    })
}

/// Reads a `multipart/byteranges` body: each part one of `spans`, each span once, its
/// bytes into its parts.
fn parts_of(
    body: &mut impl BufRead,
    boundary: &str,
    spans: &[Span],
    parts: &mut [(u64, &mut [u8])],
    size: u64,
) -> Result<(), Fail> {
    let delim = format!("--{boundary}");
    let close = format!("{delim}--");
    let mut got = vec![false; spans.len()];
    // Before the first boundary, at most two empty lines (nginx sends one).
    let mut l = line(body)?;
    for _ in 0..2 {
        if !l.is_empty() {
            break;
        }
        l = line(body)?;
    }
    if l != delim.as_bytes() {
        return Err(fatal(format!("a multipart answer that does not start with its boundary {delim:?}")));
    }
    loop {
        let mut range = None;
        for k in 0.. {
            let h = line(body)?;
            if h.is_empty() {
                break;
            }
            if k == MAX_PART_HEADERS {
                return Err(fatal(format!("a part with more than {MAX_PART_HEADERS} header lines")));
            }
            let h = String::from_utf8_lossy(&h);
            if let Some((name, v)) = h.split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-range") {
                    range = Some(parse_content_range(v.trim())?);
                }
            }
        }
        let (a, b, total) = range.ok_or_else(|| fatal("a part without Content-Range".into()))?;
        let asked = spans.binary_search_by_key(&a, |s| s.start).ok().filter(|&k| spans[k].end == b && !got[k]);
        let Some(k) = asked.filter(|_| total == size) else {
            return Err(fatal(format!("a part with bytes {a}-{} of {total}, which organ did not ask for", b - 1)));
        };
        got[k] = true;
        fill(body, a, b, &mut parts[spans[k].parts.clone()])?;
        // The part's bytes end right before CRLF and a boundary.
        let mut crlf = [0u8; 2];
        read_full(body, &mut crlf)?;
        FRAMING.fetch_add(2, Ordering::Relaxed);
        let l = if crlf == *b"\r\n" { line(body)? } else { Vec::new() };
        if l == close.as_bytes() {
            break;
        }
        if l != delim.as_bytes() {
            return Err(fatal(format!(
                "the part with bytes {a}-{} is not followed by the boundary: its length is not what its \
                 Content-Range says",
                b - 1
            )));
        }
    }
    if let Some(k) = got.iter().position(|g| !g) {
        let s = &spans[k];
        return Err(fatal(format!("the multipart answer lacks bytes {}-{}", s.start, s.end - 1)));
    }
    let mut rest = Vec::new();
    let n = body.take(MAX_EPILOGUE + 1).read_to_end(&mut rest).unwrap_or(0) as u64;
    BYTES_FETCHED.fetch_add(n, Ordering::Relaxed);
    FRAMING.fetch_add(n, Ordering::Relaxed);
    if n > MAX_EPILOGUE {
        return Err(fatal(format!("more than {MAX_EPILOGUE} bytes after the closing boundary")));
    }
    Ok(())
}

/// One line of framing, without its CRLF (or LF), counted as fetched and as framing.
fn line(body: &mut impl BufRead) -> Result<Vec<u8>, Fail> {
    let mut v = Vec::new();
    let n = (body.by_ref().take(MAX_LINE))
        .read_until(b'\n', &mut v)
        .map_err(|e| broke(&e, "the multipart answer broke off".into()))?;
    BYTES_FETCHED.fetch_add(n as u64, Ordering::Relaxed);
    FRAMING.fetch_add(n as u64, Ordering::Relaxed);
    if v.last() != Some(&b'\n') {
        if n as u64 == MAX_LINE {
            return Err(fatal(format!("a line of multipart framing longer than {MAX_LINE} bytes")));
        }
        return Err(Fail::Retry(anyhow!("a short body: the multipart answer ended mid-part"), None));
    }
    v.pop();
    if v.last() == Some(&b'\r') {
        v.pop();
    }
    Ok(v)
}

/// Checks Content-Length, when given, against the `n` bytes asked.
fn length_is(resp: &ureq::Response, n: u64) -> Result<(), Fail> {
    match resp.header("content-length") {
        Some(len) if len.trim().parse::<u64>().ok() != Some(n) => {
            Err(fatal(format!("Content-Length {len}, expected {n}")))
        }
        _ => Ok(()),
    }
}

/// Reads bytes `[at, end)` of the object from `body`: each part's into its buffer, the rest
/// dropped (all counted as fetched). `parts` lie inside, ascending.
fn fill(body: &mut impl Read, mut at: u64, end: u64, parts: &mut [(u64, &mut [u8])]) -> Result<(), Fail> {
    for (o, buf) in parts.iter_mut() {
        if buf.is_empty() {
            continue;
        }
        skip(body, *o - at)?;
        read_full(body, buf)?;
        at = *o + buf.len() as u64;
    }
    skip(body, end - at)
}

fn skip(body: &mut impl Read, n: u64) -> Result<(), Fail> {
    let mut scratch = [0u8; 16 << 10];
    let mut left = n;
    while left > 0 {
        let k = left.min(scratch.len() as u64) as usize;
        read_full(body, &mut scratch[..k])?;
        left -= k as u64;
    }
    Ok(())
}

/// Fills `buf` from `body`, counting the bytes; a body that ends or breaks first is worth
/// a retry.
fn read_full(body: &mut impl Read, buf: &mut [u8]) -> Result<(), Fail> {
    let mut got = 0;
    while got < buf.len() {
        match body.read(&mut buf[got..]) {
            Ok(0) => return Err(Fail::Retry(anyhow!("a short body: it ended {} bytes early", buf.len() - got), None)),
            Ok(n) => {
                got += n;
                BYTES_FETCHED.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(broke(&e, "the body broke off".into())),
        }
    }
    Ok(())
}

/// Checks that no byte follows the `n` asked.
fn end_of_body(body: &mut impl Read, n: u64) -> Result<(), Fail> {
    let mut more = [0u8; 1];
    match body.read(&mut more) {
        Ok(0) | Err(_) => Ok(()),
        Ok(_) => Err(fatal(format!("a body longer than the {n} bytes asked"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_from_content_types() {
        assert_eq!(
            boundary("multipart/byteranges; boundary=00000000000000000001").as_deref(),
            Some("00000000000000000001")
        );
        assert_eq!(boundary("multipart/byteranges;BOUNDARY=\"a b\"").as_deref(), Some("a b"));
        assert_eq!(boundary("multipart/byteranges"), None);
        assert_eq!(boundary("multipart/byteranges; boundary="), None);
        assert_eq!(boundary(&format!("multipart/byteranges; boundary={}", "x".repeat(71))), None);
        assert!(is_multipart("Multipart/ByteRanges; boundary=x") && !is_multipart("application/octet-stream"));
    }

    /// A body as nginx frames it, read into two parts; then the same body with each of
    /// its lies.
    #[test]
    fn multipart_bodies_are_read_strictly() {
        let spans = [Span { start: 10, end: 14, parts: 0..1 }, Span { start: 20, end: 22, parts: 1..2 }];
        let body = |parts: &[(&str, &str)], close: bool| {
            let mut b = String::new();
            for (range, bytes) in parts {
                b.push_str(&format!("\r\n--B\r\nContent-Type: x\r\nContent-Range: bytes {range}/100\r\n\r\n{bytes}"));
            }
            if close {
                b.push_str("\r\n--B--\r\n");
            }
            b.into_bytes()
        };
        let read = |b: Vec<u8>| {
            let (mut x, mut y) = ([0u8; 4], [0u8; 2]);
            let mut parts: [(u64, &mut [u8]); 2] = [(10, &mut x), (20, &mut y)];
            let r = parts_of(&mut &b[..], "B", &spans, &mut parts, 100);
            r.map(|()| (x, y)).map_err(|e| match e {
                Fail::Fatal(e) => format!("fatal: {e}"),
                Fail::Retry(e, _) => format!("retry: {e}"),
            })
        };
        assert_eq!(read(body(&[("10-13", "abcd"), ("20-21", "ef")], true)), Ok((*b"abcd", *b"ef")));
        let cases = [
            (body(&[("10-13", "abcd"), ("21-22", "ef")], true), "did not ask for"),
            (body(&[("10-13", "abcd"), ("10-13", "abcd")], true), "did not ask for"),
            (body(&[("10-13", "abc"), ("20-21", "ef")], true), "not followed by the boundary"),
            (body(&[("10-13", "abcd")], true), "lacks bytes 20-21"),
            (body(&[("10-13", "abcd"), ("20-21", "e")], false), "retry"),
            (b"--C\r\n".to_vec(), "does not start with its boundary"),
        ];
        for (b, says) in cases {
            let got = read(b).unwrap_err();
            assert!(got.contains(says), "{got}");
        }
    }
}
