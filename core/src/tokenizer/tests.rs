//! Unit tests on small synthetic vocabularies: what is built, and what is refused. Ids
//! are looked up by text in the vocabulary the test builds, never written by hand; the
//! agreement with llama.cpp on a real model is `tests/it/tokenizer.rs`.

use super::pretok::{byte_chars, split, PreSplit};
use super::unicode_table::{RANGES, WHITESPACE};
use super::*;
use crate::gguf::{MetaValue, ValueType};
use crate::model::OwnedValue;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// GPT-2's 256 byte characters, then `extra`, as token texts.
fn texts(extra: &[&str]) -> Vec<String> {
    let mut t: Vec<String> = byte_chars().iter().map(|c| String::from(*c)).collect();
    t.extend(extra.iter().map(|s| String::from(*s)));
    t
}

fn model(tokens: &[String], merges: &[&str], pre: &str) -> Model {
    let merges: Vec<String> = merges.iter().map(|s| String::from(*s)).collect();
    Model {
        version: 3,
        kvs: vec![
            ("tokenizer.ggml.model".into(), OwnedValue::string("gpt2")),
            ("tokenizer.ggml.pre".into(), OwnedValue::string(pre)),
            ("tokenizer.ggml.tokens".into(), OwnedValue::strings(tokens).unwrap()),
            ("tokenizer.ggml.merges".into(), OwnedValue::strings(&merges).unwrap()),
        ],
        tensors: Vec::new(),
    }
}

fn set(m: &mut Model, key: &str, v: OwnedValue) {
    m.kvs.retain(|(k, _)| k != key);
    m.kvs.push((key.into(), v));
}

fn i32s(v: &[i32]) -> OwnedValue {
    let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    OwnedValue::Array { elem_type: ValueType::I32, len: v.len() as u64, raw: raw.into() }
}

fn refusal(m: &Model, key: &str, needle: &str) {
    match Tokenizer::from_model(m) {
        Err(Error::BadMetadata { key: k, reason }) => {
            assert_eq!(k, key, "{reason}");
            assert!(reason.contains(needle), "{reason:?} should contain {needle:?}");
        }
        other => panic!("expected a refusal on {key}, got {other:?}"),
    }
}

#[test]
fn merges_apply_by_rank_and_specials_split_first() {
    let tokens = texts(&["he", "ll", "hell", "hello", "Ġw", "<|s|>"]);
    let mut m = model(&tokens, &["l l", "h e", "he ll", "hell o", "Ġ w"], "smollm");
    let mut types = vec![1; tokens.len()];
    *types.last_mut().unwrap() = 3;
    set(&mut m, "tokenizer.ggml.token_type", i32s(&types));
    set(&mut m, "tokenizer.ggml.bos_token_id", OwnedValue::Scalar(MetaValue::U32(tokens.len() as u32 - 1)));
    let t = Tokenizer::from_model(&m).unwrap();
    let id = |s: &str| t.vocab.id(s.as_bytes()).unwrap();
    assert_eq!(t.token_count(), tokens.len());
    assert_eq!(t.bos_text(), Some("<|s|>"));
    assert_eq!(t.encode("hello").unwrap(), vec![id("hello")]);
    // " w" is one word (space joins the letters after it); "x" has no merge.
    assert_eq!(t.encode("<|s|>hello wx").unwrap(), vec![id("<|s|>"), id("hello"), id("Ġw"), id("x")]);
    // Digits are split one by one under smollm, and the special token in the middle is cut out.
    assert_eq!(t.encode("12<|s|>3").unwrap(), vec![id("1"), id("2"), id("<|s|>"), id("3")]);
    assert_eq!(t.encode("").unwrap(), Vec::<u32>::new());
}

