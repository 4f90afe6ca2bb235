//! How numbers and θ are shown to people: byte counts, counts, and the θ colour scale
//! shared by the browser app and the static HTML page.

use alloc::format;
use alloc::string::String;

/// A byte count for people: `93.8 MiB`.
pub fn human_bytes(n: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{x:.1} {}", units[u])
    }
}

/// A count for people: `134.5 M`.
pub fn human_count(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.2} B", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1} M", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1} k", n as f64 / 1e3),
        n => format!("{n}"),
    }
}

/// The colour of θ on a scale from `lo` (warm: noise-like) to `hi` (cool: structured), as
/// a CSS `hsl()`.
pub fn theta_color(theta: f64, lo: f64, hi: f64) -> String {
    let x = if hi > lo { ((theta - lo) / (hi - lo)).clamp(0.0, 1.0) } else { 0.5 };
    let hue = 10.0 + 200.0 * x;
    format!("hsl({hue:.0},70%,{:.0}%)", 62.0 - 14.0 * x)
}

/// The colour of a cell or pair whose bytes are identical: outside the scale of
/// [`diff_color`], so "no change at all" never looks like "a tiny change".
pub const IDENTICAL_COLOR: &str = "#dfe3e8";

/// The colour of a change `d` (1 − cos, or any positive figure spanning decades) on a
/// logarithmic scale from `lo` (pale: a tiny change) to `hi` (deep red: a large one), as a
/// CSS `hsl()`. `d` at or below 0 takes `lo`'s colour.
pub fn diff_color(d: f64, lo: f64, hi: f64) -> String {
    let x = diff_position(d, lo, hi);
    format!("hsl({:.0},{:.0}%,{:.0}%)", 55.0 - 55.0 * x, 75.0 + 10.0 * x, 86.0 - 42.0 * x)
}

/// Where `d` lies between `lo` and `hi` on a log scale, from 0 to 1 (0.5 for an empty scale).
pub fn diff_position(d: f64, lo: f64, hi: f64) -> f64 {
    if !(lo > 0.0 && hi > lo) {
        return 0.5;
    }
    if d.is_nan() || d <= lo {
        return 0.0;
    }
    let (a, b) = (libm::log10(lo), libm::log10(hi));
    ((libm::log10(d) - a) / (b - a)).clamp(0.0, 1.0)
}

/// A figure that spans decades, for people: `3.2e-5`; `0` for zero; empty for none.
pub fn sci(v: Option<f64>) -> String {
    match v {
        None => String::new(),
        Some(0.0) => "0".into(),
        Some(x) => format!("{x:.1e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_a_decade_apart_get_different_colours() {
        assert_eq!(diff_position(1e-6, 1e-6, 1e-2), 0.0);
        assert!((diff_position(1e-4, 1e-6, 1e-2) - 0.5).abs() < 1e-12);
        assert_eq!(diff_position(1.0, 1e-6, 1e-2), 1.0);
        assert_eq!(diff_position(0.0, 1e-6, 1e-2), 0.0);
        assert_eq!(diff_position(f64::NAN, 1e-6, 1e-2), 0.0);
        assert_eq!(diff_position(1e-3, 0.0, 1.0), 0.5);
        assert_ne!(diff_color(1e-6, 1e-6, 1e-2), diff_color(1e-5, 1e-6, 1e-2));
        assert_ne!(diff_color(1e-6, 1e-6, 1e-2), IDENTICAL_COLOR);
        assert_eq!(sci(Some(3.21e-5)), "3.2e-5");
        assert_eq!(sci(Some(0.0)), "0");
        assert_eq!(sci(None), "");
    }

    #[test]
    fn colours_run_from_warm_to_cool() {
        assert_eq!(theta_color(0.0, 0.0, 90.0), "hsl(10,70%,62%)");
        assert_eq!(theta_color(90.0, 0.0, 90.0), "hsl(210,70%,48%)");
        assert_eq!(theta_color(200.0, 0.0, 90.0), theta_color(90.0, 0.0, 90.0));
    }
}
