//! The CLI on bad input: a clear one-line error naming the file and the offset or tensor,
//! exit status 1, and no output file left behind.

use crate::common::*;

fn err_of(args: &[&std::ffi::OsStr]) -> String {
    let out = organ().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail");
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.starts_with("organ: error: "), "{e}");
    e
}

fn write(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = tmp(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn missing_file_is_named() {
    let p = tmp("does-not-exist.gguf");
    let e = err_of(&["inspect".as_ref(), p.as_os_str()]);
    assert!(e.contains("does-not-exist.gguf") && e.contains("cannot open"), "{e}");
}

#[test]
fn non_gguf_is_named_with_offset() {
    let p = write("readme.gguf", b"# organ\nnot a model at all");
    let e = err_of(&["measure".as_ref(), p.as_os_str()]);
    assert!(e.contains("readme.gguf") && e.contains("offset 0") && e.contains("not a GGUF"), "{e}");
    // The first bytes read as text, not as a list of hex bytes.
    assert!(e.contains(r##"it starts with "# or""##), "{e}");
}

/// The files people mistake for GGUF are named for what they are, with what to do.
#[test]
fn what_a_non_gguf_file_is_is_said() {
    let mut safetensors = 60u64.to_le_bytes().to_vec();
    safetensors.extend(br#"{"__metadata__":{"format":"pt"}}"#);
    let cases: [(&str, &[u8], &str); 6] = [
        ("model.safetensors.gguf", &safetensors, "a safetensors file; llama.cpp's convert_hf_to_gguf.py"),
        ("pytorch_model.bin.gguf", b"PK\x03\x04\x00\x00\x08\x00", "a zip archive (a PyTorch checkpoint?)"),
        ("old.bin.gguf", b"\x80\x02}q\x00(X", "a Python pickle"),
        ("ggjt.gguf", b"tjgg\x03\x00\x00\x00", "a GGML-era file"),
        ("saved-page.gguf", b"\n<!DOCTYPE html><html>", "an HTML page"),
        ("config.gguf", b"{\"architectures\": []}", "JSON text"),
    ];
    for (name, bytes, said) in cases {
        let p = write(name, bytes);
        let e = err_of(&["inspect".as_ref(), p.as_os_str()]);
        assert!(e.contains(name) && e.contains("offset 0: not a GGUF file") && e.contains(said), "{name}: {e}");
    }
    // Nothing recognized: no guess.
    let p = write("random.gguf", &[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4]);
    let e = err_of(&["inspect".as_ref(), p.as_os_str()]);
    assert!(e.trim_end().ends_with(r#"it starts with "\xde\xad\xbe\xef", expected "GGUF")"#), "{e}");
}

/// A selection that matches nothing says what the model has, and a one-problem refusal
/// says "1 problem".
#[test]
fn a_selection_matching_nothing_says_what_would() {
    let Some(model) = need::smollm2() else { return };
    let out = tmp("select-nothing.gguf");
    let graft = |sel: &[&str]| {
        let mut c = organ();
        c.arg("graft").arg("--donor").arg(&model).arg("--recipient").arg(&model).args(sel).arg("--out").arg(&out);
        fails(c)
    };
    let e = graft(&["--layers", "40-50"]);
    assert!(
        e.contains("(1 problem)") && e.contains("layers 40-50 matches no tensor: the model has layers 0-29"),
        "{e}"
    );
    let e = graft(&["--name", "ffn_up"]);
    assert!(e.contains("a pattern matches whole names (did you mean *ffn_up*?)"), "{e}");
    assert!(!out.exists());
    let mut c = organ();
    c.arg("purify").arg(&model).args(["--method", "fractal", "--type", "adapter", "--out"]).arg(&out);
    let e = fails(c);
    assert!(e.contains("types adapter matches no tensor: the model has no adapter tensors"), "{e}");
}

#[test]
fn tensor_past_the_end_names_the_tensor_and_writes_nothing() {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.push(b'w');
    b.extend(1u32.to_le_bytes());
    b.extend(64u64.to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.resize(32 + 36, 0);
    let p = write("short.gguf", &b);
    let json = tmp("short-report.json");
    let e = err_of(&["measure".as_ref(), p.as_os_str(), "--json".as_ref(), json.as_os_str()]);
    // A file cut short, said as inspect says it (issue 50), the tensor it lacks named.
    assert!(e.contains("short.gguf") && e.contains("cut short") && e.contains(", w "), "{e}");
    assert!(!json.exists(), "no report for a model that failed");
    let leftovers: Vec<_> = std::fs::read_dir(json.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        // Only this report's temp files: tests in this binary run in parallel.
        .filter(|e| e.file_name().to_string_lossy().starts_with(".short-report.json.organ-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[test]
fn truncated_header_names_the_offset() {
    let p = write("trunc.gguf", b"GGUF\x03\x00\x00\x00\x01\x00");
    let e = err_of(&["inspect".as_ref(), p.as_os_str()]);
    assert!(e.contains("trunc.gguf") && e.contains("offset 8") && e.contains("file ends"), "{e}");
}

#[test]
fn measure_handles_valid_small_files_and_json_is_written_whole() {
    // A GGUF written by gguf-py's GGUFWriter (scripts/make-fuzz-seeds.py).
    let seed = repo().join("core/fuzz/seeds/parse/every_value.gguf");
    let json = tmp("small.json");
    let mut c = organ();
    c.arg("measure").arg(&seed).arg("--json").arg(&json);
    let out = String::from_utf8(ok(c).stdout).unwrap();
    assert!(out.contains("2 tensors"), "{out}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["models"][0]["tensors"].as_array().unwrap().len(), 2);
}

/// An output whose directory is missing, or is a file, is refused before any work, named
/// as the user gave it (not by the temp file the writer would have made there).
#[test]
fn an_output_in_a_missing_directory_is_refused_before_any_work() {
    let Some(model) = need::smollm2() else { return };
    let file = write("not-a-dir.txt", b"a file");
    for (dest, said) in
        [(tmp("no-such-dir").join("x.json"), "does not exist"), (file.join("x.json"), "is not a directory")]
    {
        let out = organ().arg("measure").arg(&model).arg("--sigma").arg("--json").arg(&dest).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let e = String::from_utf8(out.stderr).unwrap();
        let want = format!("organ: error: {}: cannot be written: ", dest.display());
        assert!(e.starts_with(&want) && e.contains(said) && !e.contains("organ-tmp"), "{e}");
        // Nothing was measured: the report's text is printed after the work.
        assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    }
}

/// A model output named with a mistyped extension is refused with the name meant, and
/// nothing is written; `.gguf`, no extension and `.organs` are the two kinds of output.
#[test]
fn a_mistyped_model_extension_is_refused() {
    let Some(model) = need::smollm2() else { return };
    let typo = tmp("pur.ggfu");
    let mut c = organ();
    c.arg("purify").arg(&model).args(["--method", "fractal", "--layers", "5", "--type", "organ", "--out"]).arg(&typo);
    let e = fails(c);
    let meant = tmp("pur.gguf");
    assert!(e.contains(&format!("did you mean {}?", meant.display())), "{e}");
    assert!(!typo.exists() && !meant.exists());
    let mut c = organ();
    c.arg("graft").arg("--donor").arg(&model).arg("--recipient").arg(&model).args(["--layers", "5", "--type", "organ"]);
    c.arg("--out").arg(tmp("g.GGUF.bak"));
    let e = fails(c);
    assert!(e.contains("a model is written as a GGUF file"), "{e}");
}

/// `organ inspect M --json | head`: a reader that stops early closes the pipe, and organ
/// exits 0 without a word (the JSON is megabytes, far past the pipe's buffer).
#[test]
fn a_closed_pipe_ends_quietly() {
    use std::io::Read;
    let Some(model) = need::smollm2() else { return };
    let mut child = organ()
        .arg("inspect")
        .arg(&model)
        .arg("--json")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 4096];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    // The read end is dropped here: organ's next writes meet a closed pipe.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(head.starts_with(b"{"));
}

/// A one-tensor F32 GGUF (`blk.0.ffn_up.weight`, rows of 64) holding `values`.
fn f32_model(name: &str, values: &[f32]) -> std::path::PathBuf {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes()); // tensors
    b.extend(0u64.to_le_bytes()); // metadata
    let tensor = b"blk.0.ffn_up.weight";
    b.extend((tensor.len() as u64).to_le_bytes());
    b.extend(tensor);
    b.extend(2u32.to_le_bytes());
    b.extend(64u64.to_le_bytes());
    b.extend((values.len() as u64 / 64).to_le_bytes());
    b.extend(0u32.to_le_bytes()); // F32
    b.extend(0u64.to_le_bytes()); // offset
    b.resize(b.len().next_multiple_of(32), 0);
    for v in values {
        b.extend(v.to_le_bytes());
    }
    write(name, &b)
}

/// `measure` says on the terminal when values that are not finite were left out of θ,
/// naming the tensor and pointing to `organ check`; a clean model gets no warning.
#[test]
fn measure_warns_of_values_that_are_not_finite() {
    let mut v: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin()).collect();
    v[7] = f32::NAN;
    v[9] = f32::INFINITY;
    let out = organ().arg("measure").arg(f32_model("not-finite.gguf", &v)).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(
        e.contains("organ: warning: ") && e.contains("blk.0.ffn_up.weight (2)") && e.contains("organ check"),
        "{e}"
    );
    (v[7], v[9]) = (0.5, 0.25);
    let out = organ().arg("measure").arg(f32_model("finite.gguf", &v)).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("not finite"));
}

/// graft and purify change only what they are told to: no selection is refused before any
/// work, naming the ways to choose and `--all`; `--all` is every tensor and says so.
#[test]
fn surgery_without_a_selection_is_refused_and_all_says_what_it_took() {
    let v: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin()).collect();
    let m = f32_model("select-required.gguf", &v);
    let out = tmp("select-required-out.gguf");
    let graft = ["graft".as_ref(), "--donor".as_ref(), m.as_os_str(), "--recipient".as_ref(), m.as_os_str()];
    let e = err_of(&[&graft[..], &["--out".as_ref(), out.as_os_str()]].concat());
    assert!(
        e.contains("graft: which tensors?") && e.contains("--layers, --type or --name") && e.contains("--all"),
        "{e}"
    );
    let purify = ["purify".as_ref(), m.as_os_str(), "--method".as_ref(), "fractal".as_ref()];
    let e = err_of(&[&purify[..], &["--out".as_ref(), out.as_os_str()]].concat());
    assert!(e.contains("purify: which tensors?") && e.contains("--all"), "{e}");
    assert!(!out.exists());
    // --all: every tensor, and the run says so.
    let done = organ().args(purify).arg("--all").arg("--out").arg(&out).output().unwrap();
    let text = String::from_utf8(done.stdout).unwrap();
    assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stderr));
    assert!(text.contains("of 1 tensors of select-required.gguf (all tensors)"), "{text}");
    // --all with a criterion is a usage error (clap's exit 2).
    let both = organ().args(purify).args(["--all", "--layers", "0", "--out"]).arg(&out).output().unwrap();
    assert_eq!(both.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&both.stderr).contains("--all"));
}
