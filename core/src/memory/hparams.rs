//! The metadata llama.cpp reads to size its buffers (`llama-hparams.cpp`, the
//! architectures' `load_swa_pattern` calls): layer count, widths, heads per layer, the
//! sliding-window pattern.

use super::MemoryError;
use crate::gguf::MetaValue;
use crate::model::{Model, OwnedValue, TensorEntry};
use alloc::format;
use alloc::string::ToString;
use alloc::vec::Vec;
use core::borrow::Borrow;

/// The metadata and tensors llama.cpp reads to size its buffers.
pub(super) struct Hparams {
    pub(super) n_layer: u32,
    pub(super) n_embd: u64,
    pub(super) n_vocab: u64,
    pub(super) n_ctx_train: u32,
    pub(super) head_kv: Vec<u64>,
    pub(super) head_k: u64,
    pub(super) head_v: u64,
    pub(super) head_k_swa: u64,
    pub(super) head_v_swa: u64,
    pub(super) mla: bool,
    pub(super) swa: Vec<bool>,
    pub(super) n_swa: u64,
}

/// Architectures whose `sliding_window` key makes some layers sliding-window ones, and
/// their default pattern (llama.cpp's `load_swa_pattern(ml, n)` calls in `src/models/`):
/// with a pattern of n, every n-th layer (the last of each n) is full attention.
const SWA_PATTERNS: [(&str, u32); 7] = [
    ("gemma2", 2),
    ("gemma3", 6),
    ("gemma-embedding", 6),
    ("cohere2", 4),
    ("gpt-oss", 2),
    ("exaone4", 4),
    ("olmo2", 4),
];

impl Hparams {
    pub(super) fn read<T: Borrow<TensorEntry>>(m: &Model<T>) -> Result<Hparams, MemoryError> {
        let arch =
            m.architecture().ok_or_else(|| MemoryError::NotAModel("no general.architecture".to_string()))?.into_owned();
        let key = |k: &str| format!("{arch}.{k}");
        if m.kvs.iter().any(|(k, _)| k.starts_with(&key("ssm.")) || k.starts_with(&key("wkv."))) {
            return Err(MemoryError::Recurrent(arch));
        }
        let n_layer = u32::try_from(required(m, &key("block_count"))?)
            .map_err(|_| MemoryError::BadKey(key("block_count"), "a layer count below 2³²"))?;
        if n_layer == 0 || u64::from(n_layer) > crate::limits::MAX_TENSOR_COUNT {
            return Err(MemoryError::BadKey(key("block_count"), "between 1 and the tensor count's limit"));
        }
        let n = n_layer as usize;
        let n_embd = required(m, &key("embedding_length"))?;
        let n_ctx_train = u32::try_from(required(m, &key("context_length"))?).unwrap_or(u32::MAX);
        let head = per_layer(m, &key("attention.head_count"), n)?
            .ok_or_else(|| MemoryError::NotAModel(format!("no {}", key("attention.head_count"))))?;
        let head_kv = per_layer(m, &key("attention.head_count_kv"), n)?.unwrap_or_else(|| head.clone());
        let head0 = head.first().copied().unwrap_or(0);
        let default_head = n_embd.checked_div(head0).unwrap_or(0);
        let head_k = optional(m, &key("attention.key_length"))?.unwrap_or(default_head);
        let head_v = optional(m, &key("attention.value_length"))?.unwrap_or(default_head);
        let head_k_swa = optional(m, &key("attention.key_length_swa"))?.unwrap_or(head_k);
        let head_v_swa = optional(m, &key("attention.value_length_swa"))?.unwrap_or(head_v);
        let mla = optional(m, &key("attention.key_length_mla"))?.unwrap_or(0) != 0
            && optional(m, &key("attention.value_length_mla"))?.unwrap_or(0) != 0;
        let n_swa = optional(m, &key("attention.sliding_window"))?.unwrap_or(0);
        let swa = match SWA_PATTERNS.iter().find(|(a, _)| *a == arch) {
            Some(&(_, default)) if n_swa > 0 => swa_layers(m, &key("attention.sliding_window_pattern"), n, default)?,
            _ => alloc::vec![false; n],
        };
        let n_vocab = match m.get("tokenizer.ggml.tokens") {
            Some(OwnedValue::Array { len, .. }) => *len,
            _ => {
                let rows = |name: &str| {
                    let t: &TensorEntry =
                        m.tensors.iter().map(Borrow::borrow).find(|t: &&TensorEntry| t.name == name)?;
                    t.dims.get(1).copied()
                };
                optional(m, &key("vocab_size"))?
                    .or_else(|| rows("output.weight"))
                    .or_else(|| rows("token_embd.weight"))
                    .ok_or_else(|| MemoryError::NotAModel("no vocabulary (tokenizer.ggml.tokens)".to_string()))?
            }
        };
        Ok(Hparams {
            n_layer,
            n_embd,
            n_vocab,
            n_ctx_train,
            head_kv,
            head_k,
            head_v,
            head_k_swa,
            head_v_swa,
            mla,
            swa,
            n_swa,
        })
    }

