//! `organ quantize` against llama-quantize (the build scripts/build-llama.sh makes): the
//! same arguments must give the same file, byte for byte. SmolLM2's F16 (a dequantized
//! Q4_1) has rows of 576, which no K-quant divides, so its K-quant mixes exercise the
//! fallbacks (Q4_K → Q5_0, Q6_K → Q8_0, …) on every tensor but ffn_down (rows of 1536).
//! The whole matrix of presets and flags is bench/quantize-matrix.sh; this is its subset.

use crate::common::{self, fails, llama_tool, need, ok, organ, tmp, LLAMA_THREADS};
use std::path::{Path, PathBuf};

/// Runs llama-quantize and organ quantize with `flags … IN OUT TYPE 1` and compares files;
/// returns llama-quantize's (organ's is removed).
fn same_bytes(input: &Path, ty: &str, flags: &[&str], name: &str) -> PathBuf {
    let (ll, or) = (tmp(&format!("quantize-{name}-llama.gguf")), tmp(&format!("quantize-{name}-organ.gguf")));
    let mut q = llama_tool("llama-quantize");
    q.args(flags).arg(input).arg(&ll).arg(ty).arg(LLAMA_THREADS);
    ok(q);
    let mut o = organ();
    o.arg("quantize").args(flags).arg(input).arg(&or).arg(ty).arg(LLAMA_THREADS);
    ok(o);
    let (a, b) = (std::fs::read(&ll).unwrap(), std::fs::read(&or).unwrap());
    let first = a.iter().zip(&b).position(|(x, y)| x != y);
    assert!(
        a == b,
        "{name}: organ's {} bytes differ from llama-quantize's {} (first at byte {first:?})",
        b.len(),
        a.len()
    );
    std::fs::remove_file(&or).unwrap();
    ll
}

/// `organ check OUT --derived-from SRC [--imatrix I]`: whether it passed, its text, and
/// the message of each derivation finding by subject (the report's JSON).
fn derived(out: &Path, src: &Path, imatrix: Option<&str>) -> (bool, String, Vec<(String, String)>) {
    let json = tmp(&format!("{}.derived.json", out.file_name().unwrap().to_str().unwrap()));
    let mut c = organ();
    c.arg("check").arg(out).arg("--derived-from").arg(src).arg("--json").arg(&json);
    c.args(imatrix.map(|i| ["--imatrix", i]).into_iter().flatten());
    let o = c.output().unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{c:?}: {}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).unwrap();
    let found = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "derivation")
        .map(|f| (f["subject"].as_str().unwrap().to_string(), f["message"].as_str().unwrap().to_string()))
        .collect();
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), found)
}

/// The message of the finding about `subject`.
fn about<'a>(found: &'a [(String, String)], subject: &str) -> &'a str {
    found.iter().find(|(s, _)| s == subject).map_or("", |(_, m)| m.as_str())
}

#[test]
fn smollm2_f16_presets_are_llama_quantizes_bytes() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let f16 = common::smollm2_f16(&q41);
    // Q8_0, Q4_0, Q5_0, Q5_1 and Q6_K are inside these mixes (their fallbacks, ffn_down's
    // Q6_K); each type alone is bench/quantize-matrix.sh's. IQ4_XS and IQ4_NL (about 40 s
    // a run over the model on one thread, for each of the two programs) are the imatrix
    // test's, on some tensors: those it excludes from the matrix take the plain quantizers.
    for ty in ["Q4_K_M", "Q3_K_M", "Q2_K"] {
        let out = same_bytes(&f16, ty, &[], ty);
        if ty == "Q4_K_M" {
            // llama-quantize's file is the F16 quantized as its header says; one block
            // changed, and the tensor is named.
            let (pass, text, _) = derived(&out, &f16, None);
            assert!(pass && text.contains("quantized with Q4_K_M: all 272 tensors identical"), "{text}");
            let mut bytes = std::fs::read(&out).unwrap();
            let g = organ_core::gguf::Gguf::parse(&bytes, bytes.len() as u64).unwrap();
            let t = g.tensor("blk.5.ffn_down.weight").unwrap();
            let at = (t.file_offset + t.n_bytes / 2) as usize;
            bytes[at] ^= 0x10;
            let changed = tmp("quantize-q4_k_m-changed.gguf");
            std::fs::write(&changed, &bytes).unwrap();
            let (pass, text, found) = derived(&changed, &f16, None);
            assert!(!pass && text.contains("quantized with Q4_K_M: 1 of 272 tensors differ"), "{text}");
            let m = about(&found, "blk.5.ffn_down.weight");
            assert!(m.contains("F16 quantized to Q6_K: 1 of"), "{found:?}");
            assert_eq!(found.len(), 2, "the verdict and the tensor: {found:?}");
            std::fs::remove_file(&changed).unwrap();
        }
        std::fs::remove_file(&out).unwrap();
    }
}

