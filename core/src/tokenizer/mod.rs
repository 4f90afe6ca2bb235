//! The model's own tokenizer, built from its GGUF metadata (`tokenizer.ggml.*`), giving
//! the token ids llama.cpp gives (`llama-tokenize --no-bos`: special tokens written in the
//! text parsed into their ids, nothing added).
//!
//! Supported: byte-level BPE (`tokenizer.ggml.model` = `gpt2`) with the pre-tokenizers whose
//! regexes llama.cpp runs through its GPT-2 matcher: `smollm` and the others with its
//! regex set (`starcoder`, `refact`, `command-r`, `codeshell`, `exaone`, `minerva-7b`,
//! `mellum2`: digits split one by one, then GPT-2's regex) and GPT-2's own (`gpt-2`,
//! `phi-2`, `mpt`, `olmo`, `jais`, `trillion`, `granite-docling`). Any other tokenizer
//! model or pre-tokenizer is refused by name. Unicode classes (letter, number, whitespace)
//! come from llama.cpp's own table (`unicode_table.rs`, generated), so the two agree on
//! every code point.
//!
//! The steps follow llama.cpp's `llama_vocab::impl::tokenize`: special tokens are cut out
//! of the text first (longest text first), each remaining fragment is split into words
//! (`pretok.rs`), each word's bytes mapped to GPT-2's byte alphabet and merged (`bpe.rs`).

mod bpe;
mod pretok;
#[cfg(test)]
mod tests;
#[rustfmt::skip]
mod unicode_table;
mod vocab;

use crate::error::{Error, Result};
use crate::model::Model;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use pretok::PreSplit;
use vocab::Vocab;
pub use vocab::MAX_TOKENS;

const KEY_MODEL: &str = "tokenizer.ggml.model";
const KEY_PRE: &str = "tokenizer.ggml.pre";

/// Pre-tokenizer names (`tokenizer.ggml.pre`) with llama.cpp's `\p{N}` + GPT-2 regex set.
const DIGITS_THEN_GPT2: &[&str] =
    &["smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"];
/// Pre-tokenizer names with GPT-2's regex alone (and no token attributes of their own).
const GPT2: &[&str] = &["gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling"];

/// A tokenizer read from a model's metadata.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    vocab: Vocab,
    split: PreSplit,
    bytes: [char; 256],
    bos: Option<u32>,
}

impl Tokenizer {
    /// The tokenizer of `m`, from its `tokenizer.ggml.*` metadata.
    ///
    /// # Errors
    /// [`Error::BadMetadata`] naming the key: a tokenizer model or pre-tokenizer organ does
    /// not implement (named), a missing or mistyped key, a count that disagrees with the
    /// vocabulary's, a merge naming a text that is not a token, a token id out of range.
    pub fn from_model<T>(m: &Model<T>) -> Result<Tokenizer> {
        let model = text(m, KEY_MODEL)?.ok_or_else(|| bad(KEY_MODEL, "missing: the model has no tokenizer"))?;
        if model != "gpt2" {
            return Err(bad(
                KEY_MODEL,
                format!("tokenizer model {model:?} is not supported: organ implements byte-level BPE (\"gpt2\") only"),
            ));
        }
        let pre = text(m, KEY_PRE)?.unwrap_or_else(|| "default".to_string());
        let split = if DIGITS_THEN_GPT2.contains(&pre.as_str()) {
            PreSplit::DigitsThenGpt2
        } else if GPT2.contains(&pre.as_str()) {
            PreSplit::Gpt2
        } else {
            return Err(bad(
                KEY_PRE,
                format!(
                    "pre-tokenizer {pre:?} is not supported: organ implements {} and {}",
                    DIGITS_THEN_GPT2.join(", "),
                    GPT2.join(", ")
                ),
            ));
        };
        let vocab = Vocab::read(m)?;
        let bos = vocab::id_value(m, vocab::KEY_BOS, vocab.texts.len())?;
        Ok(Tokenizer { vocab, split, bytes: pretok::byte_chars(), bos })
    }

    /// How many tokens the vocabulary has (ids run from 0 below this).
    pub fn token_count(&self) -> usize {
        self.vocab.texts.len()
    }

    /// The BOS token's text (`tokenizer.ggml.bos_token_id`), if the model names one with a
    /// UTF-8 text.
    pub fn bos_text(&self) -> Option<&str> {
        core::str::from_utf8(self.vocab.texts.get(self.bos? as usize)?).ok()
    }

    /// The BOS token's id, if the model names one.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    /// The text of token `id`, as stored (GPT-2 byte alphabet for ordinary tokens).
    pub fn token_text(&self, id: u32) -> Option<&[u8]> {
        self.vocab.texts.get(id as usize).map(Vec::as_slice)
    }

    /// The ids of `text`: special tokens written in it become their ids, nothing is added
    /// (no BOS, no EOS), as `llama-tokenize --no-bos` (its default parses special tokens).
    ///
    /// # Errors
    /// Only for a vocabulary that lacks a byte's token (see `bpe.rs`): the piece is named.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        for frag in self.partition(text) {
            match frag {
                Fragment::Token(id) => out.push(id),
                Fragment::Text(r) => {
                    let piece = &text[r];
                    for w in pretok::split(self.split, piece) {
                        let word = pretok::byte_encode(&self.bytes, &piece[w]);
                        bpe::encode_word(&self.vocab, &word, &mut out)?;
                    }
                }
            }
        }
        Ok(out)
    }

    /// `text` cut at every special token's text, longest texts first (llama.cpp's
    /// `tokenizer_st_partition`, which leftmost-first splits each remaining text fragment
    /// by one special token after another).
    fn partition(&self, text: &str) -> Vec<Fragment> {
        let mut frags = Vec::new();
        if !text.is_empty() {
            frags.push(Fragment::Text(0..text.len()));
        }
        for &id in &self.vocab.specials {
            // Specials hold UTF-8 text (checked when read), so matches fall on char bounds.
            let Ok(needle) = core::str::from_utf8(&self.vocab.texts[id as usize]) else { continue };
            if !frags.iter().any(|f| matches!(f, Fragment::Text(r) if text[r.clone()].contains(needle))) {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(r) = f else {
                    next.push(f);
                    continue;
                };
                let mut at = r.start;
                while let Some(p) = text[at..r.end].find(needle) {
                    if p > 0 {
                        next.push(Fragment::Text(at..at + p));
                    }
                    next.push(Fragment::Token(id));
                    at += p + needle.len();
                }
                if at < r.end {
                    next.push(Fragment::Text(at..r.end));
                }
            }
            frags = next;
        }
        frags
    }
}

/// A piece of the input: plain text (a byte range of it) or a special token's id.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fragment {
    Text(core::ops::Range<usize>),
    Token(u32),
}

fn bad(key: &str, reason: impl Into<String>) -> Error {
    Error::BadMetadata { key: key.to_string(), reason: reason.into() }
}

/// The UTF-8 string at `key`, if present.
fn text<T>(m: &Model<T>, key: &str) -> Result<Option<String>> {
    match m.get(key) {
        None => Ok(None),
        Some(v) => v.as_str().map(|s| Some(s.to_string())).ok_or_else(|| bad(key, "expected a UTF-8 string")),
    }
}
