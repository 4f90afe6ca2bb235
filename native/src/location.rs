//! [`Location`]: where a model named by the user is, a path on this machine or a URL, told
//! apart once. It is the one caller of [`crate::remote::is_url`]: the rest ask a
//! `Location` what depends on it (the shards of a split model, the name reports give the
//! model, the byte source of each of its files), or, where the answer is a policy and not
//! where bytes come from, match on it (the API takes a URL only when started to, a fleet
//! list's URL names one model where a path may name a directory, results go to a store
//! prefix or a directory). A new URL scheme changes nothing here: it is a line in
//! [`crate::remote`]'s scheme table and a transport.

use crate::model_file::ModelFile;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// Where a model (or a fleet's results) is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location<'a> {
    /// A file or directory on this machine.
    Local(&'a Path),
    /// Written as a URL (`SCHEME://…`), of a scheme organ reads or not ([`crate::remote`]
    /// reads it, or says why not).
    Url(&'a Path),
}

/// How the bytes of a model's files must be reached: what the command does with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Every byte in memory (a map): a model at a URL is refused.
    Mapped,
    /// Read where they are: a model at a URL keeps its header and reads the rest by range
    /// requests.
    Ranged,
    /// Every byte in memory, a model at a URL fetched whole into a temporary file first.
    Fetched,
}

impl<'a> Location<'a> {
    /// Where `path` is: a URL when written as one.
    pub fn of(path: &'a Path) -> Location<'a> {
        if crate::remote::is_url(path) {
            Location::Url(path)
        } else {
            Location::Local(path)
        }
    }

    /// [`Self::of`], a URL checked to be one organ reads ([`crate::remote::parse`]).
    ///
    /// # Errors
    /// A URL of a scheme organ does not read, not valid, or refused by the policy.
    pub fn checked(path: &'a Path) -> Result<Location<'a>> {
        let at = Self::of(path);
        if let Location::Url(u) = at {
            crate::remote::parse(u)?;
        }
        Ok(at)
    }

    /// What it was named by.
    pub fn path(&self) -> &'a Path {
        match self {
            Location::Local(p) | Location::Url(p) => p,
        }
    }

    /// If it names a llama.cpp split shard (`NAME-00002-of-00005.gguf`, on disk or at a
    /// URL), every shard of its model, in order.
    pub fn shards(&self) -> Option<Vec<PathBuf>> {
        match self {
            Location::Local(p) => crate::paths::split_shards(p),
            Location::Url(u) => crate::remote::split_urls(u),
        }
    }

    /// The first shard of its split model, or itself.
    pub fn first_shard(&self) -> PathBuf {
        self.shards().and_then(|s| s.into_iter().next()).unwrap_or_else(|| self.path().to_owned())
    }

    /// Whether it is a directory on this machine (an organ directory, or a fleet's).
    pub fn is_dir(&self) -> bool {
        matches!(self, Location::Local(p) if p.is_dir())
    }

    /// The name reports give the model: its file name, or the file name its URL ends with
    /// (a split model's first shard's).
    pub fn label(&self) -> String {
        match self {
            Location::Url(_) => crate::remote::file_name(&self.first_shard().to_string_lossy()),
            Location::Local(p) => {
                p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned())
            }
        }
    }

    /// The names reports give the models at `paths`, each told apart from the others:
    /// `base[i]`, the name its report gives it (its file name, or its split's first
    /// shard's), or, where two models share it, that name after the shortest tail of its
    /// directories (or URL path) that no other model's ends the same way (`a/m.gguf`,
    /// `b/m.gguf`). A path given twice keeps one name.
    pub fn labels(paths: &[&Path], base: &[String]) -> Vec<String> {
        let segs: Vec<Vec<String>> = paths
            .iter()
            .zip(base)
            .map(|(p, b)| {
                let mut s = Location::of(p).directories();
                s.push(b.clone());
                s
            })
            .collect();
        let tail = |i: usize, d: usize| -> &[String] { &segs[i][segs[i].len().saturating_sub(d)..] };
        let mut depth = vec![1usize; segs.len()];
        // Those whose tail at their depth another path's tail equals; grouped at each
        // depth, so the work is the paths times the depth needed.
        let mut open: Vec<usize> = (0..segs.len()).collect();
        while !open.is_empty() {
            let mut groups: std::collections::HashMap<&[String], Vec<usize>> = std::collections::HashMap::new();
            for &i in &open {
                groups.entry(tail(i, depth[i])).or_default().push(i);
            }
            let mut next = Vec::new();
            for group in groups.into_values() {
                let distinct = group.iter().any(|&i| segs[i] != segs[group[0]]);
                for i in group {
                    if distinct && depth[i] < segs[i].len() {
                        depth[i] += 1;
                        next.push(i);
                    }
                }
            }
            open = next;
        }
        (0..segs.len()).map(|i| tail(i, depth[i]).join("/")).collect()
    }

