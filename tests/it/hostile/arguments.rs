//! Hostile arguments: what the second hardening issue (46) found beside the files, given as
//! flags, configurations and side files (nested YAML as a merge configuration or a
//! `--param`, `--set-file` values past the header budget, merges and adapters past F16's
//! range, a `--rank` of 2⁶⁴ − 1). `hostile_inputs` runs each through [`super::runner`] with
//! the crafted files and counts it in the same line: each must be refused with one error
//! line that says what it refuses, in bounded memory and time, and write nothing.

use crate::build::{noise, t, write_model_kvs};
use organ_core::{GgmlType, MetaValue};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// One hostile command line, and what its refusal must say.
pub(super) struct ArgCase {
    pub(super) label: &'static str,
    pub(super) args: Vec<OsString>,
    /// The output the run must not leave.
    pub(super) out: PathBuf,
    pub(super) needle: &'static str,
}

fn os(parts: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    parts.iter().map(|p| p.as_ref().to_owned()).collect()
}

/// The cases, their models and files made under `d`.
pub(super) fn argument_cases(d: &Path) -> Vec<ArgCase> {
    let kvs = [("general.architecture", MetaValue::Str(b"llama")), ("llama.block_count", MetaValue::U32(1))];
    let model = |name: &str, seed: u64| {
        let p = write_model_kvs(name, &kvs, &[t("blk.0.attn_q.weight", &[64, 64], GgmlType::F16, noise(seed, 4096))]);
        let to = d.join(name);
        std::fs::rename(&p, &to).unwrap();
        to
    };
    let (base, tuned) = (model("args-base.gguf", 3), model("args-tuned.gguf", 4));
    let adapter_kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("general.type", MetaValue::Str(b"adapter")),
        ("adapter.type", MetaValue::Str(b"lora")),
        ("adapter.lora.alpha", MetaValue::F32(8.0)),
    ];
    let adapter = write_model_kvs(
        "args-adapter.gguf",
        &adapter_kvs,
        &[
            t("blk.0.attn_q.weight.lora_a", &[64, 4], GgmlType::F32, noise(1, 256)),
            t("blk.0.attn_q.weight.lora_b", &[4, 64], GgmlType::F32, noise(2, 256)),
        ],
    );
    let out = d.join("args-out.gguf");
    let dat = |name: &str, bytes: Vec<u8>| {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let i32s = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let dat_name = dat("name.dat", i32s(&[i32::MAX, i32::MAX]));
    let entry = [i32s(&[1, 20]), b"blk.0.attn_q.weight".to_vec(), vec![0]].concat();
    let dat_values = dat("values.dat", [entry.clone(), i32s(&[1, i32::MAX]), vec![0; 64]].concat());
    let nan = [0f32.to_le_bytes(), f32::NAN.to_le_bytes()].concat();
    let dat_nan = dat("nan.dat", [entry, i32s(&[1, 2]), nan].concat());
    // Before: yaml-rust2 recursed on each level before organ's depth limit was checked, and
    // 100 KB of it overflowed the stack (exit 134; the server aborted with every job).
    let deep = format!("{}x\n", "- ".repeat(50_000));
    let config = d.join("deep.yml");
    let body =
        format!("merge_method: linear\nmodels:\n  - model: {}\nparameters:\n  normalize:\n    {deep}", base.display());
    std::fs::write(&config, body).unwrap();
    let flow = d.join("flow.yml");
    let body = format!("merge_method: linear\nmodels: {}{}\n", "[".repeat(50_000), "]".repeat(50_000));
    std::fs::write(&flow, body).unwrap();
    // Before: 30 of one 16 MiB file made a 1.5 GB child and a header organ refused to read.
    // Sparse: the budget is summed from the files' sizes before any of them is read.
    let big = d.join("big-value.txt");
    std::fs::File::create(&big).unwrap().set_len(16 << 20).unwrap();
    let mut meta = os(&[&"meta", &base]);
    for i in 0..30 {
        meta.extend(os(&[&"--set-file", &format!("x.value{i}={}", big.display())]));
    }
    meta.extend(os(&[&"--out", &out]));
    let param = format!("normalize={deep}");
    let weighted = format!("{}:10000000", tuned.display());
    let scaled = format!("{}:100000", adapter.display());
    let merge = |method: &str| os(&[&"merge", &"--method", &method.to_owned(), &"--out", &out]);
    vec![
        ArgCase {
            label: "merge-deep-yaml",
            args: [os(&[&"merge", &config, &"--out", &out])].concat(),
            out: out.clone(),
            needle: "deeper than 32",
        },
        ArgCase {
            label: "merge-deep-flow",
            args: [os(&[&"merge", &flow, &"--out", &out])].concat(),
            out: out.clone(),
            // yaml-rust2 bounds flow nesting itself.
            needle: "recursion limit exceeded",
        },
        ArgCase {
            label: "merge-deep-param",
            args: [merge("task_arithmetic"), os(&[&"--base", &base, &"--model", &tuned, &"--param", &param])].concat(),
            out: out.clone(),
            needle: "deeper than 32",
        },
        ArgCase { label: "meta-set-file-budget", args: meta, out: out.clone(), needle: "header budget" },
        ArgCase {
            label: "merge-past-f16",
            args: [merge("task_arithmetic"), os(&[&"--base", &base, &"--model", &weighted, &"--type", &"f16"])]
                .concat(),
            out: out.clone(),
            needle: "range",
        },
        ArgCase {
            label: "lora-merge-past-f16",
            args: os(&[&"lora", &"merge", &base, &"--lora", &scaled, &"--out", &out]),
            out: out.clone(),
            needle: "out of F16's range",
        },
        ArgCase {
            label: "lora-extract-rank",
            args: os(&[
                &"lora",
                &"extract",
                &"--base",
                &base,
                &"--tuned",
                &tuned,
                &"--rank",
                &"18446744073709551615",
                &"--out",
                &out,
            ]),
            out: out.clone(),
            needle: "more than 65536",
        },
        // Legacy .dat importance matrices (read when a file is not a GGUF), whose counts
        // the C reader allocates before it reads: 2³¹ − 1 entries with a name of 2³¹ − 1
        // bytes, a value count of 2³¹ − 1, and a NaN sum.
        ArgCase {
            label: "quantize-dat-name",
            args: os(&[&"quantize", &"--imatrix", &dat_name, &base, &out, &"Q4_K_M"]),
            out: out.clone(),
            needle: "its name of 2147483647 bytes runs past the end",
        },
        ArgCase {
            label: "quantize-dat-values",
            args: os(&[&"quantize", &"--imatrix", &dat_values, &base, &out, &"Q4_K_M"]),
            out: out.clone(),
            needle: "its 2147483647 values run past the end",
        },
        ArgCase {
            label: "quantize-dat-nan",
            args: os(&[&"quantize", &"--imatrix", &dat_nan, &base, &out, &"Q4_K_M"]),
            out,
            needle: "value 1 is NaN",
        },
    ]
}
