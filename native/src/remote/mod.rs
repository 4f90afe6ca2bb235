//! Models read over HTTP(S) by range requests (`organ inspect URL`, `organ measure URL`):
//! one more place bytes come from. The header is read in growing ranges and parsed by the
//! core, as the browser does; `measure` then reads only the sampled blocks, planned by the
//! core's `ReadPlan` and joined by its `Batcher` across gaps of up to `--remote-gap`
//! bytes, a few requests at a time (`--remote-concurrency`). docs/remote.md says it all.
//!
//! Every answer is checked against the question: the status, Content-Range (start, end and
//! total), the body's length, and the validator the object was pinned by on the first
//! answer (its ETag, sent back as If-Match, or else its Last-Modified, sent back as
//! If-Unmodified-Since). An object replaced mid-read is an error, never a wrong θ.
//!
//! The client is ureq (blocking, small, rustls): object_store refuses a 200 answer to a
//! range request, which organ must handle with its own fallback, and it would bring an
//! async runtime into the measuring path for nothing.
//!
//! `hf://` URLs ([`hub`]) are resolved by the Hub to an https URL, then read as any other;
//! `s3://`, `gs://` and `az://` URLs ([`store`]) are read through object_store, behind the
//! same [`Remote`], pinned and checked the same way.

mod byteranges;
mod fetch;
pub mod hub;
mod multi;
pub mod pace;
pub mod policy;
pub mod store;
mod store_api;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

pub use fetch::Pin;

/// How remote models are read (`--remote-gap`, `--remote-concurrency`, `--remote-retries`,
/// `--remote-max-whole`, `--remote-speed-limit`, `--remote-speed-time`).
#[derive(Clone, Debug)]
pub struct Config {
    /// Sampled blocks this close (bytes) share one request: a request costs a round trip,
    /// a gap's bytes cost only bandwidth.
    pub gap: u64,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Retries of one request (429, 5xx, a reset, a timeout, a short body) before failing.
    pub retries: u32,
    /// A server that ignores Range is read whole up to this size, refused above it; a model
    /// fetched whole to disk (diff, dissect, graft's donor) likewise.
    pub max_whole: u64,
    /// The least throughput of a transfer, and how long it may fall below it.
    pub speed: pace::Speed,
}

impl Default for Config {
    fn default() -> Config {
        Config { gap: 256 << 10, concurrency: 8, retries: 5, max_whole: 256 << 20, speed: pace::Speed::default() }
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Sets how remote models are read, once, before any is opened.
pub fn configure(c: Config) {
    let _ = CONFIG.set(c);
}

/// How remote models are read.
pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::default)
}

/// Bytes received in bodies, requests sent and retries made, for `--stats`.
pub static BYTES_FETCHED: AtomicU64 = AtomicU64::new(0);
pub static REQUESTS: AtomicU64 = AtomicU64::new(0);
pub static RETRIES: AtomicU64 = AtomicU64::new(0);
/// Of [`BYTES_FETCHED`], the bytes of multipart framing (boundaries, part headers).
pub static FRAMING: AtomicU64 = AtomicU64::new(0);

/// `(bytes fetched, requests, retries)` so far.
pub fn stats() -> (u64, u64, u64) {
    let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
    (l(&BYTES_FETCHED), l(&REQUESTS), l(&RETRIES))
}

/// How the bytes of a URL organ reads are reached, by its scheme: the one place schemes
/// are told apart. A new scheme is a line here, its check in [`parse`] and its opening in
/// [`Remote::open`], with a [`multi::Transport`] for its reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scheme {
    /// http(s): organ's own range requests.
    Http,
    /// `hf://`: resolved by the Hub to an https URL, then read as one ([`hub`]).
    Hub,
    /// s3, gs, az: through object_store ([`store`]).
    Store,
}

impl Scheme {
    /// The scheme of `s` (exactly as written), if organ reads it.
    fn of(s: &str) -> Option<Scheme> {
        match s {
            "http" | "https" => Some(Scheme::Http),
            "hf" => Some(Scheme::Hub),
            s if store::is_store_scheme(s) => Some(Scheme::Store),
            _ => None,
        }
    }

    /// The scheme `url` is written with, if organ reads it.
    fn of_url(url: &str) -> Option<Scheme> {
        Scheme::of(url.split_once("://")?.0)
    }
}

/// Whether `path` is written as a URL (`SCHEME://…`), of a scheme organ reads or not.
/// Asked once per name, by [`crate::location::Location::of`]; nothing else asks.
pub(crate) fn is_url(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.split_once("://").is_some_and(|(scheme, _)| scheme_like(scheme)))
}

