//! A report's outputs: the report rendered by the core's format registry
//! ([`organ_core::report::formats`]) into the files asked for (`-`: standard output), each
//! written atomically, and its text printed. What `measure`, `report merge`, `diff` and
//! `check` share.

use crate::atomic::write_file;
use anyhow::{bail, Result};
use organ_core::report::formats::{AnyReport, Format, Shown, FORMATS, TEXT};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The report files asked for: formats of the registry, each with the file it goes to
/// (`-`: standard output), in the registry's order ([`FORMATS`]), each format once.
#[derive(Clone, Default)]
pub struct Files(Vec<(&'static Format, PathBuf)>);

impl Files {
    /// Asks for `format` in `path`, or no longer asks for it (`None`).
    pub fn set(&mut self, format: &'static Format, path: Option<PathBuf>) {
        self.0.retain(|(f, _)| f.name != format.name);
        if let Some(path) = path {
            self.0.push((format, path));
            self.0.sort_by_key(|(f, _)| FORMATS.iter().position(|g| g.name == f.name));
        }
    }

    /// [`Self::set`], by value.
    pub fn with(mut self, format: &'static Format, path: Option<PathBuf>) -> Files {
        self.set(format, path);
        self
    }

    /// Where `format` is asked for, if it is.
    pub fn get(&self, format: &Format) -> Option<&Path> {
        self.0.iter().find(|(f, _)| f.name == format.name).map(|(_, p)| p.as_path())
    }

    /// Every file asked for, with its format, in the registry's order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static Format, &Path)> {
        self.0.iter().map(|(f, p)| (*f, p.as_path()))
    }

    /// Every file asked for (for the checks made before any work: no input overwritten,
    /// at most one output on standard output).
    pub fn paths(&self) -> Vec<Option<&Path>> {
        self.0.iter().map(|(_, p)| Some(p.as_path())).collect()
    }
}

impl std::fmt::Debug for Files {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.iter().map(|(g, p)| (g.name, p))).finish()
    }
}

impl PartialEq for Files {
    fn eq(&self, other: &Files) -> bool {
        self.0.len() == other.0.len()
            && self.iter().zip(other.iter()).all(|((f, p), (g, q))| f.name == g.name && p == q)
    }
}

/// Writes `report` in each format asked for to its file, in the registry's order.
///
/// # Errors
/// A file cannot be written (or exists, without `force`).
pub fn write_all(report: AnyReport<'_>, files: &Files, shown: &Shown, force: bool) -> Result<()> {
    for (f, path) in files.iter() {
        write_file(path, force, |w| render(report, f, shown, w))?;
    }
    Ok(())
}

/// Writes `report` as JSON to `path` (a command's own `--json FILE`).
///
/// # Errors
/// The file cannot be written (or exists, without `force`).
pub fn write_json(report: AnyReport<'_>, path: &Path, force: bool) -> Result<()> {
    write_all(
        report,
        &Files::default().with(&organ_core::report::formats::JSON, Some(path.to_path_buf())),
        &Shown::WHOLE,
        force,
    )
}

/// Prints `report`'s text, as much of it as `shown` says.
///
/// # Errors
/// `out` cannot be written.
pub fn print(report: AnyReport<'_>, shown: &Shown, out: &mut dyn Write) -> Result<()> {
    render(report, &TEXT, shown, out)
}

/// `report` in `format`, whole, as the file `--NAME FILE` writes would hold it (the
/// Python module's `to_json()`).
///
/// # Errors
/// The format does not apply to the report's kind.
pub fn rendered(report: AnyReport<'_>, format: &Format) -> Result<String> {
    if !format.applies_to(report.kind()) {
        bail!("a {:?} report has no {} form", report.kind(), format.name);
    }
    let shown = Shown::WHOLE;
    let mut bytes = Vec::new();
    render(report, format, &shown, &mut bytes)?;
    Ok(String::from_utf8(bytes)?)
}

/// Renders `report` in `format` into `w`, keeping the writer's error when it fails.
fn render(report: AnyReport<'_>, format: &Format, shown: &Shown, w: &mut dyn Write) -> Result<()> {
    struct Adapter<'a> {
        w: &'a mut dyn Write,
        error: Option<std::io::Error>,
    }
    impl fmt::Write for Adapter<'_> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.w.write_all(s.as_bytes()).map_err(|e| {
                self.error = Some(e);
                fmt::Error
            })
        }
    }
    let mut a = Adapter { w, error: None };
    if (format.render)(report, shown, &mut a).is_ok() {
        return Ok(());
    }
    match a.error {
        Some(e) => Err(e.into()),
        None => bail!("the report cannot be written as {}", format.name),
    }
}
