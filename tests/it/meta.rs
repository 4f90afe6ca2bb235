//! `organ meta`: metadata edits against gguf-py 0.19.0's gguf_new_metadata.py (byte for
//! byte, or the one difference docs/surgery.md states), read back by gguf-py, loaded by
//! llama.cpp, tensors unchanged; bad input refused with nothing written.

use crate::build::{noise, t, write_model_kvs};
use crate::common::*;
use organ_core::gguf::MetaValue;
use organ_core::{GgmlType, Gguf};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `organ meta MODEL ARGS… --out tmp(NAME)`, which must succeed: the output.
#[track_caller]
fn meta(model: &Path, args: &[&str], name: &str) -> PathBuf {
    let out = tmp(name);
    let mut c = organ();
    c.arg("meta").arg(model).args(args).arg("--out").arg(&out);
    ok(c);
    out
}

/// gguf_new_metadata.py of gguf-py 0.19.0 (`--force`: no questions asked), run on `model`.
fn new_metadata(model: &Path, args: &[&str], name: &str) -> PathBuf {
    let out = tmp(name);
    let mut c = Command::new(oracle_python());
    c.args(["-m", "gguf.scripts.gguf_new_metadata"]).arg(model).arg(&out).args(args).arg("--force");
    ok(c);
    out
}

/// Every field gguf-py reads in `model` (its virtual GGUF.* ones aside), in file order:
/// name, gguf-py's type names (`["ARRAY", "UINT32"]`), value.
fn gguf_py_fields(model: &Path) -> Vec<(String, Vec<String>, serde_json::Value)> {
    let script = "import gguf, json, sys\n\
        r = gguf.GGUFReader(sys.argv[1])\n\
        out = [[f.name, [t.name for t in f.types], f.contents()] for f in r.fields.values() if not f.name.startswith('GGUF.')]\n\
        print(json.dumps(out))";
    let mut c = Command::new(oracle_python());
    c.arg("-c").arg(script).arg(model);
    serde_json::from_slice(&ok(c).stdout).unwrap()
}

/// Where the data section of the GGUF `bytes` starts.
fn data_offset(bytes: &[u8]) -> usize {
    Gguf::parse(bytes, bytes.len() as u64).unwrap().data_offset as usize
}

/// `organ diff A B --fail-on-change`: every tensor identical, no name in one model only,
/// and the metadata changed, which is a change (status 1).
#[track_caller]
fn only_metadata_changed(a: &Path, b: &Path, name: &str) {
    let json = tmp(name);
    let _ = std::fs::remove_file(&json);
    let o = organ().arg("diff").arg(a).arg(b).arg("--fail-on-change").arg("--json").arg(&json).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "a metadata edit is a change: {}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let c = &r["counts"];
    assert_eq!(c["identical"], c["comparable"], "{c}");
    for k in ["changed", "only_in_a", "only_in_b", "shape_mismatch"] {
        assert_eq!(c[k], 0, "{k}: {c}");
    }
    let m = &r["metadata"]["counts"];
    assert!(
        m["changed"].as_u64().unwrap() + m["only_in_a"].as_u64().unwrap() + m["only_in_b"].as_u64().unwrap() > 0,
        "{m}"
    );
}

