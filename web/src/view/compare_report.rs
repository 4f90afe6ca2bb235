//! A compare report on screen: which model is A and which B, the exports, the counts and
//! warnings, the groups and the most changed pairs (with their cos and rel_l2), the 1 − cos
//! heatmap beside the θ(A)/θ(B) scatter, dθ by layer, every pair in a table, the names
//! that did not pair, and the metadata keys that differ (with the summary line under the
//! counts, and how the layers were lined up when a side was cut by `organ layers`).

use super::diff_heatmap::DiffHeatmapView;
use super::pair_table::{exact, PairTable};
use crate::export;
use crate::state::CompareData;
use leptos::prelude::*;
use organ_core::compare::meta::{MetaDiff, ValueShown};
use organ_core::compare::Side;
use organ_core::report::formats::{AnyReport, Format, Kind};
use organ_core::report::{changed_figures, d_theta_by_layer_svg, human_bytes, human_count, sci, theta_scatter_svg};
use std::sync::Arc;

/// One model's row in the table of the two.
fn side_row(role: &'static str, s: &Side) -> impl IntoView {
    view! {
        <tr><td><b>{role}</b></td><td><code>{s.model.clone()}</code></td><td>{s.architecture.clone().unwrap_or_else(|| "?".into())}</td>
        <td>{s.name.clone().unwrap_or_else(|| "?".into())}</td><td class="n">{human_count(s.parameters)}</td>
        <td class="n">{human_bytes(s.file_bytes)}</td><td class="n">{s.tensors}</td></tr>
    }
}

/// A list of names with its count; "none" when empty.
fn names(id: &'static str, title: &'static str, v: &[String]) -> impl IntoView {
    view! {
        <div>
            <h3>{format!("{title} ({})", v.len())}</h3>
            {if v.is_empty() {
                view! { <p class="mute">"none"</p> }.into_any()
            } else {
                view! { <ul id=id class="names">{v.iter().map(|n| view! { <li><code>{n.clone()}</code></li> }).collect_view()}</ul> }.into_any()
            }}
        </div>
    }
}

/// The metadata keys that differ, a row per key, A's value and B's as `organ inspect`
/// shows them (the static page's table, `report::render_compare`).
fn metadata_table(m: &MetaDiff) -> impl IntoView {
    let line = |v: Option<&ValueShown>| v.map(ValueShown::line).unwrap_or_default();
    view! {
        <h3>"Metadata"</h3>
        <p class="mute">{m.counts.line()}</p>
        {(m.counts.differ() > 0).then(|| view! {
            <div class="scroll"><table id="metadata-diff" class="metadata-diff">
                <thead><tr><th>"key"</th><th></th><th>"A"</th><th>"B"</th></tr></thead>
                <tbody>{m.rows().map(|(key, how, a, b)| view! {
                    <tr data-key=key.to_owned() data-change=how.name()>
                        <td><code>{key.to_owned()}</code></td><td>{how.name()}</td>
                        <td><code>{line(a)}</code></td><td><code>{line(b)}</code></td>
                    </tr>
                }).collect_view()}</tbody>
            </table></div>
        })}
    }
}

