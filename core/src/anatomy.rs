//! Anatomy: which part of the body a tensor is, from its name alone
//! (Z-measure v1 §4, `docs/z-measure.md`).

use alloc::string::{String, ToString};
use serde::{Deserialize, Serialize};

/// The anatomy group of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// Attention tensors (`.attn_`).
    Skeleton,
    /// Feed-forward tensors (`.ffn_`): dense, experts, shared experts, routers.
    Organ,
    /// Token embedding and output head.
    Embed,
    /// Norm weights.
    Norm,
    /// LoRA tensors.
    Adapter,
    /// Anything else.
    Other,
}

impl Group {
    /// Every group, in report order.
    pub const ALL: [Group; 6] =
        [Group::Skeleton, Group::Organ, Group::Embed, Group::Norm, Group::Adapter, Group::Other];

    /// The group's name as reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            Group::Skeleton => "skeleton",
            Group::Organ => "organ",
            Group::Embed => "embed",
            Group::Norm => "norm",
            Group::Adapter => "adapter",
            Group::Other => "other",
        }
    }

    /// The group with this name.
    pub fn from_name(name: &str) -> Option<Group> {
        Group::ALL.into_iter().find(|g| g.name() == name)
    }
}

/// What kind of organ (feed-forward tensor) this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrganKind {
    /// A dense FFN tensor.
    Dense,
    /// Routed experts (`_exps`).
    Expert,
    /// Shared experts (`_shexp`).
    SharedExpert,
    /// The router (`ffn_gate_inp`).
    Router,
}

/// A tensor's place in the anatomy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anatomy {
    /// The group.
    pub group: Group,
    /// For organs, which kind.
    pub organ: Option<OrganKind>,
    /// The N of `blk.N.`.
    pub layer: Option<u32>,
}

/// Classifies a tensor by name: first rule that matches, in the order of the spec.
pub fn classify(name: &str) -> Anatomy {
    let group = if name.contains("lora_") {
        Group::Adapter
    } else if name.contains("norm") {
        Group::Norm
    } else if name.starts_with("token_embd") || name.starts_with("output.") || name.starts_with("per_layer_token_embd")
    {
        Group::Embed
    } else if name.contains(".attn_") {
        Group::Skeleton
    } else if name.contains(".ffn_") {
        Group::Organ
    } else {
        Group::Other
    };
    let organ = (group == Group::Organ).then(|| {
        if name.contains("_exps") {
            OrganKind::Expert
        } else if name.contains("_shexp") {
            OrganKind::SharedExpert
        } else if name.contains("ffn_gate_inp") {
            OrganKind::Router
        } else {
            OrganKind::Dense
        }
    });
    Anatomy { group, organ, layer: layer_of(name) }
}

/// The N of `blk.N.` (where the name starts with it), if any.
pub fn layer_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("blk.")?;
    let end = rest.find('.')?;
    let digits = &rest[..end];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The number of dimensions ggml counts (`ggml_n_dims`): trailing 1s do not count.
pub fn n_dims(dims: &[u64]) -> usize {
    dims.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1)
}

/// Whether `llama-quantize` quantizes tensor `name` of shape `dims` in a model of
/// architecture `arch` at all (`tensor_allows_quantization`, with `--leave-output-tensor`
/// off); if not, it is copied as it is.
pub fn quantizable(arch: &str, name: &str, dims: &[u64]) -> bool {
    if n_dims(dims) < 2 || !name.ends_with("weight") {
        return false;
    }
    const NEVER: &[&str] = &[
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_tid2eid.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "indexer.k_proj.weight",
        "indexer.q_proj.weight",
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        "attn_rel_b.weight",
        ".position_embd",
        "sam.pos_embd",
        "sam.neck.",
        "sam.net_",
        ".rel_pos",
        ".patch_embd",
        ".patch_merger",
        "a.rvq.codebook",
        "mm.a.code_embd",
    ];
    const GLM5_NEXT: &[&str] = &[
        "hc_",
        "indexer.attn_q_b",
        "indexer.attn_k",
        "indexer.proj",
        "indexer_compressor_gate",
        "indexer_compressor_ape",
        "ssm_f_a.weight",
        "ssm_f_b.weight",
        "ssm_g_a.weight",
        "ssm_g_b.weight",
        "ssm_beta.weight",
        "attn_kv_a_mqa.weight",
        "attn_k_b.weight",
        "attn_v_b.weight",
    ];
    if NEVER.iter().any(|s| name.contains(s)) || name == "position_embd.weight" || name == "token_types.weight" {
        return false;
    }
    !(arch == "glm5-next" && GLM5_NEXT.iter().any(|s| name.contains(s)))
}

/// The tensor's kind: its name without the `blk.N.` prefix and the `.weight` suffix
/// (`attn_q`, `ffn_down`, `token_embd`), so that one kind's tensors across layers group.
pub fn kind(name: &str) -> String {
    let rest = match classify(name).layer {
        Some(l) => name.strip_prefix(&alloc::format!("blk.{l}.")).unwrap_or(name),
        None => name,
    };
    rest.strip_suffix(".weight").unwrap_or(rest).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_the_spec_order() {
        let cases = [
            ("blk.3.attn_q.lora_a", Group::Adapter),
            ("blk.0.attn_norm.weight", Group::Norm),
            ("output_norm.weight", Group::Norm),
            ("token_embd.weight", Group::Embed),
            ("output.weight", Group::Embed),
            ("per_layer_token_embd.weight", Group::Embed),
            ("blk.0.attn_q.weight", Group::Skeleton),
            ("blk.0.ffn_up.weight", Group::Organ),
            ("rope_freqs.weight", Group::Other),
        ];
        for (name, g) in cases {
            assert_eq!(classify(name).group, g, "{name}");
        }
    }

    #[test]
    fn organ_kinds_and_layers() {
        assert_eq!(classify("blk.7.ffn_down_exps.weight").organ, Some(OrganKind::Expert));
        assert_eq!(classify("blk.7.ffn_up_shexp.weight").organ, Some(OrganKind::SharedExpert));
        assert_eq!(classify("blk.7.ffn_gate_inp.weight").organ, Some(OrganKind::Router));
        assert_eq!(classify("blk.7.ffn_gate.weight").organ, Some(OrganKind::Dense));
        assert_eq!(classify("blk.12.attn_k.weight").layer, Some(12));
        assert_eq!(classify("token_embd.weight").layer, None);
        assert_eq!(layer_of("blk.x.attn_k"), None);
        assert_eq!(layer_of("blk.99999999999.attn_k"), None);
    }
}