#[test]
fn edits_gguf_new_metadata_supports_give_its_bytes() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    // general.name, special token ids and a removal: the script's file, byte for byte.
    let py = new_metadata(
        &model,
        &[
            "--general-name",
            "Renamed: SmolLM2",
            "--special-token-by-id",
            "eos",
            "1",
            "--special-token-by-id",
            "padding",
            "0",
            "--remove-metadata",
            "general.license",
        ],
        "py-ids.gguf",
    );
    let ours = meta(
        &model,
        &[
            "--set",
            "general.name=Renamed: SmolLM2:str",
            "--set",
            "tokenizer.ggml.eos_token_id=1",
            "--set",
            "tokenizer.ggml.padding_token_id=0",
            "--rm",
            "general.license",
        ],
        "ids.gguf",
    );
    let (py, ours) = (std::fs::read(py).unwrap(), std::fs::read(&ours).unwrap());
    assert!(py == ours, "organ's output differs from gguf_new_metadata.py's");

    // A chat template from a file: the script moves the key last, organ keeps it in its
    // place (docs/surgery.md); the same keys and values, the same length, the same data.
    let template = tmp("template.jinja");
    std::fs::write(&template, "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}").unwrap();
    let py = new_metadata(&model, &["--chat-template-file", template.to_str().unwrap()], "py-template.gguf");
    let spec = format!("tokenizer.chat_template={}", template.display());
    let ours = meta(&model, &["--set-file", &spec], "template.gguf");
    let (py_fields, our_fields) = (gguf_py_fields(&py), gguf_py_fields(&ours));
    let key = "tokenizer.chat_template";
    let mut moved: Vec<_> = our_fields.iter().filter(|f| f.0 != key).cloned().collect();
    moved.extend(our_fields.iter().filter(|f| f.0 == key).cloned());
    assert_eq!(moved, py_fields, "the outputs differ by more than the template's place");
    assert_eq!(our_fields.iter().find(|f| f.0 == key).unwrap().2, std::fs::read_to_string(&template).unwrap());
    let (py, ours) = (std::fs::read(py).unwrap(), std::fs::read(&ours).unwrap());
    assert_eq!(py.len(), ours.len());
    assert_eq!(data_offset(&py), data_offset(&ours));
    assert!(py[data_offset(&py)..] == ours[data_offset(&ours)..], "the tensor data differs");
}

#[test]
fn gguf_py_reads_every_type_as_set_and_no_tensor_changes() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let sets = [
        "x.u8=255:u8",
        "x.i8=-128:i8",
        "x.u16=65535:u16",
        "x.i16=-2:i16",
        "x.u32=4000000000:u32",
        "x.i32=-7:i32",
        "x.u64=18446744073709551615:u64",
        "x.i64=-9000000000:i64",
        "x.f32=0.5:f32",
        "x.f64=1e300:f64",
        "x.bool=true:bool",
        "x.str=12:str",
        "x.url=http://host:8080/a:str",
        "x.arr=[1, 2, 3]:arr[u16]",
        "x.words=[\"a\", \"b:c\"]",
        "x.nested=[[1], [2, 3]]:arr[arr[i8]]",
        "x.inferred=42",
        "llama.context_length=4096",
    ];
    let mut args: Vec<&str> = sets.iter().flat_map(|s| ["--set", s]).collect();
    args.extend(["--rename", "general.basename=general.base_name", "--rm", "general.size_label"]);
    let out = meta(&model, &args, "typed.gguf");
    let fields = gguf_py_fields(&out);
    let field = |k: &str| fields.iter().find(|f| f.0 == k).unwrap_or_else(|| panic!("{k} missing"));
    let expect: [(&str, &[&str], serde_json::Value); 18] = [
        ("x.u8", &["UINT8"], 255.into()),
        ("x.i8", &["INT8"], (-128).into()),
        ("x.u16", &["UINT16"], 65535.into()),
        ("x.i16", &["INT16"], (-2).into()),
        ("x.u32", &["UINT32"], 4_000_000_000u32.into()),
        ("x.i32", &["INT32"], (-7).into()),
        ("x.u64", &["UINT64"], u64::MAX.into()),
        ("x.i64", &["INT64"], (-9_000_000_000i64).into()),
        ("x.f32", &["FLOAT32"], 0.5.into()),
        ("x.f64", &["FLOAT64"], 1e300.into()),
        ("x.bool", &["BOOL"], true.into()),
        ("x.str", &["STRING"], "12".into()),
        ("x.url", &["STRING"], "http://host:8080/a".into()),
        ("x.arr", &["ARRAY", "UINT16"], serde_json::json!([1, 2, 3])),
        ("x.words", &["ARRAY", "STRING"], serde_json::json!(["a", "b:c"])),
        // gguf-py's contents() flattens an array of arrays (its types say the nesting).
        ("x.nested", &["ARRAY", "ARRAY", "INT8"], serde_json::json!([1, 2, 3])),
        ("x.inferred", &["UINT32"], 42.into()),
        // An existing key keeps its type and its place.
        ("llama.context_length", &["UINT32"], 4096.into()),
    ];
    for (key, types, value) in expect {
        let f = field(key);
        assert_eq!((&f.1, &f.2), (&types.iter().map(|t| t.to_string()).collect(), &value), "{key}");
    }
    let names: Vec<&str> = fields.iter().map(|f| f.0.as_str()).collect();
    let before: Vec<String> = gguf_py_fields(&model).into_iter().map(|f| f.0).collect();
    let at = |k: &str, list: &[&str]| list.iter().position(|n| *n == k);
    // The keys before, with the removed one gone: where the kept ones must be.
    let before: Vec<&str> = before.iter().map(String::as_str).filter(|k| *k != "general.size_label").collect();
    assert_eq!(at("llama.context_length", &names), at("llama.context_length", &before));
    assert_eq!(at("general.base_name", &names), at("general.basename", &before));
    assert!(!names.contains(&"general.size_label") && !names.contains(&"general.basename"));
    assert_eq!(
        &names[names.len() - 17..],
        &sets[..17].iter().map(|s| s.split('=').next().unwrap()).collect::<Vec<_>>()[..]
    );
    // Not one tensor changed; the metadata did.
    only_metadata_changed(&model, &out, "meta-every-type-diff.json");
}

