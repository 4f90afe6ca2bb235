//! A model as surgery sees it, whatever it was read from (a GGUF file or an organ
//! directory): owned metadata, and tensors whose bytes stay in memory-mapped files.

use crate::manifest::{self, Manifest, OwnedValue};
use crate::model::ModelFile;
use anyhow::{bail, Context, Result};
use organ_core::gguf::split::{check_shards, Shard, SET_ID_KEY};
use organ_core::gguf::MetaValue;
use organ_core::surgery::organ_bin;
use organ_core::GgmlType;
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Where a tensor's bytes are.
#[derive(Clone)]
pub struct DataRef {
    pub file: Arc<ModelFile>,
    pub offset: u64,
}

#[derive(Clone)]
pub struct Tensor {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    pub n_bytes: u64,
    pub data: DataRef,
    /// New bytes made in memory (a purified tensor); when set, they replace `data`.
    pub owned: Option<Arc<Vec<u8>>>,
}

impl Tensor {
    pub fn bytes(&self) -> &[u8] {
        if let Some(b) = &self.owned {
            return b;
        }
        let b: &[u8] = &self.data.file.bytes;
        // Offsets and sizes were checked against the file when the model was opened.
        &b[self.data.offset as usize..(self.data.offset + self.n_bytes) as usize]
    }
}

pub struct Model {
    /// File or directory name, for reports.
    pub label: String,
    pub path: PathBuf,
    pub version: u32,
    pub kvs: Vec<(String, OwnedValue)>,
    pub tensors: Vec<Tensor>,
    /// For split models, every shard in order (empty otherwise).
    pub shards: Vec<PathBuf>,
}

/// Manifests larger than this are refused (a 1T-parameter model's is tens of MB).
const MAX_MANIFEST_BYTES: u64 = manifest::MAX_BYTES;

/// Whether organ files are checked against their manifest's sha256 when an organ
/// directory is opened (`--no-verify` turns it off).
static VERIFY: AtomicBool = AtomicBool::new(true);

/// Turns off (or on) the check of organ files against their manifest's sha256.
pub fn set_verify(on: bool) {
    VERIFY.store(on, Ordering::Relaxed);
}

impl Model {
    /// A new, single-file model made from this one (a graft's or a purification's
    /// result): the same label, path and GGUF version, with `kvs` and `tensors`.
    pub fn derived(&self, kvs: Vec<(String, OwnedValue)>, tensors: Vec<Tensor>) -> Model {
        Model {
            label: self.label.clone(),
            path: self.path.clone(),
            version: self.version,
            kvs,
            tensors,
            shards: Vec::new(),
        }
    }

    /// Opens a GGUF file, a split GGUF (any of its `-0000i-of-0000n.gguf` shards), or an
    /// organ directory (one with a manifest.json).
    pub fn open(path: &Path) -> Result<Model> {
        if path.is_dir() {
            Self::from_dir(path)
        } else if let Some(shards) = split_shards(path) {
            Self::from_split(path, &shards)
        } else {
            Self::from_gguf(path)
        }
    }

    /// Every shard of a split model, read as one: metadata from the first shard (less the
    /// `split.*` keys), tensors in shard order.
    pub fn from_split(path: &Path, shards: &[PathBuf]) -> Result<Model> {
        let models: Vec<Model> = shards.iter().map(|p| Self::from_gguf(p)).collect::<Result<_>>()?;
        let facts: Vec<Shard<'_>> = models
            .iter()
            .map(|m| {
                let num = |k: &str| m.get(k).and_then(|v| v.view().ok()).and_then(|v| v.as_u64());
                let set_id = match m.get(SET_ID_KEY).map(OwnedValue::view) {
                    Some(Ok(MetaValue::Str(s))) => std::str::from_utf8(s).ok(),
                    _ => None,
                };
                Shard {
                    no: num("split.no"),
                    count: num("split.count"),
                    tensors_count: num("split.tensors.count"),
                    tensors: m.tensors.iter().map(|t| t.name.as_str()).collect(),
                    version: m.version,
                    set_id,
                }
            })
            .collect();
        if let Err(e) = check_shards(&facts) {
            let file = shards.get(e.file).map_or_else(|| path.display().to_string(), |p| p.display().to_string());
            bail!("{file}: {}", e.reason);
        }
        let mut models = models.into_iter();
        let mut m = models.next().with_context(|| format!("{}: no shards", path.display()))?;
        for shard in models {
            m.tensors.extend(shard.tensors);
        }
        m.kvs.retain(|(k, _)| !k.starts_with("split.") && k != SET_ID_KEY);
        m.shards = shards.to_vec();
        Ok(m)
    }

    pub fn from_gguf(path: &Path) -> Result<Model> {
        let file = Arc::new(ModelFile::open(path)?);
        let g = file.parse()?;
        let kvs = g.kvs.iter().map(|kv| (kv.key.to_owned(), OwnedValue::from_meta(&kv.value))).collect();
        let tensors = g
            .tensors
            .iter()
            .map(|t| Tensor {
                name: t.name.to_owned(),
                dims: t.shape().to_vec(),
                ty: t.ty,
                n_bytes: t.n_bytes,
                data: DataRef { file: file.clone(), offset: t.file_offset },
                owned: None,
            })
            .collect();
        let version = g.version;
        drop(g);
        Ok(Model { label: file.file_name(), path: path.to_owned(), version, kvs, tensors, shards: Vec::new() })
    }

