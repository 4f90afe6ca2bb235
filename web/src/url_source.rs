//! A model at a URL, read by `fetch` with range requests, as `organ measure URL` reads one
//! (docs/remote.md): the header in growing ranges, then the ranges the core's plans ask
//! for. Every answer is checked against the question (status 206, Content-Range start, end
//! and total, body length) and the object is pinned by its first answer's ETag and size: an
//! answer with another is an error (the file changed mid-read), never a wrong θ.
//!
//! A host that sends no CORS headers cannot be read from a page of another origin: `fetch`
//! rejects with a bare TypeError, which says no more (nor whether the host was reachable),
//! and the error says so and what to do.

use crate::error::Error;
use js_sys::{ArrayBuffer, Uint8Array};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Request, RequestCache, RequestInit, RequestMode, Response};

/// A file at a URL: its name (the last path segment), size and ETag, from its first answer.
#[derive(Debug, Clone, PartialEq)]
pub struct UrlFile {
    pub url: String,
    pub name: String,
    pub size: u64,
    /// The ETag of the first answer (`None`: the host sends none; then the size alone pins).
    pub etag: Option<String>,
}

/// What the page says when `fetch` itself fails: for another origin, a missing CORS header
/// is the usual cause.
pub fn cors_sentence(url: &str) -> String {
    format!(
        "{url}: the host does not allow reading this file from this page (its answer has no CORS header \
         Access-Control-Allow-Origin), or it could not be reached. Download the file and drop it here instead, \
         or serve it with CORS headers: Access-Control-Allow-Origin, and Access-Control-Expose-Headers: \
         Content-Range, ETag."
    )
}

/// `bytes A-B/TOTAL` as `(A, B + 1, TOTAL)`, each checked (A ≤ B < TOTAL).
fn content_range(raw: &str) -> Option<(u64, u64, u64)> {
    let (range, total) = raw.trim().strip_prefix("bytes ")?.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    let (a, b, total) = (a.parse::<u64>().ok()?, b.parse::<u64>().ok()?, total.parse::<u64>().ok()?);
    (a <= b && b < total).then_some((a, b + 1, total))
}

/// The last path segment of `url`, for the model's name.
fn name_of(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let last = path.trim_end_matches('/').rsplit('/').next().unwrap_or(path);
    if last.is_empty() {
        url.to_owned()
    } else {
        last.to_owned()
    }
}

/// One range request for `[start, end)`: the answer's body (`[start, end)`, or up to the
/// file's end when it is shorter), its Content-Range total and its ETag, each checked.
async fn get(url: &str, start: u64, end: u64) -> Result<(ArrayBuffer, u64, Option<String>), Error> {
    let init = RequestInit::new();
    init.set_method("GET");
    init.set_mode(RequestMode::Cors);
    // A cached answer could be of another version of the file than the others.
    init.set_cache(RequestCache::NoStore);
    let req = Request::new_with_str_and_init(url, &init)
        .map_err(|e| Error::Read(format!("{url}: not a URL this page can read: {e:?}")))?;
    let range = format!("bytes={start}-{}", end - 1);
    req.headers().set("Range", &range).map_err(|e| Error::Read(format!("{url}: {e:?}")))?;
    let window = web_sys::window().ok_or(Error::Internal("no window"))?;
    let answer = JsFuture::from(window.fetch_with_request(&req)).await.map_err(|_| Error::Read(cors_sentence(url)))?;
    let r: Response = answer.dyn_into().map_err(|_| Error::Read(format!("{url}: fetch gave no response")))?;
    let what = format!("{url}: bytes {start}..{end}");
    match r.status() {
        206 => {}
        200 => {
            return Err(Error::Read(format!(
                "{what}: the host answered with the whole file (200), not the range asked for: it does not \
                 serve range requests. Download the file and drop it here instead."
            )))
        }
        s => return Err(Error::Read(format!("{what}: HTTP {s} {}", r.status_text()))),
    }
    let h = r.headers();
    let cr = h.get("content-range").ok().flatten().ok_or_else(|| {
        Error::Read(format!(
            "{what}: no Content-Range in the answer: the host must expose it to this page \
             (Access-Control-Expose-Headers: Content-Range, ETag)"
        ))
    })?;
    let (a, b, total) =
        content_range(&cr).ok_or_else(|| Error::Read(format!("{what}: a malformed Content-Range {cr:?}")))?;
    if (a, b) != (start, end.min(total)) {
        return Err(Error::Read(format!("{what}: the answer holds bytes {a}..{b} (Content-Range {cr:?})")));
    }
    if let Some(len) = h.get("content-length").ok().flatten() {
        if len.trim().parse::<u64>().ok() != Some(b - a) {
            return Err(Error::Read(format!("{what}: Content-Length {len}, expected {}", b - a)));
        }
    }
    let etag = h.get("etag").ok().flatten();
    let body = JsFuture::from(r.array_buffer().map_err(|e| Error::Read(format!("{what}: {e:?}")))?)
        .await
        .map_err(|e| Error::Read(format!("{what}: the answer's body could not be read: {e:?}")))?;
    let body: ArrayBuffer = body.dyn_into().map_err(|_| Error::Read(format!("{what}: the body is not bytes")))?;
    if u64::from(body.byte_length()) != b - a {
        return Err(Error::Read(format!("{what}: {} bytes in the answer, expected {}", body.byte_length(), b - a)));
    }
    Ok((body, total, etag))
}

impl UrlFile {
    /// Opens `url`: its first `first` bytes (all of a smaller file), whose answer pins its
    /// size and ETag.
    pub async fn open(url: &str, first: u64) -> Result<(UrlFile, Vec<u8>), Error> {
        let url = url.trim();
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(Error::Read(format!("{url:?}: give an http:// or https:// URL")));
        }
        let (body, total, etag) = get(url, 0, first).await?;
        let f = UrlFile { url: url.to_owned(), name: name_of(url), size: total, etag };
        Ok((f, Uint8Array::new(&body).to_vec()))
    }

    /// Reads `[start, end)`: one range request, its answer checked and its size and ETag
    /// against the pinned ones.
    pub async fn read(&self, start: u64, end: u64) -> Result<ArrayBuffer, Error> {
        if start >= end || end > self.size {
            return Err(Error::Read(format!(
                "{}: bytes {start}..{end} are not inside its {} bytes",
                self.url, self.size
            )));
        }
        let (body, total, etag) = get(&self.url, start, end).await?;
        if total != self.size || etag != self.etag || u64::from(body.byte_length()) != end - start {
            let tag = |e: &Option<String>| e.clone().unwrap_or_else(|| "none".into());
            return Err(Error::Read(format!(
                "{}: the file changed while it was read (now {total} bytes, ETag {}; it was {} bytes, ETag {})",
                self.url,
                tag(&etag),
                self.size,
                tag(&self.etag)
            )));
        }
        Ok(body)
    }
}
