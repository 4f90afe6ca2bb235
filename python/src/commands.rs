//! Every command but inspect, measure, diff and check ([`crate::reports`]): an argv, built
//! by the Python side from keyword arguments named as the flags are (snake_case), parsed
//! by the CLI's own flags ([`Cli`]) and run by [`organ_cli::cli::run_command`], which is
//! what the binary runs. So each function takes the flags, defaults and checks of its
//! command and nothing else, and writes what it writes: a model to a temp file renamed
//! into place, `force` replacing only what organ could have written, never an input.
//!
//! The reports a command writes to files (`--json FILE`, `--csv FILE`) go to files in a
//! temp directory of the call's own and are read back: `to_json()` is the file `organ CMD
//! --json` writes because it is that file. What the command prints is returned too.

use crate::{quiet_bar, run, OrganError, Watch};
use clap::{CommandFactory, Parser};
use organ_cli::cli::Cli;
use pyo3::prelude::*;
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What [`command`] returns: the text the command printed, and each report asked for
/// (`None` when the command wrote none: a dry run's).
type Ran = (String, Vec<Option<String>>);

/// `organ ARGV… [--REPORT FILE]…`: runs the command as the binary does, with the GIL
/// released, and returns what it printed and the text of each report of `reports` (flag
/// names: `json`, `csv`) it wrote. A usage error (an unknown flag, a value that does not
/// parse) is an `OrganError` with clap's message.
///
/// The command counts its progress on a bar of the call's own
/// (`organ_native::progress::watch`): `progress(done, total)` is called as it moves (a
/// command that makes several bars, lora extract's tensors then --judge's chunks, starts
/// again at 0 for each). A call interrupted (Ctrl-C, the callback's exception) returns at
/// once; the command runs on to its end on its thread and writes nothing more: no output
/// is renamed into place once the flag it watches is set, right after.
#[pyfunction]
#[pyo3(signature = (argv, reports=Vec::new(), progress=None))]
pub(crate) fn command(
    py: Python<'_>,
    argv: Vec<OsString>,
    reports: Vec<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Ran> {
    let dir = tempfile::Builder::new()
        .prefix("organ-python-")
        .tempdir()
        .map_err(|e| OrganError::new_err(format!("cannot make a temp directory for the report: {e}")))?;
    let files: Vec<_> = reports.iter().map(|r| dir.path().join(format!("report.{r}"))).collect();
    // `organ WORDS… --json F… FLAGS… [-- POSITIONALS…]`: the reports' flags after the
    // subcommand's words (the argv's up to its first flag or `--`), so before any `--`.
    let words = argv.iter().take_while(|a| !a.to_string_lossy().starts_with('-')).count();
    let mut full: Vec<OsString> = vec!["organ".into()];
    full.extend_from_slice(&argv[..words]);
    for (r, f) in reports.iter().zip(&files) {
        full.push(format!("--{r}").into());
        full.push(f.into());
    }
    full.extend_from_slice(&argv[words..]);
    let cli = Cli::try_parse_from(&full).map_err(|e| OrganError::new_err(usage(&e)))?;
    let bar = quiet_bar();
    let watched = Watch { bar: bar.clone(), callback: progress, stops: false };
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let ran = run(py, None, Some(watched), move || {
        organ_native::progress::watch(bar, stopped);
        let mut text = Vec::new();
        organ_cli::cli::run_command(&cli.command, &mut text)?;
        let mut read = Vec::with_capacity(files.len());
        for f in &files {
            read.push(match std::fs::read_to_string(f) {
                Ok(s) => Some(s),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(anyhow::Error::new(e).context(format!("{}: cannot read", f.display()))),
            });
        }
        Ok((String::from_utf8_lossy(&text).into_owned(), read))
    });
    // Interrupted (or failed: then the flag changes nothing), the command writes nothing
    // more, whenever it gets to its outputs.
    if ran.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    drop(dir);
    ran
}

/// clap's message, without its `error: ` and the usage lines after it.
fn usage(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first = text.split("\n\n").next().unwrap_or(&text).trim();
    first.strip_prefix("error: ").unwrap_or(first).to_owned()
}

/// The defaults of command `path`'s flags (`["lora", "extract"]`), by flag name: what the
/// CLI takes when a flag is not given. The Python functions' defaults are tested against
/// them.
#[pyfunction]
pub(crate) fn defaults(path: Vec<String>) -> PyResult<Vec<(String, Vec<String>)>> {
    let mut c = Cli::command();
    c.build();
    let mut at = &c;
    for p in &path {
        at = at.find_subcommand(p).ok_or_else(|| OrganError::new_err(format!("no command {path:?}")))?;
    }
    Ok(at
        .get_arguments()
        .filter(|a| !a.is_global_set())
        .filter_map(|a| {
            let long = a.get_long()?;
            Some((long.to_owned(), a.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect()))
        })
        .collect())
}
