//! The JSON format: the whole report, pretty-printed, with a final newline (what `--json`
//! writes; schema: `docs/report.schema.json`).

use super::kinds::{AnyReport, Shown};
use core::fmt;

/// Writes `report` as pretty JSON and a newline.
///
/// # Errors
/// `out` refused a write.
pub fn render(report: AnyReport<'_>, _: &Shown, out: &mut dyn fmt::Write) -> fmt::Result {
    match report {
        AnyReport::Measure(r) => pretty(r, out),
        AnyReport::Compare(r) => pretty(r, out),
        AnyReport::Check(r) => pretty(r, out),
        AnyReport::Sensitivity(r) => pretty(r, out),
        AnyReport::Prediction(r) => pretty(r, out),
        AnyReport::Eval(r) => pretty(&r.document().map_err(|_| fmt::Error)?, out),
        AnyReport::Surgery(r) => pretty(r, out),
        AnyReport::Recipe(r) => pretty(r, out),
        AnyReport::Quantize(r) => pretty(r, out),
    }?;
    out.write_char('\n')
}

/// `value` as serde_json's pretty JSON, streamed into `out` as it is serialized: a merged
/// report of a large fleet is never held twice (as itself and as its JSON).
#[cfg(feature = "std")]
fn pretty<T: serde::Serialize>(value: &T, out: &mut dyn fmt::Write) -> fmt::Result {
    /// serde_json writes whole characters at a time (escapes and number digits are
    /// ASCII; string runs end at an ASCII byte to escape or the string's end), so every
    /// piece is text.
    struct Text<'a>(&'a mut dyn fmt::Write);
    impl std::io::Write for Text<'_> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let s = core::str::from_utf8(b).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))?;
            self.0.write_str(s).map_err(|_| std::io::Error::other("the report's writer refused"))?;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer_pretty(Text(out), value).map_err(|_| fmt::Error)
}

/// `value` as serde_json's pretty JSON (without std, as one string first).
#[cfg(not(feature = "std"))]
fn pretty<T: serde::Serialize>(value: &T, out: &mut dyn fmt::Write) -> fmt::Result {
    out.write_str(&serde_json::to_string_pretty(value).map_err(|_| fmt::Error)?)
}
