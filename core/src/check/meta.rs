//! Tokenizer, chat-template, expert and split metadata: present, of the right types, and
//! consistent with each other and with the embedding (as llama.cpp's `llama-vocab.cpp`
//! and the common hparams of `llama-model.cpp` read them).

use super::{Finding, Kind, Severity};
use crate::gguf::ValueType;
use crate::model::{Model, OwnedValue, TensorEntry};
use crate::MetaValue;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::borrow::Borrow;

fn push(out: &mut Vec<Finding>, sev: Severity, kind: Kind, key: &str, msg: String) {
    out.push(Finding::new(sev, kind, key, msg));
}

/// An array's element type and length.
fn array<T>(m: &Model<T>, key: &str) -> Option<(ValueType, u64)> {
    match m.get(key)? {
        OwnedValue::Array { elem_type, len, .. } => Some((*elem_type, *len)),
        _ => None,
    }
}

/// The special-token id keys llama.cpp reads (a bad id is replaced by a default, with a
/// warning).
const TOKEN_IDS: [&str; 16] = [
    "bos_token_id",
    "eos_token_id",
    "eot_token_id",
    "eom_token_id",
    "unknown_token_id",
    "seperator_token_id",
    "padding_token_id",
    "cls_token_id",
    "mask_token_id",
    "fim_pre_token_id",
    "fim_suf_token_id",
    "fim_mid_token_id",
    "fim_pad_token_id",
    "fim_rep_token_id",
    "fim_sep_token_id",
    "prefix_token_id",
];

pub(super) fn check<T: Borrow<TensorEntry>>(m: &Model<T>, out: &mut Vec<Finding>) {
    tokenizer(m, out);
    chat_template(m, out);
    experts(m, out);
    split(m, out);
}

fn tokenizer<T: Borrow<TensorEntry>>(m: &Model<T>, out: &mut Vec<Finding>) {
    let model = m.text("tokenizer.ggml.model");
    if model.is_none() {
        let msg = "missing (or not a string): llama.cpp cannot build a vocabulary without it".into();
        push(out, Severity::Error, Kind::Tokenizer, "tokenizer.ggml.model", msg);
    }
    let n_tokens = match array(m, "tokenizer.ggml.tokens") {
        Some((ValueType::String, n)) => n,
        Some((t, _)) => {
            let msg = format!("an array of {}, expected strings", t.name());
            return push(out, Severity::Error, Kind::Tokenizer, "tokenizer.ggml.tokens", msg);
        }
        None => {
            if model.as_deref().is_some_and(|t| t != "none") {
                let msg = "missing: the token list (an array of strings) is required".into();
                push(out, Severity::Error, Kind::Tokenizer, "tokenizer.ggml.tokens", msg);
            }
            return;
        }
    };
    let embd = m.tensors.iter().map(Borrow::borrow).find(|t| t.name == "token_embd.weight");
    if let Some(rows) = embd.map(|t| t.dims.get(1).copied().unwrap_or(1)) {
        if rows != n_tokens {
            let msg = format!("holds {n_tokens} tokens, but token_embd.weight has {rows} rows: they must be equal");
            push(out, Severity::Error, Kind::Tokenizer, "tokenizer.ggml.tokens", msg);
        }
    }
    if let Some(arch) = m.architecture() {
        let key = format!("{arch}.vocab_size");
        if let Some(v) = m.get(&key).and_then(OwnedValue::as_u64) {
            if v != n_tokens {
                let msg = format!("says {v}, but tokenizer.ggml.tokens holds {n_tokens} tokens");
                push(out, Severity::Warning, Kind::Tokenizer, &key, msg);
            }
        }
    }
    for (key, want) in [("tokenizer.ggml.scores", ValueType::F32), ("tokenizer.ggml.token_type", ValueType::I32)] {
        match array(m, key) {
            Some((t, n)) if t != want || n != n_tokens => {
                let msg = format!(
                    "{n} {}s, expected one {} per token ({n_tokens}): llama.cpp reads one per token",
                    t.name(),
                    want.name()
                );
                push(out, Severity::Error, Kind::Tokenizer, key, msg);
            }
            Some(_) => {}
            None if m.get(key).is_some() => {
                push(
                    out,
                    Severity::Error,
                    Kind::Tokenizer,
                    key,
                    format!("not an array, expected {} per token", want.name()),
                );
            }
            None => {}
        }
    }
    if model.as_deref() == Some("gpt2") && array(m, "tokenizer.ggml.merges").is_none() {
        let msg = "missing: a gpt2 (BPE) tokenizer needs its merges".into();
        push(out, Severity::Error, Kind::Tokenizer, "tokenizer.ggml.merges", msg);
    }
    for id in TOKEN_IDS {
        let key = format!("tokenizer.ggml.{id}");
        let Some(v) = m.get(&key) else { continue };
        match v.as_u64() {
            Some(x) if x < n_tokens => {}
            Some(x) => {
                let msg = format!("{x} is past the last token ({}): llama.cpp ignores it", n_tokens.saturating_sub(1));
                push(out, Severity::Warning, Kind::Tokenizer, &key, msg);
            }
            None => push(out, Severity::Warning, Kind::Tokenizer, &key, "not a token id (an unsigned integer)".into()),
        }
    }
}

