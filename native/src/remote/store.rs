//! `s3://BUCKET/KEY`, `gs://BUCKET/KEY` and `az://CONTAINER/KEY`: objects read through
//! object_store (the Arrow project's client for S3, GCS and Azure Blob), which signs the
//! requests with credentials from the usual environment (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, …; the
//! `GOOGLE_*` and `AZURE_*` ones) and checks each answer's Content-Range.
//!
//! object_store is async. Its runtime stays here: one small tokio runtime, made on the
//! first store URL, on which each [`Object::range`] blocks; the measuring path above sees
//! blocking reads, as for http(s) URLs.
//!
//! Retries are organ's, counted in `--stats` as http(s) URLs count theirs: object_store's
//! own are off, and every request it makes goes through [`Counted`], which retries 429,
//! 5xx and failed connections with the same backoff; a body cut short is asked again
//! here. The object is pinned by the first answer's ETag (`If-Match` on every later read)
//! and, in a versioned bucket, its version: a replaced object is an error.

use super::pace::Pace;
use super::{config, Opened, Pin, Remote, BYTES_FETCHED, REQUESTS, RETRIES};
use anyhow::{anyhow, bail, Context, Result};
use futures_util::StreamExt;
use object_store::client::{
    ClientOptions, HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
    ReqwestConnector,
};
use object_store::path::Path as Key;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreScheme, RetryConfig};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// The schemes object_store reads, by the store they name.
pub fn is_store_scheme(scheme: &str) -> bool {
    matches!(scheme, "s3" | "s3a" | "gs" | "az" | "adl" | "azure" | "abfs" | "abfss")
}

/// Checks that `u` names an object: a bucket (container) and a key.
///
/// # Errors
/// object_store does not recognise it, or the key is empty.
pub fn check(s: &str, u: &url::Url) -> Result<()> {
    let (_, key) = ObjectStoreScheme::parse(u).map_err(|e| anyhow!("{s}: not a valid object URL ({e})"))?;
    if u.host_str().is_none_or(str::is_empty) || key.as_ref().is_empty() {
        bail!("{s}: not a valid object URL: write s3://BUCKET/KEY (gs://, az:// alike)");
    }
    Ok(())
}

/// An object in a store, and the version it was pinned to, if the store keeps versions.
pub struct Object {
    store: Arc<dyn ObjectStore>,
    key: Key,
    version: Option<String>,
}

/// The one runtime of the stores: two worker threads drive the connections; readers
/// block on it.
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<std::io::Result<tokio::runtime::Runtime>> = OnceLock::new();
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("organ-store").enable_all().build()
    });
    rt.as_ref().map_err(|e| anyhow!("cannot start the object-store runtime: {e}"))
}

/// The store `u` names, its credentials and endpoint from the environment (under `organ
/// serve`, only what the operator gave API jobs: [`super::store_api`]), with organ's
/// retries in place of object_store's.
fn build(s: &str, u: &url::Url) -> Result<(Arc<dyn ObjectStore>, Key)> {
    // rustls with ring (as ureq has it); reqwest brings no provider of its own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (scheme, key) = ObjectStoreScheme::parse(u).map_err(|e| anyhow!("{s}: not a valid object URL ({e})"))?;
    let retry = RetryConfig { max_retries: 0, ..RetryConfig::default() };
    let api = super::policy::active().is_some();
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::AmazonS3 => Arc::new(
            (if api { super::store_api::s3() } else { object_store::aws::AmazonS3Builder::from_env() })
                .with_url(s)
                .with_retry(retry)
                .with_http_connector(Connector)
                .build()?,
        ),
        ObjectStoreScheme::GoogleCloudStorage => Arc::new(
            (if api { super::store_api::gcs() } else { object_store::gcp::GoogleCloudStorageBuilder::from_env() })
                .with_url(s)
                .with_retry(retry)
                .with_http_connector(Connector)
                .build()?,
        ),
        ObjectStoreScheme::MicrosoftAzure => Arc::new(
            (if api { super::store_api::azure() } else { object_store::azure::MicrosoftAzureBuilder::from_env() })
                .with_url(s)
                .with_retry(retry)
                .with_http_connector(Connector)
                .build()?,
        ),
        other => bail!("{s}: organ does not read {other:?} URLs through a store"),
    };
    Ok((store, key))
}

/// How a read failed: worth another try, or not.
enum Fail {
    Retry(anyhow::Error),
    Fatal(anyhow::Error),
}

