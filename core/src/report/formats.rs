//! The report formats, in one registry: each [`Format`] says its name (the CLI's `--NAME`
//! flag, the API's output suffix), its file extension and media type, which reports it
//! applies to, whether the browser app offers it as an export, and how it renders. Every
//! face lists its formats from [`FORMATS`]: `organ measure`, `diff`, `check` and `report
//! merge` write the ones asked for, the API names its jobs' outputs by them, and the app
//! offers the ones marked for it.
//!
//! A new format is one file (its renderer, beside `json.rs`, `csv.rs`, `text.rs`) and one
//! entry in [`FORMATS`]: the CLI builds each command's `--NAME FILE` flags from
//! [`Format::flag`] (native-cli's `cli::ReportFiles`), so every command that writes a kind
//! of report the format lists offers it.

pub use super::kinds::{AnyReport, Kind, Mark, Shown};
use super::{csv, json, text};
use core::fmt;

/// One report format.
pub struct Format {
    /// Its name: `organ measure --NAME FILE` writes it, and the API's outputs end in it.
    pub name: &'static str,
    /// The extension of a file of it (without the dot).
    pub extension: &'static str,
    /// Its media type (an export's `Blob` type, an HTTP `Content-Type`).
    pub media_type: &'static str,
    /// The reports it applies to.
    pub kinds: &'static [Kind],
    /// The help of its `--NAME FILE` flag, for each kind of report (of [`Format::kinds`])
    /// whose commands offer it as a file; none for the text, which is printed.
    pub flag: &'static [(Kind, &'static str)],
    /// Whether the browser app offers it as an export (of the reports it applies to), and
    /// under which words ("Export JSON").
    pub export_label: Option<&'static str>,
    /// Writes `report` in this format; called only for the kinds in [`Format::kinds`].
    ///
    /// # Errors
    /// `out` refused a write (the report itself always renders).
    pub render: fn(AnyReport<'_>, &Shown, &mut dyn fmt::Write) -> fmt::Result,
}

impl Format {
    /// Whether this format applies to reports of `kind`.
    pub fn applies_to(&self, kind: Kind) -> bool {
        self.kinds.contains(&kind)
    }

    /// The help of its `--NAME FILE` flag for reports of `kind`, if their commands offer
    /// it as a file.
    pub fn flag_help(&self, kind: Kind) -> Option<&'static str> {
        self.flag.iter().find(|(k, _)| *k == kind).map(|(_, h)| *h)
    }
}

/// The full report as pretty JSON (schema: `docs/report.schema.json`).
pub const JSON: Format = Format {
    name: "json",
    extension: "json",
    media_type: "application/json",
    kinds: Kind::ALL,
    flag: &[
        (Kind::Measure, "Also write the full report as JSON (schema: docs/report.schema.json)"),
        (Kind::Compare, "Also write the full report as JSON (schema: docs/report.schema.json, \"compare\": \"c1\")"),
        (Kind::Check, "Also write the report as JSON (schema: docs/report.schema.json, \"check\": \"k1\")"),
        (Kind::Sensitivity, "Write the report as JSON"),
        (Kind::Eval, "Also write the figures as JSON"),
        (Kind::Quantize, "Also write every tensor's types and bytes, and the sizes, as JSON"),
    ],
    export_label: Some("Export JSON"),
    render: json::render,
};

/// A row per tensor (and per expert): a θ report's measurements, a compare report's pairs.
pub const CSV: Format = Format {
    name: "csv",
    extension: "csv",
    media_type: "text/csv",
    kinds: &[Kind::Measure, Kind::Compare, Kind::Sensitivity, Kind::Prediction],
    flag: &[
        (Kind::Measure, "Also write one CSV row per tensor"),
        (Kind::Compare, "Also write one CSV row per pair (and per expert of expert tensors)"),
        (Kind::Sensitivity, "Write one CSV line per tensor"),
    ],
    export_label: None,
    render: csv::render,
};

/// The self-contained static HTML page the app also draws from.
pub const HTML: Format = Format {
    name: "html",
    extension: "html",
    media_type: "text/html",
    kinds: &[Kind::Measure, Kind::Compare, Kind::Sensitivity],
    flag: &[
        (
            Kind::Measure,
            "Also write the report as one self-contained static HTML page (the browser app's export): opens \
             offline, fetches nothing, embeds the JSON",
        ),
        (
            Kind::Compare,
            "Also write the report as one self-contained static HTML page (the browser app's export, with the \
             1 − cos heatmap and the θ scatter): opens offline, embeds the JSON",
        ),
        (Kind::Sensitivity, "Write a static page: the layer × kind heatmap of measured sensitivity and the table"),
    ],
    export_label: Some("Export static HTML"),
    render: render_html,
};

