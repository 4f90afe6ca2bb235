//! A sweep spread over workers (`organ sensitivity … --shard I/N --results R`) and merged
//! (`organ report merge R`; docs/sensitivity.md). Each worker measures its share of the
//! tensors (tensor j of the sweep is shard j mod N's) and stores each result in the
//! results as its evaluation ends, so a worker killed and started again, here or on
//! another machine, resumes where it stopped; then it writes its shard's index. The merge
//! checks every file against the sweep and builds the report with the code a one-machine
//! run uses ([`Report::assemble`]), so both give the same report byte for byte. The
//! results are a directory or an object store's prefix, as `measure --fleet`'s are
//! ([`results::Store`]), and the shard comes from the same flags and variables ([`Shard`]).

use super::{measure_text, prepare, Options};
use crate::cmd::measure::results::{self, Store};
use crate::cmd::measure::shard::Shard;
use crate::cmd::outputs::Files;
use anyhow::{bail, Context, Result};
use organ_core::report::{AnyReport, Shown};
use organ_core::sensitivity::report::Report;
use organ_core::sensitivity::report::Row;
use organ_core::sensitivity::run::{BaseRun, Definition};
use organ_core::sensitivity::sweep::{
    index_cap, result_name, setup, shard_file, Indexed, Sweep, SweepIndex, SweepResult, SweepText, FORMAT,
    MAX_RESULT_BYTES, MAX_SWEEP_FILE_BYTES, MAX_SWEEP_TENSORS, SWEEP_FILE,
};
use serde::Deserialize;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// Parses `bytes` from `name` of `store` as JSON of `T`, of [`FORMAT`].
fn parse<T: serde::de::DeserializeOwned>(store: &dyn Store, name: &str, bytes: &[u8]) -> Result<T> {
    #[derive(Deserialize)]
    struct Version {
        organ_sweep: Option<u32>,
    }
    let at = store.locate(name);
    let v: Version =
        serde_json::from_slice(bytes).with_context(|| format!("{at}: not a file of organ's sensitivity sweeps"))?;
    match v.organ_sweep {
        Some(FORMAT) => {
            serde_json::from_slice(bytes).with_context(|| format!("{at}: not a file of organ's sensitivity sweeps"))
        }
        Some(n) => bail!("{at}: a sweep file of format {n}; this organ reads format {FORMAT}"),
        None => bail!("{at}: not a file of organ's sensitivity sweeps (no organ_sweep version)"),
    }
}

/// Whether the results `results` names are a sensitivity sweep's (they hold `sweep.json`).
/// Results that cannot be read are not: the fleet's merge says why.
pub fn is_sweep(results: &Path) -> bool {
    results::open(results, false).is_ok_and(|s| s.get(SWEEP_FILE, MAX_SWEEP_FILE_BYTES).is_ok_and(|b| b.is_some()))
}

/// Writes `sweep` as the results' `sweep.json`, or checks it against the one there: a
/// worker of another sweep is refused, naming both.
fn claim(store: &dyn Store, sweep: &Sweep) -> Result<()> {
    if sweep.shards > sweep.tensors.len() as u64 {
        bail!("{} shards for {} tensors: give at most one shard per tensor", sweep.shards, sweep.tensors.len());
    }
    let bytes = serde_json::to_vec_pretty(sweep)?;
    if sweep.tensors.len() > MAX_SWEEP_TENSORS || bytes.len() as u64 > MAX_SWEEP_FILE_BYTES {
        bail!(
            "a sweep of {} tensors ({} bytes): a sweep holds at most {MAX_SWEEP_TENSORS} tensors in \
             {MAX_SWEEP_FILE_BYTES} bytes",
            sweep.tensors.len(),
            bytes.len()
        );
    }
    let Some(there) = results::create_or_get(store, SWEEP_FILE, &bytes, MAX_SWEEP_FILE_BYTES)? else {
        return Ok(());
    };
    let there: Sweep = parse(store, SWEEP_FILE, &there)?;
    if !there.same_as(sweep) {
        bail!(
            "{}: the results of another sweep: {} there, {} here: use another --results",
            store.locate(SWEEP_FILE),
            there.identity(),
            sweep.identity()
        );
    }
    Ok(())
}