#[test]
fn llama_cpp_generates_the_same_tokens_after_an_edit() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let out = meta(
        &model,
        &[
            "--set",
            "general.name=SmolLM2 renamed",
            "--set",
            "organ.note=edited by organ meta",
            "--rm",
            "general.license",
        ],
        "llama.gguf",
    );
    assert_eq!(llama_generate(&out, 16), llama_generate(&model, 16));
}

/// A small model of two F32 tensors, and a copy of its bytes to check it is left alone.
fn small(name: &str) -> (PathBuf, Vec<u8>) {
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("general.name", MetaValue::Str(b"small")),
        ("llama.block_count", MetaValue::U32(1)),
    ];
    let p = write_model_kvs(
        name,
        &kvs,
        &[t("a", &[32], GgmlType::F32, noise(1, 32)), t("b", &[64], GgmlType::F32, noise(2, 64))],
    );
    let bytes = std::fs::read(&p).unwrap();
    (p, bytes)
}

/// The entries of `dir` (outputs and temp files alike).
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn bad_input_is_refused_and_nothing_is_written() {
    let (model, before) = small("meta-bad.gguf");
    let dir = tmp("bad-out");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("o.gguf");
    let text = tmp("not-a-model.gguf");
    std::fs::write(&text, "hello, I am not a model\n").unwrap();
    let long = format!("k{}=1", "x".repeat(70_000));
    let cases: Vec<(PathBuf, Vec<&str>, &str)> = vec![
        (model.clone(), vec!["--set-typed", "general.name=x:u33"], "unknown type \"u33\""),
        (model.clone(), vec!["--set-typed", "general.name=x"], "VALUE:TYPE"),
        (model.clone(), vec!["--set", "x.a=[1, 2:arr[u8]"], "not a JSON array"),
        (model.clone(), vec!["--set", "x.a=[1, \"two\"]"], "more than one kind"),
        (model.clone(), vec!["--set", "x.a=300:u8"], "is not a u8"),
        (model.clone(), vec!["--set", &long], "GGUF keys are at most 65535 bytes"),
        (model.clone(), vec!["--set", "general.alignment=64:u32"], "organ does not change it"),
        (model.clone(), vec!["--rm", "split.count"], "organ does not change it"),
        (model.clone(), vec!["--set", "organ.split.id=x"], "organ does not change it"),
        (model.clone(), vec!["--set", "llama.block_count=2"], "fixed by the blk.N.* tensors"),
        (model.clone(), vec!["--rm", "general.nothing"], "no such key to remove"),
        (model.clone(), vec!["--rename", "general.name=llama.block_count"], "organ does not change it"),
        (model.clone(), vec!["--rm", "general.name", "--set", "general.name=a"], "named by two edits"),
        (text.clone(), vec!["--set", "general.name=a"], "not a valid GGUF"),
    ];
    for (input, args, want) in cases {
        let mut c = organ();
        c.arg("meta").arg(&input).args(&args).arg("--out").arg(&out);
        let err = fails(c);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(entries(&dir).is_empty(), "{args:?} wrote {:?}", entries(&dir));
    }
    // The output is the input.
    let mut c = organ();
    c.arg("meta").arg(&model).args(["--set", "general.name=a", "--out"]).arg(&model);
    assert!(fails(c).contains("is an input of this run"));
    // A shard of a split model whose second shard is missing.
    let shard = tmp("m-00001-of-00002.gguf");
    std::fs::copy(&model, &shard).unwrap();
    let mut c = organ();
    c.arg("meta").arg(&shard).args(["--set", "general.name=a", "--out"]).arg(&out);
    assert!(fails(c).contains("m-00002-of-00002.gguf: cannot open"));
    assert!(entries(&dir).is_empty());
    assert!(std::fs::read(&model).unwrap() == before, "the input changed");
}

