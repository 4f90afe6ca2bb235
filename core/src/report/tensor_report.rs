//! One tensor's row of the report (§4): what it is, how it was measured and its θ. The
//! summary ([`super::Summary`]) and the model's report ([`super::ModelReport`]) are built
//! from these rows.

use crate::anatomy::{classify, Group, OrganKind};
use crate::model::TensorEntry;
use crate::zmeasure::{population_std, Draws, Measurement, Mode};
use alloc::borrow::ToOwned;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// Whether and how a tensor was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// θ from the three indicators.
    Measured,
    /// Too few distinct finite values: θ = 0.
    Degenerate,
    /// A type without a reference dequantizer (Q8_1, Q8_K): no θ.
    NotMeasurable,
}

/// One tensor's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorReport {
    /// Tensor name.
    pub name: String,
    /// Anatomy group.
    pub group: Group,
    /// Organ kind, for organs.
    pub organ: Option<OrganKind>,
    /// Layer (`blk.N.`).
    pub layer: Option<u32>,
    /// ggml type name.
    #[serde(rename = "type")]
    pub ty: String,
    /// Shape, ggml order.
    pub shape: Vec<u64>,
    /// Element count.
    pub n_elements: u64,
    /// Bytes of data.
    pub bytes: u64,
    /// Measured, degenerate or not measurable.
    pub status: Status,
    /// θ in degrees (`None` when not measurable; 0 when degenerate).
    pub theta: Option<f64>,
    /// Entropy H.
    pub entropy: Option<f64>,
    /// Excess kurtosis K.
    pub kurtosis: Option<f64>,
    /// Scale coherence C.
    pub cv: Option<f64>,
    /// Values read.
    pub sampled: u64,
    /// Non-finite values dropped.
    pub dropped: u64,
    /// σ_θ: the spread of θ over the alternate draws (§7), when asked for (`--sigma`); 0
    /// for tensors measured on every value. Absent otherwise, and when not measurable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
    /// θ of each alternate draw k = 1..8 (§7), for sampled tensors when σ was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draws: Option<Vec<f64>>,
    /// Per-expert θ of an expert tensor (§6), when asked for (`--experts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<Vec<crate::zmeasure::experts::ExpertTheta>>,
    /// For a row of an adapter's report (ΔW of a pair, named `TARGET.lora`): its rank,
    /// scale and norms. Absent for a model's tensors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<crate::report::adapter::Update>,
}

impl TensorReport {
    /// The row for tensor `t` with its measurement (`None`: not measurable).
    pub fn new(t: &TensorEntry, m: Option<&Measurement>) -> TensorReport {
        Self::from_parts(&t.name, t.ty, &t.dims, t.n_bytes, m)
    }

    /// The row for a tensor given by its parts.
    pub fn from_parts(
        name: &str,
        ty: crate::GgmlType,
        shape: &[u64],
        bytes: u64,
        m: Option<&Measurement>,
    ) -> TensorReport {
        let a = classify(name);
        let status = match m {
            None => Status::NotMeasurable,
            Some(m) if m.degenerate => Status::Degenerate,
            Some(_) => Status::Measured,
        };
        TensorReport {
            name: name.to_owned(),
            group: a.group,
            organ: a.organ,
            layer: a.layer,
            ty: ty.name().to_owned(),
            shape: shape.to_vec(),
            n_elements: shape.iter().product(),
            bytes,
            status,
            theta: m.map(|m| m.theta),
            entropy: m.and_then(|m| m.entropy),
            kurtosis: m.and_then(|m| m.kurtosis),
            cv: m.and_then(|m| m.cv),
            sampled: m.map_or(0, |m| m.sampled),
            dropped: m.map_or(0, |m| m.dropped),
            sigma: None,
            draws: None,
            experts: None,
            update: None,
        }
    }

    /// The row with its uncertainty (§7): σ_θ of `draws` (the tensor's alternate draws;
    /// `None` for a tensor measured on every value, whose σ_θ is 0). A tensor that is not
    /// measurable keeps no σ.
    pub fn with_draws(mut self, draws: Option<&Draws>) -> TensorReport {
        if self.theta.is_some() {
            self.sigma = Some(draws.map_or(0.0, |d| population_std(d)));
            self.draws = draws.map(|d| d.to_vec());
        }
        self
    }

    /// The row with its experts' rows (§6), each expert's `standing` set from them and
    /// this tensor's sampling ([`crate::zmeasure::experts::set_standings`]): every face
    /// gives an expert the standing its displays show.
    #[must_use]
    pub fn with_experts(mut self, experts: Option<Vec<crate::zmeasure::experts::ExpertTheta>>) -> TensorReport {
        self.experts = experts.map(|mut x| {
            crate::zmeasure::experts::set_standings(&mut x, self.n_elements, self.sampled);
            x
        });
        self
    }

    /// The row as measured in `mode`: with its uncertainty ([`TensorReport::with_draws`])
    /// unless plainly sampled, where reports carry no σ.
    pub fn in_mode(self, mode: Mode, draws: Option<&Draws>) -> TensorReport {
        if mode == Mode::Sampled {
            self
        } else {
            self.with_draws(draws)
        }
    }
}
