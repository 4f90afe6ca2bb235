//! The base's logits kept between runs (docs/judge.md, The base's logits are kept): `organ
//! eval --base` and every `--judge` score the base once per base, text and settings, and
//! later runs compare their model with the log-probabilities saved then, so they run
//! llama-perplexity once instead of twice, with the same figures.
//!
//! `CACHE/logits/` (CACHE: `ORGAN_CACHE`, else `~/.cache/organ`, as `organ sensitivity`'s)
//! holds one entry per [`Key`], named by the BLAKE3 of the key's JSON: `NAME.kld`, the file
//! llama-perplexity's `--kl-divergence-base` wrote, and `NAME.json`, its [`Entry`]: the
//! key itself, what the base's run scored, the file's length and BLAKE3, and how long the
//! run took. The key holds what decides the logits, as sensitivity's run directories do
//! (the base's BLAKE3, the text's, the context, the chunks) and what else may change
//! their bytes: the base's adapters, the threads, the offload, the llama-perplexity.
//!
//! Every entry is input: it is used only if its JSON parses, names the very key asked for,
//! and the file has the length recorded, the header llama.cpp wrote for that context and
//! chunk count (and a length that header implies), and the BLAKE3 recorded. Anything else
//! is said, removed, and computed again. The file checked is the file handed to
//! llama.cpp (the same open descriptor).
//!
//! Bounded: the whole directory is held to `--logits-cache-max` bytes (default 1 GiB; 0
//! keeps nothing and reads nothing). An entry larger than that is not kept (said once,
//! the run computes as without a cache); to keep a new one, the entries least recently
//! used (their JSON's time, renewed at each use) are removed first. Entries are written
//! as temp files and renamed, the logits before the JSON that vouches for them, so a
//! killed run leaves no entry half-written under its name.

use super::output::{Estimate, Perplexity};
use anyhow::{Context, Result};
use organ_core::report::human_bytes;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The cache's directory under the cache root.
pub const DIR: &str = "logits";

/// `--logits-cache-max`'s default: 1 GiB, about 40 chunks of 512 tokens of a 49,152-token
/// vocabulary (25 MB each), or 10 of a 128,000-token one.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// The entries' layout; another is never read.
pub const SCHEMA: u32 = 1;

/// The most of an entry's JSON read (it holds a key and a few figures).
const MAX_ENTRY_JSON: u64 = 64 << 10;

/// What an entry's JSON is counted as against the cap (it is about 1 kB).
const JSON_ROOM: u64 = 4096;

/// Where the base's logits are kept, and how much may be.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Policy {
    /// The cache root (`ORGAN_CACHE`, else `~/.cache/organ`); `None`: nothing is kept.
    pub root: Option<PathBuf>,
    /// The most the whole logits cache holds, in bytes; 0: nothing is kept or read.
    pub max_bytes: u64,
}

impl Policy {
    /// Nothing kept, nothing read.
    #[must_use]
    pub fn off() -> Policy {
        Policy::default()
    }

    /// Kept under the default root ([`crate::paths::cache_root`]), at most `max_bytes`.
    #[must_use]
    pub fn default_root(max_bytes: u64) -> Policy {
        Policy { root: crate::paths::cache_root(), max_bytes }
    }

    /// Whether anything is kept or read: a root, and room.
    #[must_use]
    pub fn is_on(&self) -> bool {
        self.root.is_some() && self.max_bytes > 0
    }

    /// The logits cache's directory, when it is on.
    fn dir(&self) -> Option<PathBuf> {
        self.root.as_ref().filter(|_| self.is_on()).map(|r| r.join(DIR))
    }
}

/// What decides the base's logits: equal keys, the same bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Key {
    /// [`SCHEMA`].
    pub logits_cache: u32,
    /// The BLAKE3 of the base's bytes (all shards of a split base), as handed to llama.cpp.
    pub base_blake3: String,
    /// The adapters applied to the base: `BLAKE3:SCALE` each, in order.
    pub base_adapters: Vec<String>,
    /// The BLAKE3 of the text's bytes, as handed to llama.cpp (sensitivity keys by the same).
    pub text_blake3: String,
    /// Tokens per context.
    pub ctx: u32,
    /// The chunks asked for (`None`: all the text holds).
    pub chunks: Option<u32>,
    /// llama-perplexity's `-t` (`None`: its own).
    pub threads: Option<u32>,
    /// llama-perplexity's `-ngl`.
    pub gpu_layers: Option<String>,
    /// llama-perplexity's `--device`.
    pub device: Option<String>,
    /// The BLAKE3 of the llama-perplexity binary run.
    pub llama_perplexity_blake3: String,
}

