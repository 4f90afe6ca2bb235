//! How numbers and θ are shown to people: byte counts, counts, and the θ colour scale
//! shared by the browser app and the static HTML page.

use crate::gguf::display::printable;
use alloc::format;
use alloc::string::{String, ToString};

/// An adapter's facts for people, as every report's header line says them: `LoRA
/// adapter: 6 pairs, rank 8, α 16, against the base NAME` (`ranks 4, 8` when its pairs
/// differ).
pub fn adapter_facts(a: &crate::report::adapter::Facts) -> String {
    let ranks = match a.ranks.as_slice() {
        [one] => format!("rank {one}"),
        r => format!("ranks {}", r.iter().map(u64::to_string).collect::<alloc::vec::Vec<_>>().join(", ")),
    };
    format!(
        "LoRA adapter: {} pairs, {ranks}, {}{}",
        a.pairs,
        a.alpha.map_or_else(|| "α missing".into(), |x| format!("α {x}")),
        a.base.as_deref().map_or_else(String::new, |b| format!(", against the base {}", printable(b))),
    )
}

/// An update's ‖ΔW‖_F and ‖ΔW‖/‖W‖ (`None` without a base, or with a zero weight) for
/// people, as every report's table shows them.
pub fn update_figures(u: &crate::report::adapter::Update) -> (String, Option<String>) {
    (format!("{:.4}", u.frobenius), u.relative().map(|r| format!("{r:.5}")))
}

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

/// Viridis (matplotlib's perceptual scale) at ten evenly spaced points, as sRGB: its
/// lightness rises evenly from end to end and it reads the same to colour-blind eyes.
const VIRIDIS: [[u8; 3]; 10] = [
    [0x44, 0x01, 0x54],
    [0x48, 0x28, 0x78],
    [0x3e, 0x49, 0x89],
    [0x31, 0x68, 0x8e],
    [0x26, 0x82, 0x8e],
    [0x1f, 0x9e, 0x89],
    [0x35, 0xb7, 0x79],
    [0x6e, 0xce, 0x58],
    [0xb5, 0xde, 0x2b],
    [0xfd, 0xe7, 0x25],
];

/// The θ scale's ends, fixed for every report so that colours compare across reports and
/// across tensors: 0° (noise) and 90° (structure).
pub const THETA_SCALE: (f64, f64) = (0.0, 90.0);

/// The colour at `x` (0 to 1, clamped; NaN is 0) of a scale given by evenly spaced stops,
/// interpolated linearly between them.
pub(crate) fn ramp(stops: &[[u8; 3]], x: f64) -> [u8; 3] {
    let Some(last) = stops.len().checked_sub(1) else { return [0; 3] };
    let x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) } * last as f64;
    // x is in [0, last]: the cast is exact for the integer part.
    let i = (libm::floor(x) as usize).min(last.saturating_sub(1));
    let f = x - i as f64;
    let (a, b) = (stops[i], stops[(i + 1).min(last)]);
    core::array::from_fn(|k| libm::round(f64::from(a[k]) + (f64::from(b[k]) - f64::from(a[k])) * f) as u8)
}

/// A colour as CSS: `#rrggbb`.
pub fn hex(c: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// θ's colour as sRGB, on viridis fixed from 0° (dark purple) to 90° (yellow); outside
/// that range the nearest end.
pub fn theta_rgb(theta: f64) -> [u8; 3] {
    let (lo, hi) = THETA_SCALE;
    ramp(&VIRIDIS, (theta - lo) / (hi - lo))
}

/// θ's colour as CSS (see [`theta_rgb`]).
pub fn theta_color(theta: f64) -> String {
    hex(theta_rgb(theta))
}

/// The CSS `background` of the θ scale's legend: every stop of the scale from 0° to 90°.
pub fn theta_legend() -> String {
    let stops: alloc::vec::Vec<String> = (VIRIDIS.iter().enumerate())
        .map(|(i, c)| format!("{} {:.0}%", hex(*c), 100.0 * i as f64 / (VIRIDIS.len() - 1) as f64))
        .collect();
    format!("linear-gradient(90deg,{})", stops.join(","))
}

/// The WCAG 2 relative luminance of an sRGB colour, from 0 (black) to 1 (white).
pub fn relative_luminance(c: [u8; 3]) -> f64 {
    let lin = |v: u8| {
        let s = f64::from(v) / 255.0;
        if s <= 0.04045 {
            s / 12.92
        } else {
            libm::pow((s + 0.055) / 1.055, 2.4)
        }
    };
    0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2])
}

/// The WCAG 2 contrast ratio of two colours, from 1 (the same) to 21 (black on white).
pub fn contrast_ratio(a: [u8; 3], b: [u8; 3]) -> f64 {
    let (x, y) = (relative_luminance(a), relative_luminance(b));
    (x.max(y) + 0.05) / (x.min(y) + 0.05)
}

/// Black and white, the two colours text on a coloured cell is written in.
pub const BLACK: [u8; 3] = [0; 3];
/// See [`BLACK`].
pub const WHITE: [u8; 3] = [255; 3];

/// The text colour for a cell of background `bg`: black or white, whichever contrasts
/// more. One of them always reaches 4.58:1 (they tie at a luminance of 0.179), above the
/// 4.5:1 WCAG asks of normal text.
pub fn ink(bg: [u8; 3]) -> [u8; 3] {
    if contrast_ratio(bg, BLACK) >= contrast_ratio(bg, WHITE) {
        BLACK
    } else {
        WHITE
    }
}