/// The compare report on screen. Its `data-*` attributes carry the run's figures for the
/// tests: milliseconds from files chosen to report built, bytes read, threads.
#[component]
pub fn CompareView(data: Arc<CompareData>) -> impl IntoView {
    let r = Arc::new(data.report.clone());
    let offer = {
        let r = r.clone();
        move |f: &Format| export::offer(AnyReport::Compare(&r), f)
    };
    let run = data.run.map(|(ms, bytes, n)| {
        format!(
            "Compared in {:.2} s on {n} thread{}, reading {} from {} of files (tensors of the same type are read whole on both sides to tell identical bytes).",
            ms / 1000.0,
            if n == 1 { "" } else { "s" },
            human_bytes(bytes),
            human_bytes(r.a.file_bytes.saturating_add(r.b.file_bytes))
        )
    });
    let (ms, bytes, n) = data.run.unwrap_or((0.0, 0, 0));
    let counts = r.counts.labelled();
    let scatter = theta_scatter_svg(&r);
    let d_theta = d_theta_by_layer_svg(&r);
    view! {
        <section id="compare" data-done="1" data-elapsed-ms=ms.to_string() data-bytes-read=bytes.to_string() data-threads=n.to_string()>
            <div class="row">
                <h2>{format!("{} (A) vs {} (B)", r.a.model, r.b.model)}</h2>
                <div class="actions">
                    {export::buttons(Kind::Compare, "export-compare", offer)}
                </div>
            </div>
            {run.map(|t| view! { <p class="mute" id="run">{t}</p> })}
            <p class="mute" id="same-positions">{organ_core::report::SAME_POSITIONS}</p>
            <table class="sides"><thead><tr><th></th><th>"file"</th><th>"architecture"</th><th>"name"</th><th>"parameters"</th><th>"size"</th><th>"tensors"</th></tr></thead>
                <tbody>{side_row("A · base", &r.a)}{side_row("B · other", &r.b)}</tbody></table>
            <div class="cards counts">
                {counts.into_iter().map(|(k, label, v)| view! { <div class="card" data-count=k>{label}<b>{v}</b></div> }).collect_view()}
            </div>
            {(!r.warnings.is_empty()).then(|| view! {
                <ul id="warnings" class="warnings">{r.warnings.iter().map(|w| view! { <li>{w.clone()}</li> }).collect_view()}</ul>
            })}
            {r.metadata.as_ref().map(|m| view! { <p id="metadata-line" data-differ=m.counts.differ().to_string()>{m.counts.line()}</p> })}
            {r.layers.as_ref().map(|l| view! { <p id="layers-line">{l.line()}</p> })}
            <div class="two">
                <div>
                    <h3>"Groups"</h3>
                    <table id="compare-groups"><thead><tr><th>"group"</th><th>"pairs"</th><th>"identical"</th><th>"cos mean"</th><th>"cos min"</th><th>"rel_l2 mean"</th></tr></thead><tbody>
                    {r.groups.iter().map(|g| view! {
                        <tr><td>{g.group.name()}</td><td class="n">{g.count}</td><td class="n">{g.identical}</td>
                        <td class="n">{g.cos_mean.map(|x| format!("{x:.8}")).unwrap_or_default()}</td>
                        <td class="n">{g.cos_min.map(|x| format!("{x:.8}")).unwrap_or_default()}</td>
                        <td class="n">{sci(g.rel_l2_mean)}</td></tr>
                    }).collect_view()}
                    </tbody></table>
                    <h3>"Most changed"</h3>
                    <ol id="most-changed" class="wells">{r.most_changed_pairs().map(|p| view! {
                        <li data-name=p.name.clone() data-cos=exact(p.cos) data-rel-l2=exact(p.rel_l2)>
                            <code>{p.name.clone()}</code>" "<span class="mute">{changed_figures(p)}</span>
                        </li>
                    }).collect_view()}</ol>
                </div>
                <div>
                    <DiffHeatmapView r=r.clone() />
                    <h3>"θ(A) against θ(B)"</h3>
                    <div id="scatter" class="scatterbox" inner_html=scatter></div>
                </div>
            </div>
            {(!d_theta.is_empty()).then(|| view! {
                <h3>"dθ by layer"</h3>
                <div id="d-theta-by-layer" class="layer-plot" inner_html=d_theta></div>
            })}
            <PairTable r=r.clone() />
            <h3>"Unmatched"</h3>
            <div class="two three">
                {names("only-in-a", "Only in A", &r.only_in_a)}
                {names("only-in-b", "Only in B", &r.only_in_b)}
                <div>
                    <h3>{format!("Shape mismatch ({})", r.shape_mismatch.len())}</h3>
                    <ul id="shape-mismatch" class="names">{r.shape_mismatch.iter().map(|s| {
                        let dims = |d: &[u64]| d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("×");
                        view! { <li><code>{s.name.clone()}</code>{format!(": A {} · B {}", dims(&s.a), dims(&s.b))}</li> }
                    }).collect_view()}</ul>
                </div>
            </div>
            {r.metadata.as_ref().map(metadata_table)}
        </section>
    }
}
