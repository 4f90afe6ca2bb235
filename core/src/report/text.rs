//! The text format: what `organ measure`, `organ diff` and `organ check` print (and the
//! API keeps as a job's `.txt`). A θ report's text shows each model's summary, its tensors
//! and experts (unless `summary_only`), its groups and wells, then the models side by side
//! and their ranking; a compare report's, the counts, the groups, the most changed tensors
//! and the names in one model only; a check report's, every finding and the verdict.

use super::csv::{has_sigma, json_name};
use super::kinds::{AnyReport, Mark, Shown};
use super::readable::NAMES_SHOWN;
use super::{human_count, ModelReport, Report, TensorReport};
use crate::anatomy::{Group, OrganKind};
use crate::check::{CheckReport, Severity};
use crate::gguf::display::printable;
use crate::judge::Grade;
use crate::zmeasure::experts::median;
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

/// Writes `report` as the text the CLI prints, as much of it as `shown` says.
///
/// # Errors
/// `out` refused a write.
pub fn render(report: AnyReport<'_>, shown: &Shown, out: &mut dyn fmt::Write) -> fmt::Result {
    match report {
        AnyReport::Measure(r) => measure(r, shown, out),
        AnyReport::Compare(r) => super::compare_text::compare(r, shown.top, out),
        AnyReport::Check(r) => check(r, shown, out),
        AnyReport::Sensitivity(r) => super::sensitivity_text::measured(r, out),
        AnyReport::Prediction(r) => super::sensitivity_text::predicted(r, out),
        AnyReport::Eval(r) => eval(r, shown, out),
        // No text: a surgery prints what it does as it does it.
        AnyReport::Surgery(_) => Ok(()),
        AnyReport::Recipe(r) => super::recipe::text(r, out),
        AnyReport::Quantize(r) => super::quantize::text(r, out),
    }
}

fn opt(v: Option<f64>, width: usize, prec: usize) -> String {
    v.map_or_else(|| format!("{:>width$}", "-"), |v| format!("{v:>width$.prec$}"))
}

/// ` ± σ°` after a θ, when the report carries σ; nothing otherwise.
fn pm(sigma: Option<f64>, width: usize) -> String {
    sigma.map_or_else(String::new, |s| format!(" ±{s:>width$.4}°"))
}

