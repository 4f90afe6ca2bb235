//! Every comparable pair in a table that sorts by any column and filters by name, type,
//! group or change, above the experts of the pair clicked.
//!
//! The rows are a keyed list (`<For>`, keyed by pair index), as the tensor table's: a sort
//! or filter moves the existing `<tr>`s. Each row carries its exact figures in `data-*`
//! attributes (the tests read them).

use super::sortable::{self, by_figure, group_select, Column, Sort};
use leptos::prelude::*;
use organ_core::compare::{CompareReport, PairReport};
use organ_core::report::sci;
use std::cmp::Ordering;
use std::sync::Arc;

/// Table columns that sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Col {
    Index,
    Name,
    Group,
    Layer,
    Types,
    Identical,
    Cos,
    RelL2,
    MaxAbs,
    DTheta,
    ThetaA,
    ThetaB,
}

impl Column<PairReport> for Col {
    fn cmp(self, a: &PairReport, b: &PairReport) -> Ordering {
        let f = by_figure;
        match self {
            Col::Index => Ordering::Equal,
            Col::Name => a.name.cmp(&b.name),
            Col::Group => a.group.name().cmp(b.group.name()),
            Col::Layer => a.layer.cmp(&b.layer),
            Col::Types => (&a.type_a, &a.type_b).cmp(&(&b.type_a, &b.type_b)),
            Col::Identical => a.identical.cmp(&b.identical),
            Col::Cos => f(a.cos, b.cos),
            Col::RelL2 => f(a.rel_l2, b.rel_l2),
            Col::MaxAbs => f(a.max_abs, b.max_abs),
            Col::DTheta => f(a.d_theta, b.d_theta),
            Col::ThetaA => f(a.theta_a, b.theta_a),
            Col::ThetaB => f(a.theta_b, b.theta_b),
        }
    }
}

/// What the filters ask for.
#[derive(Clone, Debug, Default, PartialEq)]
struct Filters {
    /// A name's substring or a whole type, case-insensitive.
    query: String,
    /// A group's name, or empty for all.
    group: String,
    changed_only: bool,
}

/// The indices of the pairs that pass the filters, in the chosen order (ties in A's order).
fn visible(r: &CompareReport, f: &Filters, sort: (Col, bool)) -> Vec<usize> {
    let q = f.query.to_lowercase();
    let keep = |p: &PairReport| {
        (f.group.is_empty() || p.group.name() == f.group)
            && (!f.changed_only || !p.identical)
            && (q.is_empty()
                || p.name.to_lowercase().contains(&q)
                || p.type_a.to_lowercase() == q
                || p.type_b.to_lowercase() == q)
    };
    sortable::visible(&r.pairs, keep, sort)
}

/// The table with its filters, and below it the experts of the selected pair.
#[component]
pub fn PairTable(r: Arc<CompareReport>) -> impl IntoView {
    let sort = Sort::new(Col::Index);
    let filters = RwSignal::new(Filters::default());
    let selected: RwSignal<Option<usize>> = RwSignal::new(None);
    let rows = {
        let r = r.clone();
        move || filters.with(|f| visible(&r, f, sort.get()))
    };
    let header = move |label, col| sort.header(label, col);
    let groups = {
        let r = r.clone();
        group_select(
            "pair-group-filter",
            move |g| r.pairs.iter().any(|p| p.group == g),
            move || filters.with(|f| f.group.clone()),
            move |g| filters.update(|f| f.group = g),
        )
    };
    let row_r = r.clone();
    view! {
        <h3>"Pairs"</h3>
        <div class="row filters">
            <input id="pair-filter" type="search" placeholder="filter by name or type"
                on:input=move |ev| filters.update(|f| f.query = event_target_value(&ev)) />
            {groups}
            <label><input id="changed-only" type="checkbox"
                on:change=move |ev| filters.update(|f| f.changed_only = event_target_checked(&ev)) />" changed only"</label>
            <span class="mute">"Click a column to sort; a row of an expert tensor for its experts."</span>
        </div>
        <div>
            <div class="scroll">
                <table id="pairs" class="tensors pairs">
                    <thead><tr>
                        {header("#", Col::Index)}{header("name", Col::Name)}{header("group", Col::Group)}{header("layer", Col::Layer)}
                        {header("types A → B", Col::Types)}{header("bytes", Col::Identical)}{header("cos", Col::Cos)}
                        {header("rel_l2", Col::RelL2)}{header("max_abs", Col::MaxAbs)}{header("dθ", Col::DTheta)}
                        {header("θ(A)", Col::ThetaA)}{header("θ(B)", Col::ThetaB)}
                    </tr></thead>
                    <tbody>
                        <For each=rows key=|i| *i children=move |i| pair_row(i, &row_r.pairs[i], selected) />
                    </tbody>
                </table>
            </div>
            <div id="experts">
                {move || match selected.get().map(|i| &r.pairs[i]) {
                    Some(p) if p.experts.is_some() => experts(p).into_any(),
                    Some(p) => view! { <h3>{p.name.clone()}</h3><p class="mute">"Not an expert tensor."</p> }.into_any(),
                    None => view! { <p class="mute">"Click an expert tensor (name with _exps) to compare its experts one by one."</p> }.into_any(),
                }}
            </div>
        </div>
    }
}