    /// The K and V head sizes of layer `il` (the sliding-window ones on such layers).
    pub(super) fn head_sizes(&self, il: usize) -> (u64, u64) {
        if self.swa.get(il).copied().unwrap_or(false) {
            (self.head_k_swa, self.head_v_swa)
        } else {
            (self.head_k, self.head_v)
        }
    }
}

/// Which layers slide: the pattern key as an array of bools, or as a number n (every n-th
/// layer full, llama-hparams.cpp `set_swa_pattern`), or the architecture's default n.
fn swa_layers<T>(m: &Model<T>, key: &str, n: usize, default: u32) -> Result<Vec<bool>, MemoryError> {
    let bad = || MemoryError::BadKey(key.to_string(), "a layer pattern (a number, or one bool per layer)");
    let pattern = match m.get(key) {
        None => u64::from(default),
        Some(OwnedValue::Scalar(v)) => v.as_u64().ok_or_else(bad)?,
        Some(v @ OwnedValue::Array { len, .. }) => {
            if *len != n as u64 {
                return Err(bad());
            }
            let MetaValue::Array(a) = v.view().map_err(|_| bad())? else { return Err(bad()) };
            return a.iter().map(|x| if let MetaValue::Bool(b) = x { Ok(b) } else { Err(bad()) }).collect();
        }
        Some(_) => return Err(bad()),
    };
    Ok((0..n as u64).map(|il| pattern == 0 || il % pattern < pattern - 1).collect())
}

/// The value of `key`, one per layer: a number for all, or an array of `n` numbers.
fn per_layer<T>(m: &Model<T>, key: &str, n: usize) -> Result<Option<Vec<u64>>, MemoryError> {
    let bad = || MemoryError::BadKey(key.to_string(), "a count, or one count per layer");
    match m.get(key) {
        None => Ok(None),
        Some(OwnedValue::Scalar(v)) => Ok(Some(alloc::vec![v.as_u64().ok_or_else(bad)?; n])),
        Some(v @ OwnedValue::Array { len, .. }) => {
            if *len != n as u64 {
                return Err(bad());
            }
            let MetaValue::Array(a) = v.view().map_err(|_| bad())? else { return Err(bad()) };
            a.iter().map(|x| x.as_u64().ok_or_else(bad)).collect::<Result<Vec<u64>, _>>().map(Some)
        }
        Some(_) => Err(bad()),
    }
}

/// A numeric key that must be there.
fn required<T>(m: &Model<T>, key: &str) -> Result<u64, MemoryError> {
    optional(m, key)?.ok_or_else(|| MemoryError::NotAModel(format!("no {key}")))
}

/// A numeric key, if present.
fn optional<T>(m: &Model<T>, key: &str) -> Result<Option<u64>, MemoryError> {
    match m.get(key) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| MemoryError::BadKey(key.to_string(), "an unsigned integer")),
    }
}
