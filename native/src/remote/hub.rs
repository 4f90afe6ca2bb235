//! `hf://OWNER/REPO/PATH.gguf[@REVISION]`: a GGUF in a model repository of the Hugging Face
//! Hub (or a mirror: `HF_ENDPOINT`), read by range requests like any http(s) URL once the
//! Hub has said where the file is.
//!
//! The Hub is asked the way `huggingface_hub` asks it (`get_hf_file_metadata`): a `HEAD` of
//! `ENDPOINT/OWNER/REPO/resolve/REVISION/PATH`, with `Authorization: Bearer $HF_TOKEN` when
//! the token is set, following only redirects to the Hub's own origin (a renamed repo). Its
//! answer names the commit the revision resolves to (`X-Repo-Commit`), the file's ETag
//! (`X-Linked-Etag` for an LFS file, else `ETag`) and size (`X-Linked-Size`, else
//! `Content-Length`); an LFS file's answer is a redirect to a signed CDN URL, which is then
//! read by ranges *without* the token, as `huggingface_hub` drops it for another host. The
//! token goes only to requests of the Hub's own origin: ureq sends no Authorization on a
//! redirect ([`ureq::RedirectAuthHeaders::Never`], its default).
//!
//! A model's identity is the commit and the Hub's ETag and size: never a hash of bytes
//! organ did not read.

use super::{config, fetch, Opened, Pin, REQUESTS, RETRIES};
use anyhow::{anyhow, bail, Context, Result};
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The Hub, unless `HF_ENDPOINT` names a mirror.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// What Python's `urllib.parse.quote` keeps, as `huggingface_hub` builds its URLs: letters,
/// digits and `_.-~`.
const QUOTE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'_').remove(b'.').remove(b'-').remove(b'~');

/// An `hf://` URL, taken apart and percent-decoded.
#[derive(Debug, PartialEq, Eq)]
pub struct HfUrl {
    pub owner: String,
    pub repo: String,
    /// The file's path in the repository, `/`-separated.
    pub path: String,
    /// A branch, tag or commit; `main` when the URL gives none.
    pub revision: String,
}

/// Parses `hf://OWNER/REPO/PATH.gguf[@REVISION]`. The revision is everything after the
/// first `@` past `OWNER/REPO/`, so a branch with `/` in its name is written as is
/// (`@refs/pr/1`) or percent-encoded (`@refs%2Fpr%2F1`); a path with an `@` in it writes
/// it `%40`.
///
/// # Errors
/// Not an `hf://` URL, or a part is missing, empty or not a GGUF's name.
pub fn parse(s: &str) -> Result<HfUrl> {
    let rest = s.strip_prefix("hf://").with_context(|| format!("{s}: not an hf:// URL"))?;
    let bad = |why: &str| anyhow!("{s}: not a valid hf:// URL ({why}): write hf://OWNER/REPO/PATH.gguf[@REVISION]");
    let mut parts = rest.splitn(3, '/');
    let (owner, repo, file) = match (parts.next(), parts.next(), parts.next()) {
        (Some(o), Some(r), Some(f)) => (o, r, f),
        _ => return Err(bad("it needs an owner, a repository and a path")),
    };
    let (path, revision) = match file.split_once('@') {
        Some((p, r)) => (p, Some(r)),
        None => (file, None),
    };
    let decode = |part: &str, what: &str| -> Result<String> {
        let d = percent_decode_str(part).decode_utf8().map_err(|_| bad(&format!("the {what} is not UTF-8")))?;
        if d.is_empty() || d.chars().any(char::is_control) {
            return Err(bad(&format!("an empty or unprintable {what}")));
        }
        Ok(d.into_owned())
    };
    let name_ok = |n: &str| n.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) && !n.starts_with('.');
    let (owner, repo) = (decode(owner, "owner")?, decode(repo, "repository")?);
    if !name_ok(&owner) || !name_ok(&repo) {
        return Err(bad("an owner or repository name has characters the Hub does not allow"));
    }
    let segments: Vec<String> = path.split('/').map(|p| decode(p, "path")).collect::<Result<_>>()?;
    if segments.iter().any(|p| p == "." || p == ".." || p.contains('/')) {
        return Err(bad("a path segment is `.`, `..` or holds an encoded `/`"));
    }
    let path = segments.join("/");
    if !path.to_ascii_lowercase().ends_with(".gguf") {
        return Err(bad("the path must name a .gguf file"));
    }
    let revision = revision.map_or(Ok("main".to_owned()), |r| decode(r, "revision"))?;
    Ok(HfUrl { owner, repo, path, revision })
}

