//! The page: a drop zone, a progress bar with cancel, and the report (model panel,
//! per-group summary, layer × group heatmap, wells, a sortable and filterable tensor
//! table, the histogram of a clicked tensor's sampled values), with JSON and static HTML
//! export. Every number comes from organ-core.

use crate::measure::{self, Progress};
use crate::pool;
use crate::source::{self, MetaRow};
use leptos::prelude::*;
use leptos::task::spawn_local;
use organ_core::zmeasure::html::{self, human_bytes, human_count};
use organ_core::zmeasure::report::{Report, Status, TensorReport};
use organ_core::zmeasure::view::{theta_color, Heatmap, Histogram};
use std::sync::Arc;
use wasm_bindgen::JsCast;

/// What the app is doing.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Idle,
    Reading(String),
    Measuring(String),
    Done,
    Cancelled,
    Error(String),
}

/// A report on screen, measured here or opened from an export.
struct ViewData {
    report: Report,
    histograms: Vec<Option<Histogram>>,
    metadata: Vec<MetaRow>,
    /// The GGUF version, when measured here.
    version: Option<u32>,
    /// `Some` when measured in this tab: (ms, bytes read, threads).
    run: Option<(f64, u64, usize)>,
}

fn file_list(list: Option<web_sys::FileList>) -> Vec<web_sys::File> {
    let Some(list) = list else { return Vec::new() };
    (0..list.length()).filter_map(|i| list.get(i)).collect()
}

/// Offers `text` as a download called `name`, from a local object URL (nothing is sent).
fn download(name: &str, mime: &str, text: &str) {
    let parts = js_sys::Array::of1(&text.into());
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type(mime);
    let Ok(blob) = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts) else { return };
    let Ok(url) = web_sys::Url::create_object_url_with_blob(&blob) else { return };
    if let Some(a) = document().create_element("a").ok().and_then(|e| e.dyn_into::<web_sys::HtmlAnchorElement>().ok()) {
        a.set_href(&url);
        a.set_download(name);
        a.click();
    }
    let _ = web_sys::Url::revoke_object_url(&url);
}

/// A report exported earlier, as JSON or as the static HTML page.
fn parse_export(name: &str, text: &str) -> Result<Report, String> {
    let json = if name.ends_with(".html") || name.ends_with(".htm") {
        html::extract_json(text).ok_or_else(|| format!("{name}: not an organ report page (no embedded report)"))?
    } else {
        text
    };
    serde_json::from_str::<Report>(json).map_err(|e| format!("{name}: not an organ θ report: {e}"))
}

