//! `organ sensitivity`: per-tensor sensitivity measured by llama.cpp (docs/sensitivity.md).
//! For each selected tensor, the model with that tensor alone changed (requantized with
//! `--to`, or replaced by noise or zeros with `--ablate`) is scored by `llama-perplexity`
//! against the unchanged model's log-probabilities, saved once: the mean KL divergence,
//! with its error, is the tensor's sensitivity.
//!
//! Every result is kept in a run directory ([`run_dir`]) keyed by what decides it, so an
//! interrupted run resumes where it stopped and a finished one is read back, not rerun.

mod changed;
pub mod predicted;
mod run_dir;
mod staged;
pub mod sweep;

use crate::cmd::outputs::Files;
use crate::llama_cpp::handed::open_text;
use crate::llama_cpp::perplexity::{SavedBase, Settings};
use crate::model::Model;
use anyhow::{bail, Context, Result};
use organ_core::report::{AnyReport, Shown};
use organ_core::sensitivity::report::{Estimate, Report, Row, Setup};
use organ_core::sensitivity::{is_weight, kind, Change};
use organ_core::surgery::select::Selection;
use rayon::prelude::*;
use run_dir::RunDir;
use staged::Staging;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `organ sensitivity`'s options.
pub struct Options<'a> {
    pub model: &'a Path,
    pub change: Change,
    /// Which tensors; `None`: every 2-D weight ([`is_weight`]).
    pub selection: Option<Selection>,
    /// The text, context and chunks of every evaluation (each llama-perplexity on one thread).
    pub settings: Settings,
    /// A second text, disjoint from the first: the same changes measured again on it.
    pub repeat_text: Option<PathBuf>,
    /// Evaluations run at once.
    pub jobs: usize,
    /// Where results are kept (`None`: a temp directory, removed at the end).
    pub cache: Option<PathBuf>,
    /// Keep each changed model scored in this directory (as `TENSOR.gguf`).
    pub keep_models: Option<&'a Path>,
    /// The report's files, by format (the registry's).
    pub files: Files,
    /// Print the bytes each evaluation wrote, and the staging's (`--stats`).
    pub stats: bool,
    pub force: bool,
}

/// What every run, whole or a shard of a sweep, prepares before measuring: the model, the
/// tools, the tensors that can be changed, the texts checked and hashed, the cache and the
/// donor.
struct Prepared {
    model: Model,
    tools: changed::Tools,
    picked: Vec<usize>,
    /// `--text`, then `--repeat-text`: the settings each is scored under, its BLAKE3.
    texts: Vec<(Settings, String)>,
    model_blake3: String,
    cache: run_dir::Cache,
    donor: changed::Donor,
}

/// Where a run's changed models are made: the model staged a batch at a time ([`staged`]),
/// and the bytes written, said with `--stats`.
struct Disk {
    staging: Staging,
    stats: staged::DiskStats,
}

impl Disk {
    fn new(p: &Prepared, o: &Options<'_>) -> Disk {
        Disk { staging: Staging::new(p.cache.model_dir(), o.jobs), stats: staged::DiskStats::default() }
    }

    /// With `--stats`, says what was written in all.
    fn finish(&self, o: &Options<'_>) {
        if o.stats {
            self.stats.emit();
        }
    }
}

/// Checks and prepares everything before any evaluation (the donor is made here).
fn prepare(o: &Options<'_>, w: &mut dyn Write) -> Result<Prepared> {
    if let Some(k) = o.keep_models.filter(|k| !k.is_dir()) {
        bail!("{}: not a directory (--keep-models)", k.display());
    }
    let model = Model::open(o.model)?;
    let tools = changed::Tools::find(o.change, o.settings.llama_cpp.as_deref())?;
    let picked = pick(&model, o)?;
    let mut texts = vec![(o.settings.clone(), check_text(&model, &o.settings.text, &o.settings)?)];
    if let Some(t) = &o.repeat_text {
        let s = Settings { text: t.clone(), ..o.settings.clone() };
        let b = check_text(&model, t, &s)?;
        texts.push((s, b));
    }
    let model_blake3 = crate::digest::fingerprint_files(&crate::digest::identity_files(o.model), false)?.blake3;
    let cache = run_dir::Cache::open(o.cache.as_deref(), &model_blake3)?;
    // The changed tensors' bytes: a donor made once (llama-quantize) for --to, values made
    // by organ for --ablate.
    let donor = changed::Donor::make(&model, o.model, o.change, &tools, &cache)?;
    let picked = donor.keep_possible(&model, picked, w)?;
    Ok(Prepared { model, tools, picked, texts, model_blake3, cache, donor })
}