fn scheme_like(s: &str) -> bool {
    s.len() >= 2 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
}

/// Parses `path` as a URL organ reads: http(s), `hf://` ([`hub::parse`]), or an object
/// store's ([`store::check`]).
///
/// # Errors
/// It is not a URL, or of another scheme, or not a valid one of its scheme.
pub fn parse(path: &Path) -> Result<url::Url> {
    let s = path.to_str().with_context(|| format!("{}: not a URL", path.display()))?;
    let u = url::Url::parse(s).map_err(|e| anyhow::anyhow!("{s}: not a valid URL ({e})"))?;
    if let Some(p) = policy::active() {
        p.check_url(&u).map_err(|e| anyhow::anyhow!("{}: {e}", policy::redact(s)))?;
    }
    match Scheme::of(u.scheme()) {
        Some(Scheme::Http) if u.host().is_some() => Ok(u),
        Some(Scheme::Http) => bail!("{s}: a URL without a host"),
        Some(Scheme::Hub) => hub::parse(s).map(|_| u),
        Some(Scheme::Store) => store::check(s, &u).map(|()| u),
        None => {
            let other = u.scheme();
            bail!("{s}: organ reads http://, https://, hf://, s3://, gs:// and az:// URLs, not {other}://")
        }
    }
}

/// If `path` is the URL of a llama.cpp split shard (`…/NAME-00002-of-00005.gguf`, query
/// kept), the URLs of all its shards in order: siblings by name, as local shards are found
/// (the core's [`organ_core::gguf::split::shard_urls`], as the browser's).
pub fn split_urls(path: &Path) -> Option<Vec<PathBuf>> {
    let s = path.to_str()?;
    let urls = match Scheme::of_url(s) {
        Some(Scheme::Hub) => hub::split_urls(s)?,
        _ => organ_core::gguf::split::shard_urls(parse(path).ok()?.as_str())?,
    };
    Some(urls.into_iter().map(PathBuf::from).collect())
}

/// An object on an HTTP server, pinned by its first answer: read by ranges.
pub struct Remote {
    /// The URL read (redirects are followed per request): as given, or where the Hub said
    /// an `hf://` file is.
    pub url: String,
    /// The object's size, from the first answer's Content-Range.
    pub size: u64,
    /// What every later answer must still match.
    pub pin: Pin,
    /// How its bytes are asked for: organ's own range requests (`ureq::Agent`,
    /// src/remote/fetch.rs) or a store's (`store::Object`, src/remote/store.rs).
    via: Box<dyn multi::Transport + Send + Sync>,
    /// The URL as given, when not [`Self::url`]: errors name both.
    name: String,
    /// What names the object in its identity, when not its URL and pin: an `hf://` file's
    /// URL at its commit and the Hub's ETag; a store object's URL and version.
    ident: Option<(String, Pin)>,
    /// Whether the server answers a request for many ranges with them ([`multi`]).
    multi: AtomicU8,
}

/// What the first request found.
pub enum Opened {
    /// A server that honours Range: the object pinned, and its first bytes.
    Ranged(Remote, Vec<u8>),
    /// A server that sent the whole body (it ignored Range), small enough to keep: the
    /// body, and the pin it came with (for the model's identity).
    Whole(Vec<u8>, Pin),
}

impl Remote {
    /// An object read by organ's own range requests.
    pub(super) fn new(url: String, size: u64, pin: Pin, agent: ureq::Agent) -> Remote {
        Remote { name: url.clone(), url, size, pin, via: Box::new(agent), ident: None, multi: AtomicU8::new(0) }
    }

    /// Asks for the first `first` bytes of `url` and pins the object.
    ///
    /// # Errors
    /// The request fails (after retries), the server's answer is not what was asked, or
    /// it gives no validator to pin the object by.
    pub fn open(url: &Path, first: u64) -> Result<Opened> {
        let u = parse(url)?;
        let given = url.to_str().unwrap_or_default();
        match Scheme::of_url(given) {
            Some(Scheme::Hub) => return hub::open(given, first),
            Some(Scheme::Store) => return store::open(given, first),
            Some(Scheme::Http) | None => {}
        }
        let agent = fetch::agent();
        fetch::first(&agent, u.as_str(), first, config())
            .map(|o| o.into_opened(agent, u.as_str().to_owned()))
            .with_context(|| format!("{u}: cannot read"))
    }