/// What object_store's error means, in words.
fn fatal(e: object_store::Error) -> Fail {
    use object_store::Error as E;
    Fail::Fatal(match e {
        E::Precondition { .. } => {
            anyhow!("the object changed in the store since organ first read it (replaced mid-read)")
        }
        E::NotFound { .. } => anyhow!("no such object (or no such bucket): {}", brief(&e)),
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            anyhow!("access denied (check the credentials in the environment): {}", brief(&e))
        }
        e => anyhow!("{}", brief(&e)),
    })
}

/// `e` in words, an XML error body the store sent cut to its `<Code>` and `<Message>`'s
/// first line.
fn brief(e: &object_store::Error) -> String {
    let text = e.to_string();
    let Some(at) = text.find("<?xml") else { return text };
    let tag = |t: &str| {
        let from = text.find(&format!("<{t}>"))? + t.len() + 2;
        // Azure's Message goes on with RequestId and Time lines: its first line says it.
        Some(text[from..].split('<').next()?.lines().next()?.to_owned())
    };
    let said: Vec<String> = ["Code", "Message"].into_iter().filter_map(tag).collect();
    format!("{}{}", &text[..at], said.join(": "))
}

/// Streams a body into `buf`, which it must fill exactly; a body that breaks off or comes
/// short is worth a retry (the request's own failures were retried by [`Counted`]), a
/// stalled one fails ([`super::pace`]).
async fn read_body(r: object_store::GetResult, buf: &mut [u8]) -> Result<(), Fail> {
    let speed = config().speed;
    let mut pace = Pace::new(speed);
    let mut body = r.into_stream();
    let mut got = 0;
    loop {
        let next = tokio::time::timeout(Pace::read_timeout(speed), body.next()).await;
        let Ok(next) = next else {
            // Nothing for a whole window: as slow as can be.
            return Err(Fail::Fatal(anyhow!("{}", pace.idle())));
        };
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(|e| Fail::Retry(anyhow!("the body broke off after {got} bytes: {e}")))?;
        pace.tick(chunk.len()).map_err(|s| Fail::Fatal(anyhow!("{s}")))?;
        BYTES_FETCHED.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        let want = buf.len();
        let to = buf
            .get_mut(got..got + chunk.len())
            .ok_or_else(|| Fail::Fatal(anyhow!("a body longer than the {want} bytes asked")))?;
        to.copy_from_slice(&chunk);
        got += chunk.len();
    }
    if got < buf.len() {
        return Err(Fail::Retry(anyhow!("a short body: {got} of {} bytes", buf.len())));
    }
    Ok(())
}

/// Runs `f` until it succeeds, fails for good, or has been retried `retries` times.
fn with_retries(mut f: impl FnMut() -> Result<(), Fail>) -> Result<()> {
    let retries = config().retries;
    let mut tries = 0u32;
    loop {
        match f() {
            Ok(()) => return Ok(()),
            Err(Fail::Fatal(e)) => return Err(e),
            Err(Fail::Retry(e)) if tries < retries => {
                tries += 1;
                RETRIES.fetch_add(1, Ordering::Relaxed);
                crate::progress::warn(format!("{e:#}; retry {tries} of {retries}"));
                std::thread::sleep(super::fetch::backoff(tries, None));
            }
            Err(Fail::Retry(e)) => return Err(e.context(format!("gave up after {retries} retries"))),
        }
    }
}

