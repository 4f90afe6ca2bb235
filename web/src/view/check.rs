//! A check report on screen (Check k1, as `organ check`): the verdict and the counts, every
//! finding graded error, warning or info with its subject and message, every tensor's scan,
//! and the export of the report `organ check --json` writes.

use crate::export;
use crate::state::CheckData;
use leptos::prelude::*;
use organ_core::check::Severity;
use organ_core::report::formats::{AnyReport, Format, Kind};
use organ_core::report::human_bytes;
use std::sync::Arc;

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

/// A finding's kind as the JSON names it ("non_finite_scale", …).
fn kind(k: organ_core::check::Kind) -> String {
    serde_json::to_value(k).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// The check report on screen. Its `data-*` attributes carry the run's figures for the
/// tests: milliseconds from file chosen to report built, bytes read, threads.
#[component]
pub fn CheckView(data: Arc<CheckData>) -> impl IntoView {
    let r = Arc::new(data.report.clone());
    let offer = {
        let r = r.clone();
        move |f: &Format| export::offer(AnyReport::Check(&r), f)
    };
    let (ms, bytes, n) = data.run;
    let c = r.counts;
    let verdict = if c.error > 0 { "BROKEN" } else { "ok" };
    let shapes =
        if r.shapes_checked { "shapes checked" } else { "shapes not checked (an architecture organ does not know)" };
    let run = format!(
        "Checked in {:.2} s on {n} thread{}, reading {} ({} tensors, {} of tensor data scanned; tensors that may be copies read twice, to be hashed whole).",
        ms / 1000.0,
        if n == 1 { "" } else { "s" },
        human_bytes(bytes),
        r.tensors,
        human_bytes(r.bytes_scanned)
    );
    view! {
        <section id="check" data-done="1" data-elapsed-ms=ms.to_string() data-bytes-read=bytes.to_string() data-threads=n.to_string()>
            <div class="row">
                <h2>{format!("{} · {}", r.model, r.architecture.clone().unwrap_or_else(|| "?".into()))}</h2>
                <div class="actions">
                    {export::buttons(Kind::Check, "export-check", offer)}
                </div>
            </div>
            <p class="mute" id="run">{run}</p>
            <p id="verdict" data-verdict=verdict><b>{verdict}</b>{format!(": {} errors, {} warnings, {} notes ({shapes})", c.error, c.warning, c.info)}</p>
            <div class="cards counts">
                <div class="card" data-count="error">"errors"<b>{c.error}</b></div>
                <div class="card" data-count="warning">"warnings"<b>{c.warning}</b></div>
                <div class="card" data-count="info">"notes"<b>{c.info}</b></div>
            </div>
            <h3>{format!("Findings ({})", r.findings.len())}</h3>
            {if r.findings.is_empty() {
                view! { <p class="mute" id="no-findings">"Nothing found."</p> }.into_any()
            } else {
                view! {
                    <table id="findings"><thead><tr><th>"grade"</th><th>"kind"</th><th>"subject"</th><th>"message"</th></tr></thead><tbody>
                    {r.findings.iter().map(|f| {
                        let (sev, k) = (severity(f.severity), kind(f.kind));
                        let shown = k.clone();
                        view! {
                            <tr class=sev data-severity=sev data-kind=k data-subject=f.subject.clone()>
                                <td><b>{sev}</b></td><td>{shown}</td><td><code>{f.subject.clone()}</code></td><td>{f.message.clone()}</td>
                            </tr>
                        }
                    }).collect_view()}
                    </tbody></table>
                }.into_any()
            }}
            <details>
                <summary>{format!("Every tensor's scan ({})", r.scans.len())}</summary>
                <table id="scans"><thead><tr><th>"tensor"</th><th>"type"</th><th>"scanned"</th><th>"count"</th><th>"non-finite"</th><th>"all zero"</th><th>"constant"</th></tr></thead><tbody>
                {r.scans.iter().map(|t| match &t.scan {
                    Some(s) => view! {
                        <tr data-name=t.name.clone()><td><code>{t.name.clone()}</code></td><td>{t.ty.clone()}</td><td>{s.scanned.clone()}</td>
                        <td class="n">{s.count}</td><td class="n">{s.non_finite}</td><td>{s.all_zero.to_string()}</td><td>{s.constant.to_string()}</td></tr>
                    }.into_any(),
                    None => view! {
                        <tr data-name=t.name.clone()><td><code>{t.name.clone()}</code></td><td>{t.ty.clone()}</td><td colspan="5">"not read"</td></tr>
                    }.into_any(),
                }).collect_view()}
                </tbody></table>
            </details>
        </section>
    }
}
