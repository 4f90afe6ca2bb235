//! Opening an organ directory: its manifest (parsed and checked by the core,
//! [`organ_core::model::manifest`]), and every organ file it names, confined to the
//! directory and checked against its entry before any of its data is used.

use super::{Model, Tensor};
use crate::model_file::ModelFile;
use anyhow::{bail, Context, Result};
use organ_core::limits::MAX_MANIFEST_BYTES;
use organ_core::model::manifest::{self, ManifestTensor};
use organ_core::model::organ_bin;
use organ_core::model::{self as core_model, TensorEntry};
use rayon::prelude::*;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether organ files are checked against the digest their manifest records (BLAKE3, or
/// sha256 in directories written before BLAKE3) when an organ directory is opened
/// (`--no-verify` turns it off).
static VERIFY: AtomicBool = AtomicBool::new(true);

/// Turns off (or on) the check of organ files against their manifest's digests.
pub fn set_verify(on: bool) {
    VERIFY.store(on, Ordering::Relaxed);
}

/// Opens an organ directory: its manifest, and every organ file, checked against the
/// manifest (header, and digest unless [`set_verify`] turned that off) before any of
/// its data is used. Each organ file is mapped and closed, so no descriptor stays
/// open per tensor.
pub fn open(dir: &Path) -> Result<Model> {
    let (model, digests) = open_unchecked(dir)?;
    digests.check()?;
    Ok(model)
}

/// The digests of an organ directory's files, not compared yet ([`open_unchecked`]).
pub struct Digests {
    dir: std::path::PathBuf,
    tensors: Vec<ManifestTensor>,
    files: Vec<Arc<ModelFile>>,
}

impl Digests {
    /// Compares every organ file with the digest its manifest records (in parallel),
    /// unless [`set_verify`] turned that off, which it warns of.
    ///
    /// # Errors
    /// Names every organ file that differs.
    pub fn check(&self) -> Result<()> {
        if !VERIFY.load(Ordering::Relaxed) {
            crate::progress::warn(format!("--no-verify: the organ files of {} are used unchecked", self.dir.display()));
            return Ok(());
        }
        // parse() has checked there is one digest per entry.
        let bad: Vec<String> = self
            .tensors
            .par_iter()
            .zip(&self.files)
            .filter(|(t, f)| !t.digest().is_some_and(|d| crate::digest::matches(f.bytes(), d)))
            .map(|(t, _)| format!("{} ({})", t.file, t.name))
            .collect();
        if !bad.is_empty() {
            bail!(
                "{}: {} organ files differ from the digest their manifest records (--no-verify skips this check): {}",
                self.dir.display(),
                bad.len(),
                bad.join(", ")
            );
        }
        Ok(())
    }
}

/// [`open`] without the digest comparison, which the caller must run ([`Digests::check`])
/// before the model's data is used anywhere but in a temp output it drops on failure:
/// `assemble` runs it while it copies.
pub fn open_unchecked(dir: &Path) -> Result<(Model, Digests)> {
    crate::input::open_dir(dir)?;
    let mpath = dir.join("manifest.json");
    let mfile = ModelFile::open(&mpath).with_context(|| format!("{}: not an organ directory", dir.display()))?;
    let len = mfile.bytes().len() as u64;
    if len > MAX_MANIFEST_BYTES {
        bail!("{}: {len} bytes, more than the {MAX_MANIFEST_BYTES} a manifest may have", mpath.display());
    }
    let m = manifest::parse(mfile.bytes()).with_context(|| format!("{}: not a valid manifest", mpath.display()))?;
    drop(mfile);
    let entries = match core_model::Model::from_manifest(&m) {
        Ok(e) => e,
        Err(e @ organ_core::Error::BadMetadata { .. }) => {
            return Err(anyhow::Error::new(e).context(format!("{}: metadata", mpath.display())))
        }
        Err(e) => return Err(anyhow::Error::new(e).context(mpath.display().to_string())),
    };
    let root = dir.canonicalize().with_context(|| format!("{}: cannot resolve", dir.display()))?;
    let files = m
        .tensors
        .par_iter()
        .zip(&entries.tensors)
        .map(|(t, e)| organ_file(&root, &mpath, t, e))
        .collect::<Vec<Result<Arc<ModelFile>>>>()
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    let core_model::Model { version, kvs, tensors } = entries;
    let tensors = tensors
        .into_iter()
        .zip(&files)
        .map(|(entry, file)| Tensor { entry, in_file: file.clone(), owned: None })
        .collect();
    let model = core_model::Model { version, kvs, tensors };
    let label = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
    let digests = Digests { dir: dir.to_owned(), tensors: m.tensors, files };
    Ok((Model { label, path: dir.to_owned(), shards: Vec::new(), files: Vec::new(), model }, digests))
}

/// Opens one organ file of a manifest: confined to the directory, its header equal to
/// the manifest's entry (its digest is [`Digests::check`]'s).
fn organ_file(root: &Path, mpath: &Path, t: &ManifestTensor, e: &TensorEntry) -> Result<Arc<ModelFile>> {
    let path =
        crate::paths::confined(root, &t.file).with_context(|| format!("{}: tensor {:?}", mpath.display(), t.name))?;
    let file = Arc::new(ModelFile::open_mapped(&path)?);
    let h = organ_bin::parse_header(file.bytes(), file.bytes().len() as u64)
        .with_context(|| format!("{}: not a valid organ file", path.display()))?;
    if h.name != e.name || h.dims != e.dims || h.ty != e.ty {
        bail!(
            "{}: holds {:?} {:?} {}, the manifest says {:?} {:?} {}",
            path.display(),
            h.name,
            h.dims,
            h.ty,
            t.name,
            t.shape,
            t.ty
        );
    }
    // The same name, shape and type give the same header length and data size.
    if (h.data_offset, h.n_bytes) != (e.offset, e.n_bytes) {
        bail!(
            "{}: data at {} of {} bytes, expected {} at {}",
            path.display(),
            h.data_offset,
            h.n_bytes,
            e.n_bytes,
            e.offset
        );
    }
    Ok(file)
}
