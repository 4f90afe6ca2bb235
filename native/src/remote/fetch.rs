//! One range request, its answer checked against the question, with bounded retries.
//!
//! Every number in an answer is untrusted: the status, Content-Range, Content-Length and
//! the body's real length are each compared with what was asked before a byte is used;
//! nothing is allocated by a length the server gave except a whole body below
//! [`Config::max_whole`].

use super::pace::{Pace, Paced};
use super::{policy, Config, Opened, Remote, BYTES_FETCHED, REQUESTS, RETRIES};
use anyhow::{anyhow, Result};
use std::io::Read;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub use crate::byte_source::Pin;

impl Pin {
    fn of(r: &ureq::Response) -> Result<Pin, Fail> {
        let pin = Pin {
            etag: r.header("etag").map(str::to_owned),
            last_modified: r.header("last-modified").map(str::to_owned),
        };
        if pin.etag.is_none() && pin.last_modified.is_none() {
            return Err(fatal(
                "the server gives neither ETag nor Last-Modified, so organ could not tell if the file \
                 changed while it reads it"
                    .into(),
            ));
        }
        Ok(pin)
    }

    fn strong_etag(&self) -> Option<&str> {
        self.etag.as_deref().filter(|e| !e.starts_with("W/"))
    }
}

/// How a request failed: worth another try (after the server's Retry-After, if it gave
/// one), or not.
pub(super) enum Fail {
    Retry(anyhow::Error, Option<Duration>),
    Fatal(anyhow::Error),
}

pub(super) fn fatal(msg: String) -> Fail {
    Fail::Fatal(anyhow!(msg))
}

/// The client: connections kept and reused, redirects followed, timeouts set (a read that
/// waits `--remote-speed-time` for a byte is a stall). Under `organ serve`, every address
/// connected to, a redirect's included, is checked by the server's policy first
/// ([`policy::Guard`]).
pub(super) fn agent() -> ureq::Agent {
    builder().redirects(10).build()
}

/// [`agent`]'s settings but redirects, for the clients that differ only in those (the Hub's).
pub(super) fn builder() -> ureq::AgentBuilder {
    let b = ureq::AgentBuilder::new()
        .timeout_connect(Duration::from_secs(10))
        .timeout_read(Pace::read_timeout(super::config().speed))
        .user_agent(concat!("organ/", env!("CARGO_PKG_VERSION")));
    match policy::active() {
        Some(p) => b.resolver(policy::Guard(p)),
        None => b,
    }
}

/// The body of `r`, read through a [`Pace`] of `cfg`'s speed: a stalled body fails.
pub(super) fn paced(r: ureq::Response, cfg: &Config) -> Paced<Box<dyn Read + Send + Sync + 'static>> {
    Paced::new(r.into_reader(), Pace::new(cfg.speed))
}

/// What a failed body read is: a stall is final (as curl's `--speed-time`), anything else
/// worth another try.
pub(super) fn broke(e: &std::io::Error, what: String) -> Fail {
    match super::pace::stalled(e) {
        Some(s) => Fail::Fatal(anyhow!("{s}")),
        None => Fail::Retry(anyhow!("{what}: {e}"), None),
    }
}

/// The longest wait between two tries, whatever Retry-After says.
const MAX_WAIT: Duration = Duration::from_secs(10);

/// Whether an answer with HTTP status `code` is worth another try: too many requests, or
/// a failure of the server's that may pass.
pub(super) fn retryable(code: u16) -> bool {
    matches!(code, 429 | 500 | 502 | 503 | 504)
}