    /// Reads `buf.len()` bytes at `offset`, checked against the pin.
    ///
    /// # Errors
    /// Past the end, the object changed, or the server's answer is wrong.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let end = offset.checked_add(buf.len() as u64).filter(|&e| e <= self.size);
        if end.is_none() {
            bail!("{}: {} bytes at offset {offset} lie past its end ({} bytes)", self.url, buf.len(), self.size);
        }
        if buf.is_empty() {
            return Ok(());
        }
        let read = self.via.range(self, offset, buf, config());
        if self.name == self.url {
            return read;
        }
        read.with_context(|| self.name.clone())
    }

    /// Reads each `(offset, buffer)` of `parts` (ascending, disjoint), many ranges a
    /// request where the server allows it, else ranges within `--remote-gap` of each other
    /// joined ([`multi`], for HTTP servers and stores alike).
    ///
    /// # Errors
    /// As [`Self::read_exact_at`]; a multipart answer that is not what was asked.
    pub fn read_ranges(&self, parts: &mut [(u64, &mut [u8])]) -> Result<()> {
        multi::read_ranges(self, &*self.via, parts, config())
    }

    /// The file name the URL ends with (query left out), as reports name models.
    pub fn file_name(&self) -> String {
        file_name(&self.url)
    }
}

/// An object at a URL, read by range requests through its transport.
impl crate::byte_source::ByteSource for Remote {
    fn size(&self) -> u64 {
        self.size
    }
    fn what(&self) -> &str {
        &self.url
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        Remote::read_exact_at(self, buf, offset)
    }
    fn read_ranges(&self, parts: &mut [(u64, &mut [u8])]) -> Result<()> {
        Remote::read_ranges(self, parts)
    }
    fn origin(&self) -> Option<(Option<&str>, &Pin)> {
        Some(match &self.ident {
            Some((name, pin)) => (Some(name), pin),
            None => (None, &self.pin),
        })
    }
}

/// A store serves one range a request ([`store::Object::range`]); a range covering more
/// than one part is read into a buffer of its own, so it is at most 1 MiB.
impl multi::Transport for store::Object {
    fn range(&self, r: &Remote, offset: u64, buf: &mut [u8], _: &Config) -> Result<()> {
        self.range(&r.url, offset, buf, r.size, &r.pin)
    }

    fn covering(&self, r: &Remote, start: u64, end: u64, parts: &mut [(u64, &mut [u8])], _: &Config) -> Result<()> {
        if let [(o, b)] = parts {
            if *o == start && b.len() as u64 == end - start {
                return self.range(&r.url, start, b, r.size, &r.pin);
            }
        }
        let len = usize::try_from(end - start).context("a read too large")?;
        let mut buf = vec![0u8; len];
        self.range(&r.url, start, &mut buf, r.size, &r.pin)?;
        for (o, b) in parts.iter_mut() {
            let at = (*o - start) as usize;
            b.copy_from_slice(&buf[at..at + b.len()]);
        }
        Ok(())
    }

    fn max_covering(&self) -> u64 {
        1 << 20
    }
}

/// The last path segment of `url`, percent-decoded where that gives UTF-8.
pub fn file_name(url: &str) -> String {
    if let Some(u) = (Scheme::of_url(url) == Some(Scheme::Hub)).then(|| hub::parse(url).ok()).flatten() {
        return u.file_name().to_owned();
    }
    let seg = url::Url::parse(url).ok().and_then(|u| u.path_segments()?.next_back().map(str::to_owned));
    let seg = seg.filter(|s| !s.is_empty()).unwrap_or_else(|| url.to_owned());
    url::form_urlencoded::parse(format!("x={}", seg.replace('+', "%2B")).as_bytes())
        .next()
        .map_or(seg.clone(), |(_, v)| v.into_owned())
}

