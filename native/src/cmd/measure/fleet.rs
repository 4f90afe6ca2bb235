//! A fleet measured in shards (`organ measure --fleet LIST|DIR --shard I/N --results R`)
//! and merged (`organ report merge RESULTS`): each process measures its share of the
//! models and keeps one report per model in the results ([`super::results`]); the merge
//! ranks them with the code `organ measure DIR` runs ([`Report::new`], [`super::present`]),
//! so both give the same tables byte for byte. docs/fleet.md.

use super::results::{self, FleetFile, Indexed, ShardIndex, Store, FORMAT};
use super::shard::Shard;
use super::{identify, measure_identified, Definition, Options};
use crate::location::Location;
use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The largest fleet list read, in bytes.
const MAX_LIST_BYTES: u64 = 64 << 20;

/// A model of the fleet: its name in the fleet (the path below the fleet's directory, or
/// the list's directory; the URL), and where it is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub path: PathBuf,
}

/// `path`'s name relative to `root` when below it, else `path` as it is; UTF-8 only (names
/// go into JSON).
fn name_of(path: &Path, root: &Path) -> Result<String> {
    let rel = path.strip_prefix(root).ok().filter(|r| !r.as_os_str().is_empty()).unwrap_or(path);
    rel.to_str()
        .map(str::to_owned)
        .with_context(|| format!("{}: not UTF-8; fleets name models in JSON", path.display()))
}

/// A split model by its first shard, as `organ measure DIR` counts it.
fn first_shard(path: &Path) -> PathBuf {
    Location::of(path).first_shard()
}

/// The models of a fleet, sorted by name: every model below a directory (as `organ
/// measure DIR` finds them), or those a list file names, one path or URL a line (blank
/// lines and `#` comments skipped; relative paths from the list's directory; a directory
/// stands for the models below it).
///
/// # Errors
/// The directory holds no model, the list cannot be read or names nothing, a path is not
/// UTF-8, `fleet` is a model rather than a list.
pub fn members(fleet: &Path) -> Result<Vec<Member>> {
    let mut found = Vec::new();
    if fleet.is_dir() {
        for p in crate::discover::discover(fleet)? {
            found.push(Member { name: name_of(&p, fleet)?, path: p });
        }
    } else {
        let mut bytes = Vec::new();
        let f =
            std::fs::File::open(fleet).with_context(|| format!("{}: cannot open the fleet list", fleet.display()))?;
        f.take(MAX_LIST_BYTES + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("{}: cannot read", fleet.display()))?;
        if bytes.starts_with(b"GGUF") {
            bail!("{}: a model, not a fleet: --fleet takes a directory or a list of models", fleet.display());
        }
        if bytes.len() as u64 > MAX_LIST_BYTES {
            bail!("{}: a fleet list of over {MAX_LIST_BYTES} bytes", fleet.display());
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            anyhow::anyhow!(
                "{}: not UTF-8 text (byte {}): not a fleet list",
                fleet.display(),
                e.utf8_error().valid_up_to()
            )
        })?;
        let base = fleet.parent().unwrap_or(Path::new(""));
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // A URL names one model; a path, a model or a directory of them.
            let at =
                Location::checked(Path::new(line)).with_context(|| format!("{}: line {}", fleet.display(), n + 1))?;
            if let Location::Url(_) = at {
                let url = at.first_shard();
                found.push(Member { name: url.to_string_lossy().into_owned(), path: url });
                continue;
            }
            let path = base.join(line);
            let models =
                crate::discover::discover(&path).with_context(|| format!("{}: line {}", fleet.display(), n + 1))?;
            for p in models {
                let p = first_shard(&p);
                found.push(Member { name: name_of(&p, base)?, path: p });
            }
        }
        if found.is_empty() {
            bail!("{}: the fleet list names no model", fleet.display());
        }
    }
    found.sort_by(|a, b| Path::new(&a.name).cmp(Path::new(&b.name)));
    found.dedup_by(|a, b| a.name == b.name);
    Ok(found)
}

/// The definition a fleet measured under `opts` is reported under.
fn definition_of(opts: &Options) -> Definition {
    Definition { experts: opts.experts, ..Definition::current(opts.mode) }
}

/// Measures `shard`'s models of `fleet` under `opts` into the results `results` names (a
/// directory, made if need be, or a store URL's prefix), skipping those already there;
/// then writes the shard's index. Prints one line per model.
pub fn run(opts: &Options, fleet: &Path, shard: Shard, results: &Path, out: &mut dyn Write) -> Result<()> {
    let store = results::open(results, true)?;
    measure_shard(opts, fleet, shard, store.as_ref(), out)
}

/// [`run`] into any [`Store`].
pub fn measure_shard(opts: &Options, fleet: &Path, shard: Shard, store: &dyn Store, out: &mut dyn Write) -> Result<()> {
    let members = members(fleet)?;
    let names = members.iter().map(|m| m.name.clone()).collect();
    let fleet = FleetFile { organ_fleet: FORMAT, definition: definition_of(opts), shards: shard.count, models: names };
    results::claim(store, &fleet)?;
    let mine: Vec<&Member> = members.iter().enumerate().filter(|(j, _)| shard.holds(*j)).map(|(_, m)| m).collect();
    writeln!(out, "shard {shard}: {} of {} models", mine.len(), members.len())?;
    out.flush()?;
    let progress = crate::progress::tensor_bar();
    let mut index = Vec::with_capacity(mine.len());
    let mut kept = 0;
    for m in &mine {
        progress.set_message(m.name.clone());
        let (key, opened) = identify(&m.path, opts).with_context(|| format!("fleet model {}", m.name))?;
        let (report, result_blake3, what) = match results::lookup(store, &key)? {
            Some((r, hash)) => {
                kept += 1;
                (r, hash, "in results")
            }
            None => {
                let r = measure_identified(&m.path, &opened, opts, &progress)?;
                let hash = results::store(store, &key, &r)?;
                (r, hash, "measured")
            }
        };
        // Flushed: a batch engine's log shows each model as it is done.
        progress.suspend(|| writeln!(out, "  {:<10}  {:>9.4}°  {}", what, report.summary.theta_mean, m.name))?;
        out.flush()?;
        index.push(Indexed {
            model: m.name.clone(),
            model_blake3: key.model_blake3.clone(),
            result: key.file_name()?,
            result_blake3,
        });
    }
    progress.finish_and_clear();
    let done = ShardIndex {
        organ_fleet: FORMAT,
        shard: shard.index,
        shards: shard.count,
        definition: definition_of(opts),
        results: index,
    };
    let name = results::shard_file(shard.index, shard.count);
    store.put(&name, &serde_json::to_vec_pretty(&done)?, true)?;
    writeln!(
        out,
        "shard {shard} done: {} measured, {kept} already in the results; {}",
        mine.len() - kept,
        store.locate(&name)
    )?;
    Ok(())
}

/// `organ report merge RESULTS`: the fleet's report from its results, checked
/// ([`super::merge::merged`]), written and printed as `organ measure` does
/// ([`super::present`]; `opts` says which files).
///
/// # Errors
/// As [`super::merge::merged`], and writing the files.
pub fn merge(results: &Path, opts: &Options, out: &mut dyn Write) -> Result<()> {
    let store = results::open(results, false)?;
    let (report, identities) = super::merge::merged(store.as_ref())?;
    super::present(report, &identities, opts, out)
}
