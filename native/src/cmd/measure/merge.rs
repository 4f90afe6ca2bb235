//! `organ report merge RESULTS`: a fleet's report from the results its shards left
//! ([`super::results`]), every file checked before it is believed (docs/fleet.md):
//!
//! - every file is a regular file of at most its cap, checked before it is read:
//!   `fleet.json` [`MAX_FLEET_FILE_BYTES`], an index [`index_cap`] (proportional to the
//!   names of its shard's models), a result [`MAX_RESULT_BYTES`];
//! - an index is of its shard, under the fleet's definition, and lists each of its
//!   shard's models once, with the model's identity; the result it names is the one that
//!   identity and the definition give;
//! - a result's bytes have the BLAKE3 its index recorded, and it holds the report of the
//!   model the index names, under the fleet's definition.
//!
//! A mismatch is an error naming both files. What is not checked: that a model's identity
//! in an index is its bytes' (the merge runs without the models; the worker that wrote
//! the index computed it). Each step is linear in the fleet: models are found by name in a
//! hash map.

use super::results::{self, index_cap, Indexed, ShardIndex, Store, FLEET_FILE, MAX_FLEET_FILE_BYTES, MAX_RESULT_BYTES};
use super::shard::MAX_SHARDS;
use super::{CacheKey, Definition};
use crate::location::Location;
use anyhow::{bail, Context, Result};
use organ_core::report::{ModelReport, Report};
use std::collections::HashMap;
use std::path::Path;

/// The fleet's report from the results in `store`, models in the fleet's order, and each
/// model's BLAKE3 (for a model on disk; `--verdict` ties verdicts to it).
///
/// # Errors
/// The results are not a fleet's, a shard has not finished, a file is not a regular file
/// or over its cap, an index or a result does not match the fleet, its index or its
/// BLAKE3, or a result is missing, of another format or not whole.
pub fn merged(store: &dyn Store) -> Result<(Report, Vec<Option<String>>)> {
    let bytes = store.get(FLEET_FILE, MAX_FLEET_FILE_BYTES)?.with_context(|| {
        format!("{}: not there: not the results of organ measure --fleet", store.locate(FLEET_FILE))
    })?;
    let fleet: results::FleetFile = results::parse(store, FLEET_FILE, &bytes)?;
    drop(bytes);
    let shards = fleet.shards;
    if shards == 0 || shards > MAX_SHARDS {
        bail!("{}: {shards} shards: not 1 to {MAX_SHARDS}", store.locate(FLEET_FILE));
    }
    let mut number: HashMap<&str, usize> = HashMap::with_capacity(fleet.models.len());
    for (j, m) in fleet.models.iter().enumerate() {
        if number.insert(m, j).is_some() {
            bail!("{}: lists {m} twice", store.locate(FLEET_FILE));
        }
    }
    let shard_of = |j: usize| j as u64 % shards;
    // Each model's index entry, and the index that holds it.
    let mut entry: Vec<Option<(Indexed, u64)>> = vec![None; fleet.models.len()];
    let mut unfinished = Vec::new();
    let mut names_of: HashMap<u64, Vec<&String>> = HashMap::new();
    for (j, m) in fleet.models.iter().enumerate() {
        names_of.entry(shard_of(j)).or_default().push(m);
    }
    for i in 0..shards {
        let name = results::shard_file(i, shards);
        let names = names_of.remove(&i).unwrap_or_default();
        let Some(bytes) = store.get(&name, index_cap(names.into_iter()))? else {
            unfinished.push(i);
            continue;
        };
        let idx: ShardIndex = results::parse(store, &name, &bytes)?;
        drop(bytes);
        let at = store.locate(&name);
        if (idx.shard, idx.shards) != (i, shards) {
            bail!("{at}: the index of shard {}/{}, not {i}/{shards}", idx.shard, idx.shards);
        }
        if idx.definition != fleet.definition {
            bail!(
                "{at}: measured under {}, the fleet under {} ({})",
                serde_json::to_string(&idx.definition)?,
                serde_json::to_string(&fleet.definition)?,
                store.locate(FLEET_FILE)
            );
        }
        for e in idx.results {
            let Some(&j) = number.get(e.model.as_str()) else {
                bail!("{at}: {} is not a model of this fleet ({})", e.model, store.locate(FLEET_FILE));
            };
            if shard_of(j) != i {
                bail!("{at}: {} belongs to shard {}/{shards}", e.model, shard_of(j));
            }
            let key = CacheKey { model_blake3: e.model_blake3.clone(), definition: fleet.definition.clone() };
            let want = key.file_name()?;
            if e.result != want {
                bail!(
                    "{at}: names the result {} for {}, but {}'s identity {} gives {want}",
                    e.result,
                    e.model,
                    e.model,
                    e.model_blake3
                );
            }
            if e.result_blake3.len() != 64 || !e.result_blake3.bytes().all(|b| b.is_ascii_hexdigit()) {
                bail!("{at}: {:?}, the BLAKE3 of {}'s result, is not 64 hex digits", e.result_blake3, e.model);
            }
            if entry[j].is_some() {
                bail!("{at}: lists {} twice", e.model);
            }
            entry[j] = Some((e, i));
        }
    }
    if !unfinished.is_empty() {
        bail!("{}", unfinished_message(store, &fleet.models, shards, &unfinished));
    }
    let mut models = Vec::with_capacity(fleet.models.len());
    let mut identities = Vec::with_capacity(fleet.models.len());
    for (j, m) in fleet.models.iter().enumerate() {
        let index = results::shard_file(shard_of(j), shards);
        let Some((e, _)) = &entry[j] else {
            bail!("{}: does not list {m}, a model of its shard", store.locate(&index));
        };
        models.push(read(store, e, &index, &fleet.definition)?);
        // A model on the workers' disks is known by its bytes' BLAKE3; one at a URL by
        // what its server says, which no evaluation records.
        let local = matches!(Location::of(Path::new(m)), Location::Local(_));
        identities.push(local.then(|| e.model_blake3.to_ascii_lowercase()));
    }
    let paths: Vec<&Path> = fleet.models.iter().map(Path::new).collect();
    let base: Vec<String> = paths.iter().map(|p| super::label_of(p)).collect();
    let labels = Location::labels(&paths, &base);
    for (r, label) in models.iter_mut().zip(labels) {
        r.model = label;
    }
    let mut report = Report::new(organ_core::zmeasure::GENERATOR, models);
    report.measure = fleet.definition.measure;
    Ok((report, identities))
}