/// The result stored as `name`, if it is there whole and is `tensor`'s on text `text` of
/// `sweep`; with the BLAKE3 of its bytes. Anything else is measured again.
fn lookup(store: &dyn Store, name: &str, sweep: &Sweep, text: usize, tensor: &str) -> Option<(Row, String)> {
    let bytes = match store.get(name, MAX_RESULT_BYTES) {
        Ok(b) => b?,
        Err(e) => {
            crate::progress::warn(format!("{e:#}; measured again"));
            return None;
        }
    };
    match parse::<SweepResult>(store, name, &bytes) {
        Ok(r) if r.is_of(sweep, text, tensor) => Some((r.row, crate::digest::blake3_hex(&bytes))),
        Ok(r) => {
            crate::progress::warn(format!("{}: the result of {}; measured again", store.locate(name), r.identity()));
            None
        }
        Err(e) => {
            crate::progress::warn(format!("{e:#}; measured again"));
            None
        }
    }
}

/// The map behind `m`, whether or not a job panicked holding it (its entries are whole).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Stores `row`, measured on the text of `definition`, under its name; returns the name
/// and the BLAKE3 of the bytes stored.
fn store_row(store: &dyn Store, sweep: &Sweep, definition: &Definition, row: &Row) -> Result<(String, String)> {
    let name = result_name(definition, &row.name);
    let r = SweepResult {
        organ_sweep: FORMAT,
        model_blake3: sweep.model_blake3.clone(),
        definition: definition.clone(),
        row: row.clone(),
    };
    let bytes = serde_json::to_vec_pretty(&r)?;
    store.put(&name, &bytes, true)?;
    Ok((name, crate::digest::blake3_hex(&bytes)))
}

/// Measures `shard`'s tensors of the sweep `o` defines into `results` (a directory, made
/// if need be, or a store URL's prefix), taking what is there already, then writes the
/// shard's index. Prints what it did.
///
/// # Errors
/// As a one-machine run; the results are another sweep's; they cannot be written.
pub fn run(o: &Options<'_>, shard: Shard, results: &Path, w: &mut dyn Write) -> Result<()> {
    let store = results::open(results, true)?;
    let store = store.as_ref();
    let p = prepare(o, w)?;
    let tensors: Vec<String> = p.picked.iter().map(|&i| p.model.tensors[i].name.clone()).collect();
    let texts: Vec<SweepText> = p
        .texts
        .iter()
        .map(|(s, b)| SweepText {
            text: s.text.display().to_string(),
            definition: Definition::new(o.change, b, s.ctx, s.chunks),
        })
        .collect();
    let sweep = Sweep {
        organ_sweep: FORMAT,
        model: p.model.label.clone(),
        model_blake3: p.model_blake3.clone(),
        change: o.change.label(),
        texts,
        shards: shard.count,
        tensors,
    };
    claim(store, &sweep)?;
    let mine: Vec<(usize, usize)> =
        p.picked.iter().enumerate().filter(|(j, _)| sweep.holds(shard.index, *j)).map(|(j, &i)| (j, i)).collect();
    writeln!(w, "shard {shard}: {} of {} tensors", mine.len(), sweep.tensors.len())?;
    let (mut bases, mut index) = (Vec::new(), Vec::new());
    let mut disk = super::Disk::new(&p, o);
    for (t, (s, text_blake3)) in p.texts.iter().enumerate() {
        let definition = &sweep.texts[t].definition;
        // What the results hold already is kept in the run directory, not measured again.
        let dir = super::RunDir::open(&p.cache, o.change, text_blake3, s)?;
        // The BLAKE3 of each result known to be in the results as it is: found there now, or
        // stored as its evaluation ended.
        let stored: Mutex<HashMap<String, (Row, String)>> = Mutex::default();
        let mut found = 0;
        for &(j, _) in &mine {
            let name = &sweep.tensors[j];
            if dir.result(name).is_none() {
                if let Some((row, hash)) = lookup(store, &result_name(definition, name), &sweep, t, name) {
                    dir.keep(&row)?;
                    found += 1;
                    lock(&stored).insert(name.clone(), (row, hash));
                }
            }
        }
        let picked: Vec<usize> = mine.iter().map(|&(_, i)| i).collect();
        let sink = |row: &Row| {
            let (_, hash) = store_row(store, &sweep, definition, row)?;
            lock(&stored).insert(row.name.clone(), (row.clone(), hash));
            Ok(())
        };
        let m = measure_text(&p, o, &picked, (s, text_blake3), &sink, &mut disk)?;
        // Every result of the shard is in the results now (those an earlier run kept in this
        // cache only, checked there now); the index names the bytes stored.
        let stored = stored.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        for row in &m.rows {
            let name = result_name(definition, &row.name);
            let known = stored.get(&row.name).filter(|(r, _)| r == row).map(|(_, h)| h.clone());
            let result_blake3 = match known.or_else(|| {
                lookup(store, &name, &sweep, t, &row.name).filter(|(there, _)| there == row).map(|(_, h)| h)
            }) {
                Some(hash) => hash,
                None => store_row(store, &sweep, definition, row)?.1,
            };
            index.push(Indexed { text: t, tensor: row.name.clone(), result: name, result_blake3 });
        }
        let b = &m.setup;
        bases.push(BaseRun {
            chunks: b.chunks,
            ctx: b.ctx,
            ppl: b.base_perplexity.value,
            ppl_error: b.base_perplexity.error,
        });
        writeln!(w, "  {}: {} done, {found} of them taken from the results", s.text.display(), m.rows.len())?;
    }
    disk.finish(o);
    let done = SweepIndex {
        organ_sweep: FORMAT,
        shard: shard.index,
        shards: shard.count,
        model_blake3: sweep.model_blake3.clone(),
        bases,
        llama_perplexity: p.tools.perplexity.display().to_string(),
        results: index,
    };
    let name = shard_file(shard.index, shard.count);
    store.put(&name, &serde_json::to_vec_pretty(&done)?, true)?;
    writeln!(w, "shard {shard} done: {}", store.locate(&name))?;
    Ok(())
}

