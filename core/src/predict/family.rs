//! Which architectures the residual-stream model covers, and where their blocks differ
//! from llama's (docs/predict.md, "Architectures"): read from each one's graph in llama.cpp
//! 11434 (`src/models/<arch>.cpp`). A weight the model does not cover (an architecture not
//! listed, MLA's low-rank pieces, expert stacks, shared experts, queries and keys behind a
//! per-head norm) is predicted from its weighted error alone ([`Method::WeightedError`]).
//!
//! Norm gains are used as the file stores them: llama.cpp multiplies by the stored gain, and
//! gemma's converter stores `1 + w` (Gemma's RMSNorm scales by `1 + w`), so the offset is
//! already in the file.

use serde::{Deserialize, Serialize};

/// The FFN's activation, which sets `ffn_down`'s data-free columns and the gate's and up's
/// row weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// SwiGLU: `silu(gate) · up` (llama.cpp `LLM_FFN_SILU`).
    Silu,
    /// GeGLU: `gelu(gate) · up`, GELU's tanh form (`LLM_FFN_GELU`, ggml's `gelu`).
    Gelu,
}

/// How a family's pre-norm block departs from llama's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// `general.architecture`, and the prefix of its metadata keys.
    pub arch: &'static str,
    /// The FFN's activation.
    pub activation: Activation,
    /// `post_attention_norm` and `post_ffw_norm` RMS-normalize what `attn_output` and
    /// `ffn_down` add to the stream (gemma2, gemma3).
    pub post_norms: bool,
    /// `attn_q_norm` and `attn_k_norm` RMS-normalize each head's query and key (qwen3,
    /// gemma3): their errors reach the scores relative to the head's own size, which the
    /// per-kind factors fitted on llama do not calibrate, so q and k take the weighted error.
    pub qk_norms: bool,
    /// The token embedding is scaled by `√n_embd` before the first block (gemma).
    pub embedding_scaled: bool,
}

const fn family(arch: &'static str, activation: Activation, post_norms: bool, qk_norms: bool) -> Family {
    let gemma = matches!(activation, Activation::Gelu);
    Family { arch, activation, post_norms, qk_norms, embedding_scaled: gemma }
}

/// The architectures whose blocks are llama's seven linear weights behind RMS pre-norms:
/// llama and qwen2 (q, k, v biases change no weight's error) as they are; qwen3 with q/k
/// norms; gemma with GeGLU and a scaled embedding; gemma2 and gemma3 with post-norms too
/// (gemma2's attention soft-cap is not modelled: it bounds scores the error moves).
pub const FAMILIES: [Family; 6] = [
    family("llama", Activation::Silu, false, false),
    family("qwen2", Activation::Silu, false, false),
    family("qwen3", Activation::Silu, false, true),
    family("gemma", Activation::Gelu, false, false),
    family("gemma2", Activation::Gelu, true, false),
    family("gemma3", Activation::Gelu, true, true),
];

impl Family {
    /// The family of architecture `arch`, if the residual model covers it.
    pub fn of(arch: &str) -> Option<Family> {
        FAMILIES.into_iter().find(|f| f.arch == arch)
    }

    /// The post-norm of the attention half and of the FFN half, in block `layer`.
    pub fn post_norm_names(&self, layer: u32) -> [alloc::string::String; 2] {
        [alloc::format!("blk.{layer}.post_attention_norm.weight"), alloc::format!("blk.{layer}.post_ffw_norm.weight")]
    }
}

/// Which model predicted a weight's KL divergence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// The residual-stream model: input columns propagated through the block (data-free),
    /// a factor per kind fitted on llama ([`super::Calibration::for_source`]).
    Residual,
    /// The weaker predictor: the plain weighted round-trip error, its columns from the
    /// importance matrix or, data-free, from the norm that feeds the weight (uniform when
    /// none does), scaled by one factor for every kind
    /// ([`super::Calibration::weighted_error`]).
    WeightedError,
}

impl Method {
    /// The name outputs give it (`residual`, `weighted_error`).
    pub fn name(self) -> &'static str {
        match self {
            Method::Residual => "residual",
            Method::WeightedError => "weighted_error",
        }
    }
}

/// The norm that feeds a block weight of kind `stem` (its name without `blk.N.` and
/// `.weight`), as llama.cpp's graphs apply them: its squared gains are the weight's input
/// columns' mean squares, data-free. `None` for a weight fed by no norm (an output
/// projection, MLA's `attn_k_b`/`attn_v_b`, an unknown kind).
pub fn feeding_norm(stem: &str) -> Option<&'static str> {
    match stem {
        "attn_q" | "attn_k" | "attn_v" | "attn_qkv" | "attn_q_a" | "attn_kv_a_mqa" => Some("attn_norm"),
        "attn_q_b" => Some("attn_q_a_norm"),
        "attn_kv_b" => Some("attn_kv_a_norm"),
        "ffn_gate" | "ffn_up" | "ffn_gate_exps" | "ffn_up_exps" | "ffn_gate_shexp" | "ffn_up_shexp"
        | "ffn_gate_up_exps" => Some("ffn_norm"),
        _ => None,
    }
}