#[test]
fn gpt2_split_matches_the_regex_on_edge_cases() {
    let words = |s: &str, how| -> Vec<String> { split(how, s).into_iter().map(|r| String::from(&s[r])).collect() };
    assert_eq!(words("it's  a\t\n 1234 x!!", PreSplit::Gpt2), ["it", "'s", " ", " a", "\t\n", " 1234", " x", "!!"]);
    assert_eq!(words("ab12", PreSplit::DigitsThenGpt2), ["ab", "1", "2"]);
    assert_eq!(words("a   ", PreSplit::Gpt2), ["a", "   "]);
    assert_eq!(words("é日本 😀", PreSplit::Gpt2), ["é日本", " 😀"]);
}

#[test]
fn unicode_table_is_ordered() {
    assert_eq!(RANGES[0].0, 0);
    assert!(RANGES.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 != w[1].1));
    assert!(WHITESPACE.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn refuses_other_tokenizers_by_name() {
    let tokens = texts(&[]);
    let mut m = model(&tokens, &[], "smollm");
    set(&mut m, "tokenizer.ggml.model", OwnedValue::string("llama"));
    refusal(&m, "tokenizer.ggml.model", "\"llama\"");
    let m = model(&tokens, &[], "llama-bpe");
    refusal(&m, "tokenizer.ggml.pre", "\"llama-bpe\"");
    let mut m = model(&tokens, &[], "smollm");
    m.kvs.retain(|(k, _)| k != "tokenizer.ggml.pre");
    refusal(&m, "tokenizer.ggml.pre", "\"default\"");
}

#[test]
fn refuses_bad_merges() {
    let tokens = texts(&["ab"]);
    refusal(&model(&tokens, &["a zz"], "smollm"), "tokenizer.ggml.merges", "\"zz\", which is not a token");
    refusal(&model(&tokens, &["ab"], "smollm"), "tokenizer.ggml.merges", "no space");
    let mut m = model(&tokens, &[], "smollm");
    set(&mut m, "tokenizer.ggml.merges", i32s(&[1, 2]));
    refusal(&m, "tokenizer.ggml.merges", "expected an array of STRING");
    m.kvs.retain(|(k, _)| k != "tokenizer.ggml.merges");
    refusal(&m, "tokenizer.ggml.merges", "missing");
}

#[test]
fn refuses_ids_and_counts_out_of_range() {
    let tokens = texts(&[]);
    let mut m = model(&tokens, &[], "gpt-2");
    set(&mut m, "tokenizer.ggml.bos_token_id", OwnedValue::Scalar(MetaValue::U32(256)));
    refusal(&m, "tokenizer.ggml.bos_token_id", "out of range");
    set(&mut m, "tokenizer.ggml.bos_token_id", OwnedValue::Scalar(MetaValue::I32(-1)));
    refusal(&m, "tokenizer.ggml.bos_token_id", "non-negative");
    let mut m = model(&tokens, &[], "gpt-2");
    set(&mut m, "tokenizer.ggml.token_type", i32s(&[1; 3]));
    refusal(&m, "tokenizer.ggml.token_type", "3 entries for 256 tokens");
    let mut m = model(&[], &[], "gpt-2");
    refusal(&m, "tokenizer.ggml.tokens", "0 tokens");
    // An array whose count promises more strings than its bytes hold.
    let OwnedValue::Array { raw, .. } = OwnedValue::strings(&tokens).unwrap() else { unreachable!() };
    set(&mut m, "tokenizer.ggml.tokens", OwnedValue::Array { elem_type: ValueType::String, len: 1 << 40, raw });
    refusal(&m, "tokenizer.ggml.tokens", "limit");
    m.kvs.retain(|(k, _)| k != "tokenizer.ggml.tokens");
    refusal(&m, "tokenizer.ggml.tokens", "missing");
}

#[test]
fn a_vocabulary_without_byte_tokens_is_an_error_not_a_silent_drop() {
    let tokens: Vec<String> = ["a", "b"].iter().map(|s| String::from(*s)).collect();
    let t = Tokenizer::from_model(&model(&tokens, &["a b"], "gpt-2")).unwrap();
    assert!(matches!(t.encode("ac"), Err(Error::BadMetadata { .. })));
}
