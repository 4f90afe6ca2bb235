//! `organ meta`'s tensor edits (`--rename-tensor`, `--remove-tensor`, `--retype-tensor`):
//! a rename by regex and back gives the input byte for byte; a removal leaves every other
//! tensor's bytes as they were, read by gguf-py 0.19.0; a retype gives llama-quantize's
//! bytes for that tensor and llama.cpp runs the model; what is refused is named, and
//! nothing is written.

use crate::build::{noise, t, write_model_kvs};
use crate::common::*;
use organ_core::gguf::MetaValue;
use organ_core::{GgmlType, Gguf};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `organ meta MODEL ARGS… --out tmp(NAME)`, which must succeed: the output and what it printed.
#[track_caller]
fn meta(model: &Path, args: &[&str], name: &str) -> (PathBuf, String) {
    let out = tmp(name);
    let _ = std::fs::remove_file(&out);
    let mut c = organ();
    c.arg("meta").arg(model).args(args).arg("--out").arg(&out);
    let text = String::from_utf8(ok(c).stdout).unwrap();
    (out, text)
}

/// Every tensor gguf-py 0.19.0 reads in `model`: name → (type, SHA-256 of its bytes).
fn gguf_py_tensors(model: &Path) -> BTreeMap<String, (String, String)> {
    let script = "import gguf, hashlib, json, sys\n\
        r = gguf.GGUFReader(sys.argv[1])\n\
        print(json.dumps({t.name: [t.tensor_type.name, hashlib.sha256(t.data.tobytes()).hexdigest()] for t in r.tensors}))";
    let mut c = Command::new(oracle_python());
    c.arg("-c").arg(script).arg(model);
    serde_json::from_slice(&ok(c).stdout).unwrap()
}

/// The bytes of each tensor of the GGUF `bytes`, by name.
fn tensor_bytes(bytes: &[u8]) -> BTreeMap<String, (GgmlType, Vec<u8>)> {
    let g = Gguf::parse(bytes, bytes.len() as u64).unwrap();
    g.tensors.iter().map(|t| (t.name.to_owned(), (t.ty, t.data(bytes).unwrap().to_vec()))).collect()
}

#[test]
fn a_rename_by_regex_and_back_gives_the_input_byte_for_byte() {
    let Some(model) = need::smollm2() else { return };
    let (renamed, text) =
        meta(&model, &["--rename-tensor", r"blk\.(\d+)\.attn_q\.weight=blk.$1.attn_query.weight"], "mt-renamed.gguf");
    assert!(text.contains("renamed  tensor blk.0.attn_q.weight → blk.0.attn_query.weight"), "{text}");
    assert!(text.contains("tensor data copied as is"), "{text}");
    // The check names what llama.cpp would refuse, and the file is written all the same.
    assert!(text.contains("the edited model has 60 problems the input had not"), "{text}");
    assert!(text.contains("error: blk.0.attn_q.weight: missing"), "{text}");
    let (a, b) = (std::fs::read(&model).unwrap(), std::fs::read(&renamed).unwrap());
    let (ga, gb) = (Gguf::parse(&a, a.len() as u64).unwrap(), Gguf::parse(&b, b.len() as u64).unwrap());
    assert!(a[ga.data_offset as usize..] == b[gb.data_offset as usize..], "the data section changed");
    for (x, y) in ga.tensors.iter().zip(&gb.tensors) {
        assert_eq!((x.offset, x.ty, x.shape()), (y.offset, y.ty, y.shape()), "{}", x.name);
    }
    let (back, _) =
        meta(&renamed, &["--rename-tensor", r"(blk\.\d+\.attn)_query(\.weight)=${1}_q$2"], "mt-renamed-back.gguf");
    assert!(std::fs::read(back).unwrap() == a, "renaming back does not give the input");
}