/// Opens the object at `s` and reads its first `first` bytes (fewer when it is smaller),
/// pinning it by the answer's ETag and version.
///
/// # Errors
/// The store cannot be reached or refuses, the object is missing, or the store gives no
/// ETag to pin it by.
pub fn open(s: &str, first: u64) -> Result<Opened> {
    let u = url::Url::parse(s).with_context(|| format!("{s}: not a valid URL"))?;
    let (store, key) = build(s, &u).with_context(|| format!("{s}: cannot open the store"))?;
    let rt = runtime()?;
    let opts = GetOptions { range: Some(GetRange::Bounded(0..first)), ..GetOptions::default() };
    let mut prefix = Vec::new();
    let mut found: Option<(Pin, Option<String>, u64)> = None;
    with_retries(|| {
        rt.block_on(async {
            let r = store.get_opts(&key, opts.clone()).await.map_err(fatal)?;
            let (meta, range) = (&r.meta, &r.range);
            if meta.e_tag.is_none() && meta.version.is_none() {
                return Err(Fail::Fatal(anyhow!(
                    "the store gives neither ETag nor version, so organ could not tell if the object changed"
                )));
            }
            if range.start != 0 || range.end != first.min(meta.size) {
                let (a, b, n) = (range.start, range.end, meta.size);
                return Err(Fail::Fatal(anyhow!("asked for bytes 0-{}, the store sent {a}-{b} of {n}", first - 1)));
            }
            found = Some((Pin { etag: meta.e_tag.clone(), last_modified: None }, meta.version.clone(), meta.size));
            prefix = vec![0; range.end as usize];
            read_body(r, &mut prefix).await
        })
    })
    .with_context(|| format!("{s}: cannot read"))?;
    let (pin, version, size) = found.context("no answer")?;
    let ident = version.as_ref().map(|v| (format!("{s} version {v}"), pin.clone()));
    let via = Box::new(Object { store, key, version });
    let remote = Remote { url: s.to_owned(), size, pin, via, name: s.to_owned(), ident, multi: Default::default() };
    Ok(Opened::Ranged(remote, prefix))
}

impl Object {
    /// Reads bytes `[offset, offset + buf.len())` of the object at `url`, of `size` bytes,
    /// pinned by `pin` and its version.
    ///
    /// # Errors
    /// The object changed, the store fails (after retries), or its answer is not what
    /// was asked.
    pub fn range(&self, url: &str, offset: u64, buf: &mut [u8], size: u64, pin: &Pin) -> Result<()> {
        let end = offset + buf.len() as u64;
        let opts = GetOptions {
            range: Some(GetRange::Bounded(offset..end)),
            if_match: pin.etag.clone(),
            version: self.version.clone(),
            ..GetOptions::default()
        };
        let rt = runtime()?;
        with_retries(|| {
            rt.block_on(async {
                let r = self.store.get_opts(&self.key, opts.clone()).await.map_err(fatal)?;
                if r.meta.e_tag != pin.etag {
                    let now = &r.meta.e_tag;
                    return Err(Fail::Fatal(anyhow!(
                        "the object changed in the store mid-read: {pin} at first, {now:?} now"
                    )));
                }
                if (r.range.start, r.range.end, r.meta.size) != (offset, end, size) {
                    let (a, b, n) = (r.range.start, r.range.end, r.meta.size);
                    return Err(Fail::Fatal(anyhow!("the store sent bytes {a}-{b} of {n}")));
                }
                read_body(r, &mut *buf).await
            })
        })
        .with_context(|| format!("{url}: bytes {offset}-{} of {size}", end - 1))
    }
}

/// Makes object_store's HTTP clients [`Counted`] ones.
#[derive(Debug)]
struct Connector;

impl HttpConnector for Connector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = match super::policy::active() {
            Some(p) => super::store_api::client(p, options)?,
            None => ReqwestConnector::default().connect(options)?,
        };
        Ok(HttpClient::new(Counted(inner)))
    }
}

/// object_store's HTTP client, every request counted in `--stats`, and tried again on 429,
/// 5xx (after their Retry-After, at most 10 s) and failed connections, as http(s) URLs are.
#[derive(Debug)]
struct Counted(HttpClient);

#[async_trait::async_trait]
impl HttpService for Counted {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let retries = config().retries;
        if let Some(p) = super::policy::active() {
            if !super::store_api::may_send(p, req.uri()) {
                let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, super::policy::UNREACHABLE);
                return Err(HttpError::new(HttpErrorKind::Connect, refused));
            }
        }
        let (parts, body) = req.into_parts();
        let mut tries = 0u32;
        loop {
            let mut again = http::Request::new(body.clone());
            *again.method_mut() = parts.method.clone();
            *again.uri_mut() = parts.uri.clone();
            *again.version_mut() = parts.version;
            *again.headers_mut() = parts.headers.clone();
            REQUESTS.fetch_add(1, Ordering::Relaxed);
            let (why, after) = match self.0.execute(again).await {
                Ok(r) if super::fetch::retryable(r.status().as_u16()) && tries < retries => {
                    let after =
                        r.headers().get("retry-after").and_then(|v| super::fetch::retry_after(v.to_str().ok()?));
                    (format!("HTTP {}", r.status()), after)
                }
                Err(e)
                    if tries < retries
                        && matches!(
                            e.kind(),
                            HttpErrorKind::Connect
                                | HttpErrorKind::Request
                                | HttpErrorKind::Timeout
                                | HttpErrorKind::Interrupted
                        ) =>
                {
                    (e.to_string(), None)
                }
                done => return done,
            };
            tries += 1;
            RETRIES.fetch_add(1, Ordering::Relaxed);
            crate::progress::warn(format!("{} {}: {why}; retry {tries} of {retries}", parts.method, parts.uri));
            tokio::time::sleep(super::fetch::backoff(tries, after)).await;
        }
    }
}