/// With an importance matrix (llama-imatrix on SmolLM2 F16, 4 chunks of
/// tests/data/texts/calibration.txt): the imatrix-steered quantizers, the mixes' imatrix
/// rules, the `quantize.imatrix.*` keys; and the filters.
#[test]
fn smollm2_f16_with_an_imatrix_is_llama_quantizes_bytes() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let f16 = common::smollm2_f16(&q41);
    let im = crate::predict::make_imatrix(
        &f16,
        &common::repo().join("tests/data/texts/calibration.txt"),
        4,
        "quantize.imatrix.gguf",
    );
    let im = im.to_str().unwrap();
    let out = same_bytes(&f16, "Q4_K_M", &["--imatrix", im], "imatrix-q4_k_m");
    // Derived with this matrix; without one, or with another (on another text), the
    // tensors it steers are named.
    let (pass, text, _) = derived(&out, &f16, Some(im));
    assert!(pass && text.contains("and the importance matrix"), "{text}");
    let (pass, _, found) = derived(&out, &f16, None);
    assert!(!pass && about(&found, "quantize.imatrix.entries_count").contains("give it with --imatrix"), "{found:?}");
    assert!(about(&found, "blk.0.ffn_down.weight").contains("F16 quantized to Q6_K"), "{found:?}");
    let text = common::repo().join("tests/data/perplexity.txt");
    let other = crate::predict::make_imatrix(&f16, &text, 2, "other.imatrix.gguf");
    let (pass, _, found) = derived(&out, &f16, Some(other.to_str().unwrap()));
    assert!(!pass && about(&found, "blk.0.ffn_down.weight").contains("'s F16 quantized to"), "{found:?}");
    std::fs::remove_file(&out).unwrap();
    // The same matrix in the legacy .dat format: its weights are sums scaled to a call
    // count, and its header keys come from the file's trailer.
    let dat = tmp("quantize.imatrix.dat");
    let mut c = llama_tool("llama-imatrix");
    c.arg("-m").arg(&f16).args(["--in-file", im]).arg("-o").arg(&dat).args(["--output-format", "dat"]);
    ok(c);
    let dat = dat.to_str().unwrap();
    let out = same_bytes(&f16, "Q4_K_M", &["--imatrix", dat], "imatrix-dat-q4_k_m");
    let (pass, text, _) = derived(&out, &f16, Some(dat));
    assert!(pass && text.contains("and the importance matrix"), "{text}");
    std::fs::remove_file(&out).unwrap();
    // The IQ4 searches on some tensors (on every one, IQ4_XS took each program 40 s on one
    // thread): IQ4_XS on ffn_down, IQ4_NL on six layers' attention, the rest Q8_0 (which
    // ignores the weights); two --exclude-weights give some of them the plain quantizers;
    // with layers pruned, a renumbered tensor takes its weights by its old name.
    let flags = [
        "--imatrix",
        im,
        "--tensor-type",
        "ffn_down=iq4_xs",
        "--tensor-type",
        "blk\\.[0-5]\\.attn_[qkv]=iq4_nl",
        "--exclude-weights",
        "attn_v",
        "--exclude-weights",
        "blk.3.",
        "--prune-layers",
        "0,12",
    ];
    let out = same_bytes(&f16, "Q8_0", &flags, "imatrix-iq4-prune");
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn smollm2_f16_flags_are_llama_quantizes_bytes() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let f16 = common::smollm2_f16(&q41);
    let types = tmp("quantize-types.txt");
    std::fs::write(&types, "attn_v=q8_0 blk\\.1[0-9]\\.ffn_down=q6_k\nffn_up=q5_0\n").unwrap();
    let types = types.to_str().unwrap();
    // Flags that touch different tensors share a run; each alone is the bench's.
    let cases: [(&str, &[&str]); 3] = [
        ("pure-leave-output", &["--pure", "--leave-output-tensor"]),
        ("type-file", &["--tensor-type-file", types]),
        (
            "output-embd-tensor-type",
            &[
                "--output-tensor-type",
                "q8_0",
                "--token-embedding-type",
                "q4_0",
                "--tensor-type",
                "attn_k=q5_1",
                "--tensor-type",
                "ATTN=Q8_0",
            ],
        ),
    ];
    for (name, flags) in cases {
        let out = same_bytes(&f16, "Q4_K_S", flags, name);
        if name == "type-file" {
            // Types from a file are the types OUT holds: derived as they are.
            let (pass, text, _) = derived(&out, &f16, None);
            assert!(pass, "{text}");
        }
        std::fs::remove_file(&out).unwrap();
    }
    // Keys set in the header (an int's magnitude as UINT32, a string with a colon in it,
    // a key the input has moved to the end) and layers pruned: the later layers renumbered
    // (the mix's layer rules see the new numbers), the block count set last; llama.cpp
    // runs the result.
    let flags = [
        "--override-kv",
        "general.name=str:organ: a test",
        "--override-kv",
        "llama.context_length=int:-4096",
        "--override-kv",
        "organ.test.f=float:0.5x",
        "--override-kv",
        "organ.test.b=bool:true",
        "--prune-layers",
        "29,3,7,3",
    ];
    let out = same_bytes(&f16, "Q4_K_M", &flags, "override-prune");
    let bytes = std::fs::read(&out).unwrap();
    let m = organ_core::gguf::Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    let keys: Vec<&str> = m.kvs.iter().map(|kv| kv.key).collect();
    assert_eq!(
        &keys[keys.len() - 5..],
        ["general.name", "llama.context_length", "organ.test.f", "organ.test.b", "llama.block_count"]
    );
    assert!(m.tensor("blk.26.ffn_down.weight").is_some() && m.tensor("blk.27.attn_k.weight").is_none());
    assert!(common::llama_perplexity(&out).is_finite());
    std::fs::remove_file(&out).unwrap();
    // Requantizing the Q4_1 original, which llama-quantize allows only when asked.
    let out = same_bytes(&q41, "Q8_0", &["--allow-requantize"], "requantize");
    let (pass, text, _) = derived(&out, &q41, None);
    assert!(pass && text.contains("quantized with Q8_0: all 272 tensors identical"), "{text}");
    std::fs::remove_file(&out).unwrap();
}

