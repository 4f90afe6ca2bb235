//! A compare report's text (what `organ diff` prints): the two sides, the counts and the
//! metadata's, how the layers were lined up, the groups, the most changed tensors, the
//! names in one model only, and the metadata keys that differ.

use super::human_count;
use super::readable::{num, NAMES_SHOWN};
use crate::compare::meta::ValueShown;
use crate::compare::{most_changed, CompareReport};
use crate::gguf::display::printable;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

pub(super) fn compare(r: &CompareReport, top: usize, out: &mut dyn fmt::Write) -> fmt::Result {
    for (tag, s) in [("A", &r.a), ("B", &r.b)] {
        writeln!(
            out,
            "{tag}: {}  {}  {} params  {} tensors",
            printable(&s.model),
            printable(s.architecture.as_deref().unwrap_or("?")),
            human_count(s.parameters),
            s.tensors
        )?;
    }
    for w in &r.warnings {
        writeln!(out, "warning: {}", printable(w))?;
    }
    let c = &r.counts;
    writeln!(
        out,
        "\ncomparable {}  identical {}  changed {}  only in A {}  only in B {}  shape mismatch {}",
        c.comparable, c.identical, c.changed, c.only_in_a, c.only_in_b, c.shape_mismatch
    )?;
    if let Some(m) = &r.metadata {
        writeln!(out, "{}", m.counts.line())?;
    }
    if let Some(l) = &r.layers {
        writeln!(out, "{}", printable(&l.line()))?;
    }
    writeln!(out, "{}", super::SAME_POSITIONS)?;
    if !r.groups.is_empty() {
        writeln!(
            out,
            "\n  {:<10} {:>6} {:>9} {:>12} {:>12} {:>12}",
            "group", "pairs", "identical", "mean cos", "min cos", "mean rel_l2"
        )?;
        for g in &r.groups {
            writeln!(
                out,
                "  {:<10} {:>6} {:>9} {:>12} {:>12} {:>12}",
                g.group.name(),
                g.count,
                g.identical,
                num(g.cos_mean),
                num(g.cos_min),
                num(g.rel_l2_mean)
            )?;
        }
    }
    let changed = most_changed(&r.pairs);
    if !changed.is_empty() && top > 0 {
        writeln!(out, "\n  most changed ({} of {}):", changed.len().min(top), changed.len())?;
        writeln!(
            out,
            "  {:<40} {:<15} {:>12} {:>12} {:>11} {:>9}",
            "tensor", "type A→B", "cos", "rel_l2", "max_abs", "dθ°"
        )?;
        for p in changed.iter().take(top) {
            writeln!(
                out,
                "  {:<40} {:<15} {:>12} {:>12} {:>11} {:>9}",
                printable(&p.name),
                format!("{}→{}", p.type_a, p.type_b),
                num(p.cos),
                num(p.rel_l2),
                p.max_abs.map_or_else(|| "-".into(), |v| format!("{v:.4e}")),
                p.d_theta.map_or_else(|| "-".into(), |v| format!("{v:+.4}"))
            )?;
        }
    }
    let names = |out: &mut dyn fmt::Write, title: &str, names: Vec<String>| -> fmt::Result {
        let n = names.len();
        if n == 0 {
            return Ok(());
        }
        writeln!(out, "\n  {title} ({n}):")?;
        for s in names.iter().take(NAMES_SHOWN) {
            writeln!(out, "    {s}")?;
        }
        if n > NAMES_SHOWN {
            writeln!(out, "    … and {} more (all of them in --json)", n - NAMES_SHOWN)?;
        }
        Ok(())
    };
    let list = |v: &[String]| v.iter().map(|s| printable(s).into_owned()).collect();
    names(out, "only in A", list(&r.only_in_a))?;
    names(out, "only in B", list(&r.only_in_b))?;
    let shapes = r.shape_mismatch.iter().map(|s| format!("{}  A {:?}  B {:?}", printable(&s.name), s.a, s.b));
    names(out, "shape mismatch", shapes.collect())?;
    if let Some(m) = &r.metadata {
        let key = |k: &str, v: &ValueShown| format!("{}  {}", printable(k), shown(v));
        names(out, "metadata keys only in A", m.only_in_a.iter().map(|k| key(&k.key, &k.value)).collect())?;
        names(out, "metadata keys only in B", m.only_in_b.iter().map(|k| key(&k.key, &k.value)).collect())?;
        let changes = m
            .changed
            .iter()
            .map(|k| format!("{}\n      A  {}\n      B  {}", printable(&k.key), shown(&k.a), shown(&k.b)));
        names(out, "metadata keys changed", changes.collect())?;
    }
    Ok(())
}

/// A metadata value on one line ([`ValueShown::line`]), safe for a terminal.
fn shown(v: &ValueShown) -> String {
    printable(&v.line()).into_owned()
}