/// A prefix in a store under which organ keeps small files by name: a fleet's results
/// (`--results s3://BUCKET/PREFIX`, docs/fleet.md). Reads and writes go through the same
/// client, runtime, retries and counts as the models' reads.
pub struct Prefix {
    /// The URL as given, without a trailing `/`: messages name `URL/NAME`.
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: Key,
}

impl Prefix {
    /// The prefix `s` names (a bucket's root when it has no path), credentials and
    /// endpoint from the environment. Nothing is asked of the store yet.
    ///
    /// # Errors
    /// `s` is not a store URL (s3://, gs://, az://) with a bucket.
    pub fn open(s: &str) -> Result<Prefix> {
        let u = url::Url::parse(s).map_err(|e| anyhow!("{s}: not a valid URL ({e})"))?;
        if !is_store_scheme(u.scheme()) {
            bail!("{s}: results go to a directory or an object store (s3://, gs://, az://), not {}://", u.scheme());
        }
        if u.host_str().is_none_or(str::is_empty) {
            bail!("{s}: not a valid store URL: write s3://BUCKET/PREFIX (gs://, az:// alike)");
        }
        let (store, prefix) = build(s, &u).with_context(|| format!("{s}: cannot open the store"))?;
        Ok(Prefix { url: s.trim_end_matches('/').to_owned(), store, prefix })
    }

    /// `URL/NAME`, for messages.
    pub fn locate(&self, name: &str) -> String {
        format!("{}/{name}", self.url)
    }

    /// The bytes of the object `name` (one path segment), `None` when there is none. Its
    /// size is checked against `max` from the answer's headers, before its body is read.
    ///
    /// # Errors
    /// The store fails (after retries) or refuses, the bucket does not exist, or the
    /// object is larger than `max`.
    pub fn get(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
        let key = self.prefix.clone().join(name);
        let rt = runtime()?;
        let mut found = None;
        with_retries(|| {
            rt.block_on(async {
                let r = match self.store.get_opts(&key, GetOptions::default()).await {
                    // A missing bucket is an error; a missing object is an answer.
                    Err(e @ object_store::Error::NotFound { .. }) if !e.to_string().contains("NoSuchBucket") => {
                        found = None;
                        return Ok(());
                    }
                    r => r.map_err(fatal)?,
                };
                let size = r.meta.size;
                let len = usize::try_from(size).ok().filter(|_| size <= max).ok_or_else(|| {
                    Fail::Fatal(anyhow!("an object of {size} bytes, over {max}: not a result of organ's"))
                })?;
                let mut bytes = vec![0; len];
                read_body(r, &mut bytes).await?;
                found = Some(bytes);
                Ok(())
            })
        })
        .with_context(|| format!("{}: cannot read", self.locate(name)))?;
        Ok(found)
    }

    /// Stores `bytes` as the object `name` in one PUT, which the store applies whole or
    /// not at all. Without `replace` it is a conditional create (S3 `If-None-Match: *`,
    /// GCS generation 0, Azure `If-None-Match: *`): an object already there is kept, and
    /// `false` says so.
    ///
    /// # Errors
    /// The store fails (after retries) or refuses.
    pub fn put(&self, name: &str, bytes: &[u8], replace: bool) -> Result<bool> {
        let key = self.prefix.clone().join(name);
        let mode = if replace { object_store::PutMode::Overwrite } else { object_store::PutMode::Create };
        let payload = object_store::PutPayload::from(bytes.to_vec());
        let put = runtime()?.block_on(self.store.put_opts(&key, payload, mode.into()));
        match put {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) if !replace => Ok(false),
            Err(e) => {
                let (Fail::Fatal(e) | Fail::Retry(e)) = fatal(e);
                Err(e.context(format!("{}: cannot write", self.locate(name))))
            }
        }
    }
}
