//! Every tensor of the model in a table that sorts by any column and filters by name,
//! type or group, beside the histogram of the tensor clicked.
//!
//! The rows are a keyed list (`<For>`, keyed by tensor index): a sort or a filter moves
//! the existing `<tr>`s and adds or removes only those that enter or leave, instead of
//! building every row again.

use super::histogram::HistogramView;
use leptos::prelude::*;
use organ_core::report::Histogram;
use organ_core::report::{ModelReport, Status, TensorReport};
use std::cmp::Ordering;
use std::sync::Arc;

/// Table columns that sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Col {
    Index,
    Name,
    Group,
    Layer,
    Type,
    Theta,
    Sigma,
    H,
    K,
    C,
}

/// The order of two rows by `col`, ascending; a missing number sorts first.
fn cmp_rows(a: &TensorReport, b: &TensorReport, col: Col) -> Ordering {
    let f = |x: Option<f64>, y: Option<f64>| x.unwrap_or(f64::NEG_INFINITY).total_cmp(&y.unwrap_or(f64::NEG_INFINITY));
    match col {
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
    }
}

/// The indices of the tensors that pass the filters, in the chosen order (ties in file
/// order). `query` matches a name's substring or a whole type, case-insensitively;
/// `group` is a group's name, or empty for all.
fn visible(m: &ModelReport, query: &str, group: &str, (col, asc): (Col, bool)) -> Vec<usize> {
    let q = query.to_lowercase();
    let mut ix: Vec<usize> = (0..m.tensors.len())
        .filter(|&i| {
            let t = &m.tensors[i];
            (group.is_empty() || t.group.name() == group)
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

/// The table with its filters, and the histogram of the selected tensor.
#[component]
pub fn TensorTable(
    m: Arc<ModelReport>,
    /// Per tensor, when measured in this tab.
    histograms: Arc<Vec<Option<Histogram>>>,
) -> impl IntoView {
    let sort = RwSignal::new((Col::Index, true));
    let filter = RwSignal::new(String::new());
    let group = RwSignal::new(String::new());
    let selected: RwSignal<Option<usize>> = RwSignal::new(None);
    let rows = {
        let m = m.clone();
        move || filter.with(|q| group.with(|g| visible(&m, q, g, sort.get())))
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
    let row_m = m.clone();
    // σ_θ stands beside θ when the report has it (§7).
    let sigma = m.tensors.iter().any(|t| t.sigma.is_some());
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
                        {header("type", Col::Type)}{header("θ", Col::Theta)}{sigma.then(|| header("σ", Col::Sigma))}{header("H", Col::H)}{header("K", Col::K)}{header("C", Col::C)}
                    </tr></thead>
                    <tbody>
                        <For each=rows key=|i| *i children=move |i| tensor_row(i, &row_m.tensors[i], sigma, selected) />
                    </tbody>
                </table>
            </div>
            <div id="histogram" class="hist">
                {move || match selected.get() {
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

/// The row of tensor `i`, `t`, with its σ_θ column when `sigma`; clicking it selects the
/// tensor. Built once per tensor shown: a sort or filter moves it, only the selection
/// restyles it. Its `data-theta` and `data-sigma` carry the figures in full.
fn tensor_row(i: usize, t: &TensorReport, sigma: bool, selected: RwSignal<Option<usize>>) -> impl IntoView {
    let fmt = |v: Option<f64>, d: usize| v.map_or_else(String::new, |x| format!("{x:.d$}"));
    let theta_attr = t.theta.map_or_else(String::new, |x| x.to_string());
    let sigma_attr = t.sigma.map_or_else(String::new, |x| x.to_string());
    let status = match t.status {
        Status::Measured => "",
        Status::Degenerate => "degenerate",
        Status::NotMeasurable => "not measurable",
    };
    view! {
        <tr data-name=t.name.clone() data-theta=theta_attr data-sigma=sigma_attr class:sel=move || selected.get() == Some(i) on:click=move |_| selected.set(Some(i))>
            <td class="n">{i}</td><td><code>{t.name.clone()}</code></td><td>{t.group.name()}</td>
            <td class="n">{t.layer.map(|l| l.to_string()).unwrap_or_default()}</td><td>{t.ty.clone()}</td>
            <td class="n" title=status>{if t.status == Status::NotMeasurable { "n/m".to_owned() } else { fmt(t.theta, 3) }}</td>
            {sigma.then(|| view! { <td class="n">{fmt(t.sigma, 3)}</td> })}
            <td class="n">{fmt(t.entropy, 4)}</td><td class="n">{fmt(t.kurtosis, 3)}</td><td class="n">{fmt(t.cv, 4)}</td>
        </tr>
    }
}