#[component]
pub fn App() -> impl IntoView {
    let threads = RwSignal::new(0usize);
    let phase = RwSignal::new(Phase::Idle);
    let progress = RwSignal::new(Progress::default());
    let data: RwSignal<Option<Arc<ViewData>>> = RwSignal::new(None);
    let cancel = RwSignal::new(false);
    let dragging = RwSignal::new(false);
    spawn_local(async move {
        match pool::start().await {
            Ok(n) => threads.set(n),
            Err(e) => phase.set(Phase::Error(e)),
        }
    });

    let start = move |files: Vec<web_sys::File>| {
        if files.is_empty() || matches!(phase.get_untracked(), Phase::Reading(_) | Phase::Measuring(_)) {
            return;
        }
        cancel.set(false);
        data.set(None);
        progress.set(Progress::default());
        spawn_local(async move {
            let files: Vec<gloo_file::File> = files.into_iter().map(gloo_file::File::from).collect();
            let first = files[0].name();
            if files.len() == 1 && [".json", ".html", ".htm"].iter().any(|x| first.to_lowercase().ends_with(x)) {
                phase.set(Phase::Reading(first.clone()));
                let text = gloo_file::futures::read_as_text(&files[0]).await.map_err(|e| format!("{first}: {e}"));
                match text.and_then(|t| parse_export(&first, &t)) {
                    Ok(report) => {
                        let histograms = report.models.first().map_or(0, |m| m.tensors.len());
                        let v = ViewData {
                            report,
                            histograms: vec![None; histograms],
                            metadata: Vec::new(),
                            version: None,
                            run: None,
                        };
                        data.set(Some(Arc::new(v)));
                        phase.set(Phase::Done);
                    }
                    Err(e) => phase.set(Phase::Error(e)),
                }
                return;
            }
            phase.set(Phase::Reading(first.clone()));
            // The run is timed from here, the file chosen, as `organ measure` is timed from
            // its start: reading and parsing the header count.
            let chosen = crate::pool::now_ms();
            let model = match source::open(files).await {
                Ok(m) => m,
                Err(e) => return phase.set(Phase::Error(e)),
            };
            phase.set(Phase::Measuring(model.label.clone()));
            let out = measure::measure(&model, &|| cancel.get_untracked(), &|p| progress.set(p)).await;
            match out {
                Ok(o) => {
                    let run = Some((crate::pool::now_ms() - chosen, o.bytes_read, o.threads));
                    let v = ViewData {
                        report: o.report,
                        histograms: o.histograms,
                        version: Some(model.version),
                        metadata: model.metadata,
                        run,
                    };
                    data.set(Some(Arc::new(v)));
                    phase.set(Phase::Done);
                }
                Err(_) if cancel.get_untracked() => phase.set(Phase::Cancelled),
                Err(e) => phase.set(Phase::Error(e)),
            }
        });
    };
    let on_change = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        start(file_list(input.files()));
        input.set_value("");
    };
    let on_drop = move |ev: web_sys::DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        start(file_list(ev.data_transfer().and_then(|d| d.files())));
    };

    view! {
        <header class="top">
            <div>
                <h1>"organ"</h1>
                <p class="mute">"The Z-measure θ of every tensor of a GGUF model, computed in this tab. The file never leaves your machine."</p>
            </div>
            <span id="threads" class="badge" data-threads=move || threads.get().to_string()
                class:warn=move || threads.get() == 1 && !pool::cross_origin_isolated()>
                {move || match threads.get() {
                    0 => "starting workers…".to_owned(),
                    1 if !pool::cross_origin_isolated() => "1 thread: this page is not cross-origin isolated (COOP/COEP), so no worker pool".to_owned(),
                    n => format!("{n} worker threads"),
                }}
            </span>
        </header>
        <main>
            <label id="drop" class="drop" class:over=move || dragging.get()
                on:dragover=move |ev: web_sys::DragEvent| { ev.prevent_default(); dragging.set(true); }
                on:dragleave=move |_| dragging.set(false)
                on:drop=on_drop>
                <input id="file-input" type="file" multiple accept=".gguf,.json,.html" on:change=on_change />
                <b>"Drop a .gguf file here, or click to choose one"</b>
                <span class="mute">"All the shards of a split model together, or a report exported earlier (.json or .html). Any size: only the sampled blocks are read."</span>
            </label>
            {move || match phase.get() {
                Phase::Idle => ().into_any(),
                Phase::Reading(name) => view! { <p id="status" class="status">"Reading the header of " {name} "…"</p> }.into_any(),
                Phase::Measuring(name) => view! { <ProgressView name progress cancel /> }.into_any(),
                Phase::Done => ().into_any(),
                Phase::Cancelled => view! { <p id="status" class="status">"Cancelled. Drop a file to start again."</p> }.into_any(),
                Phase::Error(e) => view! { <p id="error" class="error" role="alert">{e}</p> }.into_any(),
            }}
            {move || data.get().map(|d| view! { <ReportView data=d /> })}
        </main>
    }
}

#[component]
fn ProgressView(name: String, progress: RwSignal<Progress>, cancel: RwSignal<bool>) -> impl IntoView {
    view! {
        <section id="progress" class="progress">
            <div class="row">
                <b>"Measuring " {name}</b>
                <button id="cancel" on:click=move |_| cancel.set(true)>"Cancel"</button>
            </div>
            <div class="bar"><div class="fill" style:width=move || {
                let p = progress.get();
                format!("{:.1}%", if p.total == 0 { 0.0 } else { 100.0 * p.done as f64 / p.total as f64 })
            }></div></div>
            <p class="mute">{move || {
                let p = progress.get();
                let left = p.eta_ms().map_or_else(String::new, |ms| format!(" · about {:.1} s left", ms / 1000.0));
                format!("{} / {} tensors · {} read of {}{left}", p.done, p.total, human_bytes(p.bytes_read), human_bytes(p.bytes_total))
            }}</p>
        </section>
    }
}

