//! The commands that read and report: inspect, measure, diff and check, each through the
//! function its command calls, its report rendered by the core's registry of formats.

use crate::{quiet_bar, run, Watch};
use organ_core::report::formats::{AnyReport, CSV, JSON};
use organ_core::zmeasure::Mode;
use organ_native::cmd;
use organ_native::cmd::outputs::rendered;
use pyo3::prelude::*;
use std::path::PathBuf;

/// `organ inspect PATH --json`: the model's metadata and tensors, as JSON text.
#[pyfunction]
pub(crate) fn inspect(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    run(py, None, None, move || {
        let opts = cmd::inspect::Options { model: &path, json: true, selection: Default::default(), memory: None };
        let mut out = Vec::new();
        cmd::inspect::run(&opts, &mut out)?;
        Ok(String::from_utf8(out)?)
    })
}

/// `organ measure PATH --json J --csv C`: the θ report's JSON and CSV texts.
#[pyfunction]
#[pyo3(signature = (path, sigma=false, exact=false, experts=false, stream=false, threads=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn measure(
    py: Python<'_>,
    path: PathBuf,
    sigma: bool,
    exact: bool,
    experts: bool,
    stream: bool,
    threads: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(String, String)> {
    if sigma && exact {
        return Err(crate::OrganError::new_err("sigma and exact cannot both be asked for (as --sigma and --exact)"));
    }
    let mode = match (sigma, exact) {
        (true, _) => Mode::Sigma,
        (_, true) => Mode::Exact,
        _ => Mode::Sampled,
    };
    let opts = cmd::measure::Options {
        models: vec![path],
        files: Default::default(),
        summary_only: false,
        wells: organ_core::report::WELLS,
        all_wells: false,
        verdicts: Vec::new(),
        stream,
        cache: None,
        force: false,
        mode,
        experts,
        base: None,
    };
    let bar = quiet_bar();
    let watched = Watch { bar: bar.clone(), callback: progress, stops: true };
    run(py, threads, Some(watched), move || {
        let report = cmd::measure::report(&opts, &bar)?;
        let report = AnyReport::Measure(&report);
        Ok((rendered(report, &JSON)?, rendered(report, &CSV)?))
    })
}

/// `organ diff A B --json J --csv C`: the compare report's JSON and CSV texts.
#[pyfunction]
#[pyo3(signature = (a, b, stream=false, threads=None))]
pub(crate) fn diff(
    py: Python<'_>,
    a: PathBuf,
    b: PathBuf,
    stream: bool,
    threads: Option<usize>,
) -> PyResult<(String, String)> {
    run(py, threads, None, move || {
        let report = cmd::diff::compare_models(&a, &b, stream)?;
        let report = AnyReport::Compare(&report);
        Ok((rendered(report, &JSON)?, rendered(report, &CSV)?))
    })
}

/// `organ check PATH --json J`: the check report's JSON text, and whether any finding is
/// an error (the CLI's exit status 1).
#[pyfunction]
#[pyo3(signature = (path, stream=false, threads=None, derived_from=None, imatrix=None))]
pub(crate) fn check(
    py: Python<'_>,
    path: PathBuf,
    stream: bool,
    threads: Option<usize>,
    derived_from: Option<PathBuf>,
    imatrix: Option<PathBuf>,
) -> PyResult<(String, bool)> {
    run(py, threads, None, move || {
        anyhow::ensure!(
            imatrix.is_none() || derived_from.is_some(),
            "imatrix is the matrix a model derived from another was quantized with: give derived_from too"
        );
        let o = cmd::check::Options {
            model: path,
            files: Default::default(),
            stream,
            force: false,
            base: None,
            derived_from,
            imatrix,
        };
        let report = cmd::check::report(&o)?;
        Ok((rendered(AnyReport::Check(&report), &JSON)?, report.has_errors()))
    })
}
