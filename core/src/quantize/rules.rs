//! Which type `llama-quantize` gives each tensor: `llama_tensor_get_type` and what it calls
//! (`src/llama-quant.cpp`, llama.cpp build 11434), ported rule for rule. The rules keep
//! counters (the how-manyth `attn_v`, `ffn_down`, … this is), so tensors must be asked in
//! the order `llama-quantize` asks them: [`super::plan`] sorts them so.

use super::ftype::Ftype;
use super::Params;
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::recipe::accept::quantizable;
use alloc::format;

/// `tensor_category`: what a tensor is to the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// `token_embd.weight`, `per_layer_token_embd.weight`.
    TokenEmbd,
    /// `attn_q.weight`.
    AttentionQ,
    /// `attn_v.weight`.
    AttentionV,
    /// `attn_k.weight`.
    AttentionK,
    /// `attn_qkv.weight`.
    AttentionQkv,
    /// `attn_kv_b.weight`.
    AttentionKvB,
    /// `attn_output.weight`.
    AttentionOutput,
    /// `ffn_up…`.
    FfnUp,
    /// `ffn_gate…`.
    FfnGate,
    /// `ffn_down…`.
    FfnDown,
    /// `output.weight`.
    Output,
    /// Anything else.
    Other,
}

impl Category {
    /// `tensor_get_category`: the first test that matches, in its order.
    pub fn of(name: &str) -> Category {
        use Category::*;
        if name == "output.weight" {
            return Output;
        }
        if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
            return TokenEmbd;
        }
        const BY_PART: &[(&str, Category)] = &[
            ("attn_qkv.weight", AttentionQkv),
            ("attn_kv_b.weight", AttentionKvB),
            ("attn_v.weight", AttentionV),
            ("attn_k.weight", AttentionK),
            ("attn_q.weight", AttentionQ),
            ("attn_output.weight", AttentionOutput),
            ("ffn_up", FfnUp),
            ("ffn_gate", FfnGate),
            ("ffn_down", FfnDown),
        ];
        BY_PART.iter().find(|(part, _)| name.contains(part)).map_or(Other, |(_, c)| *c)
    }

    /// `category_is_attn_v`: the tensors more sensitive to quantization.
    pub(super) fn is_attn_v(self) -> bool {
        matches!(self, Category::AttentionV | Category::AttentionQkv | Category::AttentionKvB)
    }
}

/// What the rules read of the model (`llama_hparams`, `llm_type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hparams {
    /// `general.architecture`.
    pub arch: alloc::string::String,
    /// `{arch}.block_count` (`n_layer_all`).
    pub n_layer: u32,
    /// `{arch}.expert_count`, 0 without.
    pub n_expert: u32,
    /// Layer 0's query heads per key/value head (`n_gqa()`), 0 without key/value heads.
    pub n_gqa: u32,
    /// Whether llama.cpp calls the model `LLM_TYPE_70B` (the only size the rules read).
    pub is_70b: bool,
}

/// The rules' running state (`quantize_state_impl`'s counters).
#[derive(Debug, Clone, Default)]
pub(super) struct Counters {
    pub n_attention_wv: u32,
    pub i_attention_wv: u32,
    pub i_ffn_down: u32,
    pub i_ffn_gate: u32,
    pub i_ffn_up: u32,
    pub has_tied_embeddings: bool,
    /// Tensors whose type fell back for their row length.
    pub n_fallback: u32,
}