#[test]
fn a_removal_keeps_every_other_tensors_bytes_as_gguf_py_reads_them() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let json = tmp("mt-removed.json");
    let _ = std::fs::remove_file(&json);
    let (out, text) = meta(
        &model,
        &["--remove-tensor", "blk.29.ffn_down.weight", "--remove-tensor", r"blk\.28\.attn_[kv]\.weight", "--json"]
            .into_iter()
            .chain([json.to_str().unwrap()])
            .collect::<Vec<_>>(),
        "mt-removed.gguf",
    );
    assert!(text.contains("removed  tensor blk.28.attn_k.weight"), "{text}");
    assert!(text.contains("269 tensors copied as they are, 0 converted"), "{text}");
    assert!(text.contains("error: blk.29.ffn_down.weight: missing"), "{text}");
    let (before, after) = (gguf_py_tensors(&model), gguf_py_tensors(&out));
    assert_eq!(before.len(), 272);
    let gone = ["blk.28.attn_k.weight", "blk.28.attn_v.weight", "blk.29.ffn_down.weight"];
    let kept: BTreeMap<_, _> = before.into_iter().filter(|(name, _)| !gone.contains(&name.as_str())).collect();
    assert!(after == kept, "the kept tensors differ from the input's");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["tensor_changes"].as_array().unwrap().len(), 3, "{report}");
    assert_eq!(report["tensor_changes"][0]["op"], "removed");
    assert_eq!(report["findings"][0]["kind"], "missing_tensor", "{report}");
    assert_eq!(report["file_bytes"], std::fs::metadata(&out).unwrap().len());
}

#[test]
fn a_retype_gives_llama_quantizes_bytes_and_llama_cpp_runs_the_model() {
    let Some(model) = need::smollm2_and_llama() else { return };
    // llama-quantize, every tensor Q8_0 but ffn_down of layers 10-19 Q4_K (rows of 1536).
    let ll = tmp("mt-retype-llama.gguf");
    let mut q = llama_tool("llama-quantize");
    q.args(["--allow-requantize", "--pure", "--tensor-type", r"blk\.1[0-9]\.ffn_down=q4_k"]);
    q.arg(&model).arg(&ll).arg("Q8_0").arg(LLAMA_THREADS);
    ok(q);
    let (out, text) = meta(
        &model,
        &[
            "--retype-tensor",
            "blk.0.attn_q.weight=q8_0",
            "--retype-tensor",
            r"blk\.1[0-9]\.ffn_down\.weight=Q4_K",
            "--set",
            "general.name=retyped",
        ],
        "mt-retyped.gguf",
    );
    assert!(text.contains("retyped  tensor blk.0.attn_q.weight Q4_1 → Q8_0"), "{text}");
    assert!(text.contains("261 tensors copied as they are, 11 converted"), "{text}");
    assert!(!text.contains("problem"), "a retype breaks nothing the check sees: {text}");
    let (src, ll, ours) = (
        tensor_bytes(&std::fs::read(&model).unwrap()),
        tensor_bytes(&std::fs::read(&ll).unwrap()),
        tensor_bytes(&std::fs::read(&out).unwrap()),
    );
    assert_eq!(ours.len(), src.len());
    for (name, (ty, bytes)) in &ours {
        let layer_1x = name.strip_prefix("blk.1").and_then(|r| r.strip_suffix(".ffn_down.weight"));
        let retyped = name == "blk.0.attn_q.weight" || layer_1x.is_some_and(|d| d.len() == 1);
        let (want_ty, want) = if retyped { &ll[name] } else { &src[name] };
        assert_eq!(ty, want_ty, "{name}");
        assert!(
            bytes == want,
            "{name}: organ's bytes differ from {}",
            if retyped { "llama-quantize's" } else { "the input's" }
        );
    }
    assert_eq!(ours["blk.12.ffn_down.weight"].0, GgmlType::Q4_K);
    let text = llama_generate(&out, 16);
    assert!(!text.is_empty());
}

/// A small model of three F32 tensors, and a copy of its bytes to check it is left alone.
fn small(name: &str) -> (PathBuf, Vec<u8>) {
    let kvs = [("general.architecture", MetaValue::Str(b"llama")), ("llama.block_count", MetaValue::U32(1))];
    let p = write_model_kvs(
        name,
        &kvs,
        &[
            t("blk.0.a.weight", &[40], GgmlType::F32, noise(1, 40)),
            t("blk.0.b.weight", &[64], GgmlType::F32, noise(2, 64)),
            t("out.weight", &[32, 2], GgmlType::F32, noise(3, 64)),
        ],
    );
    let bytes = std::fs::read(&p).unwrap();
    (p, bytes)
}

