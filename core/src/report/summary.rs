//! A model's θ summary (§4): the means, the per-group statistics and the wells.

use super::{Status, TensorReport};
use crate::anatomy::Group;
use crate::zmeasure::{pairwise_sum, population_std, DRAWS};
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
    /// Its σ_θ (§7), when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
}

/// Whether a display lists `r` among the wells by default: a weight matrix (two dims of more
/// than one element), not a router. Norm vectors and biases are 1-D, and a model's lowest θ
/// are mostly theirs (all 10 of SmolLM2's) and its routers' (an untrained router is all
/// zeros, θ 0°); they say little about the matrices people look for.
pub fn is_weight_matrix(r: &TensorReport) -> bool {
    r.shape.iter().filter(|&&d| d > 1).count() >= 2 && r.organ != Some(crate::anatomy::OrganKind::Router)
}

/// The `n` lowest-θ tensors of `rows`, lowest first (ties by name): all with a θ when `all`
/// (§4's wells, as the summary holds them), else only the [`is_weight_matrix`] ones (what
/// the text, the static page and the app list unless asked for all).
pub fn wells(rows: &[TensorReport], all: bool, n: usize) -> Vec<Well> {
    let mut wells: Vec<Well> = rows
        .iter()
        .filter(|r| all || is_weight_matrix(r))
        .filter_map(|r| Some(Well { name: r.name.clone(), group: r.group, theta: r.theta?, sigma: r.sigma }))
        .collect();
    wells.sort_by(|a, b| a.theta.total_cmp(&b.theta).then_with(|| a.name.cmp(&b.name)));
    wells.truncate(n);
    wells
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
    /// σ of θ_mean (§7): the population standard deviation over the alternate draws k of
    /// θ_mean with draw k for every sampled tensor. Present when the rows carry σ_θ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theta_mean_sigma: Option<f64>,
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
        let wells = wells(rows, true, WELLS);
        let theta_mean_sigma = with_theta.iter().any(|(r, _)| r.sigma.is_some()).then(|| {
            let means: Vec<f64> = (0..DRAWS)
                .map(|k| {
                    let drawn =
                        |&(r, t): &(&TensorReport, f64)| r.draws.as_ref().and_then(|d| d.get(k).copied()).unwrap_or(t);
                    mean(&mut with_theta.iter().map(drawn))
                })
                .collect();
            population_std(&means)
        });
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
            theta_mean_sigma,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{ModelReport, Report};
    use crate::zmeasure::{Draws, Measurement};
    use crate::GgmlType;

    fn row(name: &str, theta: f64, draws: Option<&Draws>) -> TensorReport {
        let m = Measurement {
            theta,
            entropy: Some(0.5),
            kurtosis: Some(1.0),
            cv: Some(2.0),
            degenerate: false,
            sampled: 10,
            dropped: 0,
        };
        TensorReport::from_parts(name, GgmlType::F32, &[10], 40, Some(&m)).with_draws(draws)
    }

    /// σ of θ_mean: per draw, the mean with that draw for sampled tensors and θ for the
    /// rest; then the population std of the eight means. Not-measurable tensors stay out.
    #[test]
    fn theta_mean_sigma_takes_each_draw_across_tensors() {
        let d: Draws = [10.0, 12.0, 14.0, 16.0, 10.0, 12.0, 14.0, 16.0];
        let rows = [
            row("a", 13.0, Some(&d)),
            row("b", 20.0, None),
            TensorReport::from_parts("c", GgmlType::Q8_K, &[256], 292, None).with_draws(None),
        ];
        assert_eq!(rows[0].sigma, Some(population_std(&d)));
        assert_eq!(rows[1].sigma, Some(0.0));
        assert_eq!((rows[2].sigma, rows[2].theta), (None, None));
        let s = Summary::of(&rows);
        // Means (d_k + 20) / 2: their spread is half the draws'.
        assert_eq!(s.theta_mean_sigma, Some(population_std(&d) / 2.0));
        assert_eq!(s.wells[0].sigma, Some(population_std(&d)));
        let plain = Summary::of(&[row("a", 13.0, None)].map(|mut r| {
            r.sigma = None;
            r
        }));
        assert_eq!(plain.theta_mean_sigma, None);
    }

    /// Neighbours in the ranking closer than twice the larger σ are not distinguishable.
    #[test]
    fn close_neighbours_in_the_ranking_are_marked() {
        let model = |name: &str, theta: f64, spread: f64| {
            let d: Draws = core::array::from_fn(|k| theta + if k % 2 == 0 { spread } else { -spread });
            ModelReport::from_parts(name, None, None, 0, alloc::vec![row("t", theta, Some(&d))])
        };
        // σ of θ_mean is the spread: 1.0, 0.1, 0.1.
        let r = Report::new("test", alloc::vec![model("a", 50.0, 1.0), model("b", 48.5, 0.1), model("c", 40.0, 0.1)]);
        let marks: Vec<_> = r.ranking.iter().map(|x| (x.model.as_str(), x.distinguishable_from_next)).collect();
        assert_eq!(marks, [("a", Some(false)), ("b", Some(true)), ("c", None)]);
        let plain = Report::new("test", alloc::vec![ModelReport::from_parts("p", None, None, 0, alloc::vec![])]);
        assert_eq!(plain.ranking[0].distinguishable_from_next, None);
    }

    #[test]
    fn displayed_wells_are_weight_matrices_and_the_summary_keeps_all() {
        let shaped = |name: &str, theta: f64, dims: &[u64]| {
            let m = Measurement {
                theta,
                entropy: None,
                kurtosis: None,
                cv: None,
                degenerate: false,
                sampled: 1,
                dropped: 0,
            };
            TensorReport::from_parts(name, GgmlType::F32, dims, 4, Some(&m))
        };
        let rows = [
            shaped("blk.0.attn_norm.weight", 1.0, &[576]),
            shaped("blk.0.ffn_gate_inp.weight", 0.0, &[576, 4]),
            shaped("blk.0.attn_q.weight", 30.0, &[576, 576]),
            shaped("blk.0.ffn_up_exps.weight", 20.0, &[576, 1536, 4]),
            shaped("blk.0.attn_q.bias", 2.0, &[576, 1]),
            shaped("blk.0.ffn_down.weight", 25.0, &[1536, 576]),
        ];
        let names = |w: Vec<Well>| w.into_iter().map(|w| w.name).collect::<Vec<_>>();
        assert_eq!(
            names(wells(&rows, false, 10)),
            ["blk.0.ffn_up_exps.weight", "blk.0.ffn_down.weight", "blk.0.attn_q.weight"]
        );
        assert_eq!(names(wells(&rows, false, 1)), ["blk.0.ffn_up_exps.weight"]);
        let all = names(wells(&rows, true, 10));
        assert_eq!(all[..3], ["blk.0.ffn_gate_inp.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.bias"]);
        assert_eq!(Summary::of(&rows).wells.iter().map(|w| w.name.clone()).collect::<Vec<_>>(), all, "§4's wells");
    }
}