impl Key {
    /// The entry's file name (without extension): the BLAKE3 of the key's JSON, 32 hex digits.
    fn name(&self) -> Result<String> {
        let json = serde_json::to_vec(self)?;
        Ok(blake3::hash(&json).to_hex()[..32].to_owned())
    }
}

/// An entry's JSON.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    key: Key,
    /// What the base's run scored.
    chunks: u32,
    ctx: u32,
    ppl: f64,
    ppl_error: f64,
    /// The logits file's length and BLAKE3.
    bytes: u64,
    blake3: String,
    /// How long the base's run took, in seconds: what a reuse saves.
    seconds: f64,
}

/// A base's logits found in the cache, checked.
pub struct Hit {
    /// The logits file, open (at its start): the file checked is the one handed on.
    pub file: File,
    /// What the base's run scored.
    pub scored: Perplexity,
    /// How long that run took.
    pub seconds: f64,
    /// The entry's logits file.
    pub path: PathBuf,
}

/// The cache's entry for one key.
pub struct Slot {
    dir: PathBuf,
    name: String,
    key: Key,
    max_bytes: u64,
}

impl Slot {
    /// The entry for `key` under `policy`, the directory created; `None` when the policy
    /// keeps nothing or the directory cannot be made (said: the run computes as without a
    /// cache).
    #[must_use]
    pub fn open(policy: &Policy, key: Key) -> Option<Slot> {
        let dir = policy.dir()?;
        let made = std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()));
        let name = made.and_then(|()| key.name());
        match name {
            Ok(name) => {
                // The temp files of a run killed while keeping an entry.
                crate::atomic::sweep(&dir);
                Some(Slot { dir, name, key, max_bytes: policy.max_bytes })
            }
            Err(e) => {
                crate::progress::warn(format!("the base's logits are not kept: {e:#}"));
                None
            }
        }
    }

    fn json_path(&self) -> PathBuf {
        self.dir.join(format!("{}.json", self.name))
    }

    fn kld_path(&self) -> PathBuf {
        self.dir.join(format!("{}.kld", self.name))
    }

    /// The entry, if one is there and whole. One that is there but fails a check is said,
    /// removed, and `None` returned (the base is computed again).
    #[must_use]
    pub fn find(&self) -> Option<Hit> {
        let (json, kld) = (self.json_path(), self.kld_path());
        if !json.exists() && !kld.exists() {
            return None;
        }
        match self.check() {
            Ok(hit) => {
                // Used now: the last to be removed ([`make_room`]).
                if let Ok(f) = File::options().write(true).open(&json) {
                    let _ = f.set_modified(SystemTime::now());
                }
                Some(hit)
            }
            Err(e) => {
                crate::progress::warn(format!(
                    "{}: {e:#}; the base's logits are computed again",
                    self.dir.join(&self.name).display()
                ));
                let _ = std::fs::remove_file(&json);
                let _ = std::fs::remove_file(&kld);
                None
            }
        }
    }

    /// The entry read and checked against the key ([`Slot::find`]).
    fn check(&self) -> Result<Hit> {
        let json = read_capped(&self.json_path(), MAX_ENTRY_JSON)?;
        let e: Entry = serde_json::from_slice(&json).context("its JSON is not an entry of organ's")?;
        anyhow::ensure!(e.key == self.key, "its key is not the one asked for");
        let path = self.kld_path();
        let mut file = File::open(&path).context("no logits beside its JSON")?;
        let len = file.metadata()?.len();
        anyhow::ensure!(len == e.bytes, "its logits are {len} bytes, {} were kept", e.bytes);
        let header = Header::read(&mut file)?;
        anyhow::ensure!(
            (header.ctx, header.chunks) == (e.ctx, e.chunks) && e.ctx == self.key.ctx,
            "its logits are {} chunks of {} tokens, its JSON says {} of {}",
            header.chunks,
            header.ctx,
            e.chunks,
            e.ctx
        );
        anyhow::ensure!(header.len() == Some(len), "its logits are {len} bytes, not what their header implies");
        file.seek(SeekFrom::Start(0))?;
        let (blake3, _) = hash(&mut file)?;
        anyhow::ensure!(blake3 == e.blake3, "its logits' BLAKE3 is not the one kept");
        file.seek(SeekFrom::Start(0))?;
        let scored = Perplexity { chunks: e.chunks, ctx: e.ctx, ppl: Estimate { value: e.ppl, error: e.ppl_error } };
        Ok(Hit { file, scored, seconds: e.seconds, path })
    }

    /// Keeps the logits file `logits` (which llama-perplexity wrote for this key, scoring
    /// `scored` in `took`) if it fits under the cap, making room: linked into the cache
    /// where it can be, else copied. Returns whether it was kept; an entry over the cap is
    /// said and not kept.
    ///
    /// # Errors
    /// The file cannot be read, copied or renamed (the caller warns: the run goes on).
    pub fn keep(&self, logits: &Path, scored: &Perplexity, took: Duration) -> Result<bool> {
        let mut f = File::open(logits).with_context(|| format!("{}: cannot open", logits.display()))?;
        let len = f.metadata()?.len();
        if len.saturating_add(JSON_ROOM) > self.max_bytes {
            crate::progress::note(format!(
                "the base's logits ({}) do not fit in --logits-cache-max ({}): not kept, so the next run on \
                 this base computes them again (raise --logits-cache-max to keep them)",
                human_bytes(len),
                human_bytes(self.max_bytes)
            ));
            return Ok(false);
        }
        let (blake3, hashed) = hash(&mut f)?;
        anyhow::ensure!(hashed == len, "{}: changed while it was read", logits.display());
        make_room(&self.dir, self.max_bytes - len - JSON_ROOM);
        // The logits under a temp name (a hard link where the scratch directory is on the
        // same filesystem, else a copy), renamed into place; then the JSON that vouches for
        // them, likewise.
        let (tmp, out) = crate::atomic::Temp::file(&self.kld_path(), true)?;
        drop(out);
        std::fs::remove_file(&tmp.path)?;
        if std::fs::hard_link(logits, &tmp.path).is_err() {
            std::fs::copy(logits, &tmp.path)
                .with_context(|| format!("{}: cannot copy to {}", logits.display(), tmp.path.display()))?;
        }
        tmp.commit()?;
        let e = Entry {
            key: self.key.clone(),
            chunks: scored.chunks,
            ctx: scored.ctx,
            ppl: scored.ppl.value,
            ppl_error: scored.ppl.error,
            bytes: len,
            blake3,
            seconds: took.as_secs_f64(),
        };
        crate::atomic::write_json(&self.json_path(), true, &e)?;
        Ok(true)
    }
}

