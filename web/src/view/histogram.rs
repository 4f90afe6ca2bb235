//! The histogram of one tensor's sampled values, as an SVG bar chart.

use leptos::prelude::*;
use organ_core::report::Histogram;

/// The tensor's name and θ over its histogram; a note when it has none (opened from an
/// export, or not measurable).
#[component]
pub fn HistogramView(name: String, theta: Option<f64>, hist: Option<Histogram>) -> impl IntoView {
    let title = format!("{name}{}", theta.map_or_else(String::new, |t| format!(" · θ {t:.3}°")));
    let Some(h) = hist else {
        return view! { <h3>{title}</h3><p class="mute">"No sampled values for this tensor (not measured here, or not measurable)."</p> }.into_any();
    };
    let (w, ht) = (360.0f64, 180.0f64);
    let max = f64::from(h.counts.iter().copied().max().unwrap_or(1).max(1));
    let bw = w / h.counts.len() as f64;
    let total: u64 = h.counts.iter().map(|&c| u64::from(c)).sum();
    view! {
        <h3>{title}</h3>
        <svg viewBox=format!("0 0 {w} {}", ht + 18.0) width="100%" role="img">
            {h.counts.iter().enumerate().map(|(k, &c)| {
                let bh = ht * f64::from(c) / max;
                view! { <rect x=format!("{:.2}", k as f64 * bw) y=format!("{:.2}", ht - bh) width=format!("{:.2}", (bw - 1.0).max(0.5)) height=format!("{bh:.2}") fill="#4a78b5"><title>{format!("{c}")}</title></rect> }
            }).collect_view()}
            <text x="0" y=format!("{}", ht + 14.0) font-size="11">{format!("{:.4}", h.lo)}</text>
            <text x=format!("{w}") y=format!("{}", ht + 14.0) font-size="11" text-anchor="end">{format!("{:.4}", h.hi)}</text>
        </svg>
        <p class="mute">{format!("{total} finite sampled values in {} bins", h.counts.len())}</p>
    }
    .into_any()
}
