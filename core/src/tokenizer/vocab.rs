//! The vocabulary read from GGUF metadata, every count and id checked: token texts, the
//! text → id index, merge ranks, and the special tokens split out of text first.

use crate::error::{Error, Result};
use crate::gguf::{MetaArray, MetaValue, ValueType};
use crate::limits::MAX_ARRAY_LEN;
use crate::model::{Model, OwnedValue};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub(super) const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
pub(super) const KEY_TYPES: &str = "tokenizer.ggml.token_type";
pub(super) const KEY_MERGES: &str = "tokenizer.ggml.merges";
pub(super) const KEY_BOS: &str = "tokenizer.ggml.bos_token_id";

/// Most tokens a vocabulary may have: ids must fit llama.cpp's `int32` token ids.
pub const MAX_TOKENS: u64 = i32::MAX as u64;

/// Token types (`llama_token_type`) that make a token special: split out of the text
/// before pre-tokenization (unknown 2, control 3, user-defined 4).
const SPECIAL_TYPES: [i32; 3] = [2, 3, 4];

/// Texts llama.cpp's loader makes control tokens whatever their stored type (its EOG and
/// FIM lists, `llama_vocab::impl::load`), so they are split out of the text too.
const CONTROL_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
    "<｜fim▁begin｜>",
    "<｜fim▁hole｜>",
    "<｜fim▁end｜>",
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "[PAD]",
    "<PAD>",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    "<|file_sep|>",
];

fn bad(key: &str, reason: impl Into<String>) -> Error {
    Error::BadMetadata { key: key.to_string(), reason: reason.into() }
}

/// The array at `key`, of `elem` elements, at most `MAX_ARRAY_LEN` long.
fn array<'m, T>(m: &'m Model<T>, key: &str, elem: ValueType) -> Result<Option<MetaArray<'m>>> {
    let Some(v) = m.get(key) else { return Ok(None) };
    let OwnedValue::Array { elem_type, len, raw } = v else {
        return Err(bad(key, format!("expected an array of {}, found a scalar or string", elem.name())));
    };
    if *elem_type != elem {
        return Err(bad(key, format!("expected an array of {}, found an array of {}", elem.name(), elem_type.name())));
    }
    if *len > MAX_ARRAY_LEN {
        return Err(bad(key, format!("{len} elements, more than the limit {MAX_ARRAY_LEN}")));
    }
    MetaArray::from_raw(*elem_type, *len, raw).map(Some).map_err(|e| bad(key, e.to_string()))
}

/// The unsigned integer at `key`, if present.
pub(super) fn id_value<T>(m: &Model<T>, key: &str, n_tokens: usize) -> Result<Option<u32>> {
    let Some(v) = m.get(key) else { return Ok(None) };
    let id = v.as_u64().ok_or_else(|| bad(key, "expected a non-negative integer token id"))?;
    if id >= n_tokens as u64 {
        return Err(bad(key, format!("token id {id} out of range: the vocabulary has {n_tokens} tokens")));
    }
    Ok(Some(id as u32))
}

/// A checked vocabulary.
#[derive(Debug, Clone)]
pub(super) struct Vocab {
    /// Each token's text, by id (an empty one named `[EMPTY_i]`, as llama.cpp does).
    pub texts: Vec<Vec<u8>>,
    /// Ids sorted by text; where texts repeat, only the last id (llama.cpp's map keeps it).
    by_text: Vec<u32>,
    /// (left id, right id) → rank, the first listing of a pair kept.
    ranks: BTreeMap<(u32, u32), u32>,
    /// Special tokens with UTF-8 text, longest text first (ties by id).
    pub specials: Vec<u32>,
}