/// Runs the measurement, prints the table and writes the reports.
pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<Report> {
    let p = prepare(o, w)?;
    let mut disk = Disk::new(&p, o);
    let mut measured = Vec::with_capacity(p.texts.len());
    for t in &p.texts {
        let m = measure_text(&p, o, &p.picked, (&t.0, &t.1), &|_| Ok(()), &mut disk)?;
        measured.push((m.setup, m.rows));
    }
    disk.finish(o);
    let mut measured = measured.into_iter();
    let first = measured.next().context("no text measured")?;
    let report = Report::assemble(
        (p.model.label.clone(), p.model_blake3.clone(), o.change.label()),
        first,
        measured.next(),
        p.tools.perplexity.display().to_string(),
    );
    let any = AnyReport::Sensitivity(&report);
    crate::cmd::outputs::print(any, &Shown::WHOLE, w)?;
    crate::cmd::outputs::write_all(any, &o.files, &Shown::WHOLE, o.force)?;
    Ok(report)
}

/// The indices of the tensors to measure: the selection's, or every 2-D weight.
fn pick(model: &Model, o: &Options<'_>) -> Result<Vec<usize>> {
    let picked: Vec<usize> = (0..model.tensors.len())
        .filter(|&i| {
            let t = &model.tensors[i];
            match &o.selection {
                Some(s) => s.matches(&t.name),
                None => is_weight(&t.name, &t.dims),
            }
        })
        .collect();
    if picked.is_empty() {
        match &o.selection {
            Some(s) => bail!("{}: {}", model.label, s.none_matched(model.tensors.iter().map(|t| t.name.as_str()))),
            None => bail!("{}: has no 2-D weight to measure", model.label),
        }
    }
    Ok(picked)
}

/// Bytes of the text read, hashed and tokenized at a time.
const TEXT_STEP: usize = 64 << 10;

/// Before any work: the text, opened as eval opens it ([`open_text`]), holds two
/// contexts of tokens at least (counted with the model's own tokenizer where organ has
/// it; llama.cpp checks again).
/// Returns the BLAKE3 of its bytes, which keys its results.
///
/// The text is read a step at a time and tokenized only until two contexts are had: the
/// memory and time the check takes are a step's, whatever the text holds (4 MiB of bytes
/// that are no UTF-8, tokenized whole, took 897 MB and 20 s).
fn check_text(model: &Model, text: &Path, s: &Settings) -> Result<String> {
    use std::io::Read;
    let mut f = open_text(text)?;
    let mut tok = organ_core::tokenizer::Tokenizer::from_model(&model.model).ok();
    // llama-perplexity adds the BOS token.
    let (mut have, need) = (1u64, 2 * u64::from(s.ctx));
    let mut hash = blake3::Hasher::new();
    let (mut step, mut pending) = (vec![0u8; TEXT_STEP], Vec::with_capacity(2 * TEXT_STEP));
    loop {
        let got = match f.read(&mut step) {
            Ok(g) => g,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("{}: cannot read (--text)", text.display())),
        };
        hash.update(&step[..got]);
        if let Some(t) = tok.as_ref().filter(|_| have < need) {
            pending.extend_from_slice(&step[..got]);
            let cut = if got == 0 { pending.len() } else { cut_at(&pending) };
            match t.encode(&String::from_utf8_lossy(&pending[..cut])) {
                Ok(ids) => have = have.saturating_add(ids.len() as u64),
                // A vocabulary organ cannot tokenize with: llama.cpp alone checks.
                Err(_) => tok = None,
            }
            pending.drain(..cut);
        }
        if got == 0 {
            break;
        }
    }
    if tok.is_some() && have < need {
        bail!(
            "{}: {have} tokens, too short: a context of {} needs at least {need} (two contexts); give a longer \
             text or a smaller --ctx",
            text.display(),
            s.ctx
        );
    }
    Ok(hash.finalize().to_hex().to_string())
}