/// The sweep's report from the results in `store`, every file checked against the sweep:
/// each index is of its shard and the sweep's model, shares shard 0's bases, and lists
/// each of its shard's tensors once per text; each result has the BLAKE3 its index
/// recorded and is that tensor's, of the sweep's model, change, text and settings.
///
/// # Errors
/// A shard has not finished, a file is over its cap or not of organ's, or a file does not
/// match the sweep (named, with both identities).
pub fn merged(store: &dyn Store) -> Result<Report> {
    let bytes = store
        .get(SWEEP_FILE, MAX_SWEEP_FILE_BYTES)?
        .with_context(|| format!("{}: not there: not the results of a sensitivity sweep", store.locate(SWEEP_FILE)))?;
    let sweep: Sweep = parse(store, SWEEP_FILE, &bytes)?;
    drop(bytes);
    let at = store.locate(SWEEP_FILE);
    if sweep.shards == 0 || sweep.shards > sweep.tensors.len() as u64 {
        bail!("{at}: {} shards for {} tensors: not 1 to {1}", sweep.shards, sweep.tensors.len());
    }
    if sweep.tensors.len() > MAX_SWEEP_TENSORS || sweep.texts.is_empty() || sweep.texts.len() > 2 {
        bail!("{at}: {} tensors on {} texts: not a sweep of organ's", sweep.tensors.len(), sweep.texts.len());
    }
    let mut number: HashMap<&str, usize> = HashMap::with_capacity(sweep.tensors.len());
    for (j, t) in sweep.tensors.iter().enumerate() {
        if number.insert(t, j).is_some() {
            bail!("{at}: lists {t} twice");
        }
    }
    let n_texts = sweep.texts.len();
    let mut rows: Vec<Vec<Option<Row>>> = vec![vec![None; sweep.tensors.len()]; n_texts];
    let mut first: Option<(u64, Vec<BaseRun>, String)> = None;
    for i in 0..sweep.shards {
        let name = shard_file(i, sweep.shards);
        let names = sweep.tensors.iter().enumerate().filter(|(j, _)| sweep.holds(i, *j)).map(|(_, t)| t);
        let bytes = store.get(&name, index_cap(names, n_texts))?.with_context(|| {
            format!("{}: not there: shard {i} of {} has not finished", store.locate(&name), sweep.shards)
        })?;
        let index: SweepIndex = parse(store, &name, &bytes)?;
        let iat = store.locate(&name);
        if index.shard != i || index.shards != sweep.shards {
            bail!("{iat}: the index of shard {}/{}, not {i}/{}", index.shard, index.shards, sweep.shards);
        }
        if index.model_blake3 != sweep.model_blake3 {
            bail!("{iat}: measured model BLAKE3 {}, the sweep's ({at}) is {}", index.model_blake3, sweep.model_blake3);
        }
        if index.bases.len() != n_texts {
            bail!("{iat}: {} base runs for the sweep's {n_texts} texts", index.bases.len());
        }
        match &first {
            None => first = Some((i, index.bases.clone(), index.llama_perplexity.clone())),
            Some((f, bases, _)) if *bases != index.bases => bail!(
                "{iat}: its base runs ({}) differ from shard {f}'s ({}): the shards' llama.cpp builds or devices \
                 score the unchanged model differently, so their KL divergences do not compare",
                serde_json::to_string(&index.bases)?,
                serde_json::to_string(bases)?
            ),
            Some(_) => {}
        }
        for e in &index.results {
            let Some(&j) = number.get(e.tensor.as_str()) else {
                bail!("{iat}: {} is not a tensor of the sweep", e.tensor)
            };
            if !sweep.holds(i, j) || e.text >= n_texts {
                bail!("{iat}: lists {} on text {}, which is not this shard's", e.tensor, e.text);
            }
            if rows[e.text][j].is_some() {
                bail!("{iat}: lists {} on text {} twice", e.tensor, e.text);
            }
            if e.result != result_name(&sweep.texts[e.text].definition, &e.tensor) {
                bail!("{iat}: names {} for {}, not the name of its result", e.result, e.tensor);
            }
            let rat = store.locate(&e.result);
            let bytes = store
                .get(&e.result, MAX_RESULT_BYTES)?
                .with_context(|| format!("{rat}: not there, though {iat} lists it"))?;
            let hash = crate::digest::blake3_hex(&bytes);
            if hash != e.result_blake3 {
                bail!(
                    "{rat}: BLAKE3 {hash}, not the {} that {iat} recorded: changed after its shard ended",
                    e.result_blake3
                );
            }
            let r: SweepResult = parse(store, &e.result, &bytes)?;
            if !r.is_of(&sweep, e.text, &e.tensor) {
                bail!(
                    "{rat}: the result of {}, not of {}: model BLAKE3 {}…, {} on text {} of the sweep ({at})",
                    r.identity(),
                    e.tensor,
                    &sweep.model_blake3[..sweep.model_blake3.len().min(16)],
                    sweep.change,
                    e.text
                );
            }
            rows[e.text][j] = Some(r.row);
        }
    }
    let (_, bases, llama) = first.context("no shard")?;
    let mut measured = Vec::with_capacity(n_texts);
    for (t, text_rows) in rows.into_iter().enumerate() {
        let mut all = Vec::with_capacity(text_rows.len());
        for (j, r) in text_rows.into_iter().enumerate() {
            let tensor = &sweep.tensors[j];
            let shard = shard_file(j as u64 % sweep.shards, sweep.shards);
            all.push(r.with_context(|| format!("{}: has no result for {tensor} on text {t}", store.locate(&shard)))?);
        }
        measured.push((setup(&sweep.texts[t], &bases[t]), all));
    }
    let mut measured = measured.into_iter();
    let first = measured.next().context("no text")?;
    Ok(Report::assemble((sweep.model, sweep.model_blake3, sweep.change), first, measured.next(), llama))
}

/// `organ report merge RESULTS` on a sweep's results: the report, printed and written in
/// the formats asked for (those a sensitivity report has).
///
/// # Errors
/// As [`merged`]; a format sensitivity reports do not have; a file cannot be written.
pub fn merge(results: &Path, files: &Files, force: bool, w: &mut dyn Write) -> Result<Report> {
    let kind = organ_core::report::Kind::Sensitivity;
    if let Some((f, _)) = files.iter().find(|(f, _)| !f.applies_to(kind)) {
        bail!("--{}: a sensitivity sweep's report has no {} form", f.name, f.name);
    }
    let store = results::open(results, false)?;
    let report = merged(store.as_ref())?;
    let any = AnyReport::Sensitivity(&report);
    crate::cmd::outputs::print(any, &Shown::WHOLE, w)?;
    crate::cmd::outputs::write_all(any, files, &Shown::WHOLE, force)?;
    Ok(report)
}