impl HfUrl {
    /// The Hub's resolve URL of the file at `revision`: `ENDPOINT/OWNER/REPO/resolve/REV/PATH`,
    /// the revision percent-encoded whole (a `/` in it too) and the path segment by segment,
    /// as `huggingface_hub.hf_hub_url` builds it.
    pub fn resolve_url(&self, endpoint: &str, revision: &str) -> String {
        let enc = |s: &str| utf8_percent_encode(s, QUOTE).to_string();
        let path: Vec<String> = self.path.split('/').map(enc).collect();
        let (o, r) = (enc(&self.owner), enc(&self.repo));
        format!("{}/{o}/{r}/resolve/{}/{}", endpoint.trim_end_matches('/'), enc(revision), path.join("/"))
    }

    /// `hf://OWNER/REPO/PATH@REVISION`, each part percent-encoded where it must be to
    /// parse back.
    pub fn to_url(&self, revision: &str) -> String {
        const PART: &AsciiSet = &QUOTE.remove(b'/');
        let enc = |s: &str, set| utf8_percent_encode(s, set).to_string();
        format!("hf://{}/{}/{}@{}", self.owner, self.repo, enc(&self.path, QUOTE_PATH), enc(revision, PART))
    }

    /// The file's name, as reports name models.
    pub fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// A path's bytes that must be encoded to survive [`parse`]: `%`, `@` and what is not
/// printable ASCII.
const QUOTE_PATH: &AsciiSet = &percent_encoding::CONTROLS.add(b'%').add(b'@').add(b' ');

/// The Hub's origin: `HF_ENDPOINT`, or the Hub's.
///
/// # Errors
/// `HF_ENDPOINT` is not an http(s) URL.
pub fn endpoint() -> Result<String> {
    let e = super::policy::var("HF_ENDPOINT").filter(|e| !e.trim().is_empty());
    let e = e.as_deref().unwrap_or(DEFAULT_ENDPOINT).trim().trim_end_matches('/').to_owned();
    match url::Url::parse(&e) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(e),
        _ => bail!("HF_ENDPOINT={e}: not an http(s) URL"),
    }
}

/// `HF_TOKEN` (under `organ serve`, `ORGAN_API_HF_TOKEN`), when set and not empty.
fn token() -> Option<String> {
    super::policy::var("HF_TOKEN").map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
}

