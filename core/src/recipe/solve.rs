//! The search: one option per curve, minimising the total cost with the total charge
//! within the budget (a multiple-choice knapsack).
//!
//! 1. **Lagrangian over the hulls.** Each curve's options are reduced to the lower convex
//!    hull of (charge, cost) (dominated and non-convex points dropped). Every curve starts
//!    at its smallest option; the hull segments of all curves, sorted by the cost they save
//!    per byte (the slope, λ), are taken in that order while they fit. Within a curve the
//!    slopes fall, so this is the minimiser of cost + λ·bytes for the λ of the last segment
//!    taken. At the first segment that does not fit, taking the fitting fraction of it gives
//!    the optimum of the continuous relaxation: a lower bound on the best recipe
//!    ([`Solution::lower_bound`]).
//! 2. **Fill.** The bytes left are spent greedily: repeatedly, the single change of one
//!    curve's option (any option, on the hull or not) that fits and lowers the cost most.
//!
//! The result never exceeds the budget; its cost is at most the lower bound plus the gain
//! of the one segment that did not fit, and [`Solution::lower_bound`] lets the caller say
//! how far from optimal it can be.

use super::size::Account;
use super::{Curve, Error};
use alloc::format;
use alloc::vec::Vec;

/// Why an option was chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Why {
    /// The curve has one option.
    Only,
    /// The smallest option: no hull segment of this curve was worth its bytes at the final λ.
    Smallest,
    /// The option minimising cost + λ·bytes at the final λ.
    Hull,
    /// Taken with the bytes left after the hull search.
    Fill,
}

/// A recipe: for each curve, the index of its option chosen and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// Per curve, in order: the option's index and why.
    pub choices: Vec<(usize, Why)>,
    /// The total charge (per the [`Account`]) of the options chosen.
    pub charged: u64,
    /// The total cost of the options chosen.
    pub cost: f64,
    /// The λ (cost saved per byte) of the last hull segment taken (0 when none was).
    pub lambda: f64,
    /// No recipe within the budget costs less than this.
    pub lower_bound: f64,
}

/// One step along a curve's hull: from hull point `k - 1` to `k`.
struct Segment {
    curve: usize,
    k: usize,
    slope: f64,
}

/// Chooses one option per curve: minimal total cost with a total charge within `budget`.
///
/// # Errors
/// A curve without options or with a non-finite cost; [`Error::BudgetTooSmall`] when
/// every curve at its smallest option already exceeds the budget.
pub fn solve(curves: &[Curve], budget: u64, account: Account) -> Result<Solution, Error> {
    let charge = |c: usize, o: usize| account.charge(curves[c].options[o].bytes);
    let cost = |c: usize, o: usize| curves[c].options[o].cost;
    let mut hulls = Vec::with_capacity(curves.len());
    for (i, c) in curves.iter().enumerate() {
        if c.options.is_empty() {
            return Err(Error::BadCurve { tensor: c.name.clone(), reason: "no type to choose".into() });
        }
        if let Some(p) = c.options.iter().find(|p| !p.cost.is_finite()) {
            return Err(Error::BadCurve {
                tensor: c.name.clone(),
                reason: format!("{}: cost {} is not finite", p.ty, p.cost),
            });
        }
        hulls.push(hull(&(0..c.options.len()).map(|o| (charge(i, o), cost(i, o))).collect::<Vec<_>>()));
    }
    let need = hulls.iter().enumerate().fold(0u64, |n, (i, h)| n.saturating_add(charge(i, h[0])));
    if need > budget {
        return Err(Error::BudgetTooSmall { need, budget });
    }
    let mut segments = Vec::new();
    for (i, h) in hulls.iter().enumerate() {
        for k in 1..h.len() {
            let (dw, dc) = (charge(i, h[k]) - charge(i, h[k - 1]), cost(i, h[k - 1]) - cost(i, h[k]));
            segments.push(Segment { curve: i, k, slope: dc / dw as f64 });
        }
    }
    segments.sort_by(|a, b| b.slope.total_cmp(&a.slope).then(a.curve.cmp(&b.curve)).then(a.k.cmp(&b.k)));
    let mut at: Vec<usize> = alloc::vec![0; curves.len()];
    let mut charged = need;
    let mut lambda = 0.0;
    let mut fraction = 0.0;
    for s in &segments {
        let (i, k) = (s.curve, s.k);
        let dw = charge(i, hulls[i][k]) - charge(i, hulls[i][k - 1]);
        if charged + dw > budget {
            let gain = cost(i, hulls[i][k - 1]) - cost(i, hulls[i][k]);
            fraction = gain * (budget - charged) as f64 / dw as f64;
            break;
        }
        charged += dw;
        at[i] = k;
        lambda = s.slope;
    }
    let mut choices: Vec<(usize, Why)> = at
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let why = if curves[i].options.len() == 1 {
                Why::Only
            } else if k == 0 {
                Why::Smallest
            } else {
                Why::Hull
            };
            (hulls[i][k], why)
        })
        .collect();
    let total = |choices: &[(usize, Why)]| choices.iter().enumerate().map(|(i, &(o, _))| cost(i, o)).sum::<f64>();
    let lower_bound = total(&choices) - fraction;
    // Fill: each step lowers the cost, so it ends; the cap bounds it on any input.
    let cap = curves.iter().map(|c| c.options.len()).sum::<usize>().saturating_mul(4);
    for _ in 0..cap {
        let left = budget - charged;
        let mut best: Option<(usize, usize, f64, u64)> = None;
        for (i, &(o, _)) in choices.iter().enumerate() {
            let (w0, c0) = (charge(i, o), cost(i, o));
            for p in 0..curves[i].options.len() {
                let (w, c) = (charge(i, p), cost(i, p));
                if c >= c0 || w > w0 && w - w0 > left {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some((_, _, gain, dw)) => c0 - c > gain || (c0 - c == gain && w < dw),
                };
                if better {
                    best = Some((i, p, c0 - c, w));
                }
            }
        }
        let Some((i, p, _, w)) = best else { break };
        charged = charged - charge(i, choices[i].0) + w;
        choices[i] = (p, Why::Fill);
    }
    let cost = total(&choices);
    Ok(Solution { choices, charged, cost, lambda, lower_bound: lower_bound.min(cost) })
}

/// The indices of the lower convex hull of `points` (charge, cost), from the smallest
/// charge (least cost among equals) to the least cost (smallest charge among equals):
/// every point on it saves cost for its bytes, at slopes that fall.
fn hull(points: &[(u64, f64)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| points[a].0.cmp(&points[b].0).then(points[a].1.total_cmp(&points[b].1)).then(a.cmp(&b)));
    let mut h: Vec<usize> = Vec::new();
    for &p in &order {
        let (w, c) = points[p];
        // Only points that cost strictly less than every smaller one are worth bytes.
        if h.last().is_some_and(|&q| points[q].1 <= c) {
            continue;
        }
        // Drop the last point while it lies on or above the segment from the one before it to p.
        while h.len() >= 2 {
            let (a, b) = (points[h[h.len() - 2]], points[h[h.len() - 1]]);
            let cross = (b.0 - a.0) as f64 * (c - a.1) - (b.1 - a.1) * (w - a.0) as f64;
            if cross <= 0.0 {
                h.pop();
            } else {
                break;
            }
        }
        h.push(p);
    }
    h
}