#[test]
fn metadata_is_held_to_the_header_budget_it_is_read_with() {
    let (model, before) = small("meta-budget.gguf");
    let dir = tmp("meta-budget-out");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("o.gguf");
    let budget = 1u64 << 20;
    let value = tmp("meta-budget-value.txt");
    std::fs::write(&value, "v".repeat(200 << 10)).unwrap();
    let meta_within = |args: &[String]| {
        let mut c = organ();
        c.args(["--max-header-bytes", &budget.to_string(), "meta"]).arg(&model).args(args).arg("--out").arg(&out);
        c
    };
    let files = |n: usize| -> Vec<String> {
        (0..n).flat_map(|i| ["--set-file".to_owned(), format!("x.f{i}={}", value.display())]).collect()
    };
    // Six files of 200 KiB pass the 1 MiB budget at the sixth, refused from their sizes.
    let err = fails(meta_within(&files(6)));
    assert!(err.contains("--set-file x.f5="), "{err}");
    assert!(err.contains(&format!("more than the header budget of {budget} bytes")), "{err}");
    assert!(entries(&dir).is_empty(), "wrote {:?}", entries(&dir));
    // Five fit the sizes, and the header they make (with the keys and the rest) still fits.
    ok(meta_within(&files(5)));
    let mut c = organ();
    c.args(["--max-header-bytes", &budget.to_string(), "inspect"]).arg(&out);
    ok(c);
    std::fs::remove_file(&out).unwrap();
    // Values given on the command line count too, held to it in the core: the header
    // crosses the budget at the last file's key (the --set values are added first).
    let mut args = files(5);
    args.extend(["--set".to_owned(), format!("x.long={}", "w".repeat(100 << 10))]);
    let err = fails(meta_within(&args));
    assert!(err.contains("metadata key \"x.f4\""), "{err}");
    assert!(err.contains(&format!("more than the header budget of {budget} bytes")), "{err}");
    assert!(entries(&dir).is_empty(), "wrote {:?}", entries(&dir));
    assert!(std::fs::read(&model).unwrap() == before, "the input changed");
}