/// A remote model's identity for the measure cache: the URL, the validator and the size of
/// every file, hashed. An entity tag names a representation of one resource only (RFC
/// 9110, 8.8.3), so the URL is part of it; nothing of the content goes in (organ did not
/// read it all).
pub fn identity(files: &[(String, &Pin, u64)]) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"organ remote identity v1\0");
    for (url, pin, size) in files {
        for part in [url.as_str(), &pin.to_string(), &size.to_string()] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
    }
    h.finalize().to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// An object in memory, read one range a request as a store reads: the ranges asked.
    struct Mem {
        bytes: Vec<u8>,
        longest: u64,
        reads: RefCell<Vec<(u64, u64)>>,
    }

    impl multi::Transport for Mem {
        fn range(&self, r: &Remote, offset: u64, buf: &mut [u8], cfg: &Config) -> Result<()> {
            self.covering(r, offset, offset + buf.len() as u64, &mut [(offset, buf)], cfg)
        }

        fn covering(&self, _: &Remote, start: u64, end: u64, parts: &mut [(u64, &mut [u8])], _: &Config) -> Result<()> {
            self.reads.borrow_mut().push((start, end));
            for (o, b) in parts.iter_mut() {
                assert!(start <= *o && *o + b.len() as u64 <= end, "a part outside its range");
                b.copy_from_slice(&self.bytes[*o as usize..][..b.len()]);
            }
            Ok(())
        }

        fn max_covering(&self) -> u64 {
            self.longest
        }
    }

    /// One range a request: every part gets its bytes; each range starts and ends at a
    /// part's bounds, is no longer than the transport's longest (unless one span of
    /// touching parts is), and is apart from the next by more than the gap (or joining
    /// them would pass the longest).
    #[test]
    fn ranges_within_the_gap_share_a_read() {
        let bytes: Vec<u8> = (0..1u32 << 14).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8).collect();
        let mut seed = 0x9e37_79b9_u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut layout = Vec::new();
        let mut at = 0;
        while at + 1200 < bytes.len() as u64 {
            at += [0, 0, next(8), next(100), next(1000)][next(5) as usize];
            let len = if next(20) == 0 { 0 } else { 1 + next(200) };
            layout.push((at, len as usize));
            at += len;
        }
        let pin = Pin { etag: Some("\"e\"".into()), last_modified: None };
        let r = Remote::new("http://h.example/m.gguf".into(), bytes.len() as u64, pin, fetch::agent());
        for (gap, longest) in [(0, u64::MAX), (16, 256), (100, 1000), (1000, 4096), (u64::MAX, u64::MAX)] {
            let mem = Mem { bytes: bytes.clone(), longest, reads: RefCell::new(Vec::new()) };
            let cfg = Config { gap, ..Config::default() };
            let mut bufs: Vec<Vec<u8>> = layout.iter().map(|&(_, n)| vec![0; n]).collect();
            let mut parts: Vec<(u64, &mut [u8])> =
                layout.iter().zip(bufs.iter_mut()).map(|(&(o, _), b)| (o, b.as_mut_slice())).collect();
            multi::read_ranges(&r, &mem, &mut parts, &cfg).unwrap();
            for (&(o, n), b) in layout.iter().zip(&bufs) {
                assert_eq!(b[..], bytes[o as usize..][..n], "the part at {o}");
            }
            let reads = mem.reads.into_inner();
            let bounds = |x: u64| layout.iter().any(|&(o, n)| n > 0 && (o == x || o + n as u64 == x));
            for &(a, b) in &reads {
                assert!(bounds(a) && bounds(b), "a range {a}-{b} not at parts' bounds");
                let inside: u64 = layout.iter().filter(|&&(o, _)| a <= o && o < b).map(|&(_, n)| n as u64).sum();
                let one_span = inside == b - a;
                assert!(b - a <= longest || one_span, "a range {a}-{b} longer than {longest}");
            }
            for w in reads.windows(2) {
                let ((a, b), (c, d)) = (w[0], w[1]);
                assert!(c >= b && (c - b > gap || d - a > longest), "ranges {a}-{b} and {c}-{d} with gap {gap}");
            }
            assert!(reads.len() > 1 || gap == u64::MAX, "{gap}: {reads:?}");
        }
    }

    #[test]
    fn split_urls_keep_the_query() {
        let u = Path::new("https://h.example/m/x-00002-of-00003.gguf?sig=a%2Fb");
        let got = split_urls(u).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], Path::new("https://h.example/m/x-00001-of-00003.gguf?sig=a%2Fb"));
        assert_eq!(got[2], Path::new("https://h.example/m/x-00003-of-00003.gguf?sig=a%2Fb"));
        assert!(split_urls(Path::new("https://h.example/m/x.gguf")).is_none());
    }

    #[test]
    fn urls_and_schemes() {
        assert!(is_url(Path::new("http://a/b.gguf")));
        assert!(is_url(Path::new("ftp://a/b.gguf")));
        assert!(!is_url(Path::new("models/b.gguf")));
        assert!(!is_url(Path::new("./x://y")));
        assert!(parse(Path::new("ftp://a/b.gguf")).unwrap_err().to_string().contains("not ftp://"));
        assert!(parse(Path::new("http://")).is_err());
        assert_eq!(file_name("http://a/m/x%20y.gguf?q=1"), "x y.gguf");
    }
}
