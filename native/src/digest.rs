//! The digests organ records and checks: BLAKE3 for organ files, a source's identity,
//! graft provenance and the measure cache key; sha256 only when asked for (`--sha256`,
//! the Hub's LFS id) and to verify directories written before BLAKE3.

use crate::model_file::ModelFile;
use anyhow::Result;
use organ_core::model::manifest::{hex, FileDigest};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// BLAKE3 of `b`, lower-case hex.
pub fn blake3_hex(b: &[u8]) -> String {
    blake3::hash(b).to_hex().to_string()
}

/// sha256 of `b`, lower-case hex.
pub fn sha256_hex(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

/// Whether `bytes` have the digest a manifest entry records (hex compared without regard
/// to case).
pub fn matches(bytes: &[u8], want: FileDigest<'_>) -> bool {
    match want {
        FileDigest::Blake3(h) => blake3_hex(bytes).eq_ignore_ascii_case(h),
        FileDigest::Sha256(h) => sha256_hex(bytes).eq_ignore_ascii_case(h),
    }
}

/// A model's identity: the digests of its bytes, and how many there are.
pub struct Fingerprint {
    /// BLAKE3, always.
    pub blake3: String,
    /// sha256, when asked for.
    pub sha256: Option<String>,
    /// The bytes hashed.
    pub bytes: u64,
}

/// The files whose bytes are a model's identity: a GGUF file, all shards in order for a
/// split model, an organ directory's manifest.json.
pub fn identity_files(path: &Path) -> Vec<PathBuf> {
    if path.is_dir() {
        vec![path.join("manifest.json")]
    } else {
        crate::paths::split_shards(path).unwrap_or_else(|| vec![path.to_owned()])
    }
}

/// The fingerprint of `files`' bytes read one after the other; with `sha256`, its sha256
/// too, computed alongside.
pub fn fingerprint_files(files: &[PathBuf], sha256: bool) -> Result<Fingerprint> {
    let maps = files.iter().map(|f| ModelFile::open(f)).collect::<Result<Vec<_>>>()?;
    Ok(fingerprint_maps(&maps.iter().collect::<Vec<_>>(), sha256))
}

/// Bytes hashed between two releases of a map's pages.
const HASH_CHUNK: usize = 64 << 20;

/// The fingerprint of the opened files `maps`' bytes, one after the other. Without
/// sha256, each chunk's pages are given back once hashed: hashing a map touches every
/// page, which would otherwise stay resident (three 1 GiB inputs of a merge, 3 GiB).
pub fn fingerprint_maps(maps: &[&ModelFile], sha256: bool) -> Fingerprint {
    let blake = || {
        let mut h = blake3::Hasher::new();
        for m in maps {
            for (i, chunk) in m.bytes().chunks(HASH_CHUNK).enumerate() {
                h.update(chunk);
                if !sha256 {
                    m.release((i * HASH_CHUNK) as u64, chunk.len() as u64);
                }
            }
        }
        h.finalize().to_hex().to_string()
    };
    let sha = || {
        sha256.then(|| {
            let mut h = Sha256::new();
            for m in maps {
                h.update(m.bytes());
            }
            hex(&h.finalize())
        })
    };
    let (blake3, sha256) = rayon::join(blake, sha);
    Fingerprint { blake3, sha256, bytes: maps.iter().map(|m| m.bytes().len() as u64).sum() }
}