/// A Retry-After value given in seconds (a date is not taken).
pub(super) fn retry_after(v: &str) -> Option<Duration> {
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// The wait before retry `tries` (from 1): the server's Retry-After, or else 0.2 s, 0.4 s,
/// 0.8 s …; at most [`MAX_WAIT`]. HTTP(S) URLs and stores wait alike.
pub(super) fn backoff(tries: u32, after: Option<Duration>) -> Duration {
    after.unwrap_or(Duration::from_millis(100 << tries.min(7))).min(MAX_WAIT)
}

/// Runs `f` until it succeeds, fails for good, or has been retried `cfg.retries` times,
/// waiting 0.2 s, 0.4 s, 0.8 s … (or the server's Retry-After) in between.
pub(super) fn with_retries<T>(cfg: &Config, mut f: impl FnMut() -> Result<T, Fail>) -> Result<T> {
    let mut tries = 0u32;
    loop {
        REQUESTS.fetch_add(1, Ordering::Relaxed);
        match f() {
            Ok(v) => return Ok(v),
            Err(Fail::Fatal(e)) => return Err(e),
            Err(Fail::Retry(e, after)) if tries < cfg.retries => {
                tries += 1;
                RETRIES.fetch_add(1, Ordering::Relaxed);
                crate::progress::warn(format!("{e:#}; retry {tries} of {}", cfg.retries));
                std::thread::sleep(backoff(tries, after));
            }
            Err(Fail::Retry(e, _)) => return Err(e.context(format!("gave up after {} retries", cfg.retries))),
        }
    }
}

/// Sends `GET` for bytes `[start, end)`, with the pin's precondition when there is one.
fn send(agent: &ureq::Agent, url: &str, start: u64, end: u64, pin: Option<&Pin>) -> Result<ureq::Response, Fail> {
    call(request(agent, url, &format!("bytes={start}-{}", end - 1), pin))
}

/// `GET url` with `Range: SPEC`, and the pin's precondition when there is one.
pub(super) fn request(agent: &ureq::Agent, url: &str, spec: &str, pin: Option<&Pin>) -> ureq::Request {
    let mut req = agent.get(url).set("Range", spec).set("Accept-Encoding", "identity");
    if let Some(p) = pin {
        if let Some(e) = p.strong_etag() {
            req = req.set("If-Match", e);
        } else if let Some(d) = &p.last_modified {
            req = req.set("If-Unmodified-Since", d);
        }
    }
    req
}

/// Sends `req`: an error status is a [`Fail`] (worth a retry or not), as is a broken
/// connection.
pub(super) fn call(req: ureq::Request) -> Result<ureq::Response, Fail> {
    answer(req.call())
}

/// What [`call`] makes of a request's outcome.
pub(super) fn answer(res: Result<ureq::Response, ureq::Error>) -> Result<ureq::Response, Fail> {
    match res {
        Ok(r) => Ok(r),
        Err(ureq::Error::Status(code, r)) => Err(status_fail(code, &r)),
        // Under `organ serve`: one sentence for a refused address, a closed port, a host
        // that is not there and one that speaks no HTTP, and no retry that would time them
        // apart.
        Err(ureq::Error::Transport(_)) if policy::active().is_some() => Err(fatal(policy::UNREACHABLE.into())),
        Err(ureq::Error::Transport(t)) => match t.kind() {
            ureq::ErrorKind::Io | ureq::ErrorKind::ConnectionFailed => Err(Fail::Retry(anyhow!("{t}"), None)),
            _ => Err(Fail::Fatal(anyhow!("{t}"))),
        },
    }
}

fn status_fail(code: u16, r: &ureq::Response) -> Fail {
    let text = r.status_text();
    match code {
        412 => fatal(format!(
            "HTTP 412 {text}: the file changed on the server since organ first read it (replaced mid-read)"
        )),
        _ if retryable(code) => {
            Fail::Retry(anyhow!("HTTP {code} {text}"), r.header("retry-after").and_then(retry_after))
        }
        _ => fatal(format!("HTTP {code} {text}")),
    }
}

/// Refuses an answer whose ETag or Last-Modified differs from the pin's (a server that
/// ignored the precondition).
pub(super) fn check_pin(pin: &Pin, r: &ureq::Response) -> Result<(), Fail> {
    let now =
        Pin { etag: r.header("etag").map(str::to_owned), last_modified: r.header("last-modified").map(str::to_owned) };
    let changed = |a: &Option<String>, b: &Option<String>| a.is_some() && b.is_some() && a != b;
    if changed(&pin.etag, &now.etag) || changed(&pin.last_modified, &now.last_modified) {
        return Err(fatal(format!("the file changed on the server mid-read: {pin} at first, {now} now")));
    }
    Ok(())
}

/// `bytes A-B/TOTAL` as `(A, B + 1, TOTAL)`, each checked (A ≤ B < TOTAL).
pub(super) fn content_range(r: &ureq::Response) -> Result<(u64, u64, u64), Fail> {
    let raw = r.header("content-range").ok_or_else(|| fatal("a partial answer without Content-Range".into()))?;
    parse_content_range(raw)
}

/// [`content_range`] of the header's value `raw`.
pub(super) fn parse_content_range(raw: &str) -> Result<(u64, u64, u64), Fail> {
    let bad = || fatal(format!("a malformed Content-Range {raw:?}"));
    let rest = raw.trim().strip_prefix("bytes ").ok_or_else(bad)?;
    let (range, total) = rest.split_once('/').ok_or_else(bad)?;
    let (a, b) = range.split_once('-').ok_or_else(bad)?;
    let num = |s: &str| s.parse::<u64>().map_err(|_| bad());
    let (a, b, total) = (num(a)?, num(b)?, num(total)?);
    if a > b || b >= total {
        return Err(bad());
    }
    Ok((a, b + 1, total))
}

/// Reads exactly `buf.len()` bytes of `r`'s body, and checks that no more follow; a body
/// cut short is worth a retry, a stalled one fails.
fn read_body(r: ureq::Response, buf: &mut [u8], cfg: &Config) -> Result<(), Fail> {
    if let Some(len) = r.header("content-length") {
        if len.trim().parse::<u64>().ok() != Some(buf.len() as u64) {
            return Err(fatal(format!("Content-Length {len}, expected {}", buf.len())));
        }
    }
    let mut body = paced(r, cfg);
    let mut got = 0;
    while got < buf.len() {
        match body.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                BYTES_FETCHED.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(broke(&e, format!("the body broke off after {got} of {} bytes", buf.len()))),
        }
    }
    if got < buf.len() {
        return Err(Fail::Retry(anyhow!("a short body: {got} of {} bytes", buf.len()), None));
    }
    let mut more = [0u8; 1];
    match body.read(&mut more) {
        Ok(0) | Err(_) => Ok(()),
        Ok(_) => Err(fatal(format!("a body longer than the {} bytes asked", buf.len()))),
    }
}

