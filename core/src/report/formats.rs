//! The report formats, in one registry: each [`Format`] says its name (the CLI's `--NAME`
//! flag, the API's output suffix), its file extension and media type, which reports it
//! applies to, whether the browser app offers it as an export, and how it renders. Every
//! face lists its formats from [`FORMATS`]: `organ measure`, `diff`, `check` and `report
//! merge` write the ones asked for, the API names its jobs' outputs by them, and the app
//! offers the ones marked for it.
//!
//! A new format is one file (its renderer, beside `json.rs`, `csv.rs`, `text.rs`) and one
//! line in [`FORMATS`].

pub use super::kinds::{AnyReport, Kind, Shown};
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
}

/// The full report as pretty JSON (schema: `docs/report.schema.json`).
pub const JSON: Format = Format {
    name: "json",
    extension: "json",
    media_type: "application/json",
    kinds: &[Kind::Measure, Kind::Compare, Kind::Check],
    export_label: Some("Export JSON"),
    render: json::render,
};

/// A row per tensor (and per expert): a θ report's measurements, a compare report's pairs.
pub const CSV: Format = Format {
    name: "csv",
    extension: "csv",
    media_type: "text/csv",
    kinds: &[Kind::Measure, Kind::Compare],
    export_label: None,
    render: csv::render,
};

/// The self-contained static HTML page the app also draws from.
pub const HTML: Format = Format {
    name: "html",
    extension: "html",
    media_type: "text/html",
    kinds: &[Kind::Measure, Kind::Compare],
    export_label: Some("Export static HTML"),
    render: render_html,
};

/// A row per model of a θ report, in rank order, with mean θ per group.
pub const RANKING_CSV: Format = Format {
    name: "ranking-csv",
    extension: "csv",
    media_type: "text/csv",
    kinds: &[Kind::Measure],
    export_label: None,
    render: csv::render_ranking,
};

/// The text the CLI prints (and the API keeps as the job's `.txt`).
pub const TEXT: Format = Format {
    name: "text",
    extension: "txt",
    media_type: "text/plain; charset=utf-8",
    kinds: &[Kind::Measure, Kind::Compare, Kind::Check],
    export_label: None,
    render: text::render,
};

/// Every format, in the order a command writes its files (the text last).
pub const FORMATS: &[Format] = &[JSON, CSV, HTML, RANKING_CSV, TEXT];

/// The format named `name`, if any.
pub fn by_name(name: &str) -> Option<&'static Format> {
    FORMATS.iter().find(|f| f.name == name)
}

/// The formats that apply to reports of `kind`, in [`FORMATS`]' order.
pub fn for_kind(kind: Kind) -> impl Iterator<Item = &'static Format> {
    FORMATS.iter().filter(move |f| f.applies_to(kind))
}

fn render_html(report: AnyReport<'_>, _: &Shown, out: &mut dyn fmt::Write) -> fmt::Result {
    match report {
        AnyReport::Measure(r) => out.write_str(&super::html::render(r)),
        AnyReport::Compare(r) => out.write_str(&super::render_compare(r)),
        AnyReport::Check(_) => Ok(()),
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
        }
        assert_eq!(by_name("ranking-csv").map(|f| f.extension), Some("csv"));
        assert!(by_name("xml").is_none());
        let check: alloc::vec::Vec<&str> = for_kind(Kind::Check).map(|f| f.name).collect();
        assert_eq!(check, ["json", "text"]);
    }
}
