//! The large shapes of hostile input: files under 64 MiB that cost the most per byte, each
//! at a cap and past it. Many tensors (per-tensor records in every command), long tensor
//! names (copied into every record), a vocabulary of millions of tokens, long strings and
//! a long array (the header budget). Made here, by code, into the test's scratch
//! directory; not checked in.

use super::gguf_bytes::*;
use super::Case;
use std::io::Write;
use std::path::Path;

/// organ_core::limits::MAX_TENSOR_COUNT.
const TENSOR_CAP: u64 = 1 << 16;
/// organ_core::limits::MAX_TENSOR_NAME_LEN.
const NAME_CAP: usize = 128;
/// organ_core::limits::DEFAULT_MAX_HEADER_BYTES.
const BUDGET: u64 = 32 << 20;
const U64: u32 = 10;

/// What a model of the llama family needs for the commands that read its architecture
/// and tokenizer (moe, eval): 3 keys.
fn llama_keys(b: &mut Vec<u8>) {
    put_key(b, "general.architecture", STRING);
    put_str(b, b"llama");
    put_key(b, "tokenizer.ggml.model", STRING);
    put_str(b, b"llama");
    put_key(b, "llama.block_count", U32);
    b.extend(1u32.to_le_bytes());
}

/// `n` F32 tensors of 8 values each, in their own 32 bytes of data, named by `name`:
/// the per-tensor cost of every command, for the fewest bytes of file.
fn many_tensors(n: u64, name: impl Fn(u64) -> Vec<u8>) -> Vec<u8> {
    let mut b = header(n, 3);
    llama_keys(&mut b);
    for i in 0..n {
        put_tensor(&mut b, &name(i), &[8], F32_TY, i * 32);
    }
    pad(&mut b, 32);
    for _ in 0..n {
        floats(&mut b, 8);
    }
    b
}

/// A llama model whose vocabulary is `n` tokens of 4 bytes (12 bytes of file each), with
/// one small FFN so that moe and eval get past their first checks.
fn many_tokens(n: u64) -> Vec<u8> {
    let mut b = header(4, 4);
    llama_keys(&mut b);
    put_key(&mut b, "tokenizer.ggml.tokens", ARRAY);
    b.extend(STRING.to_le_bytes());
    b.extend(n.to_le_bytes());
    for i in 0..n {
        put_str(&mut b, &(i as u32).to_le_bytes().map(|x| b'a' + x % 26));
    }
    let names: [&[u8]; 4] =
        [b"token_embd.weight", b"blk.0.ffn_gate.weight", b"blk.0.ffn_up.weight", b"blk.0.ffn_down.weight"];
    for (i, name) in names.iter().enumerate() {
        put_tensor(&mut b, name, &[32, 2], F32_TY, i as u64 * 256);
    }
    pad(&mut b, 32);
    floats(&mut b, 4 * 64);
    b
}

/// `n` string values of `len` bytes each.
fn long_strings(n: u64, len: usize) -> Vec<u8> {
    let mut b = header(0, n);
    for i in 0..n {
        put_key(&mut b, &format!("s{i}"), STRING);
        b.extend((len as u64).to_le_bytes());
        b.resize(b.len() + len, b'x');
    }
    b
}

/// One u64 array of `n` elements, each as long as a JSON number gets.
fn long_u64_array(n: u64) -> Vec<u8> {
    let mut b = header(0, 1);
    put_key(&mut b, "long", ARRAY);
    b.extend(U64.to_le_bytes());
    b.extend(n.to_le_bytes());
    for i in 0..n {
        b.extend((u64::MAX - i).to_le_bytes());
    }
    b
}

/// The shapes, each written into `d`, and the commands that may accept each.
pub(super) fn shape_cases(d: &Path) -> Vec<Case> {
    let short = |i: u64| format!("blk.{i}.w").into_bytes();
    let long = |i: u64| {
        let mut n = format!("blk.{i}.").into_bytes();
        n.resize(NAME_CAP, b'n');
        n
    };
    // At the tensor cap every command but dissect reads them (dissect writes one file per
    // tensor, and refuses this many tiny ones: cmd/dissect.rs).
    const MANY: &[&str] = &["inspect", "measure"];
    const GOOD: &[&str] = super::GGUF_OK;
    const BAD: &[&str] = &[];
    type Make = Box<dyn Fn() -> Vec<u8>>;
    let shapes: Vec<(&str, Make, &'static [&'static str])> = vec![
        // The file: 750k tensors in ~54 MB, past the tensor cap.
        ("shape-tensors-750k", Box::new(move || many_tensors(750_000, short)), BAD),
        ("shape-tensors-at-cap", Box::new(move || many_tensors(TENSOR_CAP, short)), MANY),
        // The longest names, as many as the tensor cap allows.
        ("shape-long-names-at-cap", Box::new(move || many_tensors(TENSOR_CAP, long)), MANY),
        // The 5.2M tokens in 62 MB: past the header budget.
        ("shape-tokens-5M", Box::new(|| many_tokens(5_200_000)), BAD),
        ("shape-tokens-at-budget", Box::new(|| many_tokens((BUDGET - 4096) / 12)), GOOD),
        // 70 strings of 16 MiB in the issue (1.1 GB): the most under 64 MiB, then at the budget.
        ("shape-strings-3x16M", Box::new(|| long_strings(3, 16 << 20)), BAD),
        ("shape-strings-at-budget", Box::new(|| long_strings(31, 1 << 20)), GOOD),
        // A 64M-entry u64 array in the issue (512 MiB): 60 MiB of it, then at the budget.
        ("shape-u64-array-60M", Box::new(|| long_u64_array((60 << 20) / 8)), BAD),
        ("shape-u64-array-at-budget", Box::new(|| long_u64_array((BUDGET - 4096) / 8)), GOOD),
    ];
    shapes
        .into_iter()
        .map(|(name, make, ok_for)| {
            let bytes = make();
            assert!((bytes.len() as u64) < super::MAX_INPUT, "{name}: input of {} bytes", bytes.len());
            let path = d.join(format!("{name}.gguf"));
            std::fs::File::create(&path).and_then(|mut f| f.write_all(&bytes)).unwrap();
            Case { name: name.to_owned(), path, ok_for }
        })
        .collect()
}
