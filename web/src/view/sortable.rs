//! What the tensor table and the pair table share: columns that sort when their header is
//! clicked (again: the other way), the rows that pass the filters in the chosen order
//! (ties in the report's order), and the select of the groups the rows have.

use leptos::prelude::*;
use organ_core::anatomy::Group;
use std::cmp::Ordering;

/// A table's column that sorts rows `R`.
pub(super) trait Column<R>: Copy + PartialEq + Send + Sync + 'static {
    /// The order of two rows by this column, ascending.
    fn cmp(self, a: &R, b: &R) -> Ordering;
}

/// Two figures in order, a missing one first.
pub(super) fn by_figure(x: Option<f64>, y: Option<f64>) -> Ordering {
    x.unwrap_or(f64::NEG_INFINITY).total_cmp(&y.unwrap_or(f64::NEG_INFINITY))
}

/// The column rows are sorted by, and whether ascending.
#[derive(Clone, Copy)]
pub(super) struct Sort<C: Send + Sync + 'static>(RwSignal<(C, bool)>);

impl<C: Copy + PartialEq + Send + Sync + 'static> Sort<C> {
    /// Sorted by `col`, ascending.
    pub fn new(col: C) -> Self {
        Self(RwSignal::new((col, true)))
    }

    /// Sorted as `sort` says (a signal kept outside the table).
    pub fn of(sort: RwSignal<(C, bool)>) -> Self {
        Self(sort)
    }

    /// The column and whether ascending (tracked).
    pub fn get(self) -> (C, bool) {
        self.0.get()
    }

    /// The header cell of `col`: clicking it sorts by `col`, ascending, or the other way
    /// when already sorted by it; an arrow shows the order.
    pub fn header(self, label: &'static str, col: C) -> impl IntoView {
        let sort = self.0;
        view! {
            <th on:click=move |_| sort.update(|s| *s = if s.0 == col { (col, !s.1) } else { (col, true) })>
                {label}{move || { let s = sort.get(); if s.0 == col { if s.1 { " ▲" } else { " ▼" } } else { "" } }}
            </th>
        }
    }
}

/// The indices of the `rows` that `keep` keeps, in order by `col` (ties in index order),
/// ascending when `asc`.
pub(super) fn visible<R, C: Column<R>>(rows: &[R], keep: impl Fn(&R) -> bool, (col, asc): (C, bool)) -> Vec<usize> {
    let mut ix: Vec<usize> = (0..rows.len()).filter(|&i| keep(&rows[i])).collect();
    ix.sort_by(|&a, &b| {
        let o = col.cmp(&rows[a], &rows[b]).then(a.cmp(&b));
        if asc {
            o
        } else {
            o.reverse()
        }
    });
    ix
}

/// The select of the groups some row is in (`has`), in the anatomy's order, after "all
/// groups" (value ""), showing `current`; `on_group` gets the value chosen.
pub(super) fn group_select(
    id: &'static str,
    has: impl Fn(Group) -> bool,
    current: impl Fn() -> String + Copy + Send + Sync + 'static,
    on_group: impl Fn(String) + 'static,
) -> impl IntoView {
    let groups: Vec<&'static str> = Group::ALL.iter().filter(|g| has(**g)).map(|g| g.name()).collect();
    view! {
        <select id=id on:change=move |ev| on_group(event_target_value(&ev))>
            <option value="" prop:selected=move || current().is_empty()>"all groups"</option>
            {groups.into_iter().map(|g| view! { <option value=g prop:selected=move || current() == g>{g}</option> }).collect_view()}
        </select>
    }
}
