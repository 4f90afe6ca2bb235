//! Where a sensitivity run keeps what it measured, so that it resumes after any stop
//! (Ctrl-C, SIGKILL, a full disk) and a finished run is read back instead of rerun.
//!
//! `CACHE/sensitivity/MODEL_BLAKE3/` holds the donors (`donor-TYPE.gguf`), the model
//! staged as shards while a run measures (a temp directory, [`super::staged`]) and one run
//! directory per [`Definition`] (the change, the text's BLAKE3, the context and chunks),
//! named by the BLAKE3 of the definition's JSON: `definition.json`, the base's saved
//! logits and run (`base-logits.kld`, `base.json`), and `tensors/HASH.json`, one result
//! per tensor, each written whole (temp file and rename) when its evaluation ends. A
//! result is read back only if it names the tensor asked for and parses; anything else
//! is measured again. What the files hold is the core's ([`organ_core::sensitivity::run`]).

use crate::llama_cpp::output::Perplexity;
use crate::llama_cpp::perplexity::{SavedBase, Settings};
use anyhow::{Context, Result};
use organ_core::sensitivity::report::Row;
use organ_core::sensitivity::run::{BaseRun, Definition};
use organ_core::sensitivity::Change;
use std::path::{Path, PathBuf};

/// The cache of one model: where its donors and runs live.
pub struct Cache {
    model_dir: PathBuf,
    /// Removed at the end when the user asked for no cache.
    _temp: Option<crate::atomic::Temp>,
}

impl Cache {
    /// `ROOT/sensitivity/MODEL_BLAKE3` (created), or with no root a temp directory in
    /// the system's, removed when the run ends.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn open(root: Option<&Path>, model_blake3: &str) -> Result<Cache> {
        let Some(root) = root else {
            let temp = crate::atomic::Temp::dir(&std::env::temp_dir().join("organ-sensitivity"), false)?;
            return Ok(Cache { model_dir: temp.path.clone(), _temp: Some(temp) });
        };
        let model_dir = root.join("sensitivity").join(model_blake3);
        std::fs::create_dir_all(&model_dir).with_context(|| format!("{}: cannot create", model_dir.display()))?;
        // A staged model or a donor a killed run left behind (temp names only) is removed.
        crate::atomic::sweep(&model_dir);
        Ok(Cache { model_dir, _temp: None })
    }

    pub fn model_dir(&self) -> &Path {
        &self.model_dir
    }
}

/// One run: a model, a change, a text, a context.
pub struct RunDir {
    pub path: PathBuf,
}

impl RunDir {
    /// The run directory of this definition (created, with its `definition.json`).
    ///
    /// # Errors
    /// It cannot be created or written.
    pub fn open(cache: &Cache, change: Change, text_blake3: &str, s: &Settings) -> Result<RunDir> {
        let def = Definition::new(change, text_blake3, s.ctx, s.chunks);
        let json = serde_json::to_vec_pretty(&def)?;
        let path = cache.model_dir().join(&blake3::hash(&json).to_hex()[..16]);
        std::fs::create_dir_all(path.join("tensors")).with_context(|| format!("{}: cannot create", path.display()))?;
        std::fs::create_dir_all(path.join("work")).with_context(|| format!("{}: cannot create", path.display()))?;
        let def_path = path.join("definition.json");
        if !def_path.is_file() {
            crate::atomic::write_file(&def_path, true, |w| Ok(w.write_all(&json)?))?;
        }
        // Changed models a killed run left behind (temp names only) are removed.
        crate::atomic::sweep(&path.join("work"));
        Ok(RunDir { path })
    }

    /// Where changed models are made while they are scored (a temp directory each).
    pub fn work(&self) -> PathBuf {
        self.path.join("work")
    }

    /// The base's saved logits: read back when a finished base run is there, else scored
    /// now (a half-written logits file from a killed run is replaced).
    ///
    /// # Errors
    /// llama-perplexity fails on the base.
    pub fn base(&self, model: &Path, s: &Settings) -> Result<SavedBase> {
        let logits = self.path.join("base-logits.kld");
        let run = self.path.join("base.json");
        if let Some(b) = std::fs::read(&run).ok().and_then(|j| serde_json::from_slice::<BaseRun>(&j).ok()) {
            if logits.is_file() {
                let scored = Perplexity {
                    chunks: b.chunks,
                    ctx: b.ctx,
                    ppl: crate::llama_cpp::output::Estimate { value: b.ppl, error: b.ppl_error },
                };
                return SavedBase::reopen(model, s, &logits, scored);
            }
        }
        let _ = std::fs::remove_file(&logits);
        let saved = SavedBase::save(model, s, &logits, &self.work())?;
        let b = BaseRun {
            chunks: saved.scored.chunks,
            ctx: saved.scored.ctx,
            ppl: saved.scored.ppl.value,
            ppl_error: saved.scored.ppl.error,
        };
        crate::atomic::write_json(&run, true, &b)?;
        Ok(saved)
    }

    fn result_path(&self, tensor: &str) -> PathBuf {
        self.path.join("tensors").join(format!("{}.json", &blake3::hash(tensor.as_bytes()).to_hex()[..24]))
    }

    /// The result kept for `tensor`, if a whole one is there.
    pub fn result(&self, tensor: &str) -> Option<Row> {
        let bytes = std::fs::read(self.result_path(tensor)).ok()?;
        serde_json::from_slice::<Row>(&bytes).ok().filter(|r| r.name == tensor)
    }

    /// Keeps a result (temp file and rename: a stop leaves it whole or absent).
    ///
    /// # Errors
    /// It cannot be written.
    pub fn keep(&self, row: &Row) -> Result<()> {
        crate::atomic::write_json(&self.result_path(&row.name), true, row)
    }
}
