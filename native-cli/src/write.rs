//! Writing models: a GGUF file or an organ directory, always through a temp entry in the
//! destination's directory that is renamed into place only when complete
//! ([`crate::atomic`]). Inputs are only ever read, and never replaced.

use crate::atomic::Temp;
use crate::model::{Model, Tensor};
use anyhow::{bail, Context, Result};
use organ_core::anatomy::{classify, Group};
use organ_core::gguf::split::SET_ID_KEY;
use organ_core::gguf::writer::{padding, plan, TensorSpec};
use organ_core::gguf::MetaValue;
use organ_core::model::manifest::{self, Manifest, ManifestTensor};
use organ_core::model::OwnedValue;
use organ_core::surgery::organ_bin;
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes a GGUF holding `kvs` and `tensors` (each with its own type and bytes) to `dest`.
pub fn write_gguf(
    version: u32,
    kvs: &[(String, OwnedValue)],
    tensors: &[Tensor],
    dest: &Path,
    force: bool,
) -> Result<u64> {
    let (tmp, len) = stage_gguf(version, kvs, tensors, dest, force)?;
    tmp.commit()?;
    Ok(len)
}

/// Writes the GGUF into a temp path beside `dest` and returns it uncommitted, with the
/// file's length: the caller commits it (or drops it, which removes it).
fn stage_gguf(
    version: u32,
    kvs: &[(String, OwnedValue)],
    tensors: &[Tensor],
    dest: &Path,
    force: bool,
) -> Result<(Temp, u64)> {
    let views = kvs.iter().map(|(k, v)| Ok((k.as_str(), v.view()?))).collect::<Result<Vec<(&str, MetaValue<'_>)>>>()?;
    let specs: Vec<TensorSpec<'_>> =
        tensors.iter().map(|t| TensorSpec { name: &t.name, dims: &t.dims, ty: t.ty }).collect();
    let layout =
        plan(version, &views, &specs).with_context(|| format!("{}: cannot lay out the GGUF", dest.display()))?;
    let (tmp, mut f) = Temp::file(dest, force)?;
    f.write_all(&layout.header)?;
    let zeros = vec![0u8; layout.alignment as usize];
    for (t, &(_, n)) in tensors.iter().zip(&layout.tensors) {
        write_tensor_data(t, &mut f).with_context(|| format!("{}: copying tensor {:?}", tmp.path.display(), t.name))?;
        f.write_all(&zeros[..padding(n, layout.alignment) as usize])?;
    }
    f.sync_all()?;
    Ok((tmp, layout.file_len))
}

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

pub use organ_core::model::manifest::hex;

pub fn sha256_hex(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
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
                // The data moves in the kernel; the hash reads it from the map meanwhile.
                let (copied, digest) = rayon::join(
                    || write_tensor_data(t, &mut f),
                    || {
                        let mut h = Sha256::new();
                        h.update(&header);
                        h.update(t.bytes());
                        h.finalize()
                    },
                );
                copied.with_context(|| format!("{}: copying tensor data", path.display()))?;
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
                    sha256: hex(&digest),
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
    f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    tmp.commit()
}

/// A new file inside a temp directory of ours, created exclusively.
fn create_new(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("{}: cannot create", path.display()))
}

/// Parses a size like `500M`, `2G`, `1048576` (K, M, G, T are powers of 1024).
pub fn parse_size(s: &str) -> Result<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => bail!("{s:?}: unknown size suffix (use K, M, G or T)"),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: u64 = num.parse().with_context(|| format!("{s:?} is not a size like 500M"))?;
    n.checked_mul(mult).filter(|&n| n > 0).with_context(|| format!("{s:?} is not a usable size"))
}