impl Vocab {
    pub fn read<T>(m: &Model<T>) -> Result<Vocab> {
        let tokens = array(m, KEY_TOKENS, ValueType::String)?.ok_or_else(|| bad(KEY_TOKENS, "missing"))?;
        if tokens.len == 0 || tokens.len > MAX_TOKENS {
            return Err(bad(KEY_TOKENS, format!("{} tokens: expected 1 to {MAX_TOKENS}", tokens.len)));
        }
        let mut texts = Vec::with_capacity(tokens.len as usize);
        for (i, v) in tokens.iter().enumerate() {
            let MetaValue::Str(s) = v else { return Err(bad(KEY_TOKENS, format!("token {i} is not a string"))) };
            texts.push(if s.is_empty() { format!("[EMPTY_{i}]").into_bytes() } else { s.to_vec() });
        }
        if texts.len() as u64 != tokens.len {
            return Err(bad(KEY_TOKENS, format!("holds {} strings, its count says {}", texts.len(), tokens.len)));
        }
        let n = texts.len();

        let mut by_text: Vec<u32> = (0..n as u32).collect();
        // Stable sort: equal texts stay in id order, and the last of each run is kept.
        by_text.sort_by(|&a, &b| texts[a as usize].cmp(&texts[b as usize]));
        let mut dedup: Vec<u32> = Vec::with_capacity(n);
        for id in by_text {
            match dedup.last_mut() {
                Some(last) if texts[*last as usize] == texts[id as usize] => *last = id,
                _ => dedup.push(id),
            }
        }
        let mut v = Vocab { texts, by_text: dedup, ranks: BTreeMap::new(), specials: Vec::new() };

        let types = match array(m, KEY_TYPES, ValueType::I32)? {
            None => Vec::new(),
            Some(a) => {
                if a.len != n as u64 {
                    return Err(bad(KEY_TYPES, format!("{} entries for {n} tokens", a.len)));
                }
                a.iter().map(|t| if let MetaValue::I32(t) = t { t } else { 1 }).collect()
            }
        };
        let tool_response = v.id(b"<|tool_response>").is_some() || v.id(b"<|plamo:eos|>").is_some();
        for (id, text) in v.texts.iter().enumerate() {
            let typed = types.get(id).is_some_and(|t| SPECIAL_TYPES.contains(t));
            let named = CONTROL_TEXTS.iter().any(|c| c.as_bytes() == text.as_slice())
                || (text.as_slice() == b"</s>" && !tool_response);
            // Only the id a text resolves to carries the override, as in llama.cpp.
            let named = named && v.id(text) == Some(id as u32);
            if (typed || named) && core::str::from_utf8(text).is_ok() {
                v.specials.push(id as u32);
            }
        }
        let texts = &v.texts;
        v.specials.sort_by(|&a, &b| texts[b as usize].len().cmp(&texts[a as usize].len()).then(a.cmp(&b)));

        let merges = array(m, KEY_MERGES, ValueType::String)?.ok_or_else(|| bad(KEY_MERGES, "missing"))?;
        let mut ranks = BTreeMap::new();
        for (rank, mv) in merges.iter().enumerate() {
            let MetaValue::Str(s) = mv else { return Err(bad(KEY_MERGES, format!("merge {rank} is not a string"))) };
            // As llama.cpp: the first space after the first byte separates the two sides.
            let sep = s.iter().skip(1).position(|&b| b == b' ').map(|p| p + 1);
            let Some(sep) = sep else {
                return Err(bad(KEY_MERGES, format!("merge {rank} ({:?}) has no space between two tokens", lossy(s))));
            };
            let (l, r) = (&s[..sep], &s[sep + 1..]);
            let side = |t: &[u8]| {
                v.id(t).ok_or_else(|| {
                    bad(KEY_MERGES, format!("merge {rank} ({:?}) names {:?}, which is not a token", lossy(s), lossy(t)))
                })
            };
            let key = (side(l)?, side(r)?);
            ranks.entry(key).or_insert(rank as u32);
        }
        v.ranks = ranks;
        Ok(v)
    }

    /// The id of the token whose text is `text`.
    pub fn id(&self, text: &[u8]) -> Option<u32> {
        let i = self.by_text.binary_search_by(|&id| self.texts[id as usize].as_slice().cmp(text)).ok()?;
        Some(self.by_text[i])
    }

    /// The rank of merging tokens `l` and `r`, if they merge.
    pub fn rank(&self, l: u32, r: u32) -> Option<u32> {
        self.ranks.get(&(l, r)).copied()
    }
}

fn lossy(s: &[u8]) -> alloc::borrow::Cow<'_, str> {
    String::from_utf8_lossy(s)
}
