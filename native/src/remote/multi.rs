//! Many ranges of one object read in as few requests as the transport allows: the
//! ranges asked are joined into spans (touching parts), then asked for many a request
//! (`Range: bytes=a-b,c-d,…`, answered with `multipart/byteranges`, RFC 9110, 14.6) where
//! the transport can ([`Transport::budget`]), else in single ranges each covering the
//! spans within `--remote-gap` of each other. A large tensor's sampled blocks lie KiBs
//! apart: one request per block would be millions of requests, and one range over them all
//! would fetch the whole file.
//!
//! A server that answers a request for many ranges otherwise (RFC 9110, 14.2: one range
//! covering those asked, 200 and the whole body, or a refused header) is marked as not
//! served in parts, and this and every later request asks for single ranges: organ's
//! reads without multipart.
//!
//! The loop and its gap policy are the same for every way an object's bytes are asked
//! for ([`Transport`]): an HTTP server ([`super::byteranges`], which reads and checks its
//! answers) may be asked for many ranges a request; an object store (src/remote/store.rs)
//! serves one range a request, and gets only the single ranges.

use super::{Config, Remote};
use anyhow::{bail, Result};
use std::ops::Range;
use std::sync::atomic::Ordering;

/// [`Remote::multi`]: not known yet, multipart answers seen, or not served in parts.
const YES: u8 = 1;
const NO: u8 = 2;

/// Touching parts asked as one range: `[start, end)`, and which parts (indices) it holds.
pub(super) struct Span {
    pub start: u64,
    pub end: u64,
    pub parts: Range<usize>,
}

impl Span {
    /// The span as a `Range` value's item (`a-b`, inclusive).
    pub fn spec(&self) -> String {
        format!("{}-{}", self.start, self.end - 1)
    }
}

/// What the server made of a request for many ranges.
pub(super) enum Answer {
    /// `multipart/byteranges`, every range asked: read.
    Multipart,
    /// One range covering them all: read.
    Covering,
    /// 200, or the header refused: nothing read.
    Refused,
}

/// How the bytes of one pinned object are asked for: what [`read_ranges`] needs of a
/// transport. Each read is checked against the pin and retried by the transport.
pub(super) trait Transport {
    /// How long the `Range` value of a request for many ranges may be; `None` for a
    /// transport that asks for one range a request.
    fn budget(&self) -> Option<usize> {
        None
    }

    /// Asks for every span of `spans` (two or more) in one request, their bytes into
    /// `parts`; called only when [`Self::budget`] is some.
    fn many(&self, r: &Remote, spans: &[Span], parts: &mut [(u64, &mut [u8])], cfg: &Config) -> Result<Answer> {
        let _ = (r, spans, parts, cfg);
        Ok(Answer::Refused)
    }

    /// Reads bytes `[offset, offset + buf.len())` of the object (inside it), checked
    /// against its pin.
    fn range(&self, r: &Remote, offset: u64, buf: &mut [u8], cfg: &Config) -> Result<()>;

    /// Reads bytes `[start, end)` of the object in one range: each of `parts` (ascending,
    /// inside) into its buffer, the bytes between dropped.
    fn covering(&self, r: &Remote, start: u64, end: u64, parts: &mut [(u64, &mut [u8])], cfg: &Config) -> Result<()>;

    /// The longest single range, from the first byte asked to the last: a transport that
    /// buffers the bytes between bounds it.
    fn max_covering(&self) -> u64 {
        u64::MAX
    }
}
/// Reads each `(offset, buffer)` of `parts` (ascending, disjoint, inside the object) from
/// `r` through `t`, as many ranges a request as its header budget takes.
pub(super) fn read_ranges(
    r: &Remote,
    t: &(impl Transport + ?Sized),
    parts: &mut [(u64, &mut [u8])],
    cfg: &Config,
) -> Result<()> {
    let mut spans: Vec<Span> = Vec::new();
    for (i, (o, b)) in parts.iter().enumerate() {
        let end = o.checked_add(b.len() as u64).filter(|&e| e <= r.size);
        let Some(end) = end.filter(|_| spans.last().is_none_or(|s| s.end <= *o)) else {
            bail!("{}: {} bytes at offset {o}: out of order, or past its end ({} bytes)", r.url, b.len(), r.size);
        };
        match spans.last_mut() {
            _ if b.is_empty() => {}
            Some(s) if s.end == *o => {
                s.end = end;
                s.parts.end = i + 1;
            }
            _ => spans.push(Span { start: *o, end, parts: i..i + 1 }),
        }
    }
    let Some(budget) = t.budget() else {
        return one(r, t, &spans, parts, cfg);
    };
    let mut i = 0;
    while i < spans.len() {
        let mut len = "bytes=".len() + spans[i].spec().len();
        let mut j = i + 1;
        while j < spans.len() && len + 1 + spans[j].spec().len() <= budget {
            len += 1 + spans[j].spec().len();
            j += 1;
        }
        one(r, t, &spans[i..j], parts, cfg)?;
        i = j;
    }
    Ok(())
}

/// Reads `spans` in one request for them all when the server may serve it in parts, else
/// in single ranges, each covering the spans within `--remote-gap` of each other (and at
/// most the transport's longest range).
fn one(
    r: &Remote,
    t: &(impl Transport + ?Sized),
    spans: &[Span],
    parts: &mut [(u64, &mut [u8])],
    cfg: &Config,
) -> Result<()> {
    if spans.len() > 1 && t.budget().is_some() && r.multi.load(Ordering::Relaxed) != NO {
        match t.many(r, spans, parts, cfg)? {
            Answer::Multipart => {
                r.multi.store(YES, Ordering::Relaxed);
                return Ok(());
            }
            Answer::Covering => {
                r.multi.store(NO, Ordering::Relaxed);
                return Ok(());
            }
            Answer::Refused => r.multi.store(NO, Ordering::Relaxed),
        }
    }
    let longest = t.max_covering();
    let mut i = 0;
    while i < spans.len() {
        let mut j = i + 1;
        while j < spans.len()
            && spans[j].start - spans[j - 1].end <= cfg.gap
            && spans[j].end - spans[i].start <= longest
        {
            j += 1;
        }
        let (start, end) = (spans[i].start, spans[j - 1].end);
        t.covering(r, start, end, &mut parts[held(&spans[i..j])], cfg)?;
        i = j;
    }
    Ok(())
}

/// The parts `spans` hold, from the first's to the last's.
pub(super) fn held(spans: &[Span]) -> Range<usize> {
    spans.first().map_or(0, |s| s.parts.start)..spans.last().map_or(0, |s| s.parts.end)
}
