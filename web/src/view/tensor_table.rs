//! Every tensor of the model in a table that sorts by any column and filters by name,
//! type, group or layer, beside the histogram of the tensor clicked (or chosen in the
//! heatmap or the wells: the sort, filters and selection are the page's [`TensorView`]); with a predicted and a
//! measured sensitivity beside θ when there are (`super::sensitivity`).
//!
//! The rows are a keyed list (`<For>`, keyed by tensor index): a sort or a filter moves
//! the existing `<tr>`s and adds or removes only those that enter or leave, instead of
//! building every row again.

use super::histogram::HistogramView;
use super::sortable::{self, by_figure, group_select, Column, Sort};
use crate::state::{SensData, TensorCol as Col, TensorView};
use leptos::prelude::*;
use organ_core::report::Histogram;
use organ_core::report::{update_figures, ModelReport, Status, TensorReport};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

/// A tensor's row: its θ report, and its predicted and measured KLD when known.
struct Row {
    t: TensorReport,
    predicted: Option<f64>,
    measured: Option<f64>,
}

impl Column<Row> for Col {
    fn cmp(self, ra: &Row, rb: &Row) -> Ordering {
        let f = by_figure;
        let (a, b) = (&ra.t, &rb.t);
        match self {
            Col::Index => Ordering::Equal,
            Col::Name => a.name.cmp(&b.name),
            Col::Group => a.group.name().cmp(b.group.name()),
            Col::Layer => a.layer.cmp(&b.layer),
            Col::Type => a.ty.cmp(&b.ty),
            Col::Theta => f(a.theta, b.theta),
            Col::Sigma => f(a.sigma, b.sigma),
            Col::H => f(a.entropy, b.entropy),
            Col::K => f(a.kurtosis, b.kurtosis),
            Col::C => f(a.cv, b.cv),
            Col::Predicted => f(ra.predicted, rb.predicted),
            Col::Measured => f(ra.measured, rb.measured),
        }
    }
}

/// The indices of the tensors that pass the filters, in the chosen order (ties in file
/// order). `query` matches a name's substring or a whole type, case-insensitively;
/// `group` is a group's name, or empty for all; `layer`, when there is one, the layer.
fn visible(rows: &[Row], query: &str, group: &str, layer: Option<u32>, sort: (Col, bool)) -> Vec<usize> {
    let q = query.to_lowercase();
    let keep = |r: &Row| {
        let t = &r.t;
        (group.is_empty() || t.group.name() == group)
            && (layer.is_none() || t.layer == layer)
            && (q.is_empty() || t.name.to_lowercase().contains(&q) || t.ty.to_lowercase() == q)
    };
    sortable::visible(rows, keep, sort)
}

/// Each tensor's row, with the figures of `sens` by name.
fn rows_of(m: &ModelReport, sens: &SensData) -> Vec<Row> {
    let predicted: HashMap<&str, f64> =
        (sens.predicted.iter().flat_map(|p| &p.tensors)).map(|r| (r.name.as_str(), r.predicted_kld)).collect();
    let measured: HashMap<&str, f64> =
        (sens.measured.iter().flat_map(|r| &r.klds)).map(|(n, k)| (n.as_str(), *k)).collect();
    (m.tensors.iter())
        .map(|t| Row {
            predicted: predicted.get(t.name.as_str()).copied(),
            measured: measured.get(t.name.as_str()).copied(),
            t: t.clone(),
        })
        .collect()
}

/// The table with its filters, and the histogram of the selected tensor.
#[component]
pub fn TensorTable(
    m: Arc<ModelReport>,
    /// Per tensor, when measured in this tab.
    histograms: Arc<Vec<Option<Histogram>>>,
    /// Predicted and measured sensitivity, as columns beside θ.
    sens: SensData,
    /// The sort, the filters and the selected tensor (the heatmap and the wells set them too).
    view: TensorView,
) -> impl IntoView {
    let TensorView { sort, query: filter, group, layer, selected } = view;
    let sort = Sort::of(sort);
    let all = Arc::new(rows_of(&m, &sens));
    let (has_predicted, has_measured) = (sens.predicted.is_some(), sens.measured.is_some());
    let rows = {
        let all = all.clone();
        move || filter.with(|q| group.with(|g| visible(&all, q, g, layer.get(), sort.get())))
    };
    let header = move |label, col| sort.header(label, col);
    let groups = {
        let m = m.clone();
        let has = move |g| m.tensors.iter().any(|t| t.group == g);
        group_select("group-filter", has, move || group.get(), move |g| group.set(g))
    };
    // A layer chosen by a heatmap cell: a button that shows all layers again.
    let layer_chip = move || {
        layer.get().map(|l| {
            view! { <button id="layer-filter" title="show every layer" on:click=move |_| layer.set(None)>{format!("layer {l} ✕")}</button> }
        })
    };
    // σ_θ stands beside θ when the report has it (§7).
    let sigma = m.tensors.iter().any(|t| t.sigma.is_some());
    // An adapter's rows are updates: their rank and ‖ΔW‖_F, and with a base ‖ΔW‖/‖W‖.
    let update = (m.adapter.is_some(), m.adapter.as_ref().is_some_and(|a| a.base.is_some()));
    view! {
        <h3>"Tensors"</h3>
        <div class="row filters">
            <input id="filter" type="search" placeholder="filter by name or type" prop:value=move || filter.get()
                on:input=move |ev| filter.set(event_target_value(&ev)) />
            {groups}{layer_chip}
            <span class="mute">"Click a column to sort, a row for its histogram."</span>
        </div>
        <div class="two wide">
            <div class="scroll">
                <table id="tensors" class="tensors">
                    <thead><tr>
                        {header("#", Col::Index)}{header("name", Col::Name)}{header("group", Col::Group)}{header("layer", Col::Layer)}
                        {header("type", Col::Type)}{header("θ", Col::Theta)}{sigma.then(|| header("σ", Col::Sigma))}
                        {has_predicted.then(|| header("KLD predicted", Col::Predicted))}{has_measured.then(|| header("KLD measured", Col::Measured))}
                        {header("H", Col::H)}{header("K", Col::K)}{header("C", Col::C)}
                        {update.0.then(|| view! { <th>"rank"</th><th>"‖ΔW‖_F"</th> })}{update.1.then(|| view! { <th>"‖ΔW‖/‖W‖"</th> })}
                    </tr></thead>
                    <tbody>
                        <For each=rows key=|i| *i children=move |i| tensor_row(i, &all[i], sigma, (has_predicted, has_measured), update, selected) />
                    </tbody>
                </table>
            </div>
            <div id="histogram" class="hist">
                {move || match selected.with(|n| n.as_ref().and_then(|n| m.tensors.iter().position(|t| &t.name == n))) {
                    None => view! { <p class="mute">"Click a tensor to see the histogram of its sampled values."</p> }.into_any(),
                    Some(i) => {
                        let t = &m.tensors[i];
                        view! { <HistogramView name=t.name.clone() theta=t.theta hist=histograms.get(i).cloned().flatten() /> }.into_any()
                    }
                }}
            </div>
        </div>
    }
}