/// The CSS for a cell of background `bg`: the background and its [`ink`].
pub fn cell_style(bg: [u8; 3]) -> String {
    format!("background:{};color:{}", hex(bg), hex(ink(bg)))
}

/// The colour of a cell or pair whose bytes are identical: outside the scale of
/// [`diff_color`], so "no change at all" never looks like "a tiny change".
pub const IDENTICAL_COLOR: &str = "#dfe3e8";

/// ColorBrewer's single-hue Oranges, sequential from pale to deep (9 classes): the σ scale.
pub(crate) const SIGMA_STOPS: [[u8; 3]; 9] = [
    [0xff, 0xf5, 0xeb],
    [0xfe, 0xe6, 0xce],
    [0xfd, 0xd0, 0xa2],
    [0xfd, 0xae, 0x6b],
    [0xfd, 0x8d, 0x3c],
    [0xf1, 0x69, 0x13],
    [0xd9, 0x48, 0x01],
    [0xa6, 0x36, 0x03],
    [0x7f, 0x27, 0x04],
];

/// ColorBrewer's YlOrRd, sequential from pale yellow to deep red (9 classes): the scale of
/// changes (1 − cos, KL divergence).
pub(crate) const DIFF_STOPS: [[u8; 3]; 9] = [
    [0xff, 0xff, 0xcc],
    [0xff, 0xed, 0xa0],
    [0xfe, 0xd9, 0x76],
    [0xfe, 0xb2, 0x4c],
    [0xfd, 0x8d, 0x3c],
    [0xfc, 0x4e, 0x2a],
    [0xe3, 0x1a, 0x1c],
    [0xbd, 0x00, 0x26],
    [0x80, 0x00, 0x26],
];

/// The colour of a σ on a scale from 0 (pale) to `max` (deep orange), as sRGB.
pub fn sigma_rgb(sigma: f64, max: f64) -> [u8; 3] {
    ramp(&SIGMA_STOPS, if max > 0.0 { sigma / max } else { 0.0 })
}

/// The colour of a change `d` (1 − cos, or any positive figure spanning decades) on a
/// logarithmic scale from `lo` (pale yellow: a tiny change) to `hi` (deep red: a large
/// one), as sRGB. `d` at or below 0 takes `lo`'s colour.
pub fn diff_rgb(d: f64, lo: f64, hi: f64) -> [u8; 3] {
    ramp(&DIFF_STOPS, diff_position(d, lo, hi))
}

/// [`diff_rgb`] as CSS.
pub fn diff_color(d: f64, lo: f64, hi: f64) -> String {
    hex(diff_rgb(d, lo, hi))
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

/// How many unmatched names (and findings of a kind) the text prints before summarizing
/// the rest.
pub(super) const NAMES_SHOWN: usize = 10;

/// A figure for the text tables: 6 significant digits, `-` when null.
pub(super) fn num(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.6}"))
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

    /// The θ scale is fixed: 0° and 90° are its ends whatever the report, and the
    /// colours between them get steadily lighter (viridis' lightness is monotone).
    #[test]
    fn the_theta_scale_is_fixed_and_monotone() {
        assert_eq!(theta_color(0.0), "#440154");
        assert_eq!(theta_color(90.0), "#fde725");
        // Halfway between the fifth and sixth stops.
        assert_eq!(theta_color(45.0), "#23908c");
        assert_eq!(theta_color(-5.0), theta_color(0.0));
        assert_eq!(theta_color(200.0), theta_color(90.0));
        assert_eq!(theta_color(f64::NAN), theta_color(0.0));
        // Each degree is lighter than the one before; between them, 8-bit rounding may
        // darken a tenth of a degree by under 1%.
        let lum = |t: f64| relative_luminance(theta_rgb(t));
        for deg in 1..=90 {
            let t = f64::from(deg);
            assert!(lum(t) > lum(t - 1.0), "luminance falls from {}° to {t}°", t - 1.0);
        }
        for tenth in 1..=900 {
            let t = f64::from(tenth) / 10.0;
            assert!(lum(t) > 0.99 * lum(t - 0.1), "luminance falls at {t}°");
        }
        let legend = theta_legend();
        assert!(
            legend.starts_with("linear-gradient(90deg,#440154 0%,") && legend.ends_with("#fde725 100%)"),
            "{legend}"
        );
    }

    /// Every colour of the θ scale (a tenth of a degree apart) gets a text colour that
    /// contrasts at least 4.5:1 with it.
    #[test]
    fn text_on_every_colour_of_the_scale_is_readable() {
        assert!((contrast_ratio(BLACK, WHITE) - 21.0).abs() < 1e-12);
        assert_eq!(ink(theta_rgb(0.0)), WHITE);
        assert_eq!(ink(theta_rgb(90.0)), BLACK);
        let mut worst = f64::INFINITY;
        for tenth in 0..=900 {
            let bg = theta_rgb(f64::from(tenth) / 10.0);
            worst = worst.min(contrast_ratio(bg, ink(bg)));
        }
        assert!(worst >= 4.5, "worst contrast {worst}");
        for x in 0..=1000 {
            for stops in [&VIRIDIS[..], &SIGMA_STOPS[..], &DIFF_STOPS[..]] {
                let bg = ramp(stops, f64::from(x) / 1000.0);
                assert!(contrast_ratio(bg, ink(bg)) >= 4.5, "{}", hex(bg));
            }
        }
        assert_eq!(cell_style([0x44, 0x01, 0x54]), "background:#440154;color:#ffffff");
    }
}
