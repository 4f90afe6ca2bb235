//! Tests of the tensor edits (tensors.rs, through [`edit_all`]).

use super::tests::apply_all;
use super::*;
use crate::gguf::writer::{plan, TensorSpec};
use crate::gguf::MetaValue;
use crate::GgmlType;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

/// A GGUF of F32 tensors of these names and shapes, each value distinct; the alignment 32,
/// so that tensors of 3 or 40 values are followed by padding.
fn model_of(tensors: &[(&str, &[u64])]) -> Vec<u8> {
    let kvs = [("general.architecture", MetaValue::Str(b"llama")), ("llama.block_count", MetaValue::U32(2))];
    let specs: Vec<TensorSpec<'_>> =
        tensors.iter().map(|(name, dims)| TensorSpec { name, dims, ty: GgmlType::F32 }).collect();
    let layout = plan(3, &kvs, &specs).unwrap();
    let mut file = layout.header.clone();
    for (i, &(off, n)) in layout.tensors.iter().enumerate() {
        file.resize(layout.header.len() + off as usize, 0);
        for j in 0..n / 4 {
            file.extend_from_slice(&(((i * 1000 + j as usize) as f32) / 64.0 - 3.0).to_le_bytes());
        }
    }
    file.resize(layout.file_len as usize, 0);
    file
}

fn four() -> Vec<u8> {
    model_of(&[
        ("token_embd.weight", &[64, 3]),
        ("blk.0.attn_q.weight", &[3]),
        ("blk.0.ffn_up.weight", &[40, 2]),
        ("blk.1.attn_q.weight", &[3]),
        ("blk.1.ffn_up.weight", &[32, 2]),
    ])
}

fn rename(s: &str) -> TensorEdit {
    TensorEdit::rename(s).unwrap()
}

fn remove(s: &str) -> TensorEdit {
    TensorEdit::remove(s).unwrap()
}

fn retype(s: &str) -> TensorEdit {
    TensorEdit::retype(s).unwrap()
}

fn parse(bytes: &[u8]) -> Gguf<'_> {
    Gguf::parse(bytes, bytes.len() as u64).unwrap()
}

fn names(bytes: &[u8]) -> Vec<String> {
    parse(bytes).tensors.iter().map(|t| t.name.to_string()).collect()
}

/// The error of `edits` on `file`, as text.
fn refused(file: &[u8], edits: &[TensorEdit]) -> String {
    apply_all(file, &[], edits).unwrap_err().to_string()
}

#[test]
fn a_rename_by_regex_rewrites_the_header_only_and_renaming_back_gives_the_file() {
    let file = four();
    let g = parse(&file);
    let e = edit_all(&g, &[], &[rename(r"blk\.(\d+)\.attn_q\.weight=blk.$1.attn_query.weight")]).unwrap();
    assert_eq!(e.data(), Some(g.data_offset..g.file_len), "the data is copied as it is");
    assert_eq!(
        e.lines(),
        [
            "renamed  tensor blk.0.attn_q.weight → blk.0.attn_query.weight",
            "renamed  tensor blk.1.attn_q.weight → blk.1.attn_query.weight"
        ]
    );
    let out = apply_all(&file, &[], &[rename(r"blk\.(\d+)\.attn_q\.weight=blk.$1.attn_query.weight")]).unwrap();
    let h = parse(&out);
    assert_eq!(names(&out)[1], "blk.0.attn_query.weight");
    for (a, b) in g.tensors.iter().zip(&h.tensors) {
        assert_eq!(
            (a.offset, a.ty, a.shape(), a.data(&file).unwrap()),
            (b.offset, b.ty, b.shape(), b.data(&out).unwrap())
        );
    }
    // Renames apply in order, each to the names the previous left; named groups too.
    let back = apply_all(
        &out,
        &[],
        &[rename(r"(?P<b>blk\.\d+)\.attn_query\.(weight)=${b}.attn_qq.$2"), rename(r"(.*)_qq(.*)=${1}_q$2")],
    )
    .unwrap();
    assert!(back == file, "renaming back gives the input byte for byte");
}

#[test]
fn a_removal_lays_the_data_out_again_and_keeps_every_other_tensors_bytes() {
    let file = four();
    let g = parse(&file);
    // An exact name names that tensor alone; a regex its whole-name matches.
    let out = apply_all(&file, &[], &[remove("blk.0.ffn_up.weight"), remove(r"blk\.\d\.attn_q\.weight")]).unwrap();
    let h = parse(&out);
    assert_eq!(names(&out), ["token_embd.weight", "blk.1.ffn_up.weight"]);
    for b in &h.tensors {
        let a = g.tensor(b.name).unwrap();
        assert_eq!(a.data(&file).unwrap(), b.data(&out).unwrap(), "{}", b.name);
        assert_eq!(b.offset % g.alignment, 0);
    }
    assert_eq!(h.tensors[1].offset, 64 * 3 * 4, "packed after the first, which needs no padding");
    // A regex that is a whole name matches it; a part of a name matches nothing.
    let e = refused(&file, &[remove("attn_q")]);
    assert!(e.starts_with("--remove-tensor \"attn_q\": no tensor has this name"), "{e}");
    let e = refused(&file, &[remove(".*")]);
    assert!(e.contains("every one of the 5 tensors would go"), "{e}");
}