    /// Opens an organ directory: its manifest, and every organ file, checked against the
    /// manifest (header, and sha256 unless [`set_verify`] turned that off) before any of
    /// its data is used. Each organ file is mapped and closed, so no descriptor stays
    /// open per tensor.
    pub fn from_dir(dir: &Path) -> Result<Model> {
        crate::input::open_dir(dir)?;
        let mpath = dir.join("manifest.json");
        let mfile = ModelFile::open(&mpath).with_context(|| format!("{}: not an organ directory", dir.display()))?;
        let len = mfile.bytes.len() as u64;
        if len > MAX_MANIFEST_BYTES {
            bail!("{}: {len} bytes, more than the {MAX_MANIFEST_BYTES} a manifest may have", mpath.display());
        }
        let m: Manifest =
            manifest::parse(&mfile.bytes).with_context(|| format!("{}: not a valid manifest", mpath.display()))?;
        drop(mfile);
        if m.format != manifest::FORMAT {
            bail!("{}: format {:?}, expected {:?}", mpath.display(), m.format, manifest::FORMAT);
        }
        let kvs = m
            .metadata
            .iter()
            .map(manifest::decode_kv)
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("{}: metadata", mpath.display()))?;
        let root = dir.canonicalize().with_context(|| format!("{}: cannot resolve", dir.display()))?;
        let tensors = m
            .tensors
            .par_iter()
            .map(|t| organ_file(&root, &mpath, t))
            .collect::<Vec<Result<(Tensor, bool)>>>()
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
        let bad: Vec<String> = tensors
            .iter()
            .zip(&m.tensors)
            .filter(|((_, ok), _)| !ok)
            .map(|((t, _), e)| format!("{} ({})", e.file, t.name))
            .collect();
        if !bad.is_empty() {
            bail!(
                "{}: {} organ files differ from their manifest sha256 (--no-verify skips this check): {}",
                dir.display(),
                bad.len(),
                bad.join(", ")
            );
        }
        if !VERIFY.load(Ordering::Relaxed) {
            crate::progress::warn(format!("--no-verify: the organ files of {} are used unchecked", dir.display()));
        }
        let tensors = tensors.into_iter().map(|(t, _)| t).collect();
        let label = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
        Ok(Model { label, path: dir.to_owned(), version: m.gguf_version, kvs, tensors, shards: Vec::new() })
    }

    pub fn get(&self, key: &str) -> Option<&OwnedValue> {
        self.kvs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn architecture(&self) -> Option<String> {
        match self.get("general.architecture")?.view().ok()? {
            MetaValue::Str(s) => Some(String::from_utf8_lossy(s).into_owned()),
            _ => None,
        }
    }
}

/// Opens one organ file of a manifest: confined to the directory, its header equal to
/// the manifest's entry, and (unless turned off) its sha256 compared: the `bool`.
fn organ_file(root: &Path, mpath: &Path, t: &manifest::ManifestTensor) -> Result<(Tensor, bool)> {
    let path = confined(root, &t.file).with_context(|| format!("{}: tensor {:?}", mpath.display(), t.name))?;
    let file = Arc::new(ModelFile::open_mapped(&path)?);
    let h = organ_bin::parse_header(&file.bytes, file.bytes.len() as u64)
        .with_context(|| format!("{}: not a valid organ file", path.display()))?;
    let ty = GgmlType::from_name(&t.ty).with_context(|| format!("{}: unknown type {:?}", path.display(), t.ty))?;
    if h.name != t.name || h.dims != t.shape || h.ty != ty {
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
    let ok = !VERIFY.load(Ordering::Relaxed) || crate::write::hex(&Sha256::digest(&file.bytes[..])) == t.sha256;
    let (name, dims, n_bytes, offset) = (h.name.to_owned(), h.dims.clone(), h.n_bytes, h.data_offset);
    Ok((Tensor { name, dims, ty, n_bytes, data: DataRef { file, offset }, owned: None }, ok))
}

/// If `path` is named like a llama.cpp split shard (`NAME-00002-of-00005.gguf`), the
/// paths of all its shards, in order.
pub fn split_shards(path: &Path) -> Option<Vec<PathBuf>> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gguf")?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    let ok = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !ok(count) || !ok(no) {
        return None;
    }
    let n: usize = count.parse().ok().filter(|&n| n >= 1)?;
    let dir = path.parent().unwrap_or(Path::new(""));
    Some((1..=n).map(|i| dir.join(split_name(prefix, i, n))).collect())
}

/// llama.cpp's shard name: `PREFIX-00001-of-00003.gguf`.
pub fn split_name(prefix: &str, i: usize, n: usize) -> String {
    format!("{prefix}-{i:05}-of-{n:05}.gguf")
}

/// `rel` under `root`, refusing absolute paths, `..`, and symlinks that lead outside.
pub fn confined(root: &Path, rel: &str) -> Result<PathBuf> {
    let p = Path::new(rel);
    if p.components().any(|c| !matches!(c, Component::Normal(_))) || rel.is_empty() {
        bail!("path {rel:?} must be relative, without '..'");
    }
    let full = root.join(p);
    let real = full.canonicalize().with_context(|| format!("{}: missing", full.display()))?;
    if !real.starts_with(root) {
        bail!("path {rel:?} leads outside {}", root.display());
    }
    Ok(real)
}
