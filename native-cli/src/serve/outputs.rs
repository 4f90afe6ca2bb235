//! The report files of a measure, diff or check job, named from the core's format registry
//! ([`organ_core::report::formats`]): `STEM.EXT` in the job's directory, written by the
//! child's `--NAME` flags, and the text it prints kept as `STEM.txt`.

use crate::cmd::outputs::Files;
use organ_core::report::formats::{Format, CSV, HTML, JSON, TEXT};
use std::path::Path;

/// A measure job's report files: report.json (the result), report.csv, report.html.
pub(super) const MEASURE_OUT: ReportOutputs =
    ReportOutputs { stem: "report", files: &[&JSON, &CSV, &HTML], text: false };
/// A diff job's: diff.json (the result), diff.csv and the text, diff.txt.
pub(super) const DIFF_OUT: ReportOutputs = ReportOutputs { stem: "diff", files: &[&JSON, &CSV], text: true };
/// A check job's: check.json (the result) and the text, check.txt.
pub(super) const CHECK_OUT: ReportOutputs = ReportOutputs { stem: "check", files: &[&JSON], text: true };

/// The report outputs of one kind of job.
pub(super) struct ReportOutputs {
    /// What every file name starts with (`report`, `diff`, `check`).
    stem: &'static str,
    /// The formats the child writes to files, in its argv's order ([`JSON`] first: the
    /// job's result).
    files: &'static [&'static Format],
    /// Whether the text the child prints is kept (`STEM.txt`).
    text: bool,
}

impl ReportOutputs {
    fn name(&self, f: &Format) -> String {
        format!("{}.{}", self.stem, f.extension)
    }

    /// The files the job writes in `dir`, each format's (the values of the command's
    /// `--NAME` flags).
    pub fn files(&self, dir: &Path) -> Files {
        (self.files.iter()).fold(Files::default(), |asked, &f| asked.with(f, Some(dir.join(self.name(f)))))
    }

    /// Every output's name: the files, then the text.
    pub fn names(&self) -> Vec<String> {
        let text = self.text.then_some(&TEXT);
        self.files.iter().copied().chain(text).map(|f| self.name(f)).collect()
    }

    /// The file that is the job's result: the JSON.
    pub fn report(&self) -> String {
        self.name(&JSON)
    }

    /// The file the child's text goes to, if it is kept.
    pub fn stdout(&self) -> Option<String> {
        self.text.then(|| self.name(&TEXT))
    }
}

/// Asserts that docs/openapi.json (`doc`) names `names` as the outputs of the job schema
/// `job` and at the end of the summary of `POST path`, in that order.
#[cfg(test)]
pub(super) fn openapi_lists_outputs(doc: &serde_json::Value, job: &str, path: &str, names: &[&str]) {
    let said = doc["components"]["schemas"][job]["allOf"][1]["properties"]["outputs"]["description"]
        .as_str()
        .unwrap_or_default();
    let listed: Vec<&str> = (said.split_whitespace())
        .filter_map(|w| w.strip_prefix("results/JOB/"))
        .map(|w| w.trim_end_matches([',', ')']))
        .collect();
    assert_eq!(listed, names, "{job}'s outputs in docs/openapi.json: {said:?}");
    let summary = doc["paths"][path]["post"]["summary"].as_str().unwrap_or_default();
    let want = format!("; outputs {}", names.join(", "));
    assert!(summary.ends_with(&want), "{path}'s summary in docs/openapi.json: {summary:?}, not ending {want:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/openapi.json names the diff and check jobs' outputs (in the job's `outputs`
    /// and the operation's summary): they are the ones the registry names.
    #[test]
    fn openapi_names_the_outputs_jobs_write() {
        let doc: serde_json::Value = serde_json::from_str(include_str!("../../../docs/openapi.json")).unwrap();
        for (job, path, out) in [("DiffJob", "/api/diff", &DIFF_OUT), ("CheckJob", "/api/check", &CHECK_OUT)] {
            let names = out.names();
            openapi_lists_outputs(&doc, job, path, &names.iter().map(String::as_str).collect::<Vec<_>>());
        }
        assert_eq!(MEASURE_OUT.names(), ["report.json", "report.csv", "report.html"]);
        assert_eq!(MEASURE_OUT.report(), "report.json");
        assert_eq!(MEASURE_OUT.stdout(), None);
    }
}
