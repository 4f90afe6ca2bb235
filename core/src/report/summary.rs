//! A model's θ summary (§4): the means, the per-group statistics and the wells.

use super::{Status, TensorReport};
use crate::anatomy::Group;
use crate::zmeasure::pairwise_sum;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// How many lowest-θ tensors a summary lists as wells.
pub const WELLS: usize = 10;

/// θ statistics of one anatomy group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSummary {
    /// The group.
    pub group: Group,
    /// Tensors in it (measured or degenerate).
    pub count: u64,
    /// Mean θ.
    pub mean: f64,
    /// Lowest θ.
    pub min: f64,
    /// Highest θ.
    pub max: f64,
}

/// A low-θ tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Well {
    /// Tensor name.
    pub name: String,
    /// Its group.
    pub group: Group,
    /// Its θ.
    pub theta: f64,
}

/// A model's summary (§4). Tensors that are not measurable count in `tensors` and
/// `not_measurable` only; degenerate ones count as θ = 0 everywhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// All tensors.
    pub tensors: u64,
    /// Tensors with a θ from the indicators.
    pub measured: u64,
    /// Degenerate tensors (θ = 0).
    pub degenerate: u64,
    /// Tensors of types with no reference dequantizer.
    pub not_measurable: u64,
    /// Plain mean of θ.
    pub theta_mean: f64,
    /// Mean of θ weighted by element count.
    pub theta_weighted: f64,
    /// Mean of sin θ.
    pub signal: f64,
    /// Per group, in [`Group::ALL`] order, groups without tensors left out.
    pub groups: Vec<GroupSummary>,
    /// The lowest-θ tensors, lowest first (ties by name).
    pub wells: Vec<Well>,
}

impl Summary {
    /// The summary of a model's tensor rows.
    pub fn of(rows: &[TensorReport]) -> Summary {
        let with_theta: Vec<(&TensorReport, f64)> = rows.iter().filter_map(|r| r.theta.map(|t| (r, t))).collect();
        let n = with_theta.len();
        let mean = |it: &mut dyn Iterator<Item = f64>| -> f64 {
            let v: Vec<f64> = it.collect();
            if v.is_empty() {
                0.0
            } else {
                pairwise_sum(&v) / v.len() as f64
            }
        };
        let theta_mean = mean(&mut with_theta.iter().map(|&(_, t)| t));
        let total_weight: f64 = with_theta.iter().map(|(r, _)| r.n_elements as f64).sum();
        let theta_weighted = if total_weight > 0.0 {
            with_theta.iter().map(|(r, t)| t * r.n_elements as f64).sum::<f64>() / total_weight
        } else {
            0.0
        };
        let signal = mean(&mut with_theta.iter().map(|&(_, t)| libm::sin(t.to_radians())));
        let mut groups = Vec::new();
        for g in Group::ALL {
            let ts: Vec<f64> = with_theta.iter().filter(|(r, _)| r.group == g).map(|&(_, t)| t).collect();
            if ts.is_empty() {
                continue;
            }
            groups.push(GroupSummary {
                group: g,
                count: ts.len() as u64,
                mean: pairwise_sum(&ts) / ts.len() as f64,
                min: ts.iter().copied().fold(f64::INFINITY, f64::min),
                max: ts.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            });
        }
        let mut wells: Vec<Well> =
            with_theta.iter().map(|&(r, t)| Well { name: r.name.clone(), group: r.group, theta: t }).collect();
        wells.sort_by(|a, b| a.theta.total_cmp(&b.theta).then_with(|| a.name.cmp(&b.name)));
        wells.truncate(WELLS);
        let degenerate = rows.iter().filter(|r| r.status == Status::Degenerate).count() as u64;
        Summary {
            tensors: rows.len() as u64,
            measured: n as u64 - degenerate,
            degenerate,
            not_measurable: (rows.len() - n) as u64,
            theta_mean,
            theta_weighted,
            signal,
            groups,
            wells,
        }
    }
}