#[test]
fn a_retype_converts_as_organ_quantize_does_and_copies_the_others() {
    let file = four();
    let g = parse(&file);
    let edits = [retype(r"blk\.1\.ffn_up\.weight=q8_0"), retype("token_embd.weight=F16")];
    let e = edit_all(&g, &[], &edits).unwrap();
    assert_eq!(e.data(), None);
    assert!(e.wrote("x.gguf", "").ends_with("tensor data laid out again: 3 tensors copied as they are, 2 converted"));
    assert_eq!(
        e.lines(),
        ["retyped  tensor token_embd.weight F32 → F16", "retyped  tensor blk.1.ffn_up.weight F32 → Q8_0"]
    );
    let out = apply_all(&file, &[], &edits).unwrap();
    let h = parse(&out);
    let t = h.tensor("blk.1.ffn_up.weight").unwrap();
    assert_eq!((t.ty, t.shape()), (GgmlType::Q8_0, &[32u64, 2][..]));
    let values =
        crate::quant::dequantize(GgmlType::F32, g.tensor("blk.1.ffn_up.weight").unwrap().data(&file).unwrap()).unwrap();
    let mut want = Vec::new();
    crate::quantize::convert(GgmlType::Q8_0, &values, &mut want).unwrap();
    assert_eq!(t.data(&out).unwrap(), &want[..]);
    for name in ["blk.0.attn_q.weight", "blk.0.ffn_up.weight", "blk.1.attn_q.weight"] {
        assert_eq!(g.tensor(name).unwrap().data(&file).unwrap(), h.tensor(name).unwrap().data(&out).unwrap());
    }
    // What is refused, naming the flag.
    for (edits, want) in [
        (vec![retype("blk.0.ffn_up.weight=q8_0")], "rows of 40 values, which Q8_0's blocks of 32 do not divide"),
        (vec![retype("blk.0.ffn_up.weight=F32")], "is F32 already"),
        (vec![retype(r"blk\.1\..*=f16"), retype("blk.1.ffn_up.weight=q8_0")], "retyped by an earlier"),
        (vec![remove("token_embd.weight"), retype("token_embd.weight=f16")], "only tensors --remove-tensor removes"),
        (vec![retype("token_embd.weight=iq2_xxs")], "needs an importance matrix"),
        (vec![retype("nope=f16")], "--retype-tensor \"nope=F16\": no tensor has this name"),
    ] {
        let e = refused(&file, &edits);
        assert!(e.starts_with("--retype-tensor") || e.starts_with("--remove-tensor"), "{e}");
        assert!(e.contains(want), "{want}: {e}");
    }
    for (spec, want) in
        [("x", "expected NAME=TYPE"), ("x=", "both non-empty"), ("x=q9_9", "\"q9_9\" is not a ggml type")]
    {
        let e = TensorEdit::retype(spec).unwrap_err().to_string();
        assert!(e.starts_with("--retype-tensor") && e.contains(want), "{e}");
    }
}

#[test]
fn renames_that_would_break_the_file_are_refused() {
    let file = four();
    for (edit, want) in [
        (r"blk\.\d\.attn_q\.weight=q", "would both be named \"q\""),
        (r"blk\.0\.attn_q\.weight=token_embd.weight", "would both be named \"token_embd.weight\""),
        (r"(blk)\.0\.attn_q\.weight=$2", "names group $2, which the pattern does not have"),
        (r"(blk)\.0\.attn_q\.weight=$1a", "names group ${1a}"),
        (r"(blk\.0\.attn_q\.weight=x", "not a regular expression"),
        (r"blk\.0\.attn_q\.weight)|(x=x", "not a regular expression"),
        ("attn_q=x", "matches no tensor's whole name"),
    ] {
        let e = refused(&file, &[rename(edit)]);
        assert!(e.starts_with("--rename-tensor") && e.contains(want), "{edit}: {e}");
    }
    let long = alloc::format!(r"blk\.0\.attn_q\.weight={}", "n".repeat(64));
    assert!(refused(&file, &[rename(&long)]).contains("ggml loads names of at most 63 bytes"));
    for spec in ["x", "=x", "x="] {
        let e = TensorEdit::rename(spec).unwrap_err().to_string();
        assert!(e.starts_with("--rename-tensor") && e.contains("REGEX=REPLACEMENT"), "{e}");
    }
    assert!(TensorEdit::remove("").is_err());
    assert!(TensorEdit::remove(&"x".repeat(tensors::MAX_PATTERN_LEN + 1))
        .unwrap_err()
        .to_string()
        .contains("more than"));
}

#[test]
fn metadata_and_tensor_edits_combine_and_in_place_needs_the_data_unmoved() {
    let file = four();
    let g = parse(&file);
    let set = Edit::Set { key: "general.name".into(), value: crate::model::OwnedValue::Str(b"x".to_vec().into()) };
    let e =
        edit_all(&g, core::slice::from_ref(&set), &[remove("blk.1.attn_q.weight"), rename("token_embd.weight=tok")])
            .unwrap();
    assert!(!e.same_size());
    assert_eq!(
        e.lines(),
        [
            "added    general.name (STRING)",
            "removed  tensor blk.1.attn_q.weight",
            "renamed  tensor token_embd.weight → tok"
        ]
    );
    let out = apply_all(&file, &[set], &[remove("blk.1.attn_q.weight"), rename("token_embd.weight=tok")]).unwrap();
    let h = parse(&out);
    assert_eq!(h.get("general.name").and_then(|v| v.as_str()), Some("x"));
    assert_eq!(names(&out), ["tok", "blk.0.attn_q.weight", "blk.0.ffn_up.weight", "blk.1.ffn_up.weight"]);
    // A rename of the same length keeps the header's.
    let e = edit_all(&g, &[], &[rename("blk.0.attn_q.weight=blk.0.attn_k.weight")]).unwrap();
    assert!(e.same_size());
}