/// An exact figure for a `data-*` attribute (shortest round-trip form; empty for none).
pub(super) fn exact(v: Option<f64>) -> String {
    v.map_or_else(String::new, |x| x.to_string())
}

/// The row of pair `i`, `p`; clicking it selects the pair.
fn pair_row(i: usize, p: &PairReport, selected: RwSignal<Option<usize>>) -> impl IntoView {
    let fmt = |v: Option<f64>, d: usize| v.map_or_else(String::new, |x| format!("{x:.d$}"));
    let bytes = if p.identical {
        "identical"
    } else if p.measurable {
        "changed"
    } else {
        "changed (bytes only)"
    };
    view! {
        <tr data-name=p.name.clone() data-identical=p.identical.to_string() data-cos=exact(p.cos) data-rel-l2=exact(p.rel_l2)
            data-max-abs=exact(p.max_abs) data-d-theta=exact(p.d_theta) class:same=p.identical
            class:sel=move || selected.get() == Some(i) on:click=move |_| selected.set(Some(i))>
            <td class="n">{i}</td><td><code>{p.name.clone()}</code>
                {p.name_b.clone().map(|n| view! { <span class="mute">" · B "<code>{n}</code></span> })}</td><td>{p.group.name()}</td>
            <td class="n">{p.layer.map(|l| l.to_string()).unwrap_or_default()}</td>
            <td>{if p.type_a == p.type_b { p.type_a.clone() } else { format!("{} → {}", p.type_a, p.type_b) }}</td>
            <td>{bytes}</td><td class="n" title=p.cos.map(|c| format!("1 − cos = {}", 1.0 - c)).unwrap_or_default()>{fmt(p.cos, 8)}</td>
            <td class="n">{sci(p.rel_l2)}</td><td class="n">{sci(p.max_abs)}</td><td class="n">{fmt(p.d_theta, 4)}</td>
            <td class="n">{fmt(p.theta_a, 3)}</td><td class="n">{fmt(p.theta_b, 3)}</td>
        </tr>
    }
}

/// The experts of an expert tensor pair, one row each.
fn experts(p: &PairReport) -> impl IntoView {
    let fmt = |v: Option<f64>, d: usize| v.map_or_else(String::new, |x| format!("{x:.d$}"));
    let rows = p.experts.clone().unwrap_or_default();
    view! {
        <h3>{format!("{}: {} experts", p.name, rows.len())}</h3>
        <div class="scroll">
            <table id="expert-table"><thead><tr><th>"expert"</th><th>"bytes"</th><th>"cos"</th><th>"rel_l2"</th><th>"dθ"</th></tr></thead><tbody>
            {rows.into_iter().map(|e| view! {
                <tr data-expert=e.expert.to_string() data-cos=exact(e.cos)><td class="n">{e.expert}</td>
                <td>{if e.identical { "identical" } else { "changed" }}</td><td class="n">{fmt(e.cos, 8)}</td>
                <td class="n">{sci(e.rel_l2)}</td><td class="n">{fmt(e.d_theta, 4)}</td></tr>
            }).collect_view()}
            </tbody></table>
        </div>
    }
}
