//! A fleet measured in shards (`organ measure --fleet LIST|DIR --shard I/N --results R`)
//! and merged (`organ report merge RESULTS`): each process measures its share of the
//! models and keeps one report per model in the results ([`super::results`]); the merge
//! ranks them with the code `organ measure DIR` runs ([`Report::new`], [`super::present`]),
//! so both give the same tables byte for byte. docs/fleet.md.

use super::results::{self, FleetFile, Indexed, ShardIndex, Store, FLEET_FILE, FORMAT};
use super::shard::{Shard, MAX_SHARDS};
use super::{identify, label_of, measure_identified, Definition, Options};
use anyhow::{bail, Context, Result};
use organ_core::report::Report;
use std::collections::BTreeMap;
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
    let shards =
        if crate::remote::is_url(path) { crate::remote::split_urls(path) } else { crate::source::split_shards(path) };
    shards.and_then(|s| s.into_iter().next()).unwrap_or_else(|| path.to_owned())
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
            if crate::remote::is_url(Path::new(line)) {
                crate::remote::parse(Path::new(line))
                    .with_context(|| format!("{}: line {}", fleet.display(), n + 1))?;
                let url = first_shard(Path::new(line));
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
    let definition = Definition { experts: opts.experts, ..Definition::current(opts.mode) };
    let names = members.iter().map(|m| m.name.clone()).collect();
    results::claim(store, &FleetFile { organ_fleet: FORMAT, definition, shards: shard.count, models: names })?;
    let mine: Vec<&Member> = members.iter().enumerate().filter(|(j, _)| shard.holds(*j)).map(|(_, m)| m).collect();
    writeln!(out, "shard {shard}: {} of {} models", mine.len(), members.len())?;
    out.flush()?;
    let progress = crate::progress::tensor_bar();
    let mut index = Vec::with_capacity(mine.len());
    let mut kept = 0;
    for m in &mine {
        progress.set_message(m.name.clone());
        let (key, opened) = identify(&m.path, opts).with_context(|| format!("fleet model {}", m.name))?;
        let (report, what) = match results::lookup(store, &key)? {
            Some(r) => {
                kept += 1;
                (r, "in results")
            }
            None => {
                let r = measure_identified(&m.path, opened.as_ref(), opts, &progress)?;
                results::store(store, &key, &r)?;
                (r, "measured")
            }
        };
        // Flushed: a batch engine's log shows each model as it is done.
        progress.suspend(|| writeln!(out, "  {:<10}  {:>9.4}°  {}", what, report.summary.theta_mean, m.name))?;
        out.flush()?;
        index.push(Indexed { model: m.name.clone(), result: key.file_name()? });
    }
    progress.finish_and_clear();
    let done = ShardIndex { organ_fleet: FORMAT, shard: shard.index, shards: shard.count, results: index };
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

/// `organ report merge RESULTS`: the fleet's report from its results, written and printed
/// as `organ measure` does ([`super::present`]; `opts` says which files).
///
/// # Errors
/// The results are not a fleet's, a shard has not finished, a result is missing, of
/// another format or definition, or not whole.
pub fn merge(results: &Path, opts: &Options, out: &mut dyn Write) -> Result<()> {
    let store = results::open(results, false)?;
    let report = merged(store.as_ref())?;
    super::present(&report, opts, out)
}

/// The fleet's report from the results in `store`, models in the fleet's order.
pub fn merged(store: &dyn Store) -> Result<Report> {
    let bytes = store.get(FLEET_FILE)?.with_context(|| {
        format!("{}: not there: not the results of organ measure --fleet", store.locate(FLEET_FILE))
    })?;
    let fleet: FleetFile = results::parse(store, FLEET_FILE, &bytes)?;
    if fleet.shards == 0 || fleet.shards > MAX_SHARDS {
        bail!("{}: {} shards: not 1 to {MAX_SHARDS}", store.locate(FLEET_FILE), fleet.shards);
    }
    // Each model's result, from its shard's index.
    let mut result_of: BTreeMap<&str, String> = BTreeMap::new();
    let mut unfinished = Vec::new();
    for i in 0..fleet.shards {
        let name = results::shard_file(i, fleet.shards);
        let Some(bytes) = store.get(&name)? else {
            unfinished.push(i);
            continue;
        };
        let idx: ShardIndex = results::parse(store, &name, &bytes)?;
        if (idx.shard, idx.shards) != (i, fleet.shards) {
            bail!("{}: the index of shard {}/{}, not {i}/{}", store.locate(&name), idx.shard, idx.shards, fleet.shards);
        }
        for e in idx.results {
            let Some(j) = fleet.models.iter().position(|m| *m == e.model) else {
                bail!(
                    "{}: {} is not a model of this fleet ({})",
                    store.locate(&name),
                    e.model,
                    store.locate(FLEET_FILE)
                );
            };
            if j as u64 % fleet.shards != i {
                bail!(
                    "{}: {} belongs to shard {}/{}",
                    store.locate(&name),
                    e.model,
                    j as u64 % fleet.shards,
                    fleet.shards
                );
            }
            result_of.insert(&fleet.models[j], e.result);
        }
    }
    if let Some(&first) = unfinished.first() {
        let shards: Vec<String> = unfinished.iter().take(8).map(|i| format!("{i}/{}", fleet.shards)).collect();
        let models: Vec<&str> = (fleet.models.iter().enumerate())
            .filter(|(j, _)| unfinished.contains(&(*j as u64 % fleet.shards)))
            .map(|(_, m)| m.as_str())
            .take(5)
            .collect();
        bail!(
            "{}: shard {}{} not finished (no {}): no report for {}{}; run organ measure --fleet … --shard {first}/{} again",
            store.locate(""),
            shards.join(", "),
            if unfinished.len() > 8 { ", …" } else { "" },
            results::shard_file(first, fleet.shards),
            models.join(", "),
            if models.len() == 5 { ", …" } else { "" },
            fleet.shards
        );
    }
    let mut models = Vec::with_capacity(fleet.models.len());
    for (j, m) in fleet.models.iter().enumerate() {
        let shard = results::shard_file(j as u64 % fleet.shards, fleet.shards);
        let result = result_of
            .get(m.as_str())
            .with_context(|| format!("{}: does not list {m}, a model of its shard", store.locate(&shard)))?;
        let bytes = store
            .get(result)?
            .with_context(|| format!("{}: missing: the report of {m} ({} names it)", store.locate(result), shard))?;
        let mut r = results::read_result(store, result, &bytes, &fleet.definition)?;
        r.model = label_of(Path::new(m));
        models.push(r);
    }
    let mut report = Report::new(organ_core::zmeasure::GENERATOR, models);
    report.measure = fleet.definition.measure;
    Ok(report)
}