/// The fixed part of a `--kl-divergence-base` file: `_logits_`, the context (u32), the
/// vocabulary and the chunks (i32 each), little-endian, then the chunks' tokens (i32 each)
/// and, per chunk, the log-probabilities of its second half (`n_ctx - 1 - n_ctx/2` tokens)
/// as `2*((n_vocab+1)/2) + 4` u16 each (llama.cpp's tools/perplexity).
#[derive(Debug, PartialEq)]
struct Header {
    ctx: u32,
    vocabulary: u32,
    chunks: u32,
}

impl Header {
    const MAGIC: &'static [u8; 8] = b"_logits_";

    fn read(r: &mut impl Read) -> Result<Header> {
        let mut b = [0u8; 20];
        r.read_exact(&mut b).context("its logits are shorter than their header")?;
        anyhow::ensure!(&b[..8] == Self::MAGIC, "its logits do not start as llama.cpp's do");
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let (ctx, vocabulary, chunks) = (word(8), word(12), word(16));
        // i32 in llama.cpp: a negative count reads here as more than i32::MAX.
        anyhow::ensure!(
            vocabulary <= i32::MAX as u32 && chunks <= i32::MAX as u32,
            "its logits' header holds a negative count"
        );
        Ok(Header { ctx, vocabulary, chunks })
    }

    /// The file's length this header implies (`None`: past u64).
    fn len(&self) -> Option<u64> {
        let (ctx, vocab, chunks) = (u64::from(self.ctx), u64::from(self.vocabulary), u64::from(self.chunks));
        let tokens = ctx.checked_mul(chunks)?.checked_mul(4)?;
        let scored = ctx.checked_sub(1 + ctx / 2)?;
        let per_token = (2 * vocab.div_ceil(2) + 4).checked_mul(2)?;
        let probs = scored.checked_mul(per_token)?.checked_mul(chunks)?;
        20u64.checked_add(tokens)?.checked_add(probs)
    }
}

