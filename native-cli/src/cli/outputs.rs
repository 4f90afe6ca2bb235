//! The report files a command writes besides its text on stdout, one flattened struct per
//! kind of report: the formats a command offers are listed here and nowhere else.

use super::{Argv, ToArgs};
use std::path::{Path, PathBuf};

/// How many lowest-θ tensors `measure` prints by default.
pub const DEFAULT_WELLS: usize = 10;

/// What `measure` and `report merge` write besides the text on stdout, and how much of it.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ReportOutputs {
    /// Also write the full report as JSON (schema: docs/report.schema.json).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write one CSV row per tensor.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write the report as one self-contained static HTML page (the browser app's
    /// export): opens offline, fetches nothing, embeds the JSON.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Also write the ranking with per-group mean θ as CSV.
    #[arg(long, value_name = "FILE")]
    pub ranking_csv: Option<PathBuf>,
    /// Print only the summaries, groups and wells, not the per-tensor tables.
    #[arg(long)]
    pub summary_only: bool,
    /// How many lowest-θ tensors ("wells") to print.
    #[arg(long, default_value_t = DEFAULT_WELLS)]
    pub wells: usize,
}

impl Default for ReportOutputs {
    fn default() -> Self {
        ReportOutputs {
            json: None,
            csv: None,
            html: None,
            ranking_csv: None,
            summary_only: false,
            wells: DEFAULT_WELLS,
        }
    }
}

impl ReportOutputs {
    /// The files asked for.
    pub fn files(&self) -> [Option<&Path>; 4] {
        [self.json.as_deref(), self.csv.as_deref(), self.html.as_deref(), self.ranking_csv.as_deref()]
    }
}

impl ToArgs for ReportOutputs {
    fn to_args(&self, a: &mut Argv) {
        a.opt("--json", self.json.as_ref())
            .opt("--csv", self.csv.as_ref())
            .opt("--html", self.html.as_ref())
            .opt("--ranking-csv", self.ranking_csv.as_ref())
            .switch("--summary-only", self.summary_only)
            .number("--wells", Some(self.wells));
    }
}

/// What `diff` writes besides the text on stdout.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct DiffOutputs {
    /// Also write the full report as JSON (schema: docs/report.schema.json, "compare": "c1").
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write one CSV row per pair (and per expert of expert tensors).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write the report as one self-contained static HTML page (the browser app's
    /// export, with the 1 − cos heatmap and the θ scatter): opens offline, embeds the JSON.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl DiffOutputs {
    /// The files asked for.
    pub fn files(&self) -> [Option<&Path>; 3] {
        [self.json.as_deref(), self.csv.as_deref(), self.html.as_deref()]
    }
}

impl ToArgs for DiffOutputs {
    fn to_args(&self, a: &mut Argv) {
        a.opt("--json", self.json.as_ref()).opt("--csv", self.csv.as_ref()).opt("--html", self.html.as_ref());
    }
}