    /// The directories its path names (a URL: its path's, the bucket or host left out).
    fn directories(&self) -> Vec<String> {
        match self {
            Location::Local(p) => p
                .parent()
                .into_iter()
                .flat_map(Path::components)
                .filter_map(|c| match c {
                    std::path::Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
                    std::path::Component::ParentDir => Some("..".into()),
                    _ => None,
                })
                .collect(),
            Location::Url(u) => {
                let u = u.to_string_lossy();
                let path = u.split_once("://").map_or(&*u, |(_, rest)| rest);
                let path = path.split(['?', '#']).next().unwrap_or_default();
                let mut parts: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect();
                parts.truncate(parts.len().saturating_sub(1));
                parts.into_iter().skip(1).collect()
            }
        }
    }

    /// Checks that its bytes can be reached as `reach` says, before anything is read.
    ///
    /// # Errors
    /// A URL where every byte must be mapped.
    pub fn can_reach(&self, reach: Reach) -> Result<()> {
        if let (Location::Url(u), Reach::Mapped) = (self, reach) {
            bail!("{}: only inspect, measure, diff, dissect and graft's donor read remote models so far", u.display());
        }
        Ok(())
    }

    /// Opens `file`, one file of this location's model (itself, or one of its
    /// [`Self::shards`]), its bytes reached as `reach` says: mapped on this machine; at a
    /// URL, its header and range requests ([`ModelFile::open_url`]) or fetched whole
    /// ([`ModelFile::fetch_url`]).
    ///
    /// # Errors
    /// As [`Self::can_reach`]; the file cannot be opened or read.
    pub fn open_file(&self, file: &Path, reach: Reach) -> Result<ModelFile> {
        self.can_reach(reach)?;
        match (self, reach) {
            (Location::Local(_), _) => ModelFile::open(file),
            (Location::Url(_), Reach::Fetched) => ModelFile::fetch_url(file),
            (Location::Url(_), _) => ModelFile::open_url(file),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_the_shortest_tails_that_tell_models_apart() {
        let l = |ps: &[&str]| {
            let paths: Vec<&Path> = ps.iter().map(Path::new).collect();
            let base: Vec<String> = paths.iter().map(|p| Location::of(p).label()).collect();
            Location::labels(&paths, &base)
        };
        assert_eq!(l(&["fleet/a/m.gguf", "fleet/b/m.gguf", "x/n.gguf"]), ["a/m.gguf", "b/m.gguf", "n.gguf"]);
        assert_eq!(l(&["b/m.gguf", "a/b/m.gguf", "c/m.gguf"]), ["b/m.gguf", "a/b/m.gguf", "c/m.gguf"]);
        assert_eq!(l(&["m.gguf", "./d/m.gguf", "m.gguf"]), ["m.gguf", "d/m.gguf", "m.gguf"]);
        assert_eq!(l(&["/abs/m.gguf", "rel/m.gguf"]), ["abs/m.gguf", "rel/m.gguf"]);
        assert_eq!(
            l(&["https://h.example/u/r/m.gguf?x=1", "https://h.example/v/r/m.gguf", "s3://b/m.gguf"]),
            ["u/r/m.gguf", "v/r/m.gguf", "m.gguf"]
        );
        // Thousands of one name: grouped, not compared pairwise.
        let many: Vec<String> = (0..5000).map(|i| format!("d{i}/m.gguf")).collect();
        let labels = l(&many.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(labels[4999], "d4999/m.gguf");
        // The name is the report's (a split's first shard's), only the directories added.
        let paths = [Path::new("a/s-00002-of-00003.gguf"), Path::new("b/s-00001-of-00003.gguf")];
        let base = ["s-00001-of-00003.gguf".to_owned(), "s-00001-of-00003.gguf".to_owned()];
        assert_eq!(Location::labels(&paths, &base), ["a/s-00001-of-00003.gguf", "b/s-00001-of-00003.gguf"]);
        assert_eq!(Location::labels(&paths[..1], &base[..1]), ["s-00001-of-00003.gguf"]);
    }

    #[test]
    fn urls_are_told_from_paths_once() {
        let url = Path::new("https://h.example/m/x-00002-of-00003.gguf?sig=1");
        assert_eq!(Location::of(url), Location::Url(url));
        assert_eq!(Location::of(url).label(), "x-00001-of-00003.gguf");
        assert_eq!(Location::of(url).shards().map(|s| s.len()), Some(3));
        let local = Path::new("models/x-00002-of-00003.gguf");
        assert_eq!(Location::of(local), Location::Local(local));
        assert_eq!(Location::of(local).label(), "x-00002-of-00003.gguf");
        assert_eq!(Location::of(local).first_shard(), Path::new("models/x-00001-of-00003.gguf"));
        assert!(Location::checked(Path::new("ftp://a/b.gguf")).is_err());
        let refused = Location::of(url).can_reach(Reach::Mapped).unwrap_err().to_string();
        assert!(refused.contains("read remote models so far"), "{refused}");
        assert!(Location::of(local).can_reach(Reach::Mapped).is_ok());
    }
}
