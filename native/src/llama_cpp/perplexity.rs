//! An evaluation by llama.cpp's `llama-perplexity` (docs/judge.md): a model's perplexity on
//! a text and, against a base, its KL divergence and top-token agreement. `organ eval`
//! ([`crate::cmd::eval`]) prints one; `--judge` ([`crate::judge`]) grades one.
//!
//! With a base, llama-perplexity runs twice with the same context: the base with
//! `--kl-divergence-base FILE` (which scores it and saves its log-probabilities), then the
//! model with `--kl-divergence-base FILE --kl-divergence`. The logits file (tens of MB
//! per thousand tokens) is written in a temp directory removed on every way out, and kept
//! in the logits cache when it fits ([`logits_cache`]): a later run on the same base, text
//! and settings reads it back and runs the model only.
//!
//! llama-perplexity is handed every file open ([`Handed`]): the model and the base as
//! organ opened them (under `organ serve`, inside the root), the text as organ's private
//! copy, the logits file as organ created it. It never resolves a name the user gave, so
//! a path swapped for a link after organ's check changes nothing it reads.

use super::handed::{create_private, hand_model, open_text, scratch_dir};
pub use super::logits_cache::Policy as LogitsCache;
use super::logits_cache::{self, Slot};
pub use super::offload::{devices, gpu_layers, Offload};
use super::{output, Handed};
use crate::llama_cpp;
use crate::model::Model;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What to evaluate, and how.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The text scored (UTF-8, at least two contexts of tokens).
    pub text: PathBuf,
    /// Tokens per context (llama-perplexity's `-c`; also its batch, so one sequence at a time).
    pub ctx: u32,
    /// llama-perplexity's `-t` (default: its own).
    pub threads: Option<u32>,
    /// Score at most this many chunks (default: all the text holds).
    pub chunks: Option<u32>,
    /// llama.cpp's bin directory (default: ORGAN_LLAMA_CPP, then PATH).
    pub llama_cpp: Option<PathBuf>,
    /// LoRA adapters llama-perplexity applies at run time, to either side.
    pub adapters: Adapters,
    /// Where llama-perplexity runs the model: its GPU layers and devices.
    pub offload: Offload,
    /// Where a base's logits are kept for the next evaluation against it, and how much
    /// ([`logits_cache`]; off by default, as for sensitivity, which keeps its own).
    pub logits_cache: LogitsCache,
}

/// The adapters applied to each side of an evaluation (`--lora-scaled FILE:S`): the model
/// `organ eval --lora` names, or the base `--base-lora` names (`organ lora merge --judge`
/// compares its output with the base and the adapters merged).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Adapters {
    /// Applied to the model.
    pub model: Vec<Scaled>,
    /// Applied to the base.
    pub base: Vec<Scaled>,
}

/// An adapter file and the scale it is applied at (1 for llama.cpp's `--lora`).
#[derive(Clone, Debug, PartialEq)]
pub struct Scaled {
    pub path: PathBuf,
    pub scale: f32,
}

impl Scaled {
    /// `FILE` (scale 1) or `FILE:S`, as `--lora` takes them: a suffix after the last `:`
    /// that reads as a number is the scale, so a file name with a colon still works.
    ///
    /// # Errors
    /// A scale that is not finite.
    pub fn parse(s: &str) -> Result<Scaled> {
        if let Some((path, scale)) = s.rsplit_once(':') {
            if let Ok(v) = scale.parse::<f32>() {
                if !v.is_finite() {
                    bail!("{s:?}: the scale {scale} is not a finite number");
                }
                return Ok(Scaled { path: PathBuf::from(path), scale: v });
            }
        }
        Ok(Scaled { path: PathBuf::from(s), scale: 1.0 })
    }
}

impl std::fmt::Display for Scaled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.path.display(), self.scale)
    }
}

/// The contexts organ asks llama-perplexity for.
pub const MIN_CTX: u32 = 8;
pub const MAX_CTX: u32 = 1 << 17;

/// What llama-perplexity measured, as the core keeps it (one figure and its standard
/// error, the KL divergence's statistics, the evaluation).
pub use organ_core::judge::{BaseLogits, Divergence, Estimate, Evaluation};

