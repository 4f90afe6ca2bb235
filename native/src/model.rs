//! A model as the commands see it, whatever it was read from (a GGUF file, a split GGUF,
//! an organ directory): the core's [`organ_core::model::Model`], built there, with each
//! tensor paired with the file that holds its bytes.

pub mod organ_dir;

use crate::digest::{self, Fingerprint};
use crate::location::{Location, Reach};
use crate::model_file::ModelFile;
use anyhow::{bail, Context, Result};
use organ_core::model::{self, OwnedValue, TensorEntry};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A tensor: the core's entry, and where its bytes are.
#[derive(Clone)]
pub struct Tensor {
    /// Name, type, shape, size, and offset in `file`.
    pub entry: TensorEntry,
    /// The file that holds its bytes (`entry.file` indexes the files of the model
    /// it was read from; a graft moves tensors between models, the file goes with them).
    pub in_file: Arc<ModelFile>,
    /// New bytes made in memory (a purified tensor); when set, they replace the file's.
    pub owned: Option<Arc<Vec<u8>>>,
}

impl Deref for Tensor {
    type Target = TensorEntry;
    fn deref(&self) -> &TensorEntry {
        &self.entry
    }
}

impl std::borrow::Borrow<TensorEntry> for Tensor {
    fn borrow(&self) -> &TensorEntry {
        &self.entry
    }
}

impl Tensor {
    /// The tensor's bytes.
    pub fn bytes(&self) -> &[u8] {
        if let Some(b) = &self.owned {
            return b;
        }
        let b: &[u8] = self.in_file.bytes();
        // Offsets and sizes were checked against the file when the model was opened.
        &b[self.offset as usize..(self.offset + self.n_bytes) as usize]
    }

    /// The tensor's bytes wherever they are: made in memory or a slice of the map, else
    /// read from a file that is not in memory (a model at a URL).
    ///
    /// # Errors
    /// The tensor is larger than memory, or the read fails.
    pub fn bytes_or_read(&self) -> anyhow::Result<std::borrow::Cow<'_, [u8]>> {
        use anyhow::Context;
        if self.owned.is_some() || self.in_file.in_memory() {
            return Ok(std::borrow::Cow::Borrowed(self.bytes()));
        }
        let len = usize::try_from(self.n_bytes).context("a tensor larger than memory")?;
        let mut buf = vec![0; len];
        self.in_file.read_exact_at(&mut buf, self.offset)?;
        Ok(std::borrow::Cow::Owned(buf))
    }

    /// Gives back the memory its bytes in the file hold, once read ([`ModelFile::release`]):
    /// a command that reads tensor after tensor of a mapped file keeps a few in memory,
    /// not every one it touched.
    pub fn release(&self) {
        if self.owned.is_none() {
            self.in_file.release(self.offset, self.n_bytes);
        }
    }

    /// [`Tensor::release`] for bytes `[at, at + len)` of the tensor only (a span read of a
    /// tensor larger than memory should hold).
    pub fn release_range(&self, at: u64, len: u64) {
        if self.owned.is_none() && at.saturating_add(len) <= self.n_bytes {
            self.in_file.release(self.offset + at, len);
        }
    }
}

/// An opened model: the core model over [`Tensor`]s (it derefs to it), and where it is.
pub struct Model {
    /// File or directory name, for reports.
    pub label: String,
    pub path: PathBuf,
    /// For split models, every shard in order (empty otherwise).
    pub shards: Vec<PathBuf>,
    /// The files it was read from, in order (a GGUF's one, or every shard; empty for an
    /// organ directory and a derived model): a fingerprint hashes their maps.
    pub files: Vec<Arc<ModelFile>>,
    pub model: model::Model<Tensor>,
}

impl Deref for Model {
    type Target = model::Model<Tensor>;
    fn deref(&self) -> &model::Model<Tensor> {
        &self.model
    }
}

impl Model {
    /// A new, single-file model made from this one (a graft's or a purification's
    /// result): the same label, path and GGUF version, with `kvs` and `tensors`.
    pub fn derived(&self, kvs: Vec<(String, OwnedValue)>, tensors: Vec<Tensor>) -> Model {
        Model {
            label: self.label.clone(),
            path: self.path.clone(),
            shards: Vec::new(),
            files: Vec::new(),
            model: model::Model { version: self.version, kvs, tensors },
        }
    }

    /// The fingerprint of the model's bytes ([`digest::identity_files`] of its path): from
    /// the maps it was opened with when they hold every byte (a local file, or a URL
    /// fetched whole: no second map of the same bytes), else from its files opened again.
    pub fn fingerprint(&self, sha256: bool) -> Result<Fingerprint> {
        if !self.files.is_empty() && self.files.iter().all(|f| f.in_memory()) {
            return Ok(digest::fingerprint_maps(&self.files.iter().map(|f| &**f).collect::<Vec<_>>(), sha256));
        }
        let files = if self.shards.is_empty() { digest::identity_files(&self.path) } else { self.shards.clone() };
        digest::fingerprint_files(&files, sha256)
    }

    /// Opens a GGUF file, a split GGUF (any of its `-0000i-of-0000n.gguf` shards), or an
    /// organ directory (one with a manifest.json). URLs are refused: their tensors' bytes
    /// are not in memory; [`Self::open_any`] reads them by positioned reads,
    /// [`Self::open_fetched`] fetches them whole.
    pub fn open(path: &Path) -> Result<Model> {
        Self::open_as(path, Reach::Mapped)
    }