/// Removes from `dir` the entries least recently used (the time of their JSON, else of
/// their logits) until those left take at most `room` bytes.
fn make_room(dir: &Path, room: u64) {
    use std::collections::BTreeMap;
    let Ok(read) = std::fs::read_dir(dir) else { return };
    // name → (bytes, last used)
    let mut entries: BTreeMap<String, (u64, SystemTime)> = BTreeMap::new();
    for e in read.flatten() {
        let name = e.file_name();
        let Some((stem, ext)) = name.to_str().and_then(|n| n.rsplit_once('.')) else { continue };
        if stem.starts_with('.') || !matches!(ext, "json" | "kld") {
            continue;
        }
        let Ok(md) = e.metadata() else { continue };
        if !md.is_file() {
            continue;
        }
        let used = md.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let slot = entries.entry(stem.to_owned()).or_insert((0, SystemTime::UNIX_EPOCH));
        slot.0 += md.len();
        if ext == "json" || slot.1 == SystemTime::UNIX_EPOCH {
            slot.1 = used;
        }
    }
    let mut total: u64 = entries.values().map(|e| e.0).sum();
    let mut by_age: Vec<(SystemTime, String, u64)> = entries.into_iter().map(|(n, (b, t))| (t, n, b)).collect();
    by_age.sort();
    for (_, name, bytes) in by_age {
        if total <= room {
            break;
        }
        // The JSON first: without it the entry is no longer used.
        let _ = std::fs::remove_file(dir.join(format!("{name}.json")));
        let _ = std::fs::remove_file(dir.join(format!("{name}.kld")));
        total = total.saturating_sub(bytes);
    }
}

/// The BLAKE3 of what is left to read in `f`, and how many bytes that was.
fn hash(f: &mut File) -> Result<(String, u64)> {
    let mut h = blake3::Hasher::new();
    let n = std::io::copy(f, &mut h).context("cannot read the base's logits")?;
    Ok((h.finalize().to_hex().to_string(), n))
}

/// At most `max` bytes of `p`; more is an error.
fn read_capped(p: &Path, max: u64) -> Result<Vec<u8>> {
    let f = File::open(p).context("cannot open its JSON")?;
    let mut b = Vec::new();
    f.take(max + 1).read_to_end(&mut b).context("cannot read its JSON")?;
    anyhow::ensure!(b.len() as u64 <= max, "its JSON is more than {max} bytes");
    Ok(b)
}

/// The BLAKE3 of the file at `p` (the llama-perplexity run: its identity in the key).
///
/// # Errors
/// It cannot be read.
pub fn file_blake3(p: &Path) -> Result<String> {
    let mut f = File::open(p).with_context(|| format!("{}: cannot open", p.display()))?;
    Ok(hash(&mut f).with_context(|| format!("{}: cannot read", p.display()))?.0)
}