/// Where to end the part of `pending` tokenized now, so that cutting there splits no word
/// the whole text would have kept: after the last newline between two characters that are
/// not white space (a newline is a word of its own there), else, once a step is pending
/// with no such newline, at its last character's start (a word that long is cut anyway).
/// 0: wait for more.
fn cut_at(pending: &[u8]) -> usize {
    let ws = |b: u8| b.is_ascii_whitespace();
    let line = (1..pending.len().saturating_sub(1))
        .rev()
        .find(|&i| pending[i] == b'\n' && !ws(pending[i - 1]) && !ws(pending[i + 1]));
    match line {
        Some(i) => i + 1,
        None if pending.len() >= TEXT_STEP => {
            // Back to a character's first byte (at most 3 continuation bytes).
            let mut at = pending.len() - 1;
            while at > 0 && pending.len() - at < 4 && pending[at] & 0xC0 == 0x80 {
                at -= 1;
            }
            at
        }
        None => 0,
    }
}

/// One text's measurement.
struct Measured {
    setup: Setup,
    rows: Vec<Row>,
}

/// Measures every picked tensor on `s.text` (whose BLAKE3 [`check_text`] gave): the base's
/// logits once, then one evaluation per tensor, `o.jobs` at a time, each result kept as it
/// comes; the model staged for those yet to measure, a batch at a time ([`staged`]).
fn measure_text(
    p: &Prepared,
    o: &Options<'_>,
    picked: &[usize],
    (s, text_blake3): (&Settings, &str),
    kept: &Sink<'_>,
    disk: &mut Disk,
) -> Result<Measured> {
    let Prepared { model, donor, .. } = p;
    let dir = RunDir::open(&p.cache, o.change, text_blake3, s)?;
    // Several devices: the base on the first, each evaluation on its job slot's (below).
    let base = dir.base(o.model, &Settings { offload: s.offload.for_slot(0), ..s.clone() })?;
    let todo: Vec<usize> = picked.iter().copied().filter(|&i| dir.result(&model.tensors[i].name).is_none()).collect();
    if todo.len() < picked.len() {
        crate::progress::note(format!(
            "{} of {} tensors measured already on {} (kept in {})",
            picked.len() - todo.len(),
            picked.len(),
            s.text.display(),
            dir.path.display()
        ));
    }
    let bar = crate::progress::tensor_bar();
    bar.set_message(format!("{} on {}", o.change.label(), file_name(&s.text)));
    crate::progress::grow(&bar, todo.len() as u64);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(o.jobs.max(1)).build()?;
    let mut failed: Vec<String> = Vec::new();
    let Disk { staging, stats: disk } = disk;
    let disk = &*disk;
    for batch in todo.chunks(staging.batch()) {
        // --keep-models writes each changed model whole: nothing to stage.
        let staged = match o.keep_models {
            Some(_) => None,
            None => Some(staging.stage(model, batch, disk)?),
        };
        let job = Job { model, donor, base: &base, s, dir: &dir, keep: o.keep_models, staged, force: o.force, kept };
        failed.extend(pool.install(|| {
            batch
                .par_iter()
                .filter_map(|&i| {
                    let r = measure_one(&job, i, disk, o.stats);
                    crate::progress::tensor_done(&bar);
                    r.err().map(|e| format!("{}: {e:#}", model.tensors[i].name))
                })
                .collect::<Vec<String>>()
        }));
    }
    bar.finish_and_clear();
    if !failed.is_empty() {
        bail!(
            "{} of {} evaluations failed (the others are kept; run again to resume):\n  {}",
            failed.len(),
            todo.len(),
            failed.join("\n  ")
        );
    }
    let rows = picked
        .iter()
        .map(|&i| dir.result(&model.tensors[i].name).with_context(|| format!("{}: no result", model.tensors[i].name)))
        .collect::<Result<Vec<Row>>>()?;
    let setup = Setup {
        text: s.text.display().to_string(),
        text_blake3: text_blake3.to_owned(),
        ctx: base.scored.ctx,
        chunks: base.scored.chunks,
        base_perplexity: Estimate { value: base.scored.ppl.value, error: base.scored.ppl.error },
    };
    Ok(Measured { setup, rows })
}