#[test]
fn in_place_only_when_the_header_keeps_its_length() {
    let (model, before) = small("meta-in-place.gguf");
    let data = data_offset(&before);
    // A longer name makes a longer header: refused, the file untouched.
    let mut c = organ();
    c.arg("meta").arg(&model).args(["--set", &format!("general.name={}", "n".repeat(100)), "--in-place"]);
    assert!(fails(c).contains("--in-place needs the header to keep its length"));
    assert!(std::fs::read(&model).unwrap() == before);
    // One of the same length: the header rewritten, the data where it was.
    let mut c = organ();
    c.arg("meta").arg(&model).args(["--set", "general.name=SMALL", "--in-place"]);
    ok(c);
    let after = std::fs::read(&model).unwrap();
    assert_eq!(after.len(), before.len());
    assert!(after[data..] == before[data..], "tensor data moved");
    let g = Gguf::parse(&after, after.len() as u64).unwrap();
    assert_eq!(g.get("general.name").and_then(|v| v.as_str()), Some("SMALL"));
    // The same edit to a new file gives the same bytes.
    let (copy, _) = small("meta-copy.gguf");
    let out = meta(&copy, &["--set", "general.name=SMALL"], "meta-copy-out.gguf");
    assert!(std::fs::read(out).unwrap() == after);
}

#[test]
fn no_edit_copies_the_file_and_the_report_names_each_change() {
    let (model, before) = small("meta-none.gguf");
    let out = meta(&model, &[], "meta-none-out.gguf");
    assert!(std::fs::read(out).unwrap() == before);
    let json = tmp("meta-report.json");
    let out = tmp("meta-report.gguf");
    let mut c = organ();
    c.arg("meta").arg(&model).args([
        "--set",
        "general.name=b",
        "--set",
        "x.new=1.5",
        "--rename",
        "general.name=general.title",
    ]);
    c.arg("--out").arg(&out).arg("--json").arg(&json);
    // A key renamed and set is named by two edits.
    assert!(fails(c).contains("named by two edits"));
    let mut c = organ();
    c.arg("meta").arg(&model).args([
        "--set",
        "x.new=1.5",
        "--rename",
        "general.name=general.title",
        "--rm",
        "llama.nothing",
    ]);
    c.arg("--out").arg(&out);
    assert!(fails(c).contains("llama.nothing"));
    let mut c = organ();
    c.arg("meta").arg(&model).args(["--set", "x.new=1.5", "--rename", "general.name=general.title"]);
    c.arg("--out").arg(&out).arg("--json").arg(&json);
    let text = String::from_utf8(ok(c).stdout).unwrap();
    assert!(
        text.contains("renamed  general.name → general.title") && text.contains("added    x.new (FLOAT32)"),
        "{text}"
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["changes"][0]["op"], "renamed");
    assert_eq!(report["changes"][1]["value_type"], "FLOAT32");
    assert_eq!(report["file_bytes"], std::fs::metadata(&out).unwrap().len());
    // Only a type's name after the last ':' is a type (issue 50): a URL with a port is a
    // string, and --set-typed gives a type explicitly.
    let mut c = organ();
    c.arg("meta").arg(&model).args(["--set", "general.url=http://x.org:8080", "--set-typed", "x.t=a:str:str"]);
    c.arg("--out").arg(&out).arg("--json").arg(&json).arg("--force");
    ok(c);
    let bytes = std::fs::read(&out).unwrap();
    let g = organ_core::gguf::Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    let value = |key: &str| g.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    assert_eq!(value("general.url").as_deref(), Some("http://x.org:8080"));
    assert_eq!(value("x.t").as_deref(), Some("a:str"));
}

