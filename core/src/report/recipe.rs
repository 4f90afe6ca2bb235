//! A recipe's report (`organ recipe`; [`crate::recipe::report::Recipe`], made by
//! [`crate::recipe::choose`]) rendered: its JSON is the table (`--json`), its text the
//! table as printed, and its tensor-type form the `--tensor-type` lines
//! `llama-quantize --tensor-type-file` reads (`--out`).

use crate::gguf::display::printable;
pub use crate::recipe::report::{Additivity, Applied, Recipe, Row};
use alloc::format;
use alloc::string::String;
use core::fmt;

/// The table and the totals, then what `--apply` made, when it ran.
///
/// # Errors
/// `out` refused a write.
pub fn text(r: &Recipe, out: &mut dyn fmt::Write) -> fmt::Result {
    // Names and paths come from the model: escaped as every other report prints them.
    writeln!(out, "recipe for {} ({}), {}", printable(&r.model), printable(&r.source), r.target)?;
    // A predicted recipe says which predictor each tensor's losses came from.
    let by = r.tensors.iter().any(|t| t.predictor.is_some());
    let wide = r.tensors.iter().filter_map(|t| t.predictor.as_ref().map(|p| printable(p).chars().count())).max();
    let w = wide.unwrap_or(0).max(14);
    let by_head = if by { format!(" {:<w$}", "by") } else { String::new() };
    writeln!(out, "{:<36} {:>6} {:>6} {:>11} {:>11}{by_head}  why", "tensor", "from", "type", "bytes", "pred. KLD")?;
    for t in &r.tensors {
        let by = match (by, &t.predictor) {
            (true, p) => format!(" {:<w$}", printable(p.as_deref().unwrap_or("none"))),
            (false, _) => String::new(),
        };
        writeln!(
            out,
            "{:<36} {:>6} {:>6} {:>11} {:>11.4e}{by}  {}",
            printable(&t.name),
            t.from.name(),
            t.ty.name(),
            t.bytes,
            t.cost,
            t.why
        )?;
    }
    // The budget in the bytes it counts: a size's is what the header leaves for the tensors
    // (each padded), a bpw's the tensors' data.
    let counts = if r.account == "file" { "for the tensors, padded, beside the header" } else { "of tensor data" };
    writeln!(
        out,
        "total: {} tensor bytes ({:.4} bpw), file {} bytes (header {}); budget {} bytes {counts}, {} used",
        r.tensor_bytes, r.bpw, r.file_bytes, r.header_bytes, r.budget, r.charged
    )?;
    writeln!(
        out,
        "predicted KLD (sum of single-tensor KLDs): {:.5} (no recipe within the budget below {:.5}); λ = {:.3e}/byte",
        r.predicted_kld, r.lower_bound, r.lambda
    )?;
    match &r.applied {
        Some(a) => applied_text(a, out),
        None => Ok(()),
    }
}

/// What `--apply` made and, with a measured source, the additivity check (the text's
/// end, which a face prints once the model is made).
///
/// # Errors
/// `out` refused a write.
pub fn applied_text(a: &Applied, out: &mut dyn fmt::Write) -> fmt::Result {
    writeln!(out, "applied: {} ({} bytes, by {})", printable(&a.out), a.file_bytes, a.quantizer)?;
    if let Some(tool) = &a.checked_with {
        writeln!(out, "llama-quantize wrote the same bytes: {}", printable(tool))?;
    }
    if let Some(e) = &a.eval {
        crate::judge::evaluation_text(e, out)?;
    }
    if let Some(v) = &a.verdict {
        writeln!(out, "verdict: {} ({})", v.verdict.name(), v.reason)?;
    }
    if let Some(x) = &a.additivity {
        let why = "the sum of its tensors' own: at this size their errors do not add up, so the recipe was \
                   chosen on losses that do not hold here";
        held(out, "additivity: sum of single-tensor KLDs", x, why)?;
    }
    if let Some(x) = &a.prediction {
        let why = "the prediction: the predicted losses rank the tensors but do not give this recipe's loss; for \
                   a recipe chosen on measured losses, run `organ sensitivity` and then `organ recipe --from`";
        held(out, "prediction: predicted KLD", x, why)?;
    }
    Ok(())
}

/// A sum of single-tensor losses (`what`) held against the recipe's measured KL
/// divergence, and the warning, ending "… is R× `why`", when they are far apart.
fn held(out: &mut dyn fmt::Write, what: &str, x: &Additivity, why: &str) -> fmt::Result {
    writeln!(
        out,
        "{what} {:.5}, measured KLD of the recipe {:.5} ± {:.5} (ratio {:.3})",
        x.sum_single, x.measured, x.measured_error, x.ratio
    )?;
    if x.far() {
        writeln!(out, "warning: the recipe's measured KL divergence is {:.2}× {why}", x.ratio)?;
    }
    Ok(())
}

/// The `--tensor-type` lines, one a line (`llama-quantize --tensor-type-file`); a recipe
/// without one is an empty line.
///
/// # Errors
/// `out` refused a write.
pub fn tensor_types(r: &Recipe, out: &mut dyn fmt::Write) -> fmt::Result {
    writeln!(out, "{}", r.lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ggml_type::GgmlType;
    use alloc::string::String;
    use alloc::vec;

    /// A tensor name and a model label with a terminal's escape sequences (an OSC title, a
    /// colour, CR and LF) are printed escaped (before: raw, to the terminal and the API's
    /// recipe.txt).
    #[test]
    fn control_characters_in_names_are_escaped() {
        let hostile = "blk.0.attn_norm.weight\u{1b}]0;owned\u{7}\r\n\u{1b}[31m";
        let row = Row {
            name: hostile.into(),
            from: GgmlType::F32,
            ty: GgmlType::F32,
            bytes: 4,
            cost: 0.0,
            why: "kept".into(),
            predictor: None,
        };
        let r = Recipe {
            recipe: 1,
            model: "m\u{1b}[2J.gguf".into(),
            source: "data-free".into(),
            target: "8 bpw".into(),
            budget: 1,
            account: "data",
            charged: 1,
            header_bytes: 1,
            file_bytes: 1,
            tensor_bytes: 1,
            bpw: 8.0,
            predicted_kld: 0.0,
            lower_bound: 0.0,
            lambda: 0.0,
            tensors: vec![row],
            lines: vec![],
            applied: None,
        };
        let mut text = String::new();
        super::text(&r, &mut text).unwrap();
        assert!(!text.contains(['\u{1b}', '\u{7}', '\r']), "{text:?}");
        assert_eq!(text.lines().count(), 5, "the name's LF starts no line: {text:?}");
        assert!(text.contains(r"blk.0.attn_norm.weight\u{1b}]0;owned\u{7}\r\n\u{1b}[31m"), "{text}");
        assert!(text.contains(r"m\u{1b}[2J.gguf"), "{text}");
    }
}
