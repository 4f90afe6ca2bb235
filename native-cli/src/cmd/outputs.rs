//! A report's outputs: the report rendered by the core's format registry
//! ([`organ_core::report::formats`]) into the files asked for (`-`: standard output), each
//! written atomically, and its text printed. What `measure`, `report merge`, `diff` and
//! `check` share.

use crate::atomic::write_file;
use anyhow::{bail, Result};
use organ_core::report::formats::{AnyReport, Format, Shown, FORMATS, TEXT};
use std::fmt;
use std::io::Write;
use std::path::Path;

/// Writes `report` in each format asked for to its path, in the registry's order
/// ([`FORMATS`]); a format not asked for (`None`) is skipped.
///
/// # Errors
/// A file cannot be written (or exists, without `force`).
pub fn write_all(report: AnyReport<'_>, asked: &[(&Format, Option<&Path>)], shown: &Shown, force: bool) -> Result<()> {
    for f in FORMATS {
        for (_, path) in asked.iter().filter(|(g, _)| g.name == f.name) {
            if let Some(path) = path {
                write_file(path, force, |w| render(report, f, shown, w))?;
            }
        }
    }
    Ok(())
}

/// Prints `report`'s text, as much of it as `shown` says.
///
/// # Errors
/// `out` cannot be written.
pub fn print(report: AnyReport<'_>, shown: &Shown, out: &mut dyn Write) -> Result<()> {
    render(report, &TEXT, shown, out)
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