/// `--logits-cache-max`'s value: `0` (keep nothing), or a size as `--split-max-size` reads
/// them (`500M`, `2G`, bytes; K, M, G, T powers of 1024).
///
/// # Errors
/// Not a size.
pub fn parse_max(s: &str) -> Result<u64, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    organ_core::gguf::split::parse_size(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("organ-logits-cache-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn key(text: &str) -> Key {
        Key {
            logits_cache: SCHEMA,
            base_blake3: "ab".repeat(32),
            base_adapters: Vec::new(),
            text_blake3: text.to_owned(),
            ctx: 8,
            chunks: Some(2),
            threads: None,
            gpu_layers: None,
            device: None,
            llama_perplexity_blake3: "cd".repeat(32),
        }
    }

    /// A new `--kl-divergence-base` file of `chunks` chunks of 8 tokens over 5,000 (60 kB
    /// for 2), at `path`: a new inode, as each run's is (an entry kept is a hard link to it).
    fn logits(path: &Path, chunks: u32) -> u64 {
        let h = Header { ctx: 8, vocabulary: 5000, chunks };
        let len = h.len().unwrap();
        let _ = std::fs::remove_file(path);
        let mut f = File::create(path).unwrap();
        f.write_all(Header::MAGIC).unwrap();
        for w in [h.ctx, h.vocabulary, h.chunks] {
            f.write_all(&w.to_le_bytes()).unwrap();
        }
        f.write_all(&vec![7u8; (len - 20) as usize]).unwrap();
        len
    }

    fn scored() -> Perplexity {
        Perplexity { chunks: 2, ctx: 8, ppl: Estimate { value: 12.3456, error: 0.1 } }
    }

    #[test]
    fn the_length_is_llama_cpps() {
        // SmolLM2's 49,152 tokens, 2 chunks of 128: the file sensitivity's cache holds.
        assert_eq!(Header { ctx: 128, vocabulary: 49152, chunks: 2 }.len(), Some(12_388_356));
        assert_eq!(Header { ctx: 0, vocabulary: 5, chunks: 1 }.len(), None);
        assert_eq!(Header { ctx: u32::MAX, vocabulary: i32::MAX as u32, chunks: i32::MAX as u32 }.len(), None);
    }

    #[test]
    fn an_entry_kept_is_found_and_a_damaged_one_is_removed() {
        let root = tmp("found");
        let policy = Policy { root: Some(root.clone()), max_bytes: 1 << 20 };
        let slot = Slot::open(&policy, key("t1")).unwrap();
        assert!(slot.find().is_none());
        let src = root.join("base-logits.kld");
        let len = logits(&src, 2);
        assert!(slot.keep(&src, &scored(), Duration::from_millis(1500)).unwrap());
        let hit = slot.find().unwrap();
        assert_eq!((hit.scored, hit.seconds), (scored(), 1.5));
        assert_eq!(hit.file.metadata().unwrap().len(), len);
        // Another key does not find it.
        assert!(Slot::open(&policy, key("t2")).unwrap().find().is_none());
        // Truncated: refused and removed.
        File::options().write(true).open(slot.kld_path()).unwrap().set_len(len - 1).unwrap();
        assert!(slot.find().is_none());
        assert!(!slot.kld_path().exists() && !slot.json_path().exists());
        // One byte changed, same length: its BLAKE3 refuses it.
        logits(&src, 2);
        assert!(slot.keep(&src, &scored(), Duration::ZERO).unwrap());
        let mut f = File::options().write(true).open(slot.kld_path()).unwrap();
        f.seek(SeekFrom::Start(len - 1)).unwrap();
        f.write_all(&[8]).unwrap();
        assert!(slot.find().is_none());
        // A JSON with another key under this name (a swapped file): refused.
        logits(&src, 2);
        assert!(slot.keep(&src, &scored(), Duration::ZERO).unwrap());
        let other = Slot::open(&policy, key("t3")).unwrap();
        assert!(other.keep(&src, &scored(), Duration::ZERO).unwrap());
        std::fs::copy(other.json_path(), slot.json_path()).unwrap();
        assert!(slot.find().is_none());
        // Not JSON at all.
        assert!(slot.keep(&src, &scored(), Duration::ZERO).unwrap());
        std::fs::write(slot.json_path(), b"\xff not json").unwrap();
        assert!(slot.find().is_none());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_cap_keeps_the_entries_last_used() {
        let root = tmp("cap");
        let src = root.join("base-logits.kld");
        let len = logits(&src, 2);
        // Room for two entries (and their JSON), not three.
        let policy = Policy { root: Some(root.clone()), max_bytes: 2 * (len + 4096) + 100 };
        let slots: Vec<Slot> = (0..3).map(|i| Slot::open(&policy, key(&format!("t{i}"))).unwrap()).collect();
        let old = SystemTime::now() - Duration::from_secs(100);
        for (i, s) in slots[..2].iter().enumerate() {
            assert!(s.keep(&src, &scored(), Duration::ZERO).unwrap());
            let f = File::options().write(true).open(s.json_path()).unwrap();
            f.set_modified(old + Duration::from_secs(i as u64)).unwrap();
        }
        // The first is used again: the second is now the least recently used.
        assert!(slots[0].find().is_some());
        assert!(slots[2].keep(&src, &scored(), Duration::ZERO).unwrap());
        assert!(slots[0].find().is_some() && slots[2].find().is_some());
        assert!(!slots[1].json_path().exists() && !slots[1].kld_path().exists());
        // Larger than the cap: not kept, nothing removed.
        let small = Policy { root: Some(root.clone()), max_bytes: len };
        let s = Slot::open(&small, key("big")).unwrap();
        assert!(!s.keep(&src, &scored(), Duration::ZERO).unwrap());
        assert!(!s.kld_path().exists() && slots[0].find().is_some());
        // 0: off.
        assert!(Slot::open(&Policy { root: Some(root.clone()), max_bytes: 0 }, key("t0")).is_none());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_cap_reads_as_a_size_or_0() {
        assert_eq!(parse_max("0"), Ok(0));
        assert_eq!(parse_max("1G"), Ok(1 << 30));
        assert_eq!(parse_max("500M"), Ok(500 << 20));
        assert!(parse_max("lots").is_err());
    }
}