#[test]
fn split_models_and_organ_directories_are_edited_as_one_model() {
    let (model, _) = small("meta-whole.gguf");
    let edit = ["--set", "general.name=edited", "--set", "x.new=3"];
    // The edit of the file itself, which the others must give.
    let mut c = organ();
    c.arg("meta").arg(&model).args(["--set", "general.name=edited", "--out"]).arg(tmp("meta-whole-file.gguf"));
    ok(c);
    let want = std::fs::read(tmp("meta-whole-file.gguf")).unwrap();
    // An organ directory: edited as the GGUF it assembles into, written as that GGUF.
    let dir = tmp("meta-whole-dir");
    let mut c = organ();
    c.arg("dissect").arg(&model).arg("--out").arg(&dir);
    ok(c);
    let from_dir = meta(&dir, &["--set", "general.name=edited"], "meta-whole-from-dir.gguf");
    assert!(std::fs::read(&from_dir).unwrap() == want, "the directory's edit differs from the file's");
    let mut c = organ();
    c.arg("meta").arg(&dir).args(["--set", "general.name=x", "--in-place"]);
    assert!(fails(c).contains("no GGUF header to edit in place"));
    // A split model (two shards of one tensor each): the first shard's header edited, the
    // second shard copied byte for byte, the tensors unchanged.
    let split_dir = tmp("meta-whole-split");
    std::fs::create_dir_all(&split_dir).unwrap();
    let mut c = organ();
    c.arg("assemble").arg(&dir).args(["--split-max-size", "150", "--out"]).arg(split_dir.join("s.gguf"));
    ok(c);
    let shards = [split_dir.join("s-00001-of-00002.gguf"), split_dir.join("s-00002-of-00002.gguf")];
    let out_dir = tmp("meta-whole-split-out");
    std::fs::create_dir_all(&out_dir).unwrap();
    for (named, n) in [(&shards[1], "e.gguf"), (&shards[0], "f-00001-of-00002.gguf")] {
        let mut c = organ();
        c.arg("meta").arg(named).args(edit).arg("--out").arg(out_dir.join(n));
        let text = String::from_utf8(ok(c).stdout).unwrap();
        assert!(text.contains("and 1 more shards copied as they are"), "{text}");
    }
    for prefix in ["e", "f"] {
        let got: Vec<Vec<u8>> =
            (1..=2).map(|i| std::fs::read(out_dir.join(format!("{prefix}-0000{i}-of-00002.gguf"))).unwrap()).collect();
        assert!(got[1] == std::fs::read(&shards[1]).unwrap(), "{prefix}: the second shard changed");
        let g = Gguf::parse(&got[0], got[0].len() as u64).unwrap();
        assert_eq!(g.get("general.name").and_then(|v| v.as_str()), Some("edited"));
        assert_eq!(g.get("x.new").and_then(|v| v.as_u64()), Some(3));
        assert_eq!(g.get("split.count").and_then(|v| v.as_u64()), Some(2), "split.* kept");
        let input = std::fs::read(&shards[0]).unwrap();
        assert!(got[0][data_offset(&got[0])..] == input[data_offset(&input)..], "{prefix}: tensor data changed");
        let edited = out_dir.join(format!("{prefix}-00001-of-00002.gguf"));
        only_metadata_changed(&shards[0], &edited, &format!("meta-split-{prefix}-diff.json"));
    }
    // An output naming a set of another size.
    let mut c = organ();
    c.arg("meta").arg(&shards[0]).args(edit).arg("--out").arg(out_dir.join("g-00001-of-00003.gguf"));
    assert!(fails(c).contains("names a set of 3 shards; the model has 2"));
    assert!(!out_dir.join("g-00001-of-00003.gguf").exists() && !out_dir.join("g-00001-of-00002.gguf").exists());
}

