//! The measure cache: finished model reports kept in a directory (`--cache`) so that a
//! fleet run resumes where it stopped.
//!
//! An entry is found by its [`CacheKey`]: the BLAKE3 of the model's bytes and a
//! [`Definition`] naming everything else a report depends on (the measure, the report's
//! schema, every option that changes a report). The file name carries the model's BLAKE3
//! and a digest of the definition; the entry also holds the definition itself, compared on
//! reading, so a report made under another definition is never returned.

use crate::atomic::write_file;
use anyhow::{Context, Result};
use organ_core::fleet::CacheEntry as Entry;
pub use organ_core::fleet::Definition;
use organ_core::zmeasure::Mode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A cache entry's key: a model's bytes and the definition it was measured under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheKey {
    /// BLAKE3 of the model's bytes ([`crate::digest::identity_files`]).
    pub model_blake3: String,
    pub definition: Definition,
}

impl CacheKey {
    /// The key of the model at `path` under the current definition in `mode`, with
    /// per-expert θ or without.
    pub fn of(path: &Path, mode: Mode, experts: bool) -> Result<CacheKey> {
        let fp = crate::digest::fingerprint_files(&crate::digest::identity_files(path), false)?;
        Ok(CacheKey { model_blake3: fp.blake3, definition: Definition { experts, ..Definition::current(mode) } })
    }

    /// The key of an opened model, from what its byte sources say: for bytes read from
    /// URLs, [`crate::remote::identity`] (URL, ETag or Last-Modified, and size of each
    /// file; never a hash of bytes organ did not read), standing in `model_blake3`, hashed
    /// with another prefix, so it cannot meet a local model's key; else [`Self::of`] its
    /// `path`.
    pub fn of_model(model: &crate::model::Model, path: &Path, mode: Mode, experts: bool) -> Result<CacheKey> {
        let from_urls = !model.files.is_empty() && model.files.iter().all(|f| f.remote_identity().is_some());
        if !from_urls {
            return Self::of(path, mode, experts);
        }
        let mut files: Vec<&crate::model_file::ModelFile> = model.tensors.iter().map(|t| &*t.in_file).collect();
        files.dedup_by_key(|f| f.path.clone());
        let ids = (files.iter())
            .map(|f| f.remote_identity().with_context(|| format!("{}: not a remote file", f.path.display())))
            .collect::<Result<Vec<_>>>()?;
        let definition = Definition { experts, ..Definition::current(mode) };
        Ok(CacheKey { model_blake3: crate::remote::identity(&ids), definition })
    }

    /// The entry's file in `cache`: [`CacheKey::file_name`].
    pub fn entry(&self, cache: &Path) -> Result<PathBuf> {
        Ok(cache.join(self.file_name()?))
    }

    /// The name of this key's entry: `<measure>-<model BLAKE3>-<definition digest>.json`
    /// (also the name of a fleet's result, `--results`).
    pub fn file_name(&self) -> Result<String> {
        let definition = serde_json::to_vec(&self.definition)?;
        let d = crate::digest::blake3_hex(&definition);
        // The measure's name is only for people listing the cache; it is checked like the rest.
        let measure: String = self.definition.measure.chars().filter(|c| c.is_ascii_alphanumeric()).take(16).collect();
        Ok(format!("{measure}-{}-{}.json", self.model_blake3, &d[..16]))
    }

    /// The report cached under this key, if there is one (an unreadable entry, or one of
    /// another model or definition, is none).
    pub fn lookup<T: DeserializeOwned>(&self, cache: &Path) -> Option<T> {
        let bytes = std::fs::read(self.entry(cache).ok()?).ok()?;
        let e: Entry<T> = serde_json::from_slice(&bytes).ok()?;
        (e.definition == self.definition && e.model_blake3 == self.model_blake3).then_some(e.report)
    }

    /// Keeps `report` under this key (replacing an entry of the same key).
    pub fn store<T: Serialize>(&self, cache: &Path, report: &T) -> Result<()> {
        std::fs::create_dir_all(cache).with_context(|| format!("{}: cannot create the cache", cache.display()))?;
        let e = Entry { definition: self.definition.clone(), model_blake3: self.model_blake3.clone(), report };
        // The cache's own entries are replaced freely.
        write_file(&self.entry(cache)?, true, |w| Ok(serde_json::to_writer(w, &e)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use organ_core::fleet::REPORT_SCHEMA;

    fn key(measure: &str, report_schema: u32) -> CacheKey {
        let definition = Definition { measure: measure.into(), report_schema, mode: None, experts: false };
        CacheKey { model_blake3: "ab".repeat(32), definition }
    }

    fn key_in(mode: Mode) -> CacheKey {
        CacheKey { model_blake3: "ab".repeat(32), definition: Definition::current(mode) }
    }

    /// Plain, σ and exact reports of one model are three entries; the plain key is the one
    /// made before modes existed.
    #[test]
    fn modes_are_kept_apart() {
        let cache = std::env::temp_dir().join(format!("organ-cache-mode-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        let modes = [Mode::Sampled, Mode::Sigma, Mode::Exact];
        assert_eq!(key_in(Mode::Sampled), key("z1", REPORT_SCHEMA));
        assert_eq!(
            serde_json::to_string(&Definition::current(Mode::Sampled)).unwrap(),
            format!(r#"{{"measure":"z1","report_schema":{REPORT_SCHEMA}}}"#)
        );
        for (i, m) in modes.iter().enumerate() {
            key_in(*m).store(&cache, &i).unwrap();
        }
        for (i, m) in modes.iter().enumerate() {
            assert_eq!(key_in(*m).lookup::<usize>(&cache), Some(i), "{m:?}");
        }
        // With per-expert θ, each mode is a fourth, fifth and sixth entry.
        for (i, m) in modes.iter().enumerate() {
            let mut k = key_in(*m);
            k.definition.experts = true;
            assert_eq!(k.lookup::<usize>(&cache), None, "{m:?} with experts");
            k.store(&cache, &(i + 10)).unwrap();
            assert_eq!(k.lookup::<usize>(&cache), Some(i + 10));
            assert_eq!(key_in(*m).lookup::<usize>(&cache), Some(i), "{m:?} without experts");
        }
        let _ = std::fs::remove_dir_all(&cache);
    }

    /// A report made under another measure or report schema is not returned, even when
    /// its entry sits at this key's file name.
    #[test]
    fn another_definition_is_not_returned() {
        let cache = std::env::temp_dir().join(format!("organ-cache-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        let now = key("z1", REPORT_SCHEMA);
        now.store(&cache, &"now").unwrap();
        assert_eq!(now.lookup::<String>(&cache).as_deref(), Some("now"));
        for other in [key("z2", REPORT_SCHEMA), key("z1", REPORT_SCHEMA + 1)] {
            assert_ne!(other.entry(&cache).unwrap(), now.entry(&cache).unwrap());
            assert_eq!(other.lookup::<String>(&cache), None, "{other:?}");
            // Planted under this key's name, another definition's entry is still refused.
            other.store(&cache, &"other").unwrap();
            std::fs::rename(other.entry(&cache).unwrap(), now.entry(&cache).unwrap()).unwrap();
            assert_eq!(now.lookup::<String>(&cache), None, "{other:?}");
            now.store(&cache, &"now").unwrap();
        }
        let _ = std::fs::remove_dir_all(&cache);
    }
}