fn chat_template<T>(m: &Model<T>, out: &mut Vec<Finding>) {
    const KEY: &str = "tokenizer.chat_template";
    match m.get(KEY) {
        None => {
            let msg = "missing: chat front ends fall back to a guess of the format".into();
            push(out, Severity::Info, Kind::ChatTemplate, KEY, msg);
        }
        Some(OwnedValue::Str(s)) if s.iter().all(u8::is_ascii_whitespace) => {
            push(out, Severity::Warning, Kind::ChatTemplate, KEY, "empty: expected a Jinja template".into());
        }
        Some(OwnedValue::Str(s)) => {
            let t = String::from_utf8_lossy(s);
            for (word, id) in [("bos_token", "bos_token_id"), ("eos_token", "eos_token_id")] {
                let key = format!("tokenizer.ggml.{id}");
                if t.contains(word) && m.get(&key).is_none() {
                    let msg = format!("uses {word}, but {key} is not set");
                    push(out, Severity::Warning, Kind::ChatTemplate, KEY, msg);
                }
            }
            template(s, KEY, out);
        }
        Some(_) => {
            push(out, Severity::Error, Kind::ChatTemplate, KEY, "not a string: expected a Jinja template".into())
        }
    }
    // Named templates: `tokenizer.chat_templates` lists the names of
    // `tokenizer.chat_template.NAME` keys.
    if let Some(v) = m.get("tokenizer.chat_templates").and_then(|v| v.view().ok()) {
        let MetaValue::Array(a) = v else { return };
        for name in a.iter().filter_map(|x| x.as_str()) {
            let key = format!("{KEY}.{name}");
            match m.get(&key) {
                Some(OwnedValue::Str(s)) => template(s, &key, out),
                _ => {
                    let msg = format!("lists {name:?}, but {key} is missing or not a string");
                    push(out, Severity::Warning, Kind::ChatTemplate, "tokenizer.chat_templates", msg);
                }
            }
        }
    }
}

/// A template llama.cpp's Jinja parser would refuse (`llama-server --jinja` fails to start
/// on it; without `--jinja` it falls back to a guess of the format).
fn template(s: &[u8], key: &str, out: &mut Vec<Finding>) {
    if let Some(e) = super::template::parse_error(s) {
        let msg = format!("does not parse as llama.cpp's Jinja: {e}");
        push(out, Severity::Error, Kind::ChatTemplate, key, msg);
    }
}

fn experts<T>(m: &Model<T>, out: &mut Vec<Finding>) {
    let Some(arch) = m.architecture() else { return };
    let get = |k: &str| m.get(&format!("{arch}.{k}")).and_then(OwnedValue::as_u64);
    let count = get("expert_count").unwrap_or(0);
    let used_key = format!("{arch}.expert_used_count");
    let used = get("expert_used_count").unwrap_or(0);
    if used > count {
        let msg = format!("{used} experts used per token, but expert_count is {count}");
        push(out, Severity::Error, Kind::Experts, &used_key, msg);
    } else if count > 0 && used == 0 {
        let msg = format!("0 or missing, but the model has {count} experts: at least one is used per token");
        push(out, Severity::Error, Kind::Experts, &used_key, msg);
    }
    if let Some(shared) = get("expert_shared_count") {
        if count == 0 && shared > 0 {
            let key = format!("{arch}.expert_shared_count");
            push(
                out,
                Severity::Warning,
                Kind::Experts,
                &key,
                format!("{shared} shared experts in a model without experts"),
            );
        }
    }
    let groups = get("expert_group_count").unwrap_or(0);
    if groups > 0 && (groups >= count.max(1) || count % groups != 0) {
        let key = format!("{arch}.expert_group_count");
        push(out, Severity::Error, Kind::Experts, &key, format!("{groups} groups do not divide {count} experts"));
    }
}

fn split<T>(m: &Model<T>, out: &mut Vec<Finding>) {
    let Some(count) = m.get("split.count").and_then(OwnedValue::as_u64) else { return };
    let no = m.get("split.no").and_then(OwnedValue::as_u64);
    if count > 1 {
        let msg = format!(
            "this file is shard {} of {count}, opened alone: give a shard whose siblings are beside it, named \
             NAME-0000i-of-{count:05}.gguf",
            no.map_or_else(|| "?".into(), |n| format!("{}", n + 1))
        );
        push(out, Severity::Error, Kind::Split, "split.count", msg);
    } else if no.is_some_and(|n| n >= count) {
        push(
            out,
            Severity::Error,
            Kind::Split,
            "split.no",
            format!("{} is not below split.count ({count})", no.unwrap_or(0)),
        );
    }
}
