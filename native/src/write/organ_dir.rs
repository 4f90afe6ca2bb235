//! Writing an organ directory: one organ file per tensor in its anatomy group's folder,
//! each hashed (BLAKE3) as it is written, and manifest.json
//! ([`organ_core::model::manifest`]).

use crate::atomic::Temp;
use crate::model::Model;
use anyhow::{Context, Result};
use organ_core::anatomy::{classify, Group};
use organ_core::gguf::MetaValue;
use organ_core::model::manifest::{self, Manifest, ManifestTensor};
use organ_core::model::organ_bin;
use rayon::prelude::*;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// The folder of an anatomy group inside an organ directory.
pub fn group_dir(g: Group) -> &'static str {
    match g {
        Group::Skeleton => "skeleton",
        Group::Organ => "organs",
        Group::Embed => "embed",
        Group::Norm => "norm",
        Group::Adapter => "adapters",
        Group::Other => "other",
    }
}

/// A file name for a tensor: bytes outside `[A-Za-z0-9_.-]` (and a leading dot) are
/// %-encoded, so no name can climb out of its folder or hide; very long names are cut
/// and suffixed with a hash.
pub fn file_name(tensor: &str) -> String {
    let mut s = String::new();
    for (i, b) in tensor.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    if s.len() > 200 {
        let h = organ_core::zmeasure::fnv1a64(tensor.as_bytes());
        s.truncate(180);
        s.push_str(&format!("~{h:016x}"));
    }
    s + ".bin"
}

/// Writes `model` as an organ directory at `dest`. With `measure`, each tensor's θ goes
/// into the manifest. Tensors are written in parallel; each is streamed from its map.
/// `source` (the source's fingerprint, which may take a pass over its bytes) runs
/// alongside.
pub fn write_dir(
    model: &Model,
    source: impl FnOnce() -> Result<manifest::Source> + Send,
    measure: bool,
    dest: &Path,
    force: bool,
) -> Result<()> {
    let tmp = Temp::dir(dest, force)?;
    for g in Group::ALL {
        std::fs::create_dir(tmp.path.join(group_dir(g)))?;
    }
    let mut alignment = organ_core::gguf::DEFAULT_ALIGNMENT;
    let mut metadata = Vec::with_capacity(model.kvs.len());
    for (k, v) in &model.kvs {
        let v = v.view()?;
        if let (true, MetaValue::U32(a)) = (k == "general.alignment", v) {
            alignment = u64::from(a);
        }
        metadata.push(manifest::encode_kv(k, &v));
    }
    let (source, entries) = rayon::join(source, || {
        model
            .tensors
            .par_iter()
            .map(|t| -> Result<ManifestTensor> {
                let a = classify(&t.name);
                let rel = format!("{}/{}", group_dir(a.group), file_name(&t.name));
                let header = organ_bin::encode_header(&t.name, &t.dims, t.ty)?;
                let path = tmp.path.join(&rel);
                let mut f = create_new(&path)?;
                f.write_all(&header)?;
                let digest = write_hashed(&mut f, &header, t.bytes())
                    .with_context(|| format!("{}: copying tensor data", path.display()))?;
                let theta = if measure {
                    match organ_core::zmeasure::measure_tensor(&t.name, t.ty, t.n_elements, t.bytes()) {
                        Ok(m) => Some(m.theta),
                        Err(organ_core::Error::NotDequantizable { .. }) => None,
                        Err(e) => return Err(anyhow::Error::new(e).context(format!("tensor {:?}", t.name))),
                    }
                } else {
                    None
                };
                Ok(ManifestTensor {
                    name: t.name.clone(),
                    file: rel,
                    group: a.group,
                    organ: a.organ,
                    layer: a.layer,
                    ty: t.ty.name().to_owned(),
                    shape: t.dims.clone(),
                    bytes: t.n_bytes,
                    blake3: Some(digest.to_hex().to_string()),
                    sha256: None,
                    theta,
                })
            })
            .collect::<Result<Vec<_>>>()
    });
    let (source, entries) = (source?, entries?);
    let m = Manifest {
        format: manifest::FORMAT.into(),
        source,
        gguf_version: model.version,
        alignment,
        metadata,
        tensors: entries,
    };
    let mpath = tmp.path.join("manifest.json");
    let mut f = BufWriter::new(create_new(&mpath)?);
    serde_json::to_writer_pretty(&mut f, &m)?;
    f.write_all(b"\n")?;
    f.into_inner().map_err(|e| e.into_error())?;
    tmp.commit()
}

/// Bytes hashed and written per step of [`write_hashed`]: small enough to be still in the
/// core's cache when `write` copies them, large enough for BLAKE3's widest SIMD.
const HASH_STEP: usize = 256 << 10;

/// Appends `data` to `f` (whose `header` is written already), returning the BLAKE3 of
/// `header` and `data`: each step of `data` is hashed, then written while it is in the
/// cache, so the data is read once for both (an in-kernel copy beside the hash read it
/// twice).
fn write_hashed(f: &mut File, header: &[u8], data: &[u8]) -> std::io::Result<blake3::Hash> {
    let mut h = blake3::Hasher::new();
    h.update(header);
    for step in data.chunks(HASH_STEP) {
        h.update(step);
        f.write_all(step)?;
    }
    Ok(h.finalize())
}

/// A new file inside a temp directory of ours, created exclusively.
fn create_new(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("{}: cannot create", path.display()))
}