fn measure(report: &Report, shown: &Shown, out: &mut dyn fmt::Write) -> fmt::Result {
    let sigma = has_sigma(report);
    if report.measure != crate::zmeasure::MEASURE {
        writeln!(out, "measure: {} (θ over every value, no sampling)\n", report.measure)?;
    }
    for m in &report.models {
        let s = &m.summary;
        let types: Vec<String> = m.types.iter().map(|(t, n)| format!("{t}×{n}")).collect();
        match &m.adapter {
            Some(a) => writeln!(
                out,
                "{}  {}  {}; rows are the updates ΔW = (α/r)·B·A, {} values",
                printable(&m.model),
                printable(m.architecture.as_deref().unwrap_or("?")),
                super::readable::adapter_facts(a),
                human_count(m.parameters),
            )?,
            None => writeln!(
                out,
                "{}  {}  {} params  {} tensors ({})",
                printable(&m.model),
                printable(m.architecture.as_deref().unwrap_or("?")),
                human_count(m.parameters),
                s.tensors,
                types.join(", ")
            )?,
        }
        if s.tensors == 0 {
            // A vocabulary-only GGUF (llama.cpp's vocab files) or a header with no tensor:
            // nothing to measure, and the zeros below are no figure.
            writeln!(
                out,
                "  no tensors: nothing to measure (a vocabulary-only GGUF?); its θ figures are 0 by convention"
            )?;
        }
        writeln!(
            out,
            "  θ_mean {:.4}°{}  θ_weighted {:.4}°  signal (mean sin θ) {:.4}  (measured {}, degenerate {}, not measurable {})",
            s.theta_mean,
            s.theta_mean_sigma.map_or_else(String::new, |x| format!(" ± {x:.4}°")),
            s.theta_weighted,
            s.signal,
            s.measured,
            s.degenerate,
            s.not_measurable
        )?;
        if !shown.summary_only {
            write!(out, "\n  {:<40} {:<9} {:>5} {:<7} {:>9}", "tensor", "group", "layer", "type", "θ°")?;
            if sigma {
                write!(out, " {:>8}", "σ°")?;
            }
            write!(out, " {:>8} {:>10} {:>9}", "H", "K", "cv")?;
            let adapter = m.adapter.is_some();
            let base = m.adapter.as_ref().is_some_and(|a| a.base.is_some());
            if adapter {
                write!(out, " {:>5} {:>9}", "rank", "‖ΔW‖_F")?;
            }
            if base {
                write!(out, " {:>10}", "‖ΔW‖/‖W‖")?;
            }
            writeln!(out)?;
            for t in &m.tensors {
                let layer = t.layer.map_or_else(|| "-".into(), |l| l.to_string());
                let sigma_col = if sigma { format!(" {}", opt(t.sigma, 8, 4)) } else { String::new() };
                write!(
                    out,
                    "  {:<40} {:<9} {:>5} {:<7} {}{} {} {} {}",
                    printable(&t.name),
                    t.group.name(),
                    layer,
                    t.ty,
                    opt(t.theta, 9, 4),
                    sigma_col,
                    opt(t.entropy, 8, 4),
                    opt(t.kurtosis, 10, 3),
                    opt(t.cv, 9, 3)
                )?;
                if let (true, Some(u)) = (adapter, &t.update) {
                    let (frobenius, relative) = super::readable::update_figures(u);
                    write!(out, " {:>5} {frobenius:>9}", u.rank)?;
                    if base {
                        write!(out, " {:>10}", relative.as_deref().unwrap_or("-"))?;
                    }
                }
                writeln!(out)?;
            }
        }
        // Asked for with --experts, so kept by --summary-only, which drops the tensor rows.
        experts(m, out)?;
        writeln!(out, "\n  {:<10} {:>6} {:>9} {:>9} {:>9}", "group", "count", "mean θ°", "min θ°", "max θ°")?;
        for g in &s.groups {
            writeln!(out, "  {:<10} {:>6} {:>9.4} {:>9.4} {:>9.4}", g.group.name(), g.count, g.mean, g.min, g.max)?;
        }
        let (wells, which) = if shown.all_wells {
            (super::summary::wells(&m.tensors, true, shown.wells), "all tensors")
        } else {
            (
                super::summary::wells(&m.tensors, false, shown.wells),
                "weight matrices; --all-wells adds norms and routers",
            )
        };
        writeln!(out, "\n  wells (lowest θ among {which}):")?;
        for (i, w) in wells.iter().enumerate() {
            writeln!(
                out,
                "  {:>3}. {:<40} {:<9} {:>9.4}°{}",
                i + 1,
                printable(&w.name),
                w.group.name(),
                w.theta,
                pm(w.sigma, 7)
            )?;
        }
        writeln!(out)?;
    }
    if report.models.len() > 1 {
        writeln!(out, "per group, mean θ° across models:")?;
        let groups: Vec<Group> = Group::ALL
            .into_iter()
            .filter(|g| report.models.iter().any(|m| m.summary.groups.iter().any(|x| x.group == *g)))
            .collect();
        write!(out, "  {:<44}", "model")?;
        for g in &groups {
            write!(out, " {:>9}", g.name())?;
        }
        writeln!(out)?;
        for r in &report.ranking {
            let Some(m) = report.models.iter().find(|m| m.model == r.model) else { continue };
            write!(out, "  {:<44}", printable(&m.model))?;
            for g in &groups {
                match m.summary.groups.iter().find(|x| x.group == *g) {
                    Some(x) => write!(out, " {:>9.4}", x.mean)?,
                    None => write!(out, " {:>9}", "-")?,
                }
            }
            writeln!(out)?;
        }
        writeln!(out)?;
        writeln!(out, "ranking ({} models, by θ_mean):", report.models.len())?;
        write!(out, "  {:>4}  {:<44} {:>9} {:>9}", "rank", "model", "params", "θ_mean°")?;
        if sigma {
            write!(out, " {:>9}", "σ°")?;
        }
        let measured = report.ranking.iter().any(|r| r.measured.is_some());
        write!(out, " {:>9} {:>8}", "signal", "tensors")?;
        if measured {
            write!(out, "  measured")?;
        }
        writeln!(out)?;
        for r in &report.ranking {
            write!(
                out,
                "  {:>4}  {:<44} {:>9} {:>9.4}",
                r.rank,
                printable(&r.model),
                human_count(r.parameters),
                r.theta_mean
            )?;
            if sigma {
                write!(out, " {}", opt(r.theta_mean_sigma, 9, 4))?;
            }
            write!(out, " {:>9.4} {:>8}", r.signal, r.tensors)?;
            if measured {
                let m = r.measured.as_ref().map_or_else(|| "-".to_owned(), super::schema::Measured::short);
                // Padded only when the ≈ mark follows: no line ends in blanks.
                if r.distinguishable_from_next == Some(false) {
                    write!(out, "  {m:<20}")?;
                } else {
                    write!(out, "  {m}")?;
                }
            }
            if r.distinguishable_from_next == Some(false) {
                write!(out, "  ≈ next (within 2σ)")?;
            }
            writeln!(out)?;
        }
        if report.ranking.iter().any(|r| r.distinguishable_from_next == Some(false)) {
            writeln!(out, "  ≈: θ_mean within twice the larger σ of the next model's: not distinguishable")?;
        }
        for line in wrap(super::RANKING_NOTE, 96) {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(())
}

/// The text report's experts section of one model: per expert tensor, the median θ and
/// every expert's θ (`*` an outlier beyond the noise, `?` one over 3 MAD whose noise was not
/// measured, `=k` a copy of expert k: [`crate::zmeasure::experts::Standing`]); then the
/// routers and shared experts, named as such.
fn experts(m: &ModelReport, out: &mut dyn fmt::Write) -> fmt::Result {
    use crate::zmeasure::experts::{slices_sampled, standings, Standing};
    let tensors: Vec<&TensorReport> = m.tensors.iter().filter(|t| t.experts.is_some()).collect();
    if tensors.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\n  experts (θ° of each expert measured alone; * outlier: over 3 MAD from the median and beyond twice its σ; \
         ? over 3 MAD, noise not measured (--sigma); =k byte-identical to expert k, never an outlier):"
    )?;
    for t in tensors {
        let x = t.experts.as_deref().unwrap_or_default();
        let thetas: Vec<f64> = x.iter().map(|x| x.theta).collect();
        let marks = standings(x, slices_sampled(t.n_elements, t.sampled, x.len() as u64));
        let count = |s: Standing| marks.iter().filter(|m| **m == s).count();
        let unconfirmed = count(Standing::Unconfirmed);
        let unconfirmed = if unconfirmed > 0 { format!(" (and {unconfirmed} ?)") } else { String::new() };
        let dups = x.iter().filter(|x| x.duplicate_of.is_some()).count();
        writeln!(
            out,
            "  {:<40} {} experts  median {:.4}°  outliers {}{unconfirmed}  duplicates {dups}",
            printable(&t.name),
            x.len(),
            median(&thetas),
            count(Standing::Outlier),
        )?;
        for line in x.iter().zip(&marks).collect::<Vec<_>>().chunks(6) {
            let cells: Vec<String> = line
                .iter()
                .map(|(x, mark)| {
                    let sigma = x.sigma.map_or_else(String::new, |s| format!("±{s:.3}"));
                    let dup = x.duplicate_of.map_or_else(String::new, |d| format!("={d}"));
                    let flag = match mark {
                        Standing::Outlier => "*",
                        Standing::Unconfirmed => "?",
                        Standing::Typical | Standing::Copy | Standing::WithinNoise => "",
                    };
                    format!("{:>4}: {:>8.4}{sigma}{dup}{flag:<3}", x.expert, x.theta)
                })
                .collect();
            writeln!(out, "   {}", cells.join(" ").trim_end())?;
        }
    }
    for t in m.tensors.iter().filter(|t| matches!(t.organ, Some(OrganKind::Router | OrganKind::SharedExpert))) {
        let kind = if t.organ == Some(OrganKind::Router) { "router" } else { "shared expert" };
        let theta = t.theta.map_or_else(|| "-".to_owned(), |v| format!("{v:.4}°"));
        writeln!(out, "  {:<40} {kind:<13} {theta}", printable(&t.name))?;
    }
    Ok(())
}

/// `text`'s words in lines of at most `width` characters (a longer word stands alone).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

/// How many findings of one severity and kind the text prints in full.
const FINDINGS_SHOWN: usize = 3;

/// An evaluation's figures, then its verdict against the base when it has one, the grade
/// marked.
fn eval(r: &crate::judge::EvalReport, shown: &Shown, out: &mut dyn fmt::Write) -> fmt::Result {
    crate::judge::evaluation_text(&r.evaluation, out)?;
    if let Some((g, reason, _)) = &r.verdict {
        let mark = match g {
            Grade::Close => Mark::Good,
            Grade::Changed => Mark::Note,
            Grade::Degraded => Mark::Warn,
            Grade::Broken => Mark::Bad,
        };
        writeln!(out, "verdict: {} ({reason})", shown.mark(mark, g.name()))?;
    }
    Ok(())
}

fn check(r: &CheckReport, shown: &Shown, out: &mut dyn fmt::Write) -> fmt::Result {
    writeln!(
        out,
        "{}  {}  {} tensors  {} bytes scanned",
        printable(&r.model),
        printable(r.architecture.as_deref().unwrap_or("?")),
        r.tensors,
        human_count(r.bytes_scanned)
    )?;
    if !r.findings.is_empty() {
        writeln!(out)?;
    }
    // Findings of one severity and kind together, in the order each first appears; past
    // FINDINGS_SHOWN of them, one line counts and names the rest (a pruned MoE's thirty zero
    // routers are one story, not thirty lines).
    let mut groups: Vec<Vec<&crate::check::Finding>> = Vec::new();
    for f in &r.findings {
        match groups.iter_mut().find(|g| g[0].severity == f.severity && g[0].kind == f.kind) {
            Some(g) => g.push(f),
            None => groups.push(alloc::vec![f]),
        }
    }
    for g in groups {
        let (sev, mark) = match g[0].severity {
            Severity::Error => ("error", Some(Mark::Bad)),
            Severity::Warning => ("warning", Some(Mark::Warn)),
            Severity::Info => ("info", None),
        };
        // The word marked, padded as the plain word is: an escape takes no column.
        let sev = match mark {
            Some(m) => format!("{}{:pad$}", shown.mark(m, sev), "", pad = 7usize.saturating_sub(sev.len())),
            None => format!("{sev:<7}"),
        };
        let kind = json_name(g[0].kind);
        for f in g.iter().take(FINDINGS_SHOWN) {
            let subject = if f.subject.is_empty() { String::new() } else { format!("{}: ", printable(&f.subject)) };
            writeln!(out, "  {sev} {kind:<16} {subject}{}", printable(&f.message))?;
        }
        if g.len() > FINDINGS_SHOWN {
            let rest = &g[FINDINGS_SHOWN..];
            let names: Vec<String> =
                rest.iter().take(NAMES_SHOWN).map(|f| printable(&f.subject).into_owned()).collect();
            let more = if rest.len() > NAMES_SHOWN { ", …" } else { "" };
            writeln!(
                out,
                "  {sev} {kind:<16} … and {} more like these: {}{more} (each in --json)",
                rest.len(),
                names.join(", ")
            )?;
        }
    }
    let c = &r.counts;
    let verdict = if c.error > 0 { shown.mark(Mark::Bad, "BROKEN") } else { shown.mark(Mark::Good, "ok") };
    let shapes = if r.shapes_checked { "shapes checked" } else { "shapes not checked" };
    writeln!(out, "\n{verdict}: {} errors, {} warnings, {} notes ({shapes})", c.error, c.warning, c.info)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Counts, Finding, Kind};

    #[test]
    fn repeated_findings_of_a_kind_are_counted_and_named_not_listed() {
        let f = |severity, kind, subject: String| Finding { severity, kind, subject, message: String::from("m") };
        let mut findings: Vec<Finding> =
            (0..30).map(|l| f(Severity::Error, Kind::AllZero, format!("blk.{l}.ffn_gate_inp.weight"))).collect();
        findings.insert(1, f(Severity::Info, Kind::Duplicate, String::from("blk.1.attn_norm.weight")));
        let r = CheckReport {
            check: String::new(),
            generator: String::new(),
            model: String::from("m.gguf"),
            architecture: None,
            shapes_checked: true,
            tensors: 31,
            bytes_scanned: 0,
            counts: Counts { error: 30, warning: 0, info: 1 },
            findings,
            scans: Vec::new(),
        };
        let mut out = String::new();
        check(&r, &Shown::WHOLE, &mut out).unwrap();
        let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("  ")).collect();
        assert_eq!(lines.len(), 5, "{out}");
        assert!(lines[0].contains("blk.0.ffn_gate_inp.weight") && lines[2].contains("blk.2."), "{out}");
        assert!(
            lines[3].contains("… and 27 more like these: blk.3.ffn_gate_inp.weight, ")
                && lines[3].contains("blk.12.ffn_gate_inp.weight, … (each in --json)"),
            "{out}"
        );
        assert!(lines[4].starts_with("  info    duplicate") && lines[4].contains("blk.1.attn_norm.weight"), "{out}");
        assert!(out.contains("BROKEN: 30 errors"), "{out}");
    }

    #[test]
    fn a_note_wraps_at_word_boundaries() {
        let lines = wrap("θ_mean: the mean θ of the tensors; neither measures quality", 20);
        assert_eq!(lines, ["θ_mean: the mean θ", "of the tensors;", "neither measures", "quality"]);
        assert!(wrap(super::super::RANKING_NOTE, 96).iter().all(|l| l.chars().count() <= 96));
        assert_eq!(wrap("", 10), Vec::<String>::new());
    }
}
