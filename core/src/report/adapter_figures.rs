//! What an adapter's report says besides θ: per update ([`Update`], a row's) and for the
//! adapter as a whole ([`Facts`], the model's). Apart from the rows and reports that
//! `report::adapter` builds, so that the rows (`tensor_report`) and the model's report
//! (`schema`) can carry them.

use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// What a row of an adapter's report says of its update besides θ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Update {
    /// The rank r.
    pub rank: u64,
    /// The factor of B·A: s · α / r (`lora::Adapter::scale`).
    pub scale: f64,
    /// ‖ΔW‖_F.
    pub frobenius: f64,
    /// ‖W‖_F of the weight in the base, when a base was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_frobenius: Option<f64>,
}

impl Update {
    /// ‖ΔW‖_F / ‖W‖_F, when the base was given and its weight is not all zero.
    pub fn relative(&self) -> Option<f64> {
        self.base_frobenius.filter(|&b| b > 0.0).map(|b| self.frobenius / b)
    }
}

/// What a report says of an adapter as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    /// `adapter.lora.alpha`.
    pub alpha: Option<f32>,
    /// The ranks of its pairs, each once, ascending.
    pub ranks: Vec<u64>,
    /// How many weights it adapts.
    pub pairs: u64,
    /// The length of an aLoRA's invocation sequence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation_tokens: Option<u64>,
    /// The base its updates were compared with (`--base`), by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<alloc::string::String>,
}