/// What the first request found: the body (the first bytes, or the whole object when the
/// server ignored Range), the pin, the object's size.
pub(super) struct First {
    ranged: bool,
    body: Vec<u8>,
    pin: Pin,
    size: u64,
}

impl First {
    pub(super) fn into_opened(self, agent: ureq::Agent, url: String) -> Opened {
        if self.ranged {
            Opened::Ranged(Remote::new(url, self.size, self.pin, agent), self.body)
        } else {
            Opened::Whole(self.body, self.pin)
        }
    }
}

/// Asks for bytes `[0, want)`: a server that honours Range answers with them (fewer when
/// the object is smaller); one that ignores it sends the whole body, kept when it is no
/// larger than `cfg.max_whole`.
pub(super) fn first(agent: &ureq::Agent, url: &str, want: u64, cfg: &Config) -> Result<First> {
    with_retries(cfg, || {
        let r = send(agent, url, 0, want, None)?;
        let pin = Pin::of(&r)?;
        match r.status() {
            206 => {
                let (a, b, total) = content_range(&r)?;
                if a != 0 || b != want.min(total) {
                    return Err(fatal(format!(
                        "asked for bytes 0-{}, the server sent {a}-{} of {total}",
                        want - 1,
                        b - 1
                    )));
                }
                let mut body = vec![0; b as usize];
                read_body(r, &mut body, cfg)?;
                Ok(First { ranged: true, body, pin, size: total })
            }
            200 => {
                let len = r.header("content-length").and_then(|l| l.trim().parse::<u64>().ok());
                let Some(len) = len.filter(|&l| l <= cfg.max_whole) else {
                    let size = len.map_or_else(|| "a body of unknown length".into(), |l| format!("all {l} bytes"));
                    return Err(fatal(format!(
                        "the server ignores Range requests (it answered 200 with {size}); organ reads a whole \
                         body only up to {} bytes (--remote-max-whole): download the file, or serve it from a \
                         server that honours Range",
                        cfg.max_whole
                    )));
                };
                let mut body = vec![0; len as usize];
                read_body(r, &mut body, cfg)?;
                Ok(First { ranged: false, body, pin, size: len })
            }
            s => Err(fatal(format!("HTTP {s} {} to a range request", r.status_text()))),
        }
    })
}

/// Reads bytes `[offset, offset + buf.len())` of an object of `size` bytes pinned by `pin`.
pub(super) fn range(
    agent: &ureq::Agent,
    url: &str,
    offset: u64,
    buf: &mut [u8],
    size: u64,
    pin: &Pin,
    cfg: &Config,
) -> Result<()> {
    let end = offset + buf.len() as u64;
    with_retries(cfg, || {
        let r = send(agent, url, offset, end, Some(pin))?;
        if r.status() != 206 {
            return Err(fatal(format!(
                "HTTP {} {} to a range request (the server no longer honours Range)",
                r.status(),
                r.status_text()
            )));
        }
        check_pin(pin, &r)?;
        let (a, b, total) = content_range(&r)?;
        if (a, b, total) != (offset, end, size) {
            return Err(fatal(format!("the server sent bytes {a}-{} of {total}", b - 1)));
        }
        read_body(r, buf, cfg)
    })
    .map_err(|e| e.context(format!("{url}: bytes {offset}-{} of {size}", end - 1)))
}

/// A response with `status` and `headers` and no body, for unit tests of what organ makes
/// of a server's answers.
#[cfg(test)]
pub(super) fn test_answer(status: u16, headers: &[(&str, &str)]) -> ureq::Response {
    let mut raw = format!("HTTP/1.1 {status} X\r\n");
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str("\r\n");
    raw.parse().unwrap()
}

#[cfg(test)]
mod tests {
    use super::test_answer as answer;
    use super::*;

    #[test]
    fn content_ranges_are_checked() {
        let cr = |v: &str| content_range(&answer(206, &[("Content-Range", v)])).ok();
        assert_eq!(cr("bytes 0-9/100"), Some((0, 10, 100)));
        for bad in ["bytes 9-0/100", "bytes 0-100/100", "bytes 0-9/*", "bytes -1-9/100", "items 0-9/100", "bytes 0-9"] {
            assert_eq!(cr(bad), None, "{bad}");
        }
        assert!(content_range(&answer(206, &[])).is_err());
    }
}