/// Table columns that sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Col {
    Index,
    Name,
    Group,
    Layer,
    Type,
    Theta,
    H,
    K,
    C,
}

fn cmp_rows(a: &TensorReport, b: &TensorReport, col: Col) -> std::cmp::Ordering {
    let f = |x: Option<f64>, y: Option<f64>| x.unwrap_or(f64::NEG_INFINITY).total_cmp(&y.unwrap_or(f64::NEG_INFINITY));
    match col {
        Col::Index => std::cmp::Ordering::Equal,
        Col::Name => a.name.cmp(&b.name),
        Col::Group => a.group.name().cmp(b.group.name()),
        Col::Layer => a.layer.cmp(&b.layer),
        Col::Type => a.ty.cmp(&b.ty),
        Col::Theta => f(a.theta, b.theta),
        Col::H => f(a.entropy, b.entropy),
        Col::K => f(a.kurtosis, b.kurtosis),
        Col::C => f(a.cv, b.cv),
    }
}

#[component]
fn ReportView(data: Arc<ViewData>) -> impl IntoView {
    let Some(m) = data.report.models.first().cloned() else {
        return view! { <p id="error" class="error">"This report holds no model."</p> }.into_any();
    };
    let m = Arc::new(m);
    let s = m.summary.clone();
    let export_json = {
        let d = data.clone();
        move |_| {
            let text = serde_json::to_string_pretty(&d.report).unwrap_or_default();
            download(&format!("{}.organ.json", d.report.models[0].model), "application/json", &text);
        }
    };
    let export_html = {
        let d = data.clone();
        move |_| download(&format!("{}.organ.html", d.report.models[0].model), "text/html", &html::render(&d.report))
    };
    let run = data.run.map(|(ms, bytes, n)| {
        format!(
            "Measured in {:.2} s on {n} thread{}, reading {} of {}.",
            ms / 1000.0,
            if n == 1 { "" } else { "s" },
            human_bytes(bytes),
            human_bytes(m.file_bytes)
        )
    });
    let (ms, bytes, n) = data.run.unwrap_or((0.0, 0, 0));
    let types: Vec<(String, u64)> = m.types.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let total_types: u64 = types.iter().map(|t| t.1).sum::<u64>().max(1);
    let metadata = data.metadata.clone();
    view! {
        <section id="report" data-done="1" data-elapsed-ms=ms.to_string() data-bytes-read=bytes.to_string() data-threads=n.to_string()>
            <div class="row">
                <h2>{m.model.clone()}</h2>
                <div class="actions">
                    <button id="export-json" on:click=export_json>"Export JSON"</button>
                    <button id="export-html" on:click=export_html>"Export static HTML"</button>
                </div>
            </div>
            {run.map(|r| view! { <p class="mute" id="run">{r}</p> })}
            <div class="cards">
                <div class="card">"architecture"<b>{m.architecture.clone().unwrap_or_else(|| "?".into())}</b></div>
                <div class="card">"name"<b>{m.name.clone().unwrap_or_else(|| "?".into())}</b></div>
                <div class="card">"parameters"<b>{human_count(m.parameters)}</b></div>
                <div class="card">"file"<b>{human_bytes(m.file_bytes)}</b></div>
                <div class="card">"tensors"<b>{s.tensors}</b></div>
                {data.version.map(|v| view! { <div class="card">"GGUF"<b>{format!("v{v}")}</b></div> })}
                <div class="card">"θ mean"<b id="theta-mean">{format!("{:.3}°", s.theta_mean)}</b></div>
                <div class="card">"θ weighted"<b>{format!("{:.3}°", s.theta_weighted)}</b></div>
                <div class="card">"signal"<b>{format!("{:.4}", s.signal)}</b></div>
            </div>
            <h3>"Quantization mix"</h3>
            <div class="mix">
                {types.into_iter().map(|(t, c)| view! {
                    <span class="mixpart" style:flex-grow=c.to_string() title=format!("{t}: {c} tensors")>{format!("{t} × {c}")}</span>
                }).collect_view()}
            </div>
            <p class="mute">{format!("{} measured · {} degenerate · {} not measurable ({} tensors in all)", s.measured, s.degenerate, s.not_measurable, total_types)}</p>
            {(!metadata.is_empty()).then(|| view! {
                <details class="meta"><summary>{format!("Metadata ({} keys)", metadata.len())}</summary>
                    <table><thead><tr><th>"key"</th><th>"type"</th><th>"value"</th></tr></thead><tbody>
                    {metadata.into_iter().map(|r| view! { <tr><td><code>{r.key}</code></td><td>{r.ty}</td><td class="val">{r.value}</td></tr> }).collect_view()}
                    </tbody></table>
                </details>
            })}
            <div class="two">
                <div>
                    <h3>"Groups"</h3>
                    <table id="groups"><thead><tr><th>"group"</th><th>"tensors"</th><th>"θ mean"</th><th>"θ min"</th><th>"θ max"</th></tr></thead><tbody>
                    {s.groups.iter().map(|g| view! {
                        <tr><td>{g.group.name()}</td><td class="n">{g.count}</td><td class="n">{format!("{:.3}", g.mean)}</td><td class="n">{format!("{:.3}", g.min)}</td><td class="n">{format!("{:.3}", g.max)}</td></tr>
                    }).collect_view()}
                    </tbody></table>
                    <h3>"Wells: the lowest θ"</h3>
                    <ol id="wells" class="wells">
                    {s.wells.iter().map(|w| view! { <li><code>{w.name.clone()}</code>" "<span class="mute">{w.group.name()}</span>" "{format!("{:.3}°", w.theta)}</li> }).collect_view()}
                    </ol>
                </div>
                <HeatmapView m=m.clone() />
            </div>
            <TensorTable m=m.clone() histograms=Arc::new(data.histograms.clone()) />
        </section>
    }
    .into_any()
}

