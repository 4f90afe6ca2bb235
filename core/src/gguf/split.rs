//! Split models (`llama-gguf-split`): shards `NAME-00001-of-0000N.gguf`, each a GGUF with
//! `split.no` (0-based), `split.count` and, in every shard, `split.tensors.count` (the
//! whole model's). One check for every reader of shards: the CLI and the browser.
//!
//! Splits that organ writes also carry [`SET_ID_KEY`], one random id in every shard, so
//! that a shard of another split set is refused even where its `split.*` keys agree.

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// The metadata key of a split set's id, in every shard organ writes (a string of 32 hex
/// digits). Readers drop it with the `split.*` keys when they join the shards.
pub const SET_ID_KEY: &str = "organ.split.id";

/// What the shard check needs of one file (of a model: `Shard::of`, in [`crate::model`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shard<'a> {
    /// `split.no`.
    pub no: Option<u64>,
    /// `split.count`.
    pub count: Option<u64>,
    /// `split.tensors.count`.
    pub tensors_count: Option<u64>,
    /// The names of the tensors the file holds.
    pub tensors: Vec<&'a str>,
    /// The GGUF version.
    pub version: u32,
    /// [`SET_ID_KEY`], where the file has it.
    pub set_id: Option<&'a str>,
}

impl Shard<'_> {
    /// Whether this file says it is one shard of several.
    pub fn is_split(&self) -> bool {
        self.count.is_some_and(|c| c > 1)
    }
}

/// Why a set of files is not one model: the file (its index in the set) and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitError {
    /// Index of the offending file in the set.
    pub file: usize,
    /// What is wrong, to be prefixed by the file's name.
    pub reason: String,
}

