//! The JSON format: the whole report, pretty-printed, with a final newline (what `--json`
//! writes; schema: `docs/report.schema.json`).

use super::formats::{AnyReport, Shown};
use core::fmt;

/// Writes `report` as pretty JSON and a newline.
///
/// # Errors
/// `out` refused a write.
pub fn render(report: AnyReport<'_>, _: &Shown, out: &mut dyn fmt::Write) -> fmt::Result {
    // Serializing plain data structures cannot fail.
    let json = match report {
        AnyReport::Measure(r) => serde_json::to_string_pretty(r),
        AnyReport::Compare(r) => serde_json::to_string_pretty(r),
        AnyReport::Check(r) => serde_json::to_string_pretty(r),
    };
    out.write_str(&json.map_err(|_| fmt::Error)?)?;
    out.write_char('\n')
}