/// The row of tensor `i`, `r`, with its σ_θ column when `sigma` and its predicted and
/// measured KLD columns when `kld` says, and an update's rank, ‖ΔW‖_F and ‖ΔW‖/‖W‖ when
/// `update` says (`data-frobenius` and `data-base-frobenius` in full); clicking it selects the tensor. Built once per
/// tensor shown: a sort or filter moves it, only the selection restyles it. Its
/// `data-theta`, `data-sigma`, `data-predicted` and `data-measured` carry the figures in full.
fn tensor_row(
    i: usize,
    r: &Row,
    sigma: bool,
    kld: (bool, bool),
    update: (bool, bool),
    selected: RwSignal<Option<String>>,
) -> impl IntoView {
    let t = &r.t;
    let u = t.update.as_ref();
    let figures = u.map(update_figures);
    let (rank, frobenius, relative) = (
        u.map(|u| u.rank.to_string()).unwrap_or_default(),
        figures.as_ref().map(|f| f.0.clone()).unwrap_or_default(),
        figures.and_then(|f| f.1).unwrap_or_else(|| "-".into()),
    );
    let frobenius_attr = u.map(|u| u.frobenius.to_string()).unwrap_or_default();
    let base_attr = u.and_then(|u| u.base_frobenius).map(|x| x.to_string()).unwrap_or_default();
    let (is, pick) = (t.name.clone(), t.name.clone());
    let sci = |v: Option<f64>| v.map_or_else(String::new, |x| format!("{x:.2e}"));
    let full = |v: Option<f64>| v.map_or_else(String::new, |x| x.to_string());
    let fmt = |v: Option<f64>, d: usize| v.map_or_else(String::new, |x| format!("{x:.d$}"));
    let theta_attr = t.theta.map_or_else(String::new, |x| x.to_string());
    let sigma_attr = t.sigma.map_or_else(String::new, |x| x.to_string());
    let status = match t.status {
        Status::Measured => "",
        Status::Degenerate => "degenerate",
        Status::NotMeasurable => "not measurable",
    };
    view! {
        <tr data-name=t.name.clone() data-frobenius=frobenius_attr data-base-frobenius=base_attr data-theta=theta_attr data-sigma=sigma_attr data-predicted=full(r.predicted) data-measured=full(r.measured) class:sel=move || selected.with(|s| s.as_ref() == Some(&is)) on:click=move |_| selected.set(Some(pick.clone()))>
            <td class="n">{i}</td><td><code>{t.name.clone()}</code></td><td>{t.group.name()}</td>
            <td class="n">{t.layer.map(|l| l.to_string()).unwrap_or_default()}</td><td>{t.ty.clone()}</td>
            <td class="n" title=status>{if t.status == Status::NotMeasurable { "n/m".to_owned() } else { fmt(t.theta, 3) }}</td>
            {sigma.then(|| view! { <td class="n">{fmt(t.sigma, 3)}</td> })}
            {kld.0.then(|| view! { <td class="n">{sci(r.predicted)}</td> })}{kld.1.then(|| view! { <td class="n">{sci(r.measured)}</td> })}
            <td class="n">{fmt(t.entropy, 4)}</td><td class="n">{fmt(t.kurtosis, 3)}</td><td class="n">{fmt(t.cv, 4)}</td>
            {update.0.then(|| view! { <td class="n">{rank}</td><td class="n">{frobenius}</td> })}
            {update.1.then(|| view! { <td class="n">{relative}</td> })}
        </tr>
    }
}