#[test]
fn tensor_edits_that_cannot_be_done_are_refused_naming_the_flag_and_nothing_is_written() {
    let (model, before) = small("mt-bad.gguf");
    let dir = tmp("mt-bad-out");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("o.gguf");
    let cases: [(&[&str], &str); 12] = [
        (&["--rename-tensor", "nope"], "--rename-tensor \"nope\": expected REGEX=REPLACEMENT"),
        (&["--rename-tensor", "a=b"], "--rename-tensor \"a=b\": it matches no tensor's whole name"),
        (&["--rename-tensor", r"blk\.0\..*=x"], "would both be named \"x\""),
        (&["--rename-tensor", r"(blk\.0\.a\.weight=x"], "not a regular expression"),
        (&["--rename-tensor", r"(blk)\.0\.a\.weight=$2"], "names group $2"),
        (&["--rename-tensor", &format!("out.weight={}", "n".repeat(64))], "at most 63 bytes"),
        (&["--remove-tensor", "blk.0"], "--remove-tensor \"blk.0\": no tensor has this name"),
        (&["--remove-tensor", ".*"], "every one of the 3 tensors would go"),
        (&["--retype-tensor", "blk.0.a.weight=q8_0"], "rows of 40 values, which Q8_0's blocks of 32 do not divide"),
        (&["--retype-tensor", "out.weight=q9"], "--retype-tensor \"out.weight=q9\": \"q9\" is not a ggml type"),
        (&["--retype-tensor", "out.weight=f32"], "is F32 already"),
        (
            &["--remove-tensor", "out.weight", "--retype-tensor", "out.weight=f16"],
            "only tensors --remove-tensor removes",
        ),
    ];
    for (args, want) in cases {
        let mut c = organ();
        c.arg("meta").arg(&model).args(args).arg("--out").arg(&out);
        let err = fails(c);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(std::fs::read_dir(&dir).unwrap().next().is_none(), "{args:?} wrote something");
    }
    // In place: a rename that keeps the header's length is a header write; a removal moves
    // the data and is refused.
    let copy = tmp("mt-bad-in-place.gguf");
    std::fs::write(&copy, &before).unwrap();
    let mut c = organ();
    c.arg("meta").arg(&copy).args(["--remove-tensor", "out.weight", "--in-place"]);
    assert!(fails(c).contains("--in-place rewrites the header alone"));
    assert!(std::fs::read(&copy).unwrap() == before);
    let mut c = organ();
    c.arg("meta").arg(&copy).args(["--rename-tensor", "out.weight=out.weighs", "--in-place"]);
    ok(c);
    let after = std::fs::read(&copy).unwrap();
    assert_eq!(after.len(), before.len());
    assert!(tensor_bytes(&after).contains_key("out.weighs"));
    // An organ directory and a split model: refused, with what to do instead.
    let organ_dir = dissect(&model, "mt-bad-dir", &[]);
    let mut c = organ();
    c.arg("meta").arg(&organ_dir).args(["--remove-tensor", "out.weight", "--out"]).arg(&out);
    assert!(fails(c).contains("tensor edits of an organ directory are not supported"));
    let split = tmp("mt-bad-split");
    let _ = std::fs::remove_dir_all(&split);
    std::fs::create_dir_all(&split).unwrap();
    let mut c = organ();
    c.arg("assemble").arg(&organ_dir).args(["--split-max-size", "200", "--out"]).arg(split.join("s.gguf"));
    ok(c);
    let first = std::fs::read_dir(&split)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_str().unwrap().contains("-00001-of-"));
    let mut c = organ();
    c.arg("meta").arg(first.expect("a first shard")).args(["--remove-tensor", "out.weight", "--out"]).arg(&out);
    assert!(fails(c).contains("tensor edits of a split model are not supported"));
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
    assert!(std::fs::read(&model).unwrap() == before, "the input changed");
}