/// The report of `e`'s model, from its result, checked against `e` (listed in `index`).
fn read(store: &dyn Store, e: &Indexed, index: &str, definition: &Definition) -> Result<ModelReport> {
    let bytes = store.get(&e.result, MAX_RESULT_BYTES)?.with_context(|| {
        format!("{}: missing: the report of {} ({} names it)", store.locate(&e.result), e.model, store.locate(index))
    })?;
    let hash = crate::digest::blake3_hex(&bytes);
    if !hash.eq_ignore_ascii_case(&e.result_blake3) {
        bail!(
            "{}: its BLAKE3 is {hash}, but {} records {} for it: the result changed after its shard was done",
            store.locate(&e.result),
            store.locate(index),
            e.result_blake3
        );
    }
    let r = results::read_result(store, &e.result, &bytes, definition, &e.model_blake3)
        .with_context(|| format!("{} is {}'s, by {}", e.result, e.model, store.locate(index)))?;
    check_report(&r).with_context(|| format!("{}: not a report organ writes", store.locate(&e.result)))?;
    Ok(r)
}

/// Refuses a report no measure makes: more rows, dimensions, draws or experts than a
/// model may have.
fn check_report(r: &ModelReport) -> Result<()> {
    use organ_core::limits::{MAX_DIMS, MAX_EXPERTS, MAX_TENSOR_COUNT};
    if r.tensors.len() as u64 > MAX_TENSOR_COUNT {
        bail!("{} tensors, over {MAX_TENSOR_COUNT}", r.tensors.len());
    }
    for t in &r.tensors {
        let draws = t.draws.as_ref().map_or(0, Vec::len);
        let experts = t.experts.as_ref().map_or(0, Vec::len) as u64;
        if t.shape.len() > MAX_DIMS as usize || draws > organ_core::zmeasure::DRAWS || experts > MAX_EXPERTS {
            bail!("tensor {:?}: {} dimensions, {draws} draws, {experts} experts", t.name, t.shape.len());
        }
    }
    Ok(())
}

/// What to say when shards have no index yet: which, the first models without a report,
/// and the command that finishes them.
fn unfinished_message(store: &dyn Store, models: &[String], shards: u64, unfinished: &[u64]) -> String {
    let first = unfinished[0];
    let listed: Vec<String> = unfinished.iter().take(8).map(|i| format!("{i}/{shards}")).collect();
    let missing: std::collections::HashSet<u64> = unfinished.iter().copied().collect();
    let names: Vec<&str> = (models.iter().enumerate())
        .filter(|(j, _)| missing.contains(&(*j as u64 % shards)))
        .map(|(_, m)| m.as_str())
        .take(5)
        .collect();
    format!(
        "{}: shard {}{} not finished (no {}): no report for {}{}; run organ measure --fleet … --shard {first}/{shards} \
         again",
        store.locate(""),
        listed.join(", "),
        if unfinished.len() > 8 { ", …" } else { "" },
        results::shard_file(first, shards),
        names.join(", "),
        if names.len() == 5 { ", …" } else { "" },
    )
}