/// A row per model of a θ report, in rank order, with mean θ per group.
pub const RANKING_CSV: Format = Format {
    name: "ranking-csv",
    extension: "csv",
    media_type: "text/csv",
    kinds: &[Kind::Measure],
    flag: &[(Kind::Measure, "Also write the ranking with per-group mean θ as CSV")],
    export_label: None,
    render: csv::render_ranking,
};

/// The text the CLI prints (and the API keeps as the job's `.txt`).
pub const TEXT: Format = Format {
    name: "text",
    extension: "txt",
    media_type: "text/plain; charset=utf-8",
    kinds: &[
        Kind::Measure,
        Kind::Compare,
        Kind::Check,
        Kind::Sensitivity,
        Kind::Prediction,
        Kind::Eval,
        Kind::Recipe,
        Kind::Quantize,
    ],
    flag: &[],
    export_label: None,
    render: text::render,
};

/// A recipe's `--tensor-type` lines, for `llama-quantize --tensor-type-file` (`organ
/// recipe --out`, a flag of its own).
pub const TENSOR_TYPES: Format = Format {
    name: "tensor-types",
    extension: "txt",
    media_type: "text/plain; charset=utf-8",
    kinds: &[Kind::Recipe],
    flag: &[],
    export_label: None,
    render: render_tensor_types,
};

/// Every format, in the order a command writes its files (the text last).
pub const FORMATS: &[Format] = &[JSON, CSV, HTML, RANKING_CSV, TENSOR_TYPES, TEXT];

/// The format named `name`, if any.
pub fn by_name(name: &str) -> Option<&'static Format> {
    FORMATS.iter().find(|f| f.name == name)
}

/// The formats that apply to reports of `kind`, in [`FORMATS`]' order.
pub fn for_kind(kind: Kind) -> impl Iterator<Item = &'static Format> {
    FORMATS.iter().filter(move |f| f.applies_to(kind))
}

/// The formats a command writing reports of `kind` offers as `--NAME FILE` flags, with
/// each flag's help, in [`FORMATS`]' order.
pub fn flags_for(kind: Kind) -> impl Iterator<Item = (&'static Format, &'static str)> {
    FORMATS.iter().filter_map(move |f| Some((f, f.flag_help(kind)?)))
}

fn render_tensor_types(report: AnyReport<'_>, _: &Shown, out: &mut dyn fmt::Write) -> fmt::Result {
    match report {
        AnyReport::Recipe(r) => super::recipe::tensor_types(r, out),
        _ => Ok(()),
    }
}

fn render_html(report: AnyReport<'_>, _: &Shown, out: &mut dyn fmt::Write) -> fmt::Result {
    match report {
        AnyReport::Measure(r) => out.write_str(&super::html::render(r)),
        AnyReport::Compare(r) => out.write_str(&super::render_compare(r)),
        AnyReport::Sensitivity(r) => super::sensitivity_html::render(r, out),
        AnyReport::Check(_)
        | AnyReport::Prediction(_)
        | AnyReport::Eval(_)
        | AnyReport::Surgery(_)
        | AnyReport::Recipe(_)
        | AnyReport::Quantize(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_flags() {
        for (i, f) in FORMATS.iter().enumerate() {
            assert!(FORMATS[..i].iter().all(|g| g.name != f.name), "{} twice", f.name);
            assert!(f.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'), "{}: not a flag's name", f.name);
            assert!(!f.kinds.is_empty(), "{} applies to nothing", f.name);
            assert!(f.flag.iter().all(|(k, _)| f.applies_to(*k)), "{}: a flag for a kind it does not render", f.name);
            assert!(f.flag.iter().all(|(_, h)| !h.ends_with('.')), "{}: clap's helps end without a period", f.name);
        }
        assert_eq!(by_name("ranking-csv").map(|f| f.extension), Some("csv"));
        assert!(by_name("xml").is_none());
        let check: alloc::vec::Vec<&str> = for_kind(Kind::Check).map(|f| f.name).collect();
        assert_eq!(check, ["json", "text"]);
        let flags: alloc::vec::Vec<&str> = flags_for(Kind::Measure).map(|(f, _)| f.name).collect();
        assert_eq!(flags, ["json", "csv", "html", "ranking-csv"]);
    }
}
