//! Where a sharded fleet's results are kept (`organ measure --fleet … --results DIR`), and
//! what they are: one file per model, named by its [`CacheKey`] (the model's identity and
//! the measure's definition); one index per shard, saying which result is whose; and the
//! fleet's own file, the models and the definition every worker must agree on.
//!
//! Everything goes through [`Store`]: a directory ([`DirStore`], atomic renames), or a
//! prefix in an object store (`s3://BUCKET/PREFIX`, gs://, az://: [`Prefix`], whose
//! single-request PUT is all-or-nothing as the rename is). [`open`] picks one.

use super::{CacheKey, Definition};
use crate::atomic::write_file;
use crate::location::Location;
use crate::remote::store::Prefix;
use anyhow::{bail, Context, Result};
use organ_core::fleet::ResultFile;
pub use organ_core::fleet::{FleetFile, Indexed, ShardIndex, FORMAT, MAX_FLEET_MODELS};
use organ_core::report::ModelReport;
use serde::Deserialize;
use std::io::ErrorKind::NotFound;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest result read, in bytes. A result is one model's report: SmolLM2's (272
/// tensors) is 82 kB; the largest released mixtures of experts measured with `--experts
/// --sigma` (about 1 100 tensors and 70 000 expert rows) about 10 MB. Parsed, a report
/// takes about 250 bytes per tensor row however short its JSON (under 140 MiB for the
/// shortest rows at this cap): a result over it is refused from its size, before a byte
/// of it is read.
pub const MAX_RESULT_BYTES: u64 = 16 << 20;

/// The largest `fleet.json` read, in bytes: [`MAX_FLEET_MODELS`] names of 160 bytes.
pub const MAX_FLEET_FILE_BYTES: u64 = 16 << 20;

/// A shard index's bytes besides its entries; each entry may take [`INDEX_ENTRY_BYTES`]
/// plus six bytes per byte of its model's name (JSON's `\u00XX`): [`index_cap`].
const INDEX_HEAD_BYTES: u64 = 64 << 10;
const INDEX_ENTRY_BYTES: u64 = 512;

/// The largest index of a shard whose models are named `names`, in bytes: proportional to
/// what it must hold.
pub fn index_cap<'a>(names: impl Iterator<Item = &'a String>) -> u64 {
    names.fold(INDEX_HEAD_BYTES, |n, m| n.saturating_add(INDEX_ENTRY_BYTES + 6 * m.len() as u64))
}

/// The fleet's own file in the results.
pub const FLEET_FILE: &str = "fleet.json";

/// A shard's index: `shard-I-of-N.json`.
pub fn shard_file(shard: u64, shards: u64) -> String {
    format!("shard-{shard}-of-{shards}.json")
}

/// Somewhere results are kept, by name.
pub trait Store: Sync {
    /// Where `name` is, for messages (`DIR/NAME`; `s3://BUCKET/PREFIX/NAME`).
    fn locate(&self, name: &str) -> String;
    /// The bytes stored under `name`, `None` when there are none. Their size is checked
    /// against `max` before they are read; in a directory, only a regular file is read.
    ///
    /// # Errors
    /// The store cannot be read, the entry is not a regular file, or it is over `max` bytes.
    fn get(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>>;
    /// Stores `bytes` under `name`, all or nothing: a reader sees none, the old or the new
    /// bytes whole. Existing bytes are replaced only with `replace`; without it, `false`
    /// says they were there and are kept.
    ///
    /// # Errors
    /// The store cannot be written.
    fn put(&self, name: &str, bytes: &[u8], replace: bool) -> Result<bool>;
}

/// Results in a local (or shared: NFS, a Kubernetes volume) directory.
pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    /// The store in `dir`, created if need be.
    ///
    /// # Errors
    /// `dir` cannot be created.
    pub fn create(dir: &Path) -> Result<DirStore> {
        std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create the results", dir.display()))?;
        Ok(DirStore { dir: dir.to_owned() })
    }

    /// The store in `dir`, which must exist.
    ///
    /// # Errors
    /// `dir` is not a directory.
    pub fn open(dir: &Path) -> Result<DirStore> {
        if !dir.is_dir() {
            bail!("{}: no such results directory", dir.display());
        }
        Ok(DirStore { dir: dir.to_owned() })
    }

    fn path(&self, name: &str) -> Result<PathBuf> {
        check_name(&self.dir.display().to_string(), name)?;
        Ok(self.dir.join(name))
    }
}

/// Refuses a name that is not one of organ's (`at` is the store, for the message): one
/// with a separator would leave the directory or the prefix, a dot file is a temp entry.
fn check_name(at: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.starts_with('.') || name.contains(['/', '\\', '\0']) {
        bail!("{at}: {name:?} is not a result's name");
    }
    Ok(())
}