/// `use_more_bits`: the first and last eighths of the layers and every third between.
fn use_more_bits(i: u32, n: u32) -> bool {
    let (i, n) = (i64::from(i), i64::from(n));
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// The type of tensor `name` (shape `dims`, type `own`): `llama_tensor_get_type`.
pub(super) fn tensor_type(
    p: &Params,
    hp: &Hparams,
    qs: &mut Counters,
    name: &str,
    dims: &[u64],
    own: GgmlType,
) -> Result<GgmlType> {
    if !allows_quantization(p, &hp.arch, name, dims) {
        return Ok(own);
    }
    let category = Category::of(name);
    if let (Some(t), Category::TokenEmbd) = (p.token_embedding_type, category) {
        // per_layer_token_embd follows --token-embedding-type unless a pattern names it.
        if !(name == "per_layer_token_embd.weight" && p.pattern_type(name).is_some()) {
            return Ok(t);
        }
    }
    if let (Some(t), Category::Output) = (p.output_tensor_type, category) {
        return Ok(t);
    }
    let mut ty = p.ftype.default_type();
    if !super::is_quantized(ty) {
        return Ok(ty);
    }
    let manual = p.pattern_type(name);
    if let Some(t) = manual {
        ty = t;
    } else if !p.pure {
        ty = standard(p, hp, qs, ty, name, dims, category)?;
    }
    fallback(qs, name, dims, ty)
}

/// `tensor_allows_quantization`.
pub(super) fn allows_quantization(p: &Params, arch: &str, name: &str, dims: &[u64]) -> bool {
    quantizable(arch, name, dims) && (p.quantize_output || name != "output.weight")
}

/// `tensor_type_fallback`: a type whose block does not divide the row is replaced.
fn fallback(qs: &mut Counters, name: &str, dims: &[u64], ty: GgmlType) -> Result<GgmlType> {
    use GgmlType::*;
    let n_cols = dims.first().copied().unwrap_or(1);
    if n_cols % ty.block_size() as u64 == 0 {
        return Ok(ty);
    }
    qs.n_fallback += 1;
    let to = match ty {
        IQ1_S | IQ1_M | IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ4_XS => IQ4_NL,
        Q2_0 | Q2_K | Q3_K | TQ1_0 | TQ2_0 => Q4_0,
        Q4_K => Q5_0,
        Q5_K => Q5_1,
        Q6_K => Q8_0,
        // A 32-block type has nothing smaller to fall to: F16 below.
        other if other.block_size() <= 32 => other,
        other => {
            return Err(Error::Quantize {
                reason: format!(
                    "tensor {name:?}: its rows of {n_cols} are not whole {other} blocks of {}, and llama-quantize \
                     defines no type to fall back to for {other}",
                    other.block_size()
                ),
            })
        }
    };
    Ok(if n_cols % to.block_size() as u64 == 0 { to } else { F16 })
}

/// `layer_info`: the layer a tensor is in, for the rules that count layers. With experts
/// the layer is read from the name (experts are not stored in order).
fn layer_info(hp: &Hparams, counter: u32, name: &str) -> Result<(u32, u32)> {
    let n = hp.n_layer;
    if hp.n_expert.max(1) <= 1 {
        return Ok((counter, n));
    }
    match u32::try_from(super::layer_of(name)) {
        Ok(i) if i < n => Ok((i, n)),
        Ok(i) => Err(Error::Quantize { reason: format!("tensor {name:?}: layer {i} is not below block_count {n}") }),
        Err(_) => Err(Error::Quantize { reason: format!("tensor {name:?}: no layer number (blk.N.) in its name") }),
    }
}

/// `llama_tensor_get_type_impl`: the mix's rules.
#[allow(clippy::too_many_lines, clippy::cognitive_complexity)]
fn standard(
    p: &Params,
    hp: &Hparams,
    qs: &mut Counters,
    mut ty: GgmlType,
    name: &str,
    dims: &[u64],
    category: Category,
) -> Result<GgmlType> {
    use Category as C;
    use Ftype as F;
    use GgmlType as T;
    let ftype = p.ftype;
    let arch = hp.arch.as_str();
    let falcon = arch == "falcon";
    let (n_expert, n_gqa) = (hp.n_expert, hp.n_gqa);
    if arch == "glm5-next"
        && ["attn_q_a", "attn_q_b", "nextn.eh_proj"].iter().any(|s| name.contains(s))
        && !matches!(ty, T::F32 | T::BF16 | T::F16)
    {
        return Ok(T::Q8_0);
    }
    if category == C::Output || (qs.has_tied_embeddings && category == C::TokenEmbd) {
        if let Some(t) = p.output_tensor_type {
            ty = t;
        } else {
            let nx = dims.first().copied().unwrap_or(1);
            if ftype == F::MXFP4_MOE || falcon || nx % ty.block_size() as u64 != 0 {
                ty = T::Q8_0;
            } else if matches!(ftype, F::IQ2_XXS | F::IQ2_XS | F::IQ3_XXS | F::IQ1_S | F::IQ2_S | F::IQ2_M | F::IQ1_M) {
                ty = T::Q5_K;
            } else if ty != T::Q8_0 {
                ty = T::Q6_K;
            }
        }
    } else if ftype == F::MXFP4_MOE {
        let expert_role = matches!(category, C::FfnUp | C::FfnGate | C::FfnDown);
        let n2 = dims.get(2).copied().unwrap_or(1);
        ty = if n2 > 1 && (arch != "bailingmoe3" || expert_role) { T::MXFP4 } else { T::Q8_0 };
    } else if category == C::TokenEmbd {
        if let Some(t) = p.token_embedding_type {
            ty = t;
        } else if matches!(ftype, F::IQ2_XXS | F::IQ2_XS | F::IQ1_S | F::IQ1_M) {
            ty = T::Q2_K;
        } else if matches!(ftype, F::IQ2_S | F::IQ2_M | F::IQ3_XXS) {
            ty = T::IQ3_S;
        } else if matches!(ftype, F::TQ1_0 | F::TQ2_0 | F::Q2_0) {
            ty = T::Q4_K;
        }
    } else if ftype.is_low_iq() {
        let s_or_m = matches!(ftype, F::IQ2_S | F::IQ2_M);
        if category.is_attn_v() {
            ty = if n_gqa >= 4 || n_expert >= 4 {
                T::Q4_K
            } else if s_or_m {
                T::IQ3_S
            } else {
                T::Q2_K
            };
            qs.i_attention_wv += 1;
        } else if n_expert == 8 && category == C::AttentionK {
            ty = T::Q4_K;
        } else if category == C::FfnDown {
            if qs.i_ffn_down < hp.n_layer / 8 {
                ty = if s_or_m { T::IQ3_S } else { T::Q2_K };
            }
            qs.i_ffn_down += 1;
        } else if category == C::AttentionOutput {
            if n_expert == 8 {
                ty = T::Q5_K;
            } else if matches!(ftype, F::IQ1_S | F::IQ1_M) {
                ty = T::IQ2_XXS;
            } else if s_or_m {
                ty = T::IQ3_S;
            }
        }
    } else if category.is_attn_v() {
        let i = qs.i_attention_wv;
        match ftype {
            F::Q2_K => ty = if n_gqa >= 4 { T::Q4_K } else { T::Q3_K },
            F::Q2_K_S if n_gqa >= 4 => ty = T::Q4_K,
            F::IQ3_XXS => {
                ty = if n_gqa >= 4 {
                    T::Q4_K
                } else if !p.has_imatrix() {
                    T::IQ3_S
                } else {
                    T::IQ3_XXS
                }
            }
            F::IQ3_XS | F::IQ3_S if n_gqa >= 4 => ty = T::Q4_K,
            F::IQ3_M => ty = T::Q4_K,
            F::Q3_K_M => ty = if i < 2 { T::Q5_K } else { T::Q4_K },
            F::Q3_K_L => ty = T::Q5_K,
            F::IQ4_NL | F::IQ4_XS if n_gqa >= 4 => ty = T::Q5_K,
            F::Q4_K_M | F::Q5_K_M if use_more_bits(i, qs.n_attention_wv) => ty = T::Q6_K,
            F::Q4_K_S if i < 4 => ty = T::Q5_K,
            _ => {}
        }
        if hp.is_70b && matches!(ty, T::Q3_K | T::Q4_K) {
            ty = T::Q5_K;
        }
        if n_expert == 8 {
            ty = T::Q8_0;
        }
        qs.i_attention_wv += 1;
    } else if category == C::AttentionK {
        if n_expert == 8 {
            ty = T::Q8_0;
        } else if ftype == F::IQ3_XS {
            ty = T::IQ3_XXS;
        } else if ftype == F::IQ3_XXS {
            ty = T::IQ2_S;
        }
    } else if category == C::AttentionQ {
        if ftype == F::IQ3_XS {
            ty = T::IQ3_XXS;
        } else if ftype == F::IQ3_XXS {
            ty = T::IQ2_S;
        }
    } else if category == C::FfnDown {
        let (i, n) = layer_info(hp, qs.i_ffn_down, name)?;
        match ftype {
            F::Q2_K => ty = T::Q3_K,
            // Q2_K_S's other layers keep Q2_K: no later rule is for it.
            F::Q2_K_S if i < n / 8 => ty = T::Q4_K,
            F::IQ3_XXS if !p.has_imatrix() => ty = if i < n / 8 { T::Q4_K } else { T::Q3_K },
            F::Q3_K_M => {
                ty = if i < n / 16 {
                    T::Q5_K
                } else if !falcon || use_more_bits(i, n) {
                    T::Q4_K
                } else {
                    T::Q3_K
                }
            }
            F::IQ3_M if i < n / 8 || (n_expert == 8 && use_more_bits(i, n)) => ty = T::Q4_K,
            F::Q3_K_L => ty = if falcon { T::Q4_K } else { T::Q5_K },
            F::Q4_K_M => {
                if falcon {
                    ty = if i < n / 16 {
                        T::Q6_K
                    } else if use_more_bits(i, n) {
                        T::Q5_K
                    } else {
                        T::Q4_K
                    };
                } else if use_more_bits(i, n) {
                    ty = T::Q6_K;
                }
            }
            F::IQ4_NL | F::IQ4_XS if i < n / 8 && !p.has_imatrix() => ty = T::Q5_K,
            F::Q5_K_M if use_more_bits(i, n) => ty = T::Q6_K,
            F::Q4_K_S if !falcon && i < n / 8 => ty = T::Q5_K,
            F::Q4_0 | F::Q5_0 if p.has_imatrix() && i < n / 8 => {
                ty = if ftype == F::Q4_0 { T::Q4_1 } else { T::Q5_1 };
            }
            _ => {}
        }
        qs.i_ffn_down += 1;
    } else if category == C::AttentionOutput {
        if !falcon {
            if n_expert == 8 {
                if matches!(
                    ftype,
                    F::Q2_K
                        | F::IQ3_XS
                        | F::IQ3_XXS
                        | F::Q3_K_S
                        | F::Q3_K_M
                        | F::IQ4_NL
                        | F::Q4_K_S
                        | F::Q4_K_M
                        | F::IQ3_S
                        | F::IQ3_M
                        | F::IQ4_XS
                ) {
                    ty = T::Q5_K;
                }
            } else {
                match ftype {
                    F::Q2_K => ty = T::Q3_K,
                    F::IQ3_XXS => ty = T::IQ3_S,
                    F::Q3_K_M | F::IQ3_M => ty = T::Q4_K,
                    F::Q3_K_L => ty = T::Q5_K,
                    _ => {}
                }
            }
        } else if ftype == F::Q3_K_L {
            ty = T::Q4_K;
        }
    } else if category == C::AttentionQkv {
        match ftype {
            F::Q3_K_M | F::Q3_K_L | F::IQ3_M => ty = T::Q4_K,
            F::Q4_K_M => ty = T::Q5_K,
            F::Q5_K_M => ty = T::Q6_K,
            _ => {}
        }
    } else if matches!(category, C::FfnGate | C::FfnUp) {
        let counter = if category == C::FfnGate { &mut qs.i_ffn_gate } else { &mut qs.i_ffn_up };
        let (i, n) = layer_info(hp, *counter, name)?;
        if ftype == F::IQ3_XS && i >= n / 8 && i < 7 * n / 8 {
            ty = T::IQ3_XXS;
        }
        *counter += 1;
    }
    Ok(ty)
}