/// `--keep-split`: a shard for each of the input's, in its order, named as llama-quantize
/// names them (`OUT` less `.gguf`, then `-0000i-of-0000N.gguf`; one shard for a model that
/// was not split), every shard llama-quantize's byte for byte; llama.cpp runs the result.
#[test]
fn keep_split_writes_llama_quantizes_shards() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let f16 = common::smollm2_f16(&q41);
    let dir = tmp("quantize-keep-split");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut split = llama_tool("llama-gguf-split");
    split.args(["--split", "--split-max-size", "100M"]).arg(&f16).arg(dir.join("in"));
    ok(split);
    let first = dir.join("in-00001-of-00003.gguf");
    for (input, n, ty) in [(first.as_path(), 3, "Q4_K_M"), (f16.as_path(), 1, "Q8_0")] {
        for (tool, out) in [("llama", "ll.gguf"), ("organ", "or.gguf")] {
            let mut c = if tool == "llama" { llama_tool("llama-quantize") } else { organ() };
            if tool == "organ" {
                c.arg("quantize");
            }
            c.arg("--keep-split").arg(input).arg(dir.join(out)).arg(ty).arg(LLAMA_THREADS);
            ok(c);
        }
        for i in 1..=n {
            let name = |p: &str| dir.join(format!("{p}-{i:05}-of-{n:05}.gguf"));
            let (a, b) = (std::fs::read(name("ll")).unwrap(), std::fs::read(name("or")).unwrap());
            assert!(
                a == b,
                "{ty}, shard {i} of {n}: organ's {} bytes differ from llama-quantize's {}",
                b.len(),
                a.len()
            );
        }
        if n > 1 {
            assert!(common::llama_perplexity(&dir.join(format!("or-00001-of-{n:05}.gguf"))).is_finite());
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn what_llama_quantize_refuses_organ_refuses_naming_the_tensor() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let out = tmp("quantize-refused.gguf");
    let mut c = organ();
    c.arg("quantize").arg(&q41).arg(&out).arg("Q8_0");
    let e = fails(c);
    assert!(e.contains("requantizing from type Q4_1 is disabled") && e.contains("blk.0.attn_k.weight"), "{e}");
    let f16 = common::smollm2_f16(&q41);
    // Q1_0's blocks of 128 do not divide 576 and llama.cpp defines no fallback for them.
    let mut c = organ();
    c.arg("quantize").arg(&f16).arg(&out).arg("Q1_0");
    let e = fails(c);
    assert!(e.contains("no type to fall back to for Q1_0") && e.contains("blk.0.attn_k.weight"), "{e}");
    let mut q = llama_tool("llama-quantize");
    q.arg(&f16).arg(&out).arg("Q1_0");
    assert!(!q.output().unwrap().status.success(), "llama-quantize should refuse Q1_0 on rows of 576 too");
    // Q2_K_S needs an importance matrix, and none was given.
    let mut c = organ();
    c.arg("quantize").arg(&f16).arg(&out).arg("Q2_K_S");
    let e = fails(c);
    assert!(e.contains("requires an importance matrix"), "{e}");
    assert!(!out.exists(), "a refused quantization wrote {}", out.display());
}

#[test]
fn a_dry_run_lists_the_types_and_writes_nothing() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let f16 = common::smollm2_f16(&q41);
    let out = tmp("quantize-dry.gguf");
    let mut c = organ();
    c.arg("quantize").arg("--dry-run").arg(&f16).arg(&out).arg("Q4_K_M");
    let text = String::from_utf8(ok(c).stdout).unwrap();
    let line = |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name} in {text}"));
    assert!(line("blk.0.ffn_down.weight ").ends_with("Q6_K"), "{text}");
    assert!(line("blk.3.ffn_down.weight ").ends_with("Q4_K"), "{text}");
    assert!(line("blk.0.attn_q.weight ").ends_with("Q5_0"), "{text}");
    assert!(text.contains("fell back"), "{text}");
    assert!(!out.exists());
    // The report (--json): every tensor's types and bytes, the sizes the text prints.
    let json = tmp("quantize-dry.json");
    let mut c = organ();
    c.arg("quantize").arg("--dry-run").arg("--json").arg(&json).arg("--force").arg(&f16).arg(&out).arg("Q4_K_M");
    ok(c);
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = r["tensors"].as_array().unwrap();
    assert_eq!(
        (r["organ_quantize"].as_u64(), r["type"].as_str(), &r["outputs"]),
        (Some(1), Some("Q4_K_M"), &serde_json::json!([]))
    );
    let row = rows.iter().find(|t| t["name"] == "blk.0.ffn_down.weight").unwrap();
    assert_eq!(
        (row["from"].as_str(), row["type"].as_str(), row["bytes"].as_u64()),
        (Some("F16"), Some("Q6_K"), Some(1536 / 256 * 210 * 576))
    );
    let sum: u64 = rows.iter().map(|t| t["bytes"].as_u64().unwrap()).sum();
    assert_eq!(r["bytes_out"].as_u64(), Some(sum));
    let mib = sum as f64 / 1024.0 / 1024.0;
    assert!(text.contains(&format!("quant size  = {mib:8.2} MiB")), "{text}");
    assert!(r["file_bytes"].as_u64().unwrap() > sum + r["header_bytes"].as_u64().unwrap() - 1);
}