/// The results `--results` (or `report merge`'s argument) names: a store URL's prefix,
/// or a directory (made if `create`, else it must exist).
///
/// # Errors
/// A URL not of a store, or a directory that cannot be made or is not there.
pub fn open(results: &Path, create: bool) -> Result<Box<dyn Store>> {
    if let Location::Url(_) = Location::of(results) {
        let url = results.to_str().context("a URL that is not UTF-8")?;
        return Ok(Box::new(Prefix::open(url)?));
    }
    Ok(Box::new(if create { DirStore::create(results)? } else { DirStore::open(results)? }))
}

impl Store for DirStore {
    fn locate(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn get(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
        let p = self.path(name)?;
        // A regular file only, opened without blocking (a FIFO would wait for a writer); not
        // recorded as an input, since a worker replaces a result that is not whole.
        let f = match crate::input::open_regular(&p) {
            Ok(f) => f,
            Err(e) if e.root_cause().downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == NotFound) => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let size = f.metadata().with_context(|| format!("{}: cannot stat", p.display()))?.len();
        if size > max {
            bail!("{}: {size} bytes, over the {max} it may have: not a file of organ's", p.display());
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        // The file may grow after the stat: never more than `max` is read.
        f.take(max + 1).read_to_end(&mut bytes).with_context(|| format!("{}: cannot read", p.display()))?;
        if bytes.len() as u64 > max {
            bail!("{}: grew past the {max} bytes it may have while read: not a file of organ's", p.display());
        }
        Ok(Some(bytes))
    }

    fn put(&self, name: &str, bytes: &[u8], replace: bool) -> Result<bool> {
        let p = self.path(name)?;
        if !replace && std::fs::symlink_metadata(&p).is_ok() {
            return Ok(false);
        }
        write_file(&p, replace, |w| Ok(w.write_all(bytes)?))?;
        Ok(true)
    }
}

/// Results under a prefix of an object store. A result is one object written by one PUT;
/// `put` without `replace` is a conditional create, so a worker never overwrites
/// another's `fleet.json`. A store that ignores the condition (some S3-compatible servers
/// do) overwrites instead, which is harmless for results (named by their key, the same
/// key gives the same bytes); for `fleet.json` only two workers of different fleets
/// starting at the same moment could clash, and every worker after them is checked
/// against the file there by [`claim`].
impl Store for Prefix {
    fn locate(&self, name: &str) -> String {
        Prefix::locate(self, name)
    }

    fn get(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
        check_name(&Prefix::locate(self, ""), name)?;
        Prefix::get(self, name, max)
    }

    fn put(&self, name: &str, bytes: &[u8], replace: bool) -> Result<bool> {
        check_name(&Prefix::locate(self, ""), name)?;
        Prefix::put(self, name, bytes, replace)
    }
}

/// Parses `bytes` from `name` of `store` as JSON of `T`, of [`FORMAT`].
///
/// # Errors
/// Not JSON of `T`, or of another format: format 1 with the advice to measure again.
pub fn parse<T: serde::de::DeserializeOwned>(store: &dyn Store, name: &str, bytes: &[u8]) -> Result<T> {
    #[derive(Deserialize)]
    struct Version {
        organ_fleet: Option<u32>,
    }
    let at = store.locate(name);
    let v: Version = serde_json::from_slice(bytes).with_context(|| format!("{at}: not a fleet file of organ's"))?;
    match v.organ_fleet {
        Some(FORMAT) => serde_json::from_slice(bytes).with_context(|| format!("{at}: not a fleet file of organ's")),
        Some(1) => bail!(
            "{at}: a fleet file of format 1, made by an earlier organ whose results name no model identity the \
             merge can check: measure the fleet again into new results (another --results)"
        ),
        Some(n) => bail!("{at}: a fleet file of format {n}; this organ reads format {FORMAT}"),
        None => bail!("{at}: not a fleet file of organ's (no organ_fleet version)"),
    }
}

/// The report stored under `key` and the BLAKE3 of its result's bytes, if it is there
/// whole and is this key's: a file that does not parse, or holds another model or
/// definition, is none (it is measured again).
pub fn lookup(store: &dyn Store, key: &CacheKey) -> Result<Option<(ModelReport, String)>> {
    let name = key.file_name()?;
    let Some(bytes) = store.get(&name, MAX_RESULT_BYTES)? else { return Ok(None) };
    match read_result(store, &name, &bytes, &key.definition, &key.model_blake3) {
        Ok(r) => Ok(Some((r, crate::digest::blake3_hex(&bytes)))),
        Err(e) => {
            crate::progress::warn(format!("{e:#}; measured again"));
            Ok(None)
        }
    }
}

/// Keeps `report` under `key` (replacing what is there: a result is only written after
/// [`lookup`] found none that is whole). Returns the BLAKE3 of the bytes stored.
pub fn store(store: &dyn Store, key: &CacheKey, report: &ModelReport) -> Result<String> {
    let name = key.file_name()?;
    let f = ResultFile {
        organ_fleet: FORMAT,
        definition: key.definition.clone(),
        model_blake3: key.model_blake3.clone(),
        report: report.clone(),
    };
    let bytes = serde_json::to_vec(&f)?;
    if bytes.len() as u64 > MAX_RESULT_BYTES {
        bail!(
            "{}: the report is {} bytes, over the {MAX_RESULT_BYTES} a result may have: a merge would refuse it",
            store.locate(&name),
            bytes.len()
        );
    }
    store.put(&name, &bytes, true)?;
    Ok(crate::digest::blake3_hex(&bytes))
}

/// The report in the result `name` (its `bytes`), which must be of `definition` and of the
/// model whose identity is `model`, and stored under its own key's name.
///
/// # Errors
/// Not a result of this format, of another definition or model, or under another name.
pub fn read_result(
    store: &dyn Store,
    name: &str,
    bytes: &[u8],
    definition: &Definition,
    model: &str,
) -> Result<ModelReport> {
    let at = store.locate(name);
    let f: ResultFile = parse(store, name, bytes)?;
    if &f.definition != definition {
        bail!(
            "{at}: measured under {}, the fleet under {}",
            serde_json::to_string(&f.definition)?,
            serde_json::to_string(definition)?
        );
    }
    if f.model_blake3 != model {
        bail!("{at}: the report of the model whose identity is {}, not {model}", f.model_blake3);
    }
    let key = CacheKey { model_blake3: f.model_blake3, definition: f.definition };
    if key.file_name()? != name {
        bail!("{at}: holds the result named {}, not its own", key.file_name()?);
    }
    Ok(f.report)
}

/// Stores `bytes` as `name` unless something is there already: `None` when this call
/// wrote them, else the bytes there (at most `max`), for the caller to check. Workers start
/// together: one writes, the others find its file (or race to the same bytes); a failed
/// write is an error only when nothing is there.
///
/// # Errors
/// The store cannot be written or read, or what is there is over `max`.
pub fn create_or_get(store: &dyn Store, name: &str, bytes: &[u8], max: u64) -> Result<Option<Vec<u8>>> {
    let wrote =
        store.put(name, bytes, false).or_else(|e| if store.get(name, max)?.is_some() { Ok(false) } else { Err(e) })?;
    if wrote {
        return Ok(None);
    }
    let there = store.get(name, max)?.with_context(|| format!("{}: vanished", store.locate(name)))?;
    Ok(Some(there))
}

/// Writes `fleet` as the results' fleet file, or checks that the one there is the same.
///
/// # Errors
/// The fleet is over [`MAX_FLEET_MODELS`] or [`MAX_FLEET_FILE_BYTES`], or the results
/// hold another fleet (other models, shard count or definition).
pub fn claim(store: &dyn Store, fleet: &FleetFile) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(fleet)?;
    // Refused before any work: a merge would refuse such a fleet.
    if fleet.models.len() > MAX_FLEET_MODELS || bytes.len() as u64 > MAX_FLEET_FILE_BYTES {
        bail!(
            "a fleet of {} models ({} bytes of names and definition): a fleet holds at most {MAX_FLEET_MODELS} \
             models in {MAX_FLEET_FILE_BYTES} bytes: measure it as several fleets",
            fleet.models.len(),
            bytes.len()
        );
    }
    let Some(there) = create_or_get(store, FLEET_FILE, &bytes, MAX_FLEET_FILE_BYTES)? else { return Ok(()) };
    let there: FleetFile = parse(store, FLEET_FILE, &there)?;
    let at = store.locate(FLEET_FILE);
    if there.definition != fleet.definition {
        bail!(
            "{at}: this fleet is measured under {}, not {}: use another --results",
            serde_json::to_string(&there.definition)?,
            serde_json::to_string(&fleet.definition)?
        );
    }
    if there.shards != fleet.shards {
        bail!("{at}: this fleet is split in {} shards, not {}: use another --results", there.shards, fleet.shards);
    }
    if there.models != fleet.models {
        let first = (there.models.iter().zip(&fleet.models).find(|(a, b)| a != b))
            .map_or_else(String::new, |(a, b)| format!("; first difference: {a} there, {b} here"));
        bail!(
            "{at}: this fleet has {} models, this run lists {}{first}: another fleet (use another --results)",
            there.models.len(),
            fleet.models.len()
        );
    }
    Ok(())
}
