//! The routers' rows (docs/moe.md): all zero, seeded standard normal values, or mergekit's
//! `cheap_embed` from the token embeddings of each expert's prompts. Each layer's router is
//! F32 `[n_embd, n_expert]`: expert `e`'s row is the `e`-th run of `n_embd` values.

use super::MoePlan;
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
pub use crate::random::normal;
use crate::tokenizer::Tokenizer;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// The routers' values.
#[derive(Debug, Clone, PartialEq)]
pub enum Router {
    /// All zero.
    Uniform,
    /// [`normal`]`(seed, i)` for value `i = (N * n_expert + e) * n_embd + d` of layer `N`.
    Random {
        /// The stream's seed.
        seed: u64,
    },
    /// The same rows in every layer: `n_expert * n_embd` values ([`cheap_embed`]).
    Embed {
        /// Expert-major rows.
        rows: Vec<f32>,
    },
}

impl Router {
    /// The bytes of layer `layer`'s router (little-endian F32).
    ///
    /// # Errors
    /// [`Router::Embed`] rows of another size than the plan's experts and width.
    pub fn layer_bytes(&self, plan: &MoePlan, layer: u64) -> Result<Vec<u8>> {
        let n = (plan.n_expert as usize).saturating_mul(plan.n_embd as usize);
        let name = || format!("blk.{layer}.ffn_gate_inp.weight");
        Ok(match self {
            Router::Uniform => vec![0u8; n.saturating_mul(4)],
            Router::Random { seed } => {
                let start = layer.checked_mul(n as u64).ok_or_else(|| Error::BadLayout {
                    tensor: name(),
                    reason: "layer index too large for the random stream".into(),
                })?;
                (0..n as u64).flat_map(|i| normal(*seed, start.wrapping_add(i)).to_le_bytes()).collect()
            }
            Router::Embed { rows } if rows.len() == n => rows.iter().flat_map(|v| v.to_le_bytes()).collect(),
            Router::Embed { rows } => {
                return Err(Error::BadLayout {
                    tensor: name(),
                    reason: format!(
                        "{} router values for {} experts of width {}",
                        rows.len(),
                        plan.n_expert,
                        plan.n_embd
                    ),
                })
            }
        })
    }
}

/// One expert's prompts as token ids: every token of its positive prompts, and of its
/// negative prompts (each prompt already prefixed with the BOS token's text and tokenized
/// with no special tokens added).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompts {
    /// Every token of the positive prompts, in order.
    pub positive: Vec<u32>,
    /// Every token of the negative prompts, in order.
    pub negative: Vec<u32>,
}

impl Prompts {
    /// One expert's prompts from its prompt files' texts (one prompt a line; empty lines
    /// skipped), each prefixed with the BOS token's text (none if the model names none) and
    /// tokenized by the model's own tokenizer with no special tokens added, as mergekit's
    /// `tokenize_prompts` does.
    ///
    /// # Errors
    /// The tokenizer's (a piece it cannot encode).
    pub fn tokenize(tok: &Tokenizer, positive: &str, negative: Option<&str>) -> Result<Prompts> {
        let ids = |text: &str| -> Result<Vec<u32>> {
            let bos = tok.bos_text().unwrap_or("");
            let mut out = Vec::new();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                out.extend(tok.encode(&format!("{bos}{line}"))?);
            }
            Ok(out)
        };
        Ok(Prompts { positive: ids(positive)?, negative: negative.map(ids).transpose()?.unwrap_or_default() })
    }
}

/// mergekit-moe's `cheap_embed` rows: per expert, the sum of the token-embedding rows of
/// its positive tokens minus that of its negative tokens (in f64, in token order), divided
/// by its L2 norm floored at 1e-8, rounded to f32. `embd` is `token_embd.weight`'s bytes
/// (type `ty`, shape `[n_embd, n_vocab]`), dequantized a row at a time by the core's
/// quant table.
///
/// # Errors
/// A type organ cannot dequantize, a shape the bytes do not hold, a token id out of the
/// vocabulary.
pub fn cheap_embed(ty: GgmlType, embd: &[u8], dims: &[u64], experts: &[Prompts]) -> Result<Vec<f32>> {
    let bad = |reason: String| Error::BadLayout { tensor: "token_embd.weight".into(), reason };
    let &[n_embd, n_vocab] = dims else { return Err(bad(format!("shape {dims:?}, expected 2-D"))) };
    let bs = ty.block_size() as u64;
    if bs == 0 || n_embd == 0 || n_embd % bs != 0 {
        return Err(bad(format!("rows of {n_embd} values are not whole {ty} blocks")));
    }
    let row_bytes = n_embd / bs * ty.type_size() as u64;
    if row_bytes.checked_mul(n_vocab) != Some(embd.len() as u64) {
        return Err(bad(format!("{} bytes do not hold {n_vocab} rows of {row_bytes}", embd.len())));
    }
    let (n_embd, row_bytes) = (n_embd as usize, row_bytes as usize);
    let mut row = vec![0f32; n_embd];
    let mut out = Vec::with_capacity(experts.len().saturating_mul(n_embd));
    for p in experts {
        let mut sum = vec![0f64; n_embd];
        for (ids, sign) in [(&p.positive, 1.0), (&p.negative, -1.0)] {
            for &id in ids {
                if u64::from(id) >= n_vocab {
                    return Err(bad(format!("token id {id} is outside the vocabulary of {n_vocab}")));
                }
                let at = id as usize * row_bytes;
                crate::quant::dequantize_into(ty, &embd[at..at + row_bytes], &mut row)?;
                for (s, &v) in sum.iter_mut().zip(&row) {
                    *s += sign * f64::from(v);
                }
            }
        }
        let norm = libm::sqrt(sum.iter().map(|v| v * v).sum::<f64>()).max(1e-8);
        out.extend(sum.iter().map(|v| (v / norm) as f32));
    }
    Ok(out)
}