/// Writes a GGUF split like `llama-gguf-split` does: shards `PREFIX-0000i-of-0000N.gguf`
/// beside `dest` (PREFIX is `dest` without `.gguf`), each holding whole tensors of at most
/// `max_bytes` of data (a larger tensor gets a shard of its own). The first shard holds all
/// metadata; every shard carries `split.no`, `split.count`, `split.tensors.count`, and
/// one random split set id ([`SET_ID_KEY`]), so a shard of another set is refused. All
/// shards are written to temp paths first and renamed only when every one is complete.
pub fn write_gguf_split(
    version: u32,
    kvs: &[(String, OwnedValue)],
    tensors: &[Tensor],
    dest: &Path,
    max_bytes: u64,
    force: bool,
) -> Result<Vec<PathBuf>> {
    let mut groups: Vec<Vec<Tensor>> = vec![Vec::new()];
    let mut size = 0u64;
    for t in tensors {
        let cur = groups.last_mut().expect("one group at least");
        if !cur.is_empty() && size + t.n_bytes > max_bytes {
            groups.push(Vec::new());
            size = 0;
        }
        size += t.n_bytes;
        groups.last_mut().expect("one group at least").push(t.clone());
    }
    let n = groups.len();
    // split.no and split.count are u16 in llama.cpp's format.
    if n > usize::from(u16::MAX) {
        bail!("{n} shards: more than the {} a split.count (u16) can hold", u16::MAX);
    }
    let name = dest.to_string_lossy();
    let prefix = name.strip_suffix(".gguf").unwrap_or(&name);
    let prefix_name = Path::new(prefix).file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = dest.parent().map(Path::to_owned).unwrap_or_default();
    let paths: Vec<PathBuf> = (1..=n).map(|i| dir.join(crate::source::split_name(&prefix_name, i, n))).collect();
    // Every shard is staged in its own temp path (refused if the shard exists); they are
    // renamed into place together once all are written. On any error the staged temps
    // are dropped, which removes them.
    let set_id = format!("{:016x}{:016x}", crate::atomic::random_u64()?, crate::atomic::random_u64()?);
    let mut staged = Vec::with_capacity(n);
    for (i, (g, path)) in groups.iter().zip(&paths).enumerate() {
        let mut shard_kvs: Vec<(String, OwnedValue)> = if i == 0 {
            kvs.iter().filter(|(k, _)| !k.starts_with("split.") && k != SET_ID_KEY).cloned().collect()
        } else {
            Vec::new()
        };
        shard_kvs.push(("split.no".into(), OwnedValue::Scalar(MetaValue::U16(i as u16))));
        shard_kvs.push(("split.count".into(), OwnedValue::Scalar(MetaValue::U16(n as u16))));
        shard_kvs.push(("split.tensors.count".into(), OwnedValue::Scalar(MetaValue::I32(tensors.len() as i32))));
        shard_kvs.push((SET_ID_KEY.into(), OwnedValue::string(&set_id)));
        staged.push(stage_gguf(version, &shard_kvs, g, path, force)?.0);
    }
    for t in staged {
        t.commit()?;
    }
    Ok(paths)
}

/// Appends a tensor's bytes to `dst`: in memory ones directly, file-backed ones in the kernel.
fn write_tensor_data(t: &Tensor, dst: &mut File) -> Result<()> {
    match &t.owned {
        Some(b) => Ok(dst.write_all(b)?),
        None => t.in_file.with_file(|src| copy_range(src, t.offset, t.n_bytes, dst)),
    }
}

/// Copies `len` bytes of `src` from `offset` to the current end of `dst`, in the kernel
/// (`copy_file_range`, as cp does) where it can, else through a buffer.
pub fn copy_range(src: &File, offset: u64, len: u64, dst: &mut File) -> Result<()> {
    let mut off = offset;
    let mut left = len;
    while left > 0 {
        let chunk = usize::try_from(left.min(1 << 30)).unwrap_or(1 << 30);
        match rustix::fs::copy_file_range(src, Some(&mut off), &*dst, None, chunk) {
            Ok(0) => bail!("source ended {left} bytes early"),
            Ok(n) => left -= n as u64,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => {
                // Not supported here (another filesystem, an old kernel): copy by hand.
                use std::io::Write;
                use std::os::unix::fs::FileExt;
                let mut buf = vec![0u8; (1 << 20).min(left as usize)];
                while left > 0 {
                    let n = buf.len().min(left as usize);
                    src.read_exact_at(&mut buf[..n], off)?;
                    dst.write_all(&buf[..n])?;
                    off += n as u64;
                    left -= n as u64;
                }
            }
        }
    }
    Ok(())
}

/// sha256 of a model's bytes: the GGUF file, or an organ directory's manifest.
pub fn fingerprint(m: &Model) -> Result<String> {
    if m.path.is_dir() {
        Ok(sha256_hex(&crate::model_file::ModelFile::open(&m.path.join("manifest.json"))?.bytes))
    } else {
        Ok(sha256_hex(&crate::model_file::ModelFile::open(&m.path)?.bytes))
    }
}

/// Writes `model` to `out`: a GGUF if `out` ends in `.gguf` (split into shards of at most
/// `split_max` bytes of data when given), else an organ directory whose manifest names
/// `source` as where it came from.
pub fn write_model(
    model: &Model,
    source: &Model,
    out: &Path,
    split_max: Option<u64>,
    force: bool,
    w: &mut dyn Write,
) -> Result<()> {
    let is_gguf = out.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if let (true, Some(max)) = (is_gguf, split_max) {
        let shards = write_gguf_split(model.version, &model.kvs, &model.tensors, out, max, force)?;
        writeln!(w, "wrote {} shards: {}", shards.len(), shards[0].display())?;
    } else if is_gguf {
        let n = write_gguf(model.version, &model.kvs, &model.tensors, out, force)?;
        writeln!(w, "wrote {} ({n} bytes)", out.display())?;
    } else {
        let src = manifest::Source { file: source.label.clone(), sha256: fingerprint(source)?, bytes: 0 };
        write_dir(model, move || Ok(src), false, out, force)?;
        writeln!(w, "wrote organ directory {}", out.display())?;
    }
    Ok(())
}