/// `organ meta MODEL ARGS --in-place` killed (SIGKILL, or SIGTERM) at `tries` random
/// instants of its run: every time the model left is the old one or the new one, byte for
/// byte, and gguf-py and organ read it.
fn kill_at_random_instants(model: &Path, args: &[&str], new: &[u8], tries: u32, py: &mut GgufPy) {
    let old = std::fs::read(model).unwrap();
    let run = || {
        let mut c = organ();
        c.arg("meta").arg(model).args(args).arg("--in-place");
        c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
        c
    };
    // How long a whole run takes: the kills land anywhere in it, and a little after.
    let t0 = std::time::Instant::now();
    assert!(run().status().unwrap().success());
    let whole = t0.elapsed().as_micros() as u64;
    assert!(std::fs::read(model).unwrap() == new, "{args:?}: the edit in place differs from --out's");
    let mut seed = 0x2545_F491_4F6C_DD1Du64 ^ whole;
    let (mut olds, mut news) = (0, 0);
    for i in 0..tries {
        std::fs::write(model, &old).unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut child = run().spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_micros(seed % (whole + whole / 4 + 1)));
        let signal = if i % 4 == 3 { "TERM" } else { "KILL" };
        drop(Command::new("kill").arg(format!("-{signal}")).arg(child.id().to_string()).status());
        drop(child.wait());
        let got = std::fs::read(model).unwrap();
        match () {
            _ if got == old => olds += 1,
            _ if got == new => news += 1,
            _ => panic!("{args:?}: SIG{signal} left a model that is neither the old nor the new one"),
        }
        py.read(model);
        let mut c = organ();
        c.arg("inspect").arg(model).stdout(std::process::Stdio::null());
        ok(c);
    }
    eprintln!("{args:?}: {tries} kills left {olds} old models and {news} new ones");
    std::fs::write(model, &old).unwrap();
}

/// One gguf-py process that reads the models it is given, one a line, and says ok.
struct GgufPy(std::process::Child);

impl GgufPy {
    fn start() -> GgufPy {
        let script = "import gguf, sys\n\
            for line in sys.stdin:\n    \
                r = gguf.GGUFReader(line.strip())\n    \
                n = sum(1 for f in r.fields.values())\n    \
                print('ok', n, len(r.tensors), flush=True)";
        let mut c = Command::new(oracle_python());
        c.arg("-c").arg(script).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
        GgufPy(c.spawn().unwrap())
    }

    #[track_caller]
    fn read(&mut self, model: &Path) {
        use std::io::{BufRead, Write};
        let stdin = self.0.stdin.as_mut().unwrap();
        writeln!(stdin, "{}", model.display()).unwrap();
        let mut line = String::new();
        let mut out = std::io::BufReader::new(self.0.stdout.as_mut().unwrap());
        out.read_line(&mut line).unwrap();
        assert!(line.starts_with("ok "), "gguf-py cannot read {}: {line:?}", model.display());
    }
}

#[test]
fn a_killed_edit_in_place_leaves_the_old_model_or_the_new() {
    let Some(_) = need::oracle() else { return };
    // A header of two pages (a long value between the edited ones) before 1 MiB of data.
    let pad = "p".repeat(5000);
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("general.name", MetaValue::Str(b"small")),
        ("llama.block_count", MetaValue::U32(1)),
        ("x.pad", MetaValue::Str(pad.as_bytes())),
        ("x.tail", MetaValue::Str(b"a longer tail")),
    ];
    let model = write_model_kvs("meta-kill.gguf", &kvs, &[t("a", &[1 << 18], GgmlType::F32, noise(3, 1 << 18))]);
    let mut py = GgufPy::start();
    // One value of the same length, in one page: patched where it is.
    // Two values that swap lengths, a page apart: the bytes between move, the length stays.
    let cases: [&[&str]; 2] =
        [&["--set", "general.name=SMALL"], &["--set", "general.name=a small model!", "--set", "x.tail=tail"]];
    for (i, args) in cases.into_iter().enumerate() {
        let copy = tmp("meta-kill-copy.gguf");
        std::fs::copy(&model, &copy).unwrap();
        let new = std::fs::read(meta(&copy, args, &format!("meta-kill-new{i}.gguf"))).unwrap();
        assert_eq!(new.len(), std::fs::metadata(&model).unwrap().len() as usize, "{args:?} keeps the length");
        kill_at_random_instants(&model, args, &new, 100, &mut py);
    }
}