/// Evaluates `model` (against `base`, when given). Temp files go in a directory under
/// `scratch` (the output's directory) or the system's temp directory, removed on return.
///
/// # Errors
/// llama-perplexity is missing or fails, the text is too short, a block of its output is
/// missing, or the vocabularies differ.
pub fn evaluate(model: &Path, base: Option<&Path>, s: &Settings, scratch: Option<&Path>) -> Result<Evaluation> {
    let tool = llama_cpp::find("llama-perplexity", s.llama_cpp.as_deref())?;
    check_inputs(model, s)?;
    if let Some(b) = base {
        check_gguf(b)?;
    }
    // llama.cpp reads what organ opened (under `organ serve`: inside the root) and read
    // first, the text as a private copy: every file handed open, never by a name it
    // would resolve again.
    let dir = scratch_dir(scratch)?;
    let (model_file, read) = hand_model(model, &dir.path.join("model"))?;
    let (model_adapters, _) = hand_adapters(&s.adapters.model, model, &read, false)?;
    // The base's adapters are part of its logits' key: their bytes are hashed when the
    // logits cache is on.
    let caching = base.is_some() && s.logits_cache.is_on();
    let (base_file, (base_adapters, base_adapter_ids), base_read) = match base {
        Some(b) => {
            let (handed, base_read) = hand_model(b, &dir.path.join("base"))?;
            same_vocabulary(b, &base_read, model, &read)?;
            let adapters = hand_adapters(&s.adapters.base, b, &base_read, caching)?;
            (Some(handed), adapters, Some(base_read))
        }
        None if !s.adapters.base.is_empty() => bail!("adapters for the base need a base to apply them to"),
        None => (None, (Vec::new(), Vec::new()), None),
    };
    // What the verdict is tied to: the bytes scored, whatever their name
    // (`measure --verdict`).
    let model_blake3 = read.fingerprint(false)?.blake3;
    let base_blake3 = base_read.as_ref().map(|b| b.fingerprint(false)).transpose()?.map(|f| f.blake3);
    // The maps go before llama.cpp runs: it reads the files itself.
    drop((read, base_read));
    let (text, text_blake3) = copy_text(&s.text, &dir.path)?;
    // The base's logits kept by an earlier run on the same base, text and settings.
    let slot = match (&base_blake3, caching) {
        (Some(b), true) => {
            logits_key(&tool, b, base_adapter_ids, text_blake3, s).and_then(|k| Slot::open(&s.logits_cache, k))
        }
        _ => None,
    };
    let hit = slot.as_ref().and_then(Slot::find);
    let label = |p: &Path| p.display().to_string();
    // A side run with adapters says so: `MODEL + lora FILE:S…`.
    let with = |p: &Path, adapters: &[Scaled]| adapters.iter().fold(label(p), |l, a| format!("{l} + lora {a}"));
    let mut e = Evaluation {
        model: with(model, &s.adapters.model),
        model_blake3,
        base: base.map(|b| with(b, &s.adapters.base)),
        base_blake3,
        text: label(&s.text),
        ctx: s.ctx,
        chunks: 0,
        perplexity: Estimate { value: f64::NAN, error: f64::NAN },
        base_perplexity: None,
        kl_divergence: None,
        llama_perplexity: label(&tool),
        base_logits: None,
    };
    // A bar over the chunks scored, or progress events: one run, or two (the base's, then
    // the model's on the same chunks), counted as one task.
    let name = |p: &Path| p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned());
    let bar = Cleared(crate::progress::chunk_bar(match base {
        Some(b) => format!("{} (the base)", name(b)),
        None => name(model),
    }));
    let runs = if base.is_some() && hit.is_none() { 2 } else { 1 };
    let step = |run: u64| {
        let bar = bar.0.clone();
        move |done: u32, total: u32| {
            let total = u64::from(total);
            crate::progress::chunks_done(&bar, run * total + u64::from(done), runs * total);
        }
    };
    let (Some(base), Some(base_file)) = (base, base_file) else {
        let make = || {
            let mut c = command(&tool, &model_file, &model_adapters, &[&text], s);
            c.arg("-f").arg(&text.arg);
            c
        };
        let r = run_read(make, output::perplexity, &label(model), &mut step(0))
            .with_context(|| format!("{}", model.display()))?;
        (e.chunks, e.perplexity) = (r.chunks, r.ppl);
        return Ok(e);
    };
    let (logits, b, next) = match hit {
        Some(hit) => {
            crate::progress::note(format!(
                "the base's logits read back from {} (its run took {:.1} s; --logits-cache-max 0 computes them)",
                hit.path.display(),
                hit.seconds
            ));
            e.base_logits = Some(BaseLogits::Cached);
            (Handed::file(hit.file)?, hit.scored, 0)
        }
        None => {
            let path = dir.path.join("base-logits.kld");
            let logits = Handed::file(create_private(&path)?)?;
            let started = std::time::Instant::now();
            let b = run_base(&tool, &base_file, &base_adapters, &text, &logits, s, &mut step(0))
                .with_context(|| format!("{} (the base)", base.display()))?;
            if let Some(slot) = &slot {
                // Kept before the model runs: a model that fails does not cost the base.
                if let Err(err) = slot.keep(&path, &b, started.elapsed()) {
                    crate::progress::warn(format!("the base's logits are not kept: {err:#}"));
                }
            }
            e.base_logits = Some(BaseLogits::Computed);
            (logits, b, 1)
        }
    };
    bar.0.set_message(format!("{} against the base", name(model)));
    let k = run_divergence(&tool, &model_file, &model_adapters, &logits, &b, s, &mut step(next))
        .with_context(|| format!("{}", model.display()))?;
    drop((logits, text, dir));
    e.chunks = k.chunks;
    e.perplexity = k.ppl;
    e.base_perplexity = Some(b.ppl);
    e.kl_divergence = Some(Divergence {
        mean: k.kld_mean,
        median: k.kld_median,
        p99: k.kld_p99,
        max: k.kld_max,
        same_top: k.same_top,
        ln_ppl_ratio: k.ln_ppl_ratio,
    });
    Ok(e)
}