/// The test-built families with rows of 256 (tests/oracle/make-family-models.py
/// --f16-256: llama, qwen2, gemma3 and deepseek2 with four experts and a shared one, every
/// matrix F16), so that every K-quant applies and the mixes' per-architecture rules decide
/// each tensor's type: a few presets on each, with and without an importance matrix of its
/// own (llama-imatrix, 2 chunks), are llama-quantize's bytes, derived as their headers say,
/// and llama.cpp generates a token from each. Every preset and flag on them is
/// bench/quantize-matrix.sh's.
#[test]
fn families_with_rows_of_256_are_llama_quantizes_bytes() {
    let Some(tokenizer) = need::smollm2_oracle_and_llama() else { return };
    let dir = tmp("families-256");
    let mut c = std::process::Command::new(common::oracle_python());
    c.arg(common::repo().join("tests/oracle/make-family-models.py")).arg(&tokenizer).arg(&dir).arg("--f16-256");
    ok(c);
    let calibration = common::repo().join("tests/data/texts/calibration.txt");
    for arch in ["llama", "qwen2", "gemma3", "deepseek2"] {
        let f16 = dir.join(format!("{arch}.gguf"));
        let im = crate::predict::make_imatrix(&f16, &calibration, 2, &format!("families-256-{arch}.imatrix.gguf"));
        let im = im.to_str().unwrap();
        let imatrix = ["--imatrix", im];
        // IQ4_XS's search over the 12.6 M values of the embedding took each program seconds
        // a family: it is the bench's. Two K-quant mixes a family, each of Q4_K_M, Q3_K_S,
        // Q5_K_M on two families and each importance-matrix mix on two (CI's time: the
        // five on every family took 121 s).
        let mut cases: Vec<(&str, &[&str])> = match arch {
            "llama" => vec![("Q4_K_M", &[]), ("Q2_K_S", &imatrix)],
            "qwen2" => vec![("Q5_K_M", &[]), ("Q4_K_S", &imatrix)],
            "gemma3" => vec![("Q3_K_S", &[]), ("Q2_K_S", &imatrix)],
            _ => vec![("Q4_K_M", &[]), ("Q3_K_S", &[]), ("Q5_K_M", &[]), ("Q4_K_S", &imatrix)],
        };
        if arch == "deepseek2" {
            // The experts, 3-D, become MXFP4; everything else Q8_0.
            cases.push(("MXFP4_MOE", &[]));
        }
        // The i-quants below 4 bits, each mix once, with the importance matrix they need,
        // but for IQ1_S and IQ2_M (the whole matrix is the bench's, bench/quantize-matrix.sh
        // families): llama-quantize builds the type's grid at its start, which took IQ1_S and
        // IQ1_M 14-15 s of CPU a run here (IQ2_* 3-7 s, IQ3_* 1-2 s), and IQ1_S's grid is
        // IQ1_M's, IQ2_M's IQ2_S's. organ's quantizers of every type meet ggml's on the
        // checked-in vectors (scripts/gen-ggml-quant-vectors.sh).
        let iq: &[&str] = match arch {
            "llama" => &["IQ2_XXS", "IQ3_XXS"],
            "qwen2" => &["IQ2_XS", "IQ3_M"],
            "gemma3" => &["IQ2_S", "IQ3_XS"],
            _ => &["IQ1_M", "IQ3_S"],
        };
        cases.extend(iq.iter().map(|&ty| (ty, &imatrix[..])));
        for (ty, flags) in cases {
            let name = format!("{arch}-{ty}{}", if flags.is_empty() { "" } else { "-imatrix" });
            let out = same_bytes(&f16, ty, flags, &name);
            let (pass, text, _) = derived(&out, &f16, flags.get(1).copied());
            assert!(pass && text.contains(&format!("quantized with {ty}")), "{name}: {text}");
            let mut c = llama_tool("llama-completion");
            c.arg("-m").arg(&out).args(["-p", "Hello", "-n", "1", "--temp", "0", "-no-cnv", "-t", LLAMA_THREADS]);
            ok(c);
            std::fs::remove_file(&out).unwrap();
        }
    }
}