/// What is done with each result once it is kept in the run directory (a sweep's shard
/// stores it in the results at once).
type Sink<'a> = dyn Fn(&Row) -> Result<()> + Sync + 'a;

/// What every evaluation of one text shares.
#[derive(Clone, Copy)]
struct Job<'a> {
    model: &'a Model,
    donor: &'a changed::Donor,
    base: &'a SavedBase,
    s: &'a Settings,
    dir: &'a RunDir,
    /// `--keep-models`, and whether a model kept there may replace a file (`--force`).
    keep: Option<&'a Path>,
    /// The model staged for this batch (none with `keep`).
    staged: Option<&'a staged::Staged>,
    force: bool,
    kept: &'a Sink<'a>,
}

/// One tensor: its changed model made in the run directory (of the staged shards), or
/// written whole in `--keep-models`, scored, the result kept, the model removed (or kept).
/// With `stats`, says the bytes written for it.
fn measure_one(j: &Job<'_>, i: usize, disk: &staged::DiskStats, stats: bool) -> Result<()> {
    let Job { model, donor, base, s, dir, keep, staged, force, kept } = *j;
    let t = &model.tensors[i];
    // Several devices: this job slot's own.
    let s = &Settings { offload: s.offload.for_slot(rayon::current_thread_index().unwrap_or(0)), ..s.clone() };
    let replaced = donor.replacement(model, i)?;
    let (k, written) = match (keep, staged) {
        (Some(keep), _) => {
            let dest = keep.join(format!("{}.gguf", t.name.replace('/', "_")));
            let (tmp, len) = changed::write_whole(model, i, &replaced, &dest, force)?;
            let k = base.divergence(&tmp.path, s, &dir.work())?;
            tmp.commit()?;
            (k, len)
        }
        (None, Some(staged)) => {
            let c = staged.changed(i, &replaced, &dir.work(), disk)?;
            (base.divergence(&c.first, s, &dir.work())?, c.written)
        }
        (None, None) => bail!("{}: neither staged nor kept", t.name),
    };
    disk.evaluated(written);
    if stats {
        crate::progress::emit(&organ_core::events::Event::EvaluationStats {
            tensor: t.name.clone(),
            changed_bytes: replaced.n_bytes,
            bytes_written: written,
            kld_by_chunk: k.kld_by_chunk.iter().map(|e| [e.value, e.error]).collect(),
        });
    }
    let est = |e: crate::llama_cpp::output::Estimate| Estimate { value: e.value, error: e.error };
    let row = Row {
        name: t.name.clone(),
        kind: kind(&t.name),
        layer: organ_core::anatomy::layer_of(&t.name),
        ty: t.ty.name().to_owned(),
        dims: t.dims.clone(),
        n_elements: t.n_elements,
        bytes: t.n_bytes,
        changed_type: replaced.ty.name().to_owned(),
        changed_bytes: replaced.n_bytes,
        kld: est(k.kld_mean),
        kld_median: k.kld_median,
        kld_p99: k.kld_p99,
        ppl: est(k.ppl),
        same_top: est(k.same_top),
        repeat_kld: None,
    };
    dir.keep(&row)?;
    kept(&row)
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned())
}
