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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_run_from_warm_to_cool() {
        assert_eq!(theta_color(0.0, 0.0, 90.0), "hsl(10,70%,62%)");
        assert_eq!(theta_color(90.0, 0.0, 90.0), "hsl(210,70%,48%)");
        assert_eq!(theta_color(200.0, 0.0, 90.0), theta_color(90.0, 0.0, 90.0));
    }
}