#[component]
fn HeatmapView(m: Arc<organ_core::zmeasure::report::ModelReport>) -> impl IntoView {
    let h = Heatmap::of(&m);
    if h.layers.is_empty() {
        return ().into_any();
    }
    let (lo, hi) = h.range;
    let legend = format!(
        "linear-gradient(90deg,{},{},{})",
        theta_color(lo, lo, hi),
        theta_color((lo + hi) / 2.0, lo, hi),
        theta_color(hi, lo, hi)
    );
    let groups = h.groups.clone();
    view! {
        <div>
            <h3>"θ by layer and group"</h3>
            <p class="mute">{format!("{lo:.2}° ")}<span class="legend" style:background=legend></span>{format!(" {hi:.2}°")}</p>
            <table id="heatmap" class="heat">
                <thead><tr><th>"layer"</th>{groups.iter().map(|g| view! { <th>{g.name()}</th> }).collect_view()}</tr></thead>
                <tbody>
                {h.layers.iter().enumerate().map(|(r, l)| view! {
                    <tr><td>{*l}</td>
                    {(0..h.groups.len()).map(|c| match h.cell(r, c) {
                        Some((t, n)) => view! { <td style:background=theta_color(t, lo, hi) title=format!("{n} tensors, mean θ {t:.3}°")>{format!("{t:.1}")}</td> }.into_any(),
                        None => view! { <td></td> }.into_any(),
                    }).collect_view()}
                    </tr>
                }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

#[component]
fn TensorTable(
    m: Arc<organ_core::zmeasure::report::ModelReport>,
    histograms: Arc<Vec<Option<Histogram>>>,
) -> impl IntoView {
    let sort = RwSignal::new((Col::Index, true));
    let filter = RwSignal::new(String::new());
    let group = RwSignal::new(String::new());
    let selected: RwSignal<Option<usize>> = RwSignal::new(None);
    let rows = {
        let m = m.clone();
        move || {
            let q = filter.get().to_lowercase();
            let g = group.get();
            let (col, asc) = sort.get();
            let mut ix: Vec<usize> = (0..m.tensors.len())
                .filter(|&i| {
                    let t = &m.tensors[i];
                    (g.is_empty() || t.group.name() == g)
                        && (q.is_empty() || t.name.to_lowercase().contains(&q) || t.ty.to_lowercase() == q)
                })
                .collect();
            ix.sort_by(|&a, &b| {
                let o = cmp_rows(&m.tensors[a], &m.tensors[b], col).then(a.cmp(&b));
                if asc {
                    o
                } else {
                    o.reverse()
                }
            });
            ix
        }
    };
    let header = move |label: &'static str, col: Col| {
        view! {
            <th on:click=move |_| sort.update(|s| *s = if s.0 == col { (col, !s.1) } else { (col, true) })>
                {label}{move || { let s = sort.get(); if s.0 == col { if s.1 { " ▲" } else { " ▼" } } else { "" } }}
            </th>
        }
    };
    let groups: Vec<&'static str> = organ_core::anatomy::Group::ALL
        .iter()
        .filter(|g| m.tensors.iter().any(|t| t.group == **g))
        .map(|g| g.name())
        .collect();
    let m2 = m.clone();
    view! {
        <h3>"Tensors"</h3>
        <div class="row filters">
            <input id="filter" type="search" placeholder="filter by name or type" on:input=move |ev| filter.set(event_target_value(&ev)) />
            <select id="group-filter" on:change=move |ev| group.set(event_target_value(&ev))>
                <option value="">"all groups"</option>
                {groups.into_iter().map(|g| view! { <option value=g>{g}</option> }).collect_view()}
            </select>
            <span class="mute">"Click a column to sort, a row for its histogram."</span>
        </div>
        <div class="two wide">
            <div class="scroll">
                <table id="tensors" class="tensors">
                    <thead><tr>
                        {header("#", Col::Index)}{header("name", Col::Name)}{header("group", Col::Group)}{header("layer", Col::Layer)}
                        {header("type", Col::Type)}{header("θ", Col::Theta)}{header("H", Col::H)}{header("K", Col::K)}{header("C", Col::C)}
                    </tr></thead>
                    <tbody>
                    {move || rows().into_iter().map(|i| {
                        let t = &m.tensors[i];
                        let fmt = |v: Option<f64>, d: usize| v.map_or_else(String::new, |x| format!("{x:.d$}"));
                        let theta_attr = t.theta.map_or_else(String::new, |x| x.to_string());
                        let status = match t.status { Status::Measured => "", Status::Degenerate => "degenerate", Status::NotMeasurable => "not measurable" };
                        view! {
                            <tr data-name=t.name.clone() data-theta=theta_attr class:sel=move || selected.get() == Some(i) on:click=move |_| selected.set(Some(i))>
                                <td class="n">{i}</td><td><code>{t.name.clone()}</code></td><td>{t.group.name()}</td>
                                <td class="n">{t.layer.map(|l| l.to_string()).unwrap_or_default()}</td><td>{t.ty.clone()}</td>
                                <td class="n" title=status>{if t.status == Status::NotMeasurable { "n/m".to_owned() } else { fmt(t.theta, 3) }}</td>
                                <td class="n">{fmt(t.entropy, 4)}</td><td class="n">{fmt(t.kurtosis, 3)}</td><td class="n">{fmt(t.cv, 4)}</td>
                            </tr>
                        }
                    }).collect_view()}
                    </tbody>
                </table>
            </div>
            <div id="histogram" class="hist">
                {move || match selected.get() {
                    None => view! { <p class="mute">"Click a tensor to see the histogram of its sampled values."</p> }.into_any(),
                    Some(i) => {
                        let t = &m2.tensors[i];
                        view! { <HistogramView name=t.name.clone() theta=t.theta hist=histograms.get(i).cloned().flatten() /> }.into_any()
                    }
                }}
            </div>
        </div>
    }
}

#[component]
fn HistogramView(name: String, theta: Option<f64>, hist: Option<Histogram>) -> impl IntoView {
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