/// A bar cleared from the terminal however the evaluation ends.
struct Cleared(indicatif::ProgressBar);

impl Drop for Cleared {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// An adapter handed to llama.cpp, with the scale it applies it at.
type HandedAdapter = (Handed, f32);

/// llama-perplexity on the handed model `m` with its `adapters` (`--lora-scaled FILE:S`),
/// the settings' context (also its batch), threads and chunks; `also` are the other files
/// it inherits.
fn command(tool: &Path, m: &Handed, adapters: &[HandedAdapter], also: &[&Handed], s: &Settings) -> Command {
    let mut c = Command::new(tool);
    c.arg("-m").arg(&m.arg).arg("-c").arg(s.ctx.to_string()).arg("-b").arg(s.ctx.to_string());
    for (a, scale) in adapters {
        // A handed file is /proc/self/fd/N: no ':' or ',' for llama.cpp to split on.
        let mut arg = a.arg.clone().into_os_string();
        arg.push(format!(":{scale}"));
        c.arg("--lora-scaled").arg(arg);
    }
    let files: Vec<&Handed> =
        [m].into_iter().chain(adapters.iter().map(|(a, _)| a)).chain(also.iter().copied()).collect();
    llama_cpp::inherit(&mut c, &files);
    if let Some(t) = s.threads {
        c.arg("-t").arg(t.max(1).to_string());
    }
    if let Some(n) = s.chunks {
        c.arg("--chunks").arg(n.max(1).to_string());
    }
    if let Some(n) = &s.offload.gpu_layers {
        c.arg("-ngl").arg(n);
    }
    if let Some(d) = &s.offload.device {
        c.arg("--device").arg(d);
    }
    c
}

/// How many times in all a run whose output was cut short ([`output::Error::cut_short`])
/// is made.
const RUNS: u32 = 3;

/// Runs the command `make` builds and reads what it printed with `read`. A run whose
/// output was cut short at exit is made again, up to [`RUNS`] in all, with a warning
/// naming `who` (each run is the whole computation again: llama.cpp lost only the
/// printing of it). `progress` hears of each chunk scored, never of one twice.
fn run_read<T>(
    make: impl Fn() -> Command,
    read: fn(&str, &str) -> Result<T, output::Error>,
    who: &str,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<T> {
    let mut heard: Option<u32> = None;
    let mut hear = |done: u32, total: u32| {
        if heard.is_none_or(|h| done > h) {
            heard = Some(done);
            progress(done, total);
        }
    };
    let mut run = 1;
    loop {
        let p = llama_cpp::run_metered(make(), &mut hear)?;
        match read(&p.stdout, &p.stderr) {
            Err(e) if e.cut_short() && run < RUNS => {
                run += 1;
                crate::progress::warn(format!("{who}: {e}; running it again ({run} of {RUNS})"));
            }
            r => return Ok(r?),
        }
    }
}

/// Scores the base on the text and saves its tokens and log-probabilities into `logits`.
/// `progress` hears of each chunk scored ([`llama_cpp::run_metered`]).
fn run_base(
    tool: &Path,
    base: &Handed,
    adapters: &[HandedAdapter],
    text: &Handed,
    logits: &Handed,
    s: &Settings,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<output::Perplexity> {
    let make = || {
        let mut c = command(tool, base, adapters, &[text, logits], s);
        c.arg("-f").arg(&text.arg).arg("--kl-divergence-base").arg(&logits.arg);
        c
    };
    run_read(make, output::perplexity, "the base", progress)
}

/// Scores the model on the tokens saved in `logits` and compares its distribution with the
/// saved one; `base` is what the base's run scored, which the model's must match.
fn run_divergence(
    tool: &Path,
    model: &Handed,
    adapters: &[HandedAdapter],
    logits: &Handed,
    base: &output::Perplexity,
    s: &Settings,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<output::KlDivergence> {
    let make = || {
        let mut c = command(tool, model, adapters, &[logits], s);
        c.arg("--kl-divergence-base").arg(&logits.arg).arg("--kl-divergence");
        c
    };
    let k = run_read(make, output::kl_divergence, "the model", progress)?;
    if (k.chunks, k.ctx) != (base.chunks, base.ctx) {
        bail!(
            "scored {} chunks of {} tokens, the base {} of {}: not the same tokens",
            k.chunks,
            k.ctx,
            base.chunks,
            base.ctx
        );
    }
    Ok(k)
}

/// A base scored once, its log-probabilities kept in a file, against which many models are
/// compared (`organ sensitivity`: one run of the base, one run per changed model).
pub struct SavedBase {
    /// The base's run: chunks, context, perplexity.
    pub scored: output::Perplexity,
    /// llama-perplexity's `--kl-divergence-base` file.
    pub logits: PathBuf,
    /// The base's vocabulary size, which every model compared must have.
    vocabulary: u64,
    tool: PathBuf,
}

impl SavedBase {
    /// Scores `base` on the settings' text and saves its log-probabilities in `logits`,
    /// a new file (its directory must exist; it is made readable by organ's user only).
    /// Temp files go in `scratch`.
    ///
    /// # Errors
    /// As [`evaluate`]; `logits` exists already.
    pub fn save(base: &Path, s: &Settings, logits: &Path, scratch: &Path) -> Result<SavedBase> {
        let tool = llama_cpp::find("llama-perplexity", s.llama_cpp.as_deref())?;
        check_inputs(base, s)?;
        let dir = scratch_dir(Some(scratch))?;
        let (base_file, read) = hand_model(base, &dir.path.join("base"))?;
        let vocabulary = vocabulary(base, &read)?;
        let (adapters, _) = hand_adapters(&s.adapters.base, base, &read, false)?;
        drop(read);
        let (text, _) = copy_text(&s.text, &dir.path)?;
        let out = Handed::file(create_private(logits)?)?;
        let scored = run_base(&tool, &base_file, &adapters, &text, &out, s, &mut |_, _| {})
            .with_context(|| format!("{} (the base)", base.display()));
        if scored.is_err() {
            let _ = std::fs::remove_file(logits);
        }
        Ok(SavedBase { scored: scored?, logits: logits.to_owned(), vocabulary, tool })
    }

    /// A base saved earlier by [`SavedBase::save`] with these settings: `scored` is what
    /// that run reported.
    ///
    /// # Errors
    /// llama-perplexity is missing, or the base cannot be read.
    pub fn reopen(base: &Path, s: &Settings, logits: &Path, scored: output::Perplexity) -> Result<SavedBase> {
        let tool = llama_cpp::find("llama-perplexity", s.llama_cpp.as_deref())?;
        let read = Model::open(base)?;
        let vocabulary = vocabulary(base, &read)?;
        Ok(SavedBase { scored, logits: logits.to_owned(), vocabulary, tool })
    }

    /// The KL divergence of `model` from the saved base (same context and chunks). Temp
    /// files go in `scratch`.
    ///
    /// # Errors
    /// The model is not a GGUF organ reads, its vocabulary differs, llama-perplexity fails.
    pub fn divergence(&self, model: &Path, s: &Settings, scratch: &Path) -> Result<output::KlDivergence> {
        let dir = scratch_dir(Some(scratch))?;
        let (model_file, read) = hand_model(model, &dir.path.join("model"))?;
        let m = vocabulary(model, &read)?;
        let (adapters, _) = hand_adapters(&s.adapters.model, model, &read, false)?;
        if m != self.vocabulary {
            bail!(
                "{} has {m} tokens, the base {}: KL divergence compares the same tokens' probabilities",
                model.display(),
                self.vocabulary
            );
        }
        drop(read);
        let saved = std::fs::File::open(&self.logits)
            .with_context(|| format!("{}: cannot open the base's saved logits", self.logits.display()))?;
        let logits = Handed::file(saved)?;
        run_divergence(&self.tool, &model_file, &adapters, &logits, &self.scored, s, &mut |_, _| {})
            .with_context(|| format!("{}", model.display()))
    }
}

/// Checks the settings, the text, and that `model` is a GGUF file.
///
/// # Errors
/// A context under 8, a text or model that is not a file, an organ directory.
pub fn check_inputs(model: &Path, s: &Settings) -> Result<()> {
    if !(MIN_CTX..=MAX_CTX).contains(&s.ctx) {
        bail!("--ctx {}: give {MIN_CTX} to {MAX_CTX} tokens", s.ctx);
    }
    check_file(&s.text, "--text")?;
    check_gguf(model)
}

/// The adapters `list` names, each opened as any input, read by organ and checked as
/// llama.cpp would apply it to `side` (read as `side_model`): an adapter llama.cpp
/// refuses or aborts on is refused here, named, before any run. Handed with their scales.
///
/// With `identify`, also each adapter's `BLAKE3:SCALE` (the bytes read: the logits cache's
/// key).
///
/// # Errors
/// A file cannot be opened or read, is not an adapter llama.cpp loads, or does not fit
/// the side's model.
fn hand_adapters(
    list: &[Scaled],
    side: &Path,
    side_model: &Model,
    identify: bool,
) -> Result<(Vec<HandedAdapter>, Vec<String>)> {
    use organ_core::lora::{Adapter, Severity};
    let (mut out, mut ids) = (Vec::with_capacity(list.len()), Vec::new());
    for a in list {
        let file = crate::input::open(&a.path)?;
        let handed = file.try_clone().with_context(|| format!("{}: cannot duplicate", a.path.display()))?;
        let m = Model::from_open_files(&a.path, vec![(a.path.clone(), file)])?;
        let adapter = Adapter::read(&m.model);
        if let Some(e) = adapter.first_error() {
            bail!("{}: not a LoRA adapter llama.cpp loads: {e}", a.path.display());
        }
        if let Some(p) = adapter.against(&side_model.model).iter().find(|p| p.severity == Severity::Error) {
            bail!("{}: cannot be applied to {}: {}", a.path.display(), side.display(), p.sentence());
        }
        if let Some(n) = adapter.invocation_tokens {
            crate::progress::warn(format!(
                "{}: an aLoRA, which llama.cpp applies only after its {n} invocation tokens: where the text \
                 does not hold them, the figures are {}'s without it",
                a.path.display(),
                side.display()
            ));
        }
        if identify {
            ids.push(format!("{}:{}", m.fingerprint(false)?.blake3, a.scale));
        }
        out.push((Handed::file(handed)?, a.scale));
    }
    Ok((out, ids))
}

/// The key of the base's logits ([`logits_cache::Key`]); `None` (said) when the
/// llama-perplexity binary cannot be read to identify it.
fn logits_key(
    tool: &Path,
    base_blake3: &str,
    adapters: Vec<String>,
    text_blake3: String,
    s: &Settings,
) -> Option<logits_cache::Key> {
    let tool_blake3 = match logits_cache::file_blake3(tool) {
        Ok(b) => b,
        Err(e) => {
            crate::progress::warn(format!("the base's logits are not kept: {e:#}"));
            return None;
        }
    };
    Some(logits_cache::Key {
        logits_cache: logits_cache::SCHEMA,
        base_blake3: base_blake3.to_owned(),
        base_adapters: adapters,
        text_blake3,
        ctx: s.ctx,
        chunks: s.chunks,
        threads: s.threads,
        gpu_layers: s.offload.gpu_layers.clone(),
        device: s.offload.device.clone(),
        llama_perplexity_blake3: tool_blake3,
    })
}

/// Copies the text ([`open_text`]) into `dir`, and hands the copy to llama.cpp; with the
/// BLAKE3 of the bytes copied (which keys the base's logits, as sensitivity's results).
fn copy_text(text: &Path, dir: &Path) -> Result<(Handed, String)> {
    let mut f = open_text(text)?;
    let copy = dir.join("text.txt");
    let mut out = Hashing { inner: create_private(&copy)?, hash: blake3::Hasher::new() };
    std::io::copy(&mut f, &mut out)
        .with_context(|| format!("{}: cannot copy to {}", text.display(), copy.display()))?;
    Ok((Handed::file(out.inner)?, out.hash.finalize().to_hex().to_string()))
}

/// A writer that hashes what it passes on.
struct Hashing<W> {
    inner: W,
    hash: blake3::Hasher,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn check_file(p: &Path, what: &str) -> Result<()> {
    let md = std::fs::metadata(p).with_context(|| format!("{}: cannot read ({what})", p.display()))?;
    if !md.is_file() {
        bail!("{}: not a file ({what})", p.display());
    }
    Ok(())
}

/// llama.cpp reads GGUF files (a split model through its first shard), not organ directories.
fn check_gguf(p: &Path) -> Result<()> {
    if p.is_dir() {
        bail!(
            "{}: an organ directory; llama.cpp reads GGUF files: `organ assemble {} --out MODEL.gguf` first",
            p.display(),
            p.display()
        );
    }
    check_file(p, "a GGUF model")
}

/// The vocabulary size a GGUF declares: its tokenizer's token count.
fn vocabulary(p: &Path, m: &Model) -> Result<u64> {
    match m.get("tokenizer.ggml.tokens") {
        Some(organ_core::model::OwnedValue::Array { len, .. }) => Ok(*len),
        _ => bail!("{}: has no tokenizer.ggml.tokens: llama.cpp cannot tokenize the text with it", p.display()),
    }
}

/// Refuses, before any run, a base whose vocabulary differs from the model's.
fn same_vocabulary(base: &Path, base_read: &Model, model: &Path, model_read: &Model) -> Result<()> {
    let (b, m) = (vocabulary(base, base_read)?, vocabulary(model, model_read)?);
    if b != m {
        bail!(
            "{} has {b} tokens, {} has {m}: KL divergence compares the same tokens' probabilities, so the \
             base must have the model's vocabulary",
            base.display(),
            model.display()
        );
    }
    Ok(())
}

/// Prints an evaluation.
pub fn print(e: &Evaluation, w: &mut dyn Write) -> Result<()> {
    let mut text = String::new();
    organ_core::judge::evaluation_text(e, &mut text)?;
    w.write_all(text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Scaled;
    use std::path::PathBuf;

    #[test]
    fn an_adapter_argument_is_a_file_and_an_optional_scale() {
        let s = |path: &str, scale| Scaled { path: PathBuf::from(path), scale };
        assert_eq!(Scaled::parse("a.gguf").unwrap(), s("a.gguf", 1.0));
        assert_eq!(Scaled::parse("a.gguf:0.5").unwrap(), s("a.gguf", 0.5));
        assert_eq!(Scaled::parse("dir:x/a.gguf:-2").unwrap(), s("dir:x/a.gguf", -2.0));
        // A suffix that is not a number is part of the name.
        assert_eq!(Scaled::parse("dir:x/a.gguf").unwrap(), s("dir:x/a.gguf", 1.0));
        assert!(Scaled::parse("a.gguf:inf").is_err());
        assert!(Scaled::parse("a.gguf:NaN").is_err());
        assert_eq!(s("a.gguf", 0.5).to_string(), "a.gguf:0.5");
    }
}