    /// [`Self::open`], and GGUFs and split GGUFs at http(s) URLs fetched whole, each file
    /// into a temporary file ([`ModelFile::fetch_url`]): for the commands that need every
    /// tensor byte (diff, dissect, graft's donor).
    pub fn open_fetched(path: &Path) -> Result<Model> {
        Self::open_as(path, Reach::Fetched)
    }

    /// [`Self::open`], and GGUFs and split GGUFs at http(s) URLs (shards found by name),
    /// whose tensor data must be read by [`ModelFile::read_exact_at`], never
    /// [`Tensor::bytes`].
    pub fn open_any(path: &Path) -> Result<Model> {
        Self::open_as(path, Reach::Ranged)
    }

    /// The model at `path` (one GGUF, every shard of a split model in order, or an organ
    /// directory), its files' bytes reached as `reach` says ([`Location::open_file`]),
    /// joined and checked by the core ([`model::Model::join`]).
    fn open_as(path: &Path, reach: Reach) -> Result<Model> {
        let at = Location::checked(path)?;
        at.can_reach(reach)?;
        if at.is_dir() {
            return organ_dir::open(path);
        }
        let shards = at.shards();
        let paths = shards.clone().unwrap_or_else(|| vec![path.to_owned()]);
        let files: Vec<Arc<ModelFile>> =
            paths.iter().map(|p| at.open_file(p, reach).map(Arc::new)).collect::<Result<_>>()?;
        Self::from_opened(path, &paths, files, shards.unwrap_or_default())
    }

    /// A local GGUF file cut short (a partial download): the model of the tensors it
    /// holds whole, the model its header describes (every tensor, no bytes), and what it
    /// lacks; `None` when the file is not one (whole, split, a directory, a URL, or not a
    /// GGUF header at all: [`Self::open`]'s error says which).
    pub fn open_cut_short(path: &Path) -> Option<CutShort> {
        let at = Location::checked(path).ok()?;
        if !matches!(at, Location::Local(_)) || at.is_dir() || at.shards().is_some() {
            return None;
        }
        let file = Arc::new(at.open_file(path, Reach::Mapped).ok()?);
        let g = file.parse_cut_short().ok()?;
        let cut = organ_core::gguf::cut::Cut::of(&g)?;
        let buf: model::SharedBuffer = file.clone();
        let header = model::Model::from_gguf_in(&g, 0, &buf);
        let core = model::Model::from_gguf_in(&g.within_file(), 0, &buf);
        let model::Model { version, kvs, tensors } = core;
        let tensors = tensors.into_iter().map(|entry| Tensor { entry, in_file: file.clone(), owned: None }).collect();
        let model = model::Model { version, kvs, tensors };
        let whole =
            Model { label: file.file_name(), path: path.to_owned(), shards: Vec::new(), files: vec![file], model };
        Some(CutShort { whole, header, cut })
    }

    /// The model of GGUF files already opened (through [`crate::input::open`]): one, or
    /// every shard of a split model in order, each with the path it was opened from. For a
    /// caller that hands those very files on (eval, to llama.cpp) once organ has read them.
    pub fn from_open_files(path: &Path, opened: Vec<(PathBuf, std::fs::File)>) -> Result<Model> {
        let shards = if opened.len() > 1 { opened.iter().map(|(p, _)| p.clone()).collect() } else { Vec::new() };
        let paths: Vec<PathBuf> = opened.iter().map(|(p, _)| p.clone()).collect();
        let files =
            (opened.into_iter()).map(|(p, f)| ModelFile::from_open(&p, f).map(Arc::new)).collect::<Result<_>>()?;
        Self::from_opened(path, &paths, files, shards)
    }

    /// The model of the opened `files` (of `paths`), joined and checked by the core.
    fn from_opened(path: &Path, paths: &[PathBuf], files: Vec<Arc<ModelFile>>, shards: Vec<PathBuf>) -> Result<Model> {
        // The metadata's values are ranges of the files' bytes (a map, or a remote
        // file's header), not copies: a header's values are in memory once, however many
        // models and outputs hold them.
        let parts = files.iter().enumerate().map(|(i, f)| {
            let buf: model::SharedBuffer = f.clone();
            Ok(model::Model::from_gguf_in(&f.parse()?, i, &buf))
        });
        let joined = match model::Model::join(parts.collect::<Result<_>>()?) {
            Ok(m) => m,
            Err(e) => {
                let file = paths.get(e.file).unwrap_or(&path.to_owned()).display().to_string();
                bail!("{file}: {}", e.reason);
            }
        };
        let label = files.first().with_context(|| format!("{}: no shards", path.display()))?.file_name();
        let model::Model { version, kvs, tensors } = joined;
        let tensors = tensors
            .into_iter()
            .map(|entry| {
                let file = files.get(entry.file).context("a tensor of no file")?.clone();
                Ok(Tensor { entry, in_file: file, owned: None })
            })
            .collect::<Result<_>>()?;
        let model = model::Model { version, kvs, tensors };
        Ok(Model { label, path: path.to_owned(), shards, files, model })
    }
}

/// A GGUF file cut short ([`Model::open_cut_short`]).
pub struct CutShort {
    /// The tensors it holds whole, readable.
    pub whole: Model,
    /// Every tensor its header names (their bytes not all there: never read them).
    pub header: model::Model<TensorEntry>,
    /// What it lacks.
    pub cut: organ_core::gguf::cut::Cut,
}
