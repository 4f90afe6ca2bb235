//! The report files a command writes besides its text on stdout: one `--NAME FILE` flag
//! per format of the core's registry ([`organ_core::report::formats::FORMATS`]) that
//! offers a flag for the kind of report the command writes ([`Format::flag`]). The flags
//! are built from the registry ([`ReportFiles`]), so a new format there is a new flag of
//! every command that writes its kind of report, with nothing to add here.
//!
//! A command declares the kind of report it writes by the type it flattens:
//! `#[command(flatten)] pub reports: ReportFiles<Theta>` (θ reports: measure, report
//! merge), `ReportFiles<Compare>` (diff), `ReportFiles<Check>` (check). A new kind of
//! report is a [`Kind`] in the core, the formats that render it listing it, and one
//! [`report_kind!`] line here.

use super::{Argv, ToArgs};
use crate::cmd::outputs::Files;
use organ_core::report::formats::{self, Format, Kind};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

/// How many lowest-θ tensors `measure` prints by default.
pub const DEFAULT_WELLS: usize = organ_core::report::WELLS;

/// The kind of report a command writes, as a type ([`ReportFiles`]'s parameter: clap
/// builds flags from a type, not a value).
pub trait ReportKind {
    /// The kind.
    const KIND: Kind;
}

/// One marker type per [`Kind`] of report.
macro_rules! report_kind {
    ($($(#[$doc:meta])* $name:ident => $kind:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        pub struct $name;
        impl ReportKind for $name {
            const KIND: Kind = $kind;
        }
    )*};
}

report_kind! {
    /// θ reports (`measure`, `report merge`).
    Theta => Kind::Measure;
    /// Compare reports (`diff`).
    Compare => Kind::Compare;
    /// Check reports (`check`).
    Check => Kind::Check;
    /// Sensitivity reports (`sensitivity`, measured; a prediction takes the same files).
    Sensitivity => Kind::Sensitivity;
    /// Quantization reports (`quantize`).
    Quantization => Kind::Quantize;
}

/// The id of the group of a command's report-file flags: `conflicts_with = "reports"`
/// conflicts with each of them, whatever formats the registry has.
pub const REPORTS_GROUP: &str = "reports";

/// The `--NAME FILE` flags of the registry's formats for reports of kind `K`
/// ([`formats::flags_for`]), in the registry's order: what a command writes besides its
/// text.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReportFiles<K> {
    pub files: Files,
    kind: PhantomData<K>,
}

impl<K> From<Files> for ReportFiles<K> {
    fn from(files: Files) -> Self {
        ReportFiles { files, kind: PhantomData }
    }
}

impl<K: ReportKind> ReportFiles<K> {
    /// Asks for `format` in `path` (a format with a flag for `K`).
    pub fn with(self, format: &'static Format, path: Option<PathBuf>) -> Self {
        debug_assert!(format.flag_help(K::KIND).is_some(), "--{} is not a flag of these reports", format.name);
        self.files.with(format, path).into()
    }

    /// Every file asked for.
    pub fn paths(&self) -> Vec<Option<&Path>> {
        self.files.paths()
    }
}

impl<K: ReportKind> clap::Args for ReportFiles<K> {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        let mut group = clap::ArgGroup::new(REPORTS_GROUP).multiple(true);
        for (f, help) in formats::flags_for(K::KIND) {
            cmd = cmd.arg(
                clap::Arg::new(f.name)
                    .long(f.name)
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(PathBuf))
                    .action(clap::ArgAction::Set)
                    .help(help),
            );
            group = group.arg(f.name);
        }
        cmd.group(group)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl<K: ReportKind> clap::FromArgMatches for ReportFiles<K> {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut r = ReportFiles { files: Files::default(), kind: PhantomData };
        r.update_from_arg_matches(m)?;
        Ok(r)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        for (f, _) in formats::flags_for(K::KIND) {
            if let Some(path) = m.get_one::<PathBuf>(f.name) {
                self.files.set(f, Some(path.clone()));
            }
        }
        Ok(())
    }
}

impl<K> ToArgs for ReportFiles<K> {
    fn to_args(&self, a: &mut Argv) {
        for (f, path) in self.files.iter() {
            a.opt(&format!("--{}", f.name), Some(path));
        }
    }
}

/// What `measure` and `report merge` write besides the text on stdout, and how much of it.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ReportOutputs {
    #[command(flatten)]
    pub files: ReportFiles<Theta>,
    /// Print only the summaries, groups and wells, not the per-tensor tables.
    #[arg(long)]
    pub summary_only: bool,
    /// How many lowest-θ tensors ("wells") to print.
    #[arg(long, default_value_t = DEFAULT_WELLS)]
    pub wells: usize,
    /// List the wells among all tensors, norm vectors and routers included (as the JSON's
    /// summary does), not only among the weight matrices.
    #[arg(long)]
    pub all_wells: bool,
    /// The JSON of `organ eval MODEL --base PARENT` (or of a surgery's --judge): its
    /// verdict is shown beside the model in the ranking (repeatable).
    #[arg(long = "verdict", value_name = "FILE")]
    pub verdicts: Vec<PathBuf>,
}

impl Default for ReportOutputs {
    fn default() -> Self {
        ReportOutputs {
            files: ReportFiles::default(),
            summary_only: false,
            wells: DEFAULT_WELLS,
            all_wells: false,
            verdicts: Vec::new(),
        }
    }
}

impl ToArgs for ReportOutputs {
    fn to_args(&self, a: &mut Argv) {
        a.flags(&self.files)
            .switch("--summary-only", self.summary_only)
            .number("--wells", Some(self.wells))
            .switch("--all-wells", self.all_wells)
            .each("--verdict", &self.verdicts);
    }
}
