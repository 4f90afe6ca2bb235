//! The core's tokenizer against llama.cpp's on SmolLM2: for every prompt in
//! `tests/data/prompts/`, prefixed with the BOS token's text as `organ moe --router embed`
//! tokenizes it (issue 18), organ's ids equal `llama-tokenize --ids --no-escape --no-bos`
//! (special tokens parsed, nothing added).

use crate::common::{llama_tool, need, repo, tmp};
use organ_core::model::Model;
use organ_core::tokenizer::Tokenizer;
use organ_core::Gguf;
use std::io::Read;
use std::path::Path;

/// The model's metadata, read with the core's parser from as much of the file as it needs.
fn read_model(path: &Path) -> Model {
    let file_len = std::fs::metadata(path).unwrap().len();
    let mut want = 1u64 << 20;
    loop {
        let mut buf = Vec::new();
        std::fs::File::open(path).unwrap().take(want).read_to_end(&mut buf).unwrap();
        match Gguf::parse(&buf, file_len) {
            Ok(g) => return Model::from_gguf(&g, 0),
            // At least double the prefix: the parser asks for the next record only.
            Err(e) => want = e.needed_len().unwrap_or_else(|| panic!("{}: {e}", path.display())).max(want * 2),
        }
    }
}

/// `llama-tokenize`'s ids for the text in `file`.
fn llama_ids(model: &Path, file: &Path) -> Vec<u32> {
    let out = llama_tool("llama-tokenize")
        .arg("-m")
        .arg(model)
        .args(["--ids", "--no-escape", "--no-bos", "--log-disable", "-f"])
        .arg(file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "llama-tokenize on {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    let list = stdout.lines().rev().find(|l| l.starts_with('[')).unwrap_or_else(|| panic!("no id list in {stdout:?}"));
    let inner = list.trim().trim_start_matches('[').trim_end_matches(']');
    inner.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse().unwrap()).collect()
}

#[test]
fn smollm2_ids_equal_llama_tokenize_on_every_prompt() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let tok = Tokenizer::from_model(&read_model(&model)).unwrap();
    let bos = tok.bos_text().expect("SmolLM2 names a BOS token");
    let dir = repo().join("tests/data/prompts");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 6, "{}: expected the test prompts", dir.display());
    let work = tmp("prompts");
    std::fs::create_dir_all(&work).unwrap();
    let mut total = 0;
    for f in &files {
        let text = format!("{bos}{}", std::fs::read_to_string(f).unwrap());
        let input = work.join(f.file_name().unwrap());
        std::fs::write(&input, &text).unwrap();
        let want = llama_ids(&model, &input);
        let got = tok.encode(&text).unwrap();
        assert_eq!(got, want, "{}: organ's ids (left) differ from llama-tokenize's", f.display());
        assert_eq!(got.first().copied(), tok.bos_id(), "{}: the BOS text is parsed into its id", f.display());
        total += got.len();
    }
    println!("tokenizer: {} prompts, {total} tokens, equal to llama-tokenize's", files.len());
}

/// Seeded pseudo-random text drawn from the cases the pre-tokenizer tells apart (letters
/// of several scripts, digits, spaces and other whitespace, apostrophes, punctuation,
/// marks, emoji, special-token texts), plus the repo's perplexity text: equal ids again.
#[test]
fn smollm2_ids_equal_llama_tokenize_on_mixed_text() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let tok = Tokenizer::from_model(&read_model(&model)).unwrap();
    let pool = [
        "a",
        "Z",
        "é",
        "ß",
        "日",
        "本",
        "한",
        "я",
        "λ",
        "0",
        "7",
        "٣",
        "½",
        "²",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\u{a0}",
        "\u{2028}",
        "\u{3000}",
        "'",
        "'s",
        "'LL",
        "'re",
        "!",
        "?!",
        ".",
        ",",
        "-",
        "_",
        "(",
        "}",
        "$",
        "\u{301}",
        "😀",
        "👍🏽",
        "\u{200d}",
        "<|im_start|>",
        "<|im_end|>",
        "<|endoftext|>",
        "<|im_",
        "word",
        " the",
        "12345",
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut text = String::new();
    for _ in 0..4000 {
        text.push_str(pool[(next() % pool.len() as u64) as usize]);
    }
    let work = tmp("mixed");
    std::fs::create_dir_all(&work).unwrap();
    let story = std::fs::read_to_string(repo().join("tests/data/perplexity.txt")).unwrap();
    for (name, body) in [("mixed.txt", text), ("perplexity.txt", story)] {
        let text = format!("{}{body}", tok.bos_text().unwrap());
        let input = work.join(name);
        std::fs::write(&input, &text).unwrap();
        let want = llama_ids(&model, &input);
        let got = tok.encode(&text).unwrap();
        if got != want {
            let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
            let lo = at.saturating_sub(3);
            panic!(
                "{name}: first difference at token {at}: organ {:?}, llama-tokenize {:?}",
                &got[lo..(at + 3).min(got.len())],
                &want[lo..(at + 3).min(want.len())]
            );
        }
        println!("tokenizer: {name}: {} tokens, equal to llama-tokenize's", got.len());
    }
}

#[test]
fn smollm2_vocabulary_is_read_whole() {
    let Some(model) = need::smollm2() else { return };
    let m = read_model(&model);
    let tok = Tokenizer::from_model(&m).unwrap();
    let Some(organ_core::model::OwnedValue::Array { len, .. }) = m.get("tokenizer.ggml.tokens") else {
        panic!("SmolLM2 has a token list")
    };
    assert_eq!(tok.token_count() as u64, *len);
}