/// Checks that `files` (in file-name order) are one model: a single file that is not a
/// shard, or every shard of one split model, in order (`split.no` = position, `split.count`
/// = how many were given), holding `split.tensors.count` tensors in all, no name twice,
/// all of one GGUF version, and all with the first shard's set id (or all without one).
///
/// # Errors
/// The first file found wrong, and why.
pub fn check_shards(files: &[Shard<'_>]) -> Result<(), SplitError> {
    let n = files.len() as u64;
    let err = |file: usize, reason: String| Err(SplitError { file, reason });
    if n == 0 {
        return err(0, "no file given".into());
    }
    if n == 1 && !files[0].is_split() {
        return Ok(());
    }
    for (i, f) in files.iter().enumerate() {
        match (f.no, f.count) {
            (Some(no), Some(count)) if no == i as u64 && count == n => {}
            (_, Some(count)) if count != n => {
                return err(
                    i,
                    format!("shard of a split model with {count} shards, but {n} file(s) were given: give all the shards together"),
                )
            }
            (no, Some(_)) => return err(i, format!("split.no is {no:?}, expected {i} in file-name order")),
            (_, None) => return err(i, "not a shard of a split model (no split.count): give one model at a time".into()),
        }
    }
    let total: u64 = files.iter().map(|f| f.tensors.len() as u64).sum();
    if let Some((i, f)) = files.iter().enumerate().find(|(_, f)| f.tensors_count != Some(total)) {
        return err(
            i,
            format!("split.tensors.count is {:?}, but the {n} shards hold {total} tensors", f.tensors_count),
        );
    }
    for (i, f) in files.iter().enumerate().skip(1) {
        if f.version != files[0].version {
            return err(i, format!("GGUF version {}, but the first shard's is {}", f.version, files[0].version));
        }
        if f.set_id != files[0].set_id {
            let id = |s: Option<&str>| s.map_or_else(|| String::from("none"), |s| format!("{s:?}"));
            return err(
                i,
                format!(
                    "belongs to another split set: {SET_ID_KEY} is {}, the first shard's is {}",
                    id(f.set_id),
                    id(files[0].set_id)
                ),
            );
        }
    }
    let mut seen = BTreeSet::new();
    for (i, f) in files.iter().enumerate() {
        if let Some(t) = f.tensors.iter().find(|t| !seen.insert(**t)) {
            return err(i, format!("tensor {t:?} appears in more than one shard"));
        }
    }
    Ok(())
}

/// llama.cpp's shard name: `PREFIX-00001-of-00003.gguf` (`i` from 1).
pub fn shard_name(prefix: &str, i: usize, n: usize) -> String {
    format!("{prefix}-{i:05}-of-{n:05}.gguf")
}

/// If `name` (a file name, no directory) is a llama.cpp shard's (`NAME-00002-of-00005.gguf`,
/// five digits each, count ≥ 1), the names of all its shards in order: how a shard's
/// siblings are found, on disk or at a URL.
pub fn shard_names(name: &str) -> Option<Vec<String>> {
    let stem = name.strip_suffix(".gguf")?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    let ok = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !ok(count) || !ok(no) {
        return None;
    }
    let n: usize = count.parse().ok().filter(|&n| n >= 1)?;
    Some((1..=n).map(|i| shard_name(prefix, i, n)).collect())
}

/// If `url`'s last path segment is a llama.cpp shard's name ([`shard_names`]), the URLs of
/// all its shards in order: that segment replaced, the rest (scheme, host, directory,
/// query, fragment) kept as written. How a shard's siblings are found at a URL, by the CLI
/// and the browser.
pub fn shard_urls(url: &str) -> Option<Vec<String>> {
    let (path, tail) = url.split_at(url.find(['?', '#']).unwrap_or(url.len()));
    let (dir, name) = path.rsplit_once('/')?;
    Some(shard_names(name)?.iter().map(|n| format!("{dir}/{n}{tail}")).collect())
}

/// A size like `500M`, `2G`, `1048576` (K, M, G, T are powers of 1024), as
/// `llama-gguf-split --split-max-size` and `organ recipe --target-size` read it.
///
/// # Errors
/// [`crate::error::Error::BadSetting`]: not a number, an unknown suffix, zero, too large.
pub fn parse_size(s: &str) -> crate::error::Result<u64> {
    let s = s.trim();
    let bad = |reason: &str| crate::error::Error::BadSetting { what: format!("{s:?}"), reason: reason.into() };
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(bad("unknown size suffix (use K, M, G or T)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| bad("not a size like 500M"))?;
    n.checked_mul(mult).filter(|&n| n > 0).ok_or_else(|| bad("not a usable size"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn shard_names_are_llama_cpps() {
        assert_eq!(
            shard_names("m-00002-of-00003.gguf").unwrap(),
            ["m-00001-of-00003.gguf", "m-00002-of-00003.gguf", "m-00003-of-00003.gguf"]
        );
        assert_eq!(shard_names("a-b-00001-of-00001.gguf").unwrap(), ["a-b-00001-of-00001.gguf"]);
        for not in ["m.gguf", "m-0002-of-00003.gguf", "m-00002-of-00003.bin", "m-00002-of-00000.gguf", "-of-.gguf"] {
            assert_eq!(shard_names(not), None, "{not}");
        }
    }

    #[test]
    fn shard_urls_keep_all_but_the_name() {
        let got = shard_urls("https://h.example/m/x%20y-00002-of-00003.gguf?sig=a%2Fb#f").unwrap();
        assert_eq!(
            got,
            [
                "https://h.example/m/x%20y-00001-of-00003.gguf?sig=a%2Fb#f",
                "https://h.example/m/x%20y-00002-of-00003.gguf?sig=a%2Fb#f",
                "https://h.example/m/x%20y-00003-of-00003.gguf?sig=a%2Fb#f"
            ]
        );
        assert_eq!(
            shard_urls("https://h.example/d/m-00001-of-00001.gguf").unwrap(),
            ["https://h.example/d/m-00001-of-00001.gguf"]
        );
        for not in [
            "https://h.example/m.gguf",
            "https://h.example/",
            "m-00001-of-00002.gguf",
            "https://h/m.gguf?x-00001-of-00002.gguf",
        ] {
            assert_eq!(shard_urls(not), None, "{not}");
        }
    }

    fn shard(no: u64, count: u64, total: u64, tensors: &[&'static str]) -> Shard<'static> {
        Shard {
            no: Some(no),
            count: Some(count),
            tensors_count: Some(total),
            tensors: tensors.to_vec(),
            version: 3,
            set_id: Some("ab12"),
        }
    }

    #[test]
    fn a_whole_split_set_passes_and_every_fault_names_its_file() {
        let ok = vec![shard(0, 3, 4, &["a", "b"]), shard(1, 3, 4, &["c"]), shard(2, 3, 4, &["d"])];
        assert_eq!(check_shards(&ok), Ok(()));
        assert_eq!(check_shards(&[Shard { tensors: vec!["a"], ..Shard::default() }]), Ok(()));

        let missing = &ok[..2];
        assert!(check_shards(missing).unwrap_err().reason.contains("3 shards, but 2 file(s)"));
        let mut swapped = ok.clone();
        swapped.swap(1, 2);
        let e = check_shards(&swapped).unwrap_err();
        assert_eq!(e.file, 1);
        assert!(e.reason.contains("split.no is Some(2), expected 1"), "{}", e.reason);
        let mut plain = ok.clone();
        plain[2] = Shard { tensors: vec!["d"], ..Shard::default() };
        assert!(check_shards(&plain).unwrap_err().reason.contains("no split.count"));
        let mut short = ok.clone();
        short[1].tensors.clear();
        assert_eq!(
            check_shards(&short).unwrap_err().reason,
            "split.tensors.count is Some(4), but the 3 shards hold 3 tensors"
        );
        let mut twice = ok.clone();
        twice[2].tensors = vec!["a"];
        let e = check_shards(&twice).unwrap_err();
        assert_eq!((e.file, e.reason.as_str()), (2, "tensor \"a\" appears in more than one shard"));
        let lone = [shard(0, 2, 1, &["a"])];
        assert!(check_shards(&lone).unwrap_err().reason.contains("2 shards, but 1 file(s)"));
        assert_eq!(check_shards(&[]).unwrap_err().reason, "no file given");
    }

    #[test]
    fn a_shard_of_another_set_or_version_is_refused() {
        let ok = vec![shard(0, 2, 2, &["a"]), shard(1, 2, 2, &["b"])];
        let mut other = ok.clone();
        other[1].set_id = Some("cd34");
        let e = check_shards(&other).unwrap_err();
        assert_eq!(e.file, 1);
        assert!(e.reason.contains("another split set") && e.reason.contains("\"cd34\""), "{}", e.reason);
        let mut missing = ok.clone();
        missing[1].set_id = None;
        assert!(check_shards(&missing).unwrap_err().reason.contains("is none"));
        let mut v2 = ok.clone();
        v2[1].version = 2;
        assert_eq!(check_shards(&v2).unwrap_err().reason, "GGUF version 2, but the first shard's is 3");
        // llama-gguf-split's shards carry no set id: all without one is fine.
        let mut plain = ok;
        plain.iter_mut().for_each(|s| s.set_id = None);
        assert_eq!(check_shards(&plain), Ok(()));
    }

    #[test]
    fn sizes_read_as_llama_gguf_split_reads_them() {
        assert_eq!(parse_size("500M").unwrap(), 500 << 20);
        assert_eq!(parse_size(" 2g ").unwrap(), 2 << 30);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("1T").unwrap(), 1 << 40);
        for bad in ["", "0", "0M", "5X", "M", "-1M", "1.5G", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