/// The same scheme, host and port.
fn same_origin(a: &str, b: &str) -> bool {
    match (url::Url::parse(a), url::Url::parse(b)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

/// Adds `Authorization: Bearer TOKEN` to the requests of one origin only.
struct Bearer {
    origin: String,
    header: String,
}

impl ureq::Middleware for Bearer {
    fn handle(&self, req: ureq::Request, next: ureq::MiddlewareNext) -> Result<ureq::Response, ureq::Error> {
        let req = if same_origin(req.url(), &self.origin) { req.set("Authorization", &self.header) } else { req };
        next.handle(req)
    }
}

/// A client like the plain URLs' ([`fetch::agent`]), redirects followed or not, that sends
/// the token to the Hub's origin only.
fn agent(endpoint: &str, redirects: u32) -> ureq::Agent {
    let b = fetch::builder().redirects(redirects).redirect_auth_headers(ureq::RedirectAuthHeaders::Never);
    match token() {
        Some(t) => b.middleware(Bearer { origin: endpoint.to_owned(), header: format!("Bearer {t}") }).build(),
        None => b.build(),
    }
}

/// What the Hub said of a file.
#[derive(Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The commit the revision resolves to.
    pub commit: String,
    /// `X-Linked-Etag` (an LFS file's sha256) or `ETag`, as given.
    pub etag: String,
    /// `X-Linked-Size` or `Content-Length`, when given.
    pub size: Option<u64>,
    /// Where the bytes are: the signed CDN URL a redirect named, or the resolve URL.
    pub location: String,
}

/// Reads the Hub's answer: a 2xx, or a redirect to another origin (`Location`), with the
/// commit and ETag headers. `url` is the URL asked.
pub fn resolved(url: &str, r: &ureq::Response) -> Result<Resolved> {
    let h = |n: &str| r.header(n).map(str::trim).filter(|v| !v.is_empty());
    let commit = h("x-repo-commit").with_context(|| {
        format!("{url}: the answer has no X-Repo-Commit header: not the Hugging Face Hub (check HF_ENDPOINT)")
    })?;
    if !commit.bytes().all(|b| b.is_ascii_hexdigit()) || !(7..=64).contains(&commit.len()) {
        bail!("{url}: X-Repo-Commit {commit:?} is not a commit id");
    }
    let etag = h("x-linked-etag").or_else(|| h("etag")).with_context(|| format!("{url}: the Hub gave no ETag"))?;
    let redirect = (300..400).contains(&r.status());
    let size = match h("x-linked-size").or(if redirect { None } else { h("content-length") }) {
        Some(n) => Some(n.parse::<u64>().map_err(|_| anyhow!("{url}: the Hub gave a size {n:?}"))?),
        None => None,
    };
    let location = if redirect {
        let to = h("location").with_context(|| format!("{url}: HTTP {} without Location", r.status()))?;
        let base = url::Url::parse(url).with_context(|| format!("{url}: not a valid URL"))?;
        base.join(to).map_err(|e| anyhow!("{url}: a redirect to {to:?}, not a valid URL ({e})"))?.to_string()
    } else {
        url.to_owned()
    };
    Ok(Resolved { commit: commit.to_owned(), etag: etag.to_owned(), size, location })
}

/// What a failed answer means, in words, with the Hub's own error code and message.
fn refusal(url: &str, code: u16, r: &ureq::Response) -> anyhow::Error {
    let said = [r.header("x-error-code"), r.header("x-error-message")].into_iter().flatten().collect::<Vec<_>>();
    let said = if said.is_empty() { String::new() } else { format!(" ({})", said.join(": ")) };
    let hint = match (code, token().is_some()) {
        (401 | 403, false) => ": a private or gated repository needs a token in HF_TOKEN",
        (401 | 403, true) => ": HF_TOKEN does not give access to it",
        (404, _) => ": no such repository, revision or file",
        _ => "",
    };
    anyhow!("{url}: HTTP {code} {}{said}{hint}", r.status_text())
}

/// Asks the Hub where `u`'s file is: `HEAD` of its resolve URL, following redirects to
/// the Hub's own origin only (at most 5), retrying 429 and 5xx answers and failed
/// connections as plain URLs are.
///
/// # Errors
/// The Hub refuses (401, 403, 404 …), cannot be reached, or its answer lacks what names
/// the file.
pub fn resolve(u: &HfUrl, endpoint: &str) -> Result<Resolved> {
    let a = agent(endpoint, 0);
    let mut url = u.resolve_url(endpoint, &u.revision);
    let cfg = config();
    let (mut hops, mut tries) = (0, 0u32);
    loop {
        REQUESTS.fetch_add(1, Ordering::Relaxed);
        let answer = match a.head(&url).set("Accept-Encoding", "identity").call() {
            Ok(r) => Ok(r),
            Err(ureq::Error::Status(code, r)) if (300..400).contains(&code) => Ok(r),
            Err(e) => Err(e),
        };
        let retry = match answer {
            Ok(r) if (300..400).contains(&r.status()) && r.header("x-repo-commit").is_none() => {
                let to = r.header("location").unwrap_or_default();
                let next = url::Url::parse(&url).and_then(|b| b.join(to)).map(|n| n.to_string());
                match next {
                    Ok(n) if same_origin(&n, endpoint) && hops < 5 => {
                        hops += 1;
                        url = n;
                        continue;
                    }
                    _ => bail!("{url}: HTTP {} to {to:?}: not a file the Hub resolves", r.status()),
                }
            }
            Ok(r) => return resolved(&url, &r),
            Err(ureq::Error::Status(code @ (429 | 500 | 502 | 503 | 504), r)) => {
                let after = r.header("retry-after").and_then(|s| s.trim().parse::<u64>().ok());
                (anyhow!("{url}: HTTP {code} {}", r.status_text()), after.map(Duration::from_secs))
            }
            Err(ureq::Error::Status(code, r)) => return Err(refusal(&url, code, &r)),
            Err(ureq::Error::Transport(_)) if super::policy::active().is_some() => {
                bail!("{url}: {}", super::policy::UNREACHABLE)
            }
            Err(ureq::Error::Transport(t)) => match t.kind() {
                ureq::ErrorKind::Io | ureq::ErrorKind::ConnectionFailed => (anyhow!("{url}: {t}"), None),
                _ => bail!("{url}: {t}"),
            },
        };
        if tries >= cfg.retries {
            return Err(retry.0.context(format!("gave up after {} retries", cfg.retries)));
        }
        tries += 1;
        RETRIES.fetch_add(1, Ordering::Relaxed);
        crate::progress::warn(format!("{:#}; retry {tries} of {}", retry.0, cfg.retries));
        std::thread::sleep(retry.1.unwrap_or(Duration::from_millis(100 << tries.min(7))).min(Duration::from_secs(10)));
    }
}

/// Opens `hf://…`: resolves it, then reads its first `first` bytes from where the Hub said
/// they are, pinned by that server's ETag as any URL is. The remote's identity is the
/// commit, the Hub's ETag and the size.
///
/// # Errors
/// The URL is not valid, the Hub refuses or cannot be reached, the file's server fails,
/// or its size is not the one the Hub gave.
pub fn open(given: &str, first: u64) -> Result<Opened> {
    let u = parse(given)?;
    let endpoint = endpoint().with_context(|| format!("{given}: cannot resolve"))?;
    let r = resolve(&u, &endpoint).with_context(|| format!("{given}: cannot resolve"))?;
    let agent = agent(&endpoint, 10);
    let opened = fetch::first(&agent, &r.location, first, config())
        .map(|o| o.into_opened(agent, r.location.clone()))
        .with_context(|| format!("{given}: cannot read (at {})", r.location))?;
    let ident = (u.to_url(&r.commit), Pin { etag: Some(r.etag.clone()), last_modified: None });
    Ok(match opened {
        Opened::Ranged(mut remote, prefix) => {
            if r.size.is_some_and(|n| n != remote.size) {
                bail!("{given}: the Hub says {} bytes, its file has {}", r.size.unwrap_or(0), remote.size);
            }
            remote.name = given.to_owned();
            remote.ident = Some(ident);
            Opened::Ranged(remote, prefix)
        }
        Opened::Whole(body, _) => {
            if r.size.is_some_and(|n| n != body.len() as u64) {
                bail!("{given}: the Hub says {} bytes, its file has {}", r.size.unwrap_or(0), body.len());
            }
            Opened::Whole(body, ident.1)
        }
    })
}

/// The URLs of every shard when `given` names a llama.cpp split shard, the revision kept.
pub fn split_urls(given: &str) -> Option<Vec<String>> {
    let u = parse(given).ok()?;
    let (dir, file) = u.path.rsplit_once('/').map_or(("", u.path.as_str()), |(d, f)| (d, f));
    let shards = organ_core::gguf::split::shard_names(file)?;
    let url = |name: &String| {
        let path = if dir.is_empty() { name.clone() } else { format!("{dir}/{name}") };
        HfUrl { owner: u.owner.clone(), repo: u.repo.clone(), path, revision: u.revision.clone() }.to_url(&u.revision)
    };
    Some(shards.iter().map(url).collect())
}

#[cfg(test)]
mod tests {
    use super::super::fetch::test_answer as answer;
    use super::*;

    fn hf(owner: &str, repo: &str, path: &str, revision: &str) -> HfUrl {
        HfUrl { owner: owner.into(), repo: repo.into(), path: path.into(), revision: revision.into() }
    }

    #[test]
    fn url_forms() {
        let p = |s: &str| parse(s).map_err(|e| e.to_string());
        assert_eq!(p("hf://o/r/m.gguf").unwrap(), hf("o", "r", "m.gguf", "main"));
        assert_eq!(p("hf://o/r/d/e/m.GGUF@v1.0").unwrap(), hf("o", "r", "d/e/m.GGUF", "v1.0"));
        assert_eq!(p("hf://o/r/m.gguf@refs/pr/1").unwrap(), hf("o", "r", "m.gguf", "refs/pr/1"));
        assert_eq!(p("hf://o/r/m.gguf@refs%2Fpr%2F1").unwrap(), hf("o", "r", "m.gguf", "refs/pr/1"));
        assert_eq!(p("hf://o/r/a%40b%20c.gguf").unwrap(), hf("o", "r", "a@b c.gguf", "main"));
        for bad in [
            "hf://o/r",
            "hf://o/r/",
            "hf://o/r/m.bin",
            "hf://o//m.gguf",
            "hf://o/r/../m.gguf",
            "hf://o/r/a%2Fb.gguf",
            "hf://o/r/m.gguf@",
            "hf://o w/r/m.gguf",
            "hf://o/r/a//m.gguf",
            "hf://o/r/m.gguf@%ff",
            "http://o/r/m.gguf",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
        assert!(p("hf://o/r/m.bin").unwrap_err().contains("hf://o/r/m.bin"));
    }

    #[test]
    fn resolve_urls_are_encoded_as_huggingface_hub_encodes_them() {
        let u = hf("HuggingFaceTB", "SmolLM2-135M-Instruct", "q/a b+c@d.gguf", "refs/pr/1");
        assert_eq!(
            u.resolve_url("https://huggingface.co/", &u.revision),
            "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/refs%2Fpr%2F1/q/a%20b%2Bc%40d.gguf"
        );
        assert_eq!(
            u.resolve_url("http://127.0.0.1:9/mirror", "abc"),
            "http://127.0.0.1:9/mirror/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/abc/q/a%20b%2Bc%40d.gguf"
        );
        // Back to an hf:// URL that parses to the same parts.
        for rev in ["refs/pr/1", "main", "0123abc"] {
            assert_eq!(
                parse(&u.to_url(rev)).unwrap(),
                HfUrl { revision: rev.into(), ..hf(&u.owner, &u.repo, &u.path, "") }
            );
        }
        assert_eq!(u.file_name(), "a b+c@d.gguf");
    }

    #[test]
    fn split_shards_keep_the_revision() {
        let got = split_urls("hf://o/r/d/m-00002-of-00003.gguf@v2").unwrap();
        assert_eq!(
            got,
            [
                "hf://o/r/d/m-00001-of-00003.gguf@v2",
                "hf://o/r/d/m-00002-of-00003.gguf@v2",
                "hf://o/r/d/m-00003-of-00003.gguf@v2"
            ]
        );
        assert!(split_urls("hf://o/r/m.gguf").is_none());
    }

    #[test]
    fn the_hubs_answers() {
        let url = "https://hub.example/o/r/resolve/main/m.gguf";
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let lfs = answer(
            302,
            &[
                ("X-Repo-Commit", commit),
                ("X-Linked-Etag", "\"sha256hex\""),
                ("ETag", "\"gitblob\""),
                ("X-Linked-Size", "98362432"),
                ("Content-Length", "1234"),
                ("Location", "https://cdn.example/x?sig=1"),
            ],
        );
        let want = Resolved {
            commit: commit.into(),
            etag: "\"sha256hex\"".into(),
            size: Some(98362432),
            location: "https://cdn.example/x?sig=1".into(),
        };
        assert_eq!(resolved(url, &lfs).unwrap(), want);
        // A relative Location is joined to the URL asked.
        let rel = answer(307, &[("X-Repo-Commit", commit), ("ETag", "\"e\""), ("Location", "/cdn/x")]);
        let r = resolved(url, &rel).unwrap();
        assert_eq!((r.location.as_str(), r.size, r.etag.as_str()), ("https://hub.example/cdn/x", None, "\"e\""));
        // A plain file: its ETag and Content-Length, read where it was asked.
        let plain = answer(200, &[("X-Repo-Commit", commit), ("ETag", "\"e\""), ("Content-Length", "10")]);
        assert_eq!(resolved(url, &plain).unwrap().location, url);
        assert_eq!(resolved(url, &plain).unwrap().size, Some(10));
        for bad in [
            answer(200, &[("ETag", "\"e\"")]),
            answer(200, &[("X-Repo-Commit", "not-hex!"), ("ETag", "\"e\"")]),
            answer(200, &[("X-Repo-Commit", commit)]),
            answer(302, &[("X-Repo-Commit", commit), ("ETag", "\"e\"")]),
            answer(200, &[("X-Repo-Commit", commit), ("ETag", "\"e\""), ("Content-Length", "-1")]),
        ] {
            assert!(resolved(url, &bad).unwrap_err().to_string().contains(url));
        }
    }
}
