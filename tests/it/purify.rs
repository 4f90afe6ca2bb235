//! organ purify on the real model: both methods judged by llama.cpp, the θ before/after
//! table and perplexities printed; refusals by name; --only-if-improves.

use crate::common::*;
use organ_core::gguf::MetaValue;
use organ_core::Gguf;
use serde_json::Value;

#[test]
fn both_methods_on_smollm2_organs_load_generate_and_report() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let p_orig = smollm2_perplexity(&model);
    println!("original: perplexity {p_orig:.4}");
    for (method, extra) in [("fractal", ["--strength", "0.5"]), ("spectral", ["--keep", "0.95"])] {
        let out = tmp(&format!("purified-{method}.gguf"));
        let json = tmp(&format!("purified-{method}.json"));
        let mut c = organ();
        c.arg("purify").arg(&model).args(["--method", method, "--type", "organ", "--layers", "5-20"]).args(extra);
        c.arg("--out").arg(&out).arg("--json").arg(&json);
        let table = String::from_utf8(ok(c).stdout).unwrap();
        println!("{table}");
        assert!(table.contains(&format!("{n} of {n} selected tensors purified", n = SMOLLM2_ORGANS_5_20)), "{table}");
        let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        for r in report["tensors"].as_array().unwrap() {
            assert_eq!(r["status"], "purified");
            assert_eq!(r["written_as"], "Q4_1", "kept in its own type");
            assert!(r["relative_l2"].as_f64().unwrap() > 0.0);
        }
        let bytes = std::fs::read(&out).unwrap();
        let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
        assert_eq!(g.get("organ.purify.method").and_then(|v| v.as_str()), Some(method));
        let touched = g.get("organ.purify.tensors");
        assert!(matches!(touched, Some(MetaValue::Array(a)) if a.len == SMOLLM2_ORGANS_5_20 as u64), "{touched:?}");
        let text = llama_generate(&out, 24);
        let p = llama_perplexity(&out);
        println!("{method}: generates {text:?}; perplexity {p:.4} (original {p_orig:.4})");
        // Denoising costs perplexity on this model (22.5 -> 29.8 fractal, 45.0 spectral), but
        // a broken requantization lands in the hundreds or thousands.
        assert!(p.is_finite() && p < 2.5 * p_orig, "{method}: perplexity {p} against the parent's {p_orig}");
    }
}

#[test]
fn only_if_improves_keeps_every_tensor_whose_theta_would_fall() {
    let Some(model) = need::smollm2() else { return };
    let out = tmp("improves.gguf");
    let json = tmp("improves.json");
    let mut c = organ();
    let args = ["--method", "spectral", "--keep", "0.99", "--layers", "0-3", "--only-if-improves"];
    c.arg("purify").arg(&model).args(args);
    c.arg("--out").arg(&out).arg("--json").arg(&json);
    ok(c);
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let (src, dst) = (std::fs::read(&model).unwrap(), std::fs::read(&out).unwrap());
    let (gs, gd) = (Gguf::parse(&src, src.len() as u64).unwrap(), Gguf::parse(&dst, dst.len() as u64).unwrap());
    let (mut purified, mut kept) = (0, 0);
    for r in report["tensors"].as_array().unwrap() {
        let (b, a) = (r["theta_before"].as_f64(), r["theta_after"].as_f64());
        let name = r["name"].as_str().unwrap();
        let same = gs.tensor(name).unwrap().data(&src).unwrap() == gd.tensor(name).unwrap().data(&dst).unwrap();
        match r["status"].as_str().unwrap() {
            "purified" => {
                assert!(a.unwrap() > b.unwrap(), "{r}");
                assert!(!same, "{name}: purified, so its bytes changed");
                purified += 1;
            }
            s if s.starts_with("kept") => {
                assert!(a.unwrap() <= b.unwrap(), "{r}");
                assert!(same, "{name}: kept, so its bytes are the input's");
                kept += 1;
            }
            s => assert!(s.starts_with("untouched"), "{r}"),
        }
    }
    // Both branches must run, or this test checks nothing: on SmolLM2's layers 0-3,
    // spectral 0.99 raises θ of some tensors and lowers it on others.
    assert!(purified > 0 && kept > 0, "purified {purified}, kept {kept}: both branches must run");
}

/// SmolLM2 quantized by llama.cpp itself (`llama-quantize FLAGS… TYPE`), to tmp(`name`).
fn llama_quantized(name: &str, ty: &str, flags: &[&str]) -> std::path::PathBuf {
    let out = tmp(&format!("{name}.gguf"));
    let mut q = llama_tool("llama-quantize");
    q.arg("--allow-requantize").args(flags).arg(smollm2()).arg(&out).arg(ty);
    ok(q);
    out
}

#[test]
fn k_quant_organs_go_back_into_q4_k_and_q6_k_and_load_in_llama_cpp() {
    if need::smollm2_and_llama().is_none() {
        return;
    }
    // Q4_K_M, made by llama.cpp: its FFN tensors are Q4_K and Q6_K (a few legacy types
    // where a row is not whole 256-blocks).
    let q4k = llama_quantized("Q4_K_M", "Q4_K_M", &[]);
    let out = tmp("q4k-purified.gguf");
    let json = tmp("q4k-purified.json");
    let mut c = organ();
    c.arg("purify").arg(&q4k).args(["--method", "fractal", "--type", "organ", "--layers", "5-20"]);
    c.arg("--out").arg(&out).arg("--json").arg(&json);
    println!("{}", String::from_utf8(ok(c).stdout).unwrap());
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let src = std::fs::read(&q4k).unwrap();
    let src = Gguf::parse(&src, src.len() as u64).unwrap();
    let bytes = std::fs::read(&out).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    let mut k_types = std::collections::BTreeSet::new();
    for r in report["tensors"].as_array().unwrap() {
        assert_eq!(r["status"], "purified", "{r}");
        let name = r["name"].as_str().unwrap();
        let (before, after) = (src.tensor(name).unwrap(), g.tensor(name).unwrap());
        assert_eq!((after.ty, after.n_bytes), (before.ty, before.n_bytes), "{name} keeps its type and size");
        assert_eq!(r["written_as"], before.ty.name());
        k_types.insert(before.ty.name());
    }
    assert!(k_types.contains("Q4_K") && k_types.contains("Q6_K"), "{k_types:?}");
    let text = llama_generate(&out, 24);
    let (p_before, p_after) = (llama_perplexity(&q4k), llama_perplexity(&out));
    println!("Q4_K_M purified: generates {text:?}; perplexity {p_after:.4} (Q4_K_M {p_before:.4})");
    assert!(p_after.is_finite() && p_after < 2.0 * p_before, "{p_after} vs {p_before}");
}

#[test]
fn low_bit_tensors_go_back_into_their_types_and_load_in_llama_cpp() {
    if need::smollm2_and_llama().is_none() {
        return;
    }
    // Made by llama.cpp: Q2_K and Q3_K_S --pure have ffn_down in Q2_K / Q3_K and the
    // matrices whose rows of 576 are not whole 256-blocks in Q4_0; the third has layer 5's
    // matrices in IQ4_NL (`--tensor-type`, on Q8_0: IQ4_NL's search on every matrix took
    // llama-quantize 40 s). Organ's quantizers (ggml's, bit for bit) write them back.
    let iq4nl: &[&str] = &["--tensor-type", "blk\\.5\\.=iq4_nl"];
    for (ftype, ty, flags, types) in [
        ("Q2_K", "Q2_K", &["--pure"][..], &["Q2_K", "Q4_0"][..]),
        ("Q3_K_S", "Q3_K_S", &["--pure"], &["Q3_K", "Q4_0"]),
        ("IQ4_NL", "Q8_0", iq4nl, &["IQ4_NL"]),
    ] {
        let model = llama_quantized(ftype, ty, flags);
        let out = tmp(&format!("{ftype}-purified.gguf"));
        let mut c = organ();
        c.arg("purify").arg(&model).args(["--method", "fractal", "--type", "organ", "--layers", "5"]);
        c.arg("--out").arg(&out);
        ok(c);
        let (src, bytes) = (std::fs::read(&model).unwrap(), std::fs::read(&out).unwrap());
        let (src, g) = (Gguf::parse(&src, src.len() as u64).unwrap(), Gguf::parse(&bytes, bytes.len() as u64).unwrap());
        let mut seen = std::collections::BTreeSet::new();
        for t in src.tensors.iter().filter(|t| t.name.starts_with("blk.5.") && t.name.ends_with(".weight")) {
            let after = g.tensor(t.name).unwrap();
            assert_eq!((after.ty, after.n_bytes), (t.ty, t.n_bytes), "{ftype} {}: keeps its type and size", t.name);
            seen.insert(t.ty.name());
        }
        assert!(types.iter().all(|t| seen.contains(t)), "{ftype}: {seen:?}");
        let text = llama_generate(&out, 24);
        println!("{ftype} purified: generates {text:?}");
    }
}

#[test]
fn i_quant_organs_go_back_into_their_type_and_others_are_refused_by_name_unless_written_as_f16() {
    if need::smollm2_oracle_and_llama().is_none() {
        return;
    }
    // Made by llama.cpp: layer 5's ffn_down in IQ3_S, the rest Q8_0 (`--tensor-type` on
    // Q8_0: IQ3_S --pure's searches on every matrix took llama-quantize most of a minute).
    // organ quantizes IQ3_S as ggml does, so the organ goes back into IQ3_S and runs.
    let iq3s = llama_quantized("IQ3_S", "Q8_0", &["--tensor-type", "blk\\.5\\.ffn_down=iq3_s"]);
    let out = tmp("iq3s-purified.gguf");
    let mut c = organ();
    c.arg("purify").arg(&iq3s).args(["--method", "fractal", "--type", "organ", "--layers", "5"]).arg("--out").arg(&out);
    ok(c);
    let (before, after) = (std::fs::read(&iq3s).unwrap(), std::fs::read(&out).unwrap());
    let (gb, ga) =
        (Gguf::parse(&before, before.len() as u64).unwrap(), Gguf::parse(&after, after.len() as u64).unwrap());
    let (tb, ta) = (gb.tensor("blk.5.ffn_down.weight").unwrap(), ga.tensor("blk.5.ffn_down.weight").unwrap());
    assert_eq!((ta.ty, ta.n_bytes), (organ_core::GgmlType::IQ3_S, tb.n_bytes));
    llama_generate(&out, 24);
    // Every type llama-quantize writes is one organ writes too; a float64 weight (gguf-py
    // writes one) is not, and is refused by name before any work, unless written as F16.
    let f64_model = tmp("f64-organ.gguf");
    let mut c = std::process::Command::new(oracle_python());
    c.arg("-c")
        .arg(
            "import sys, numpy as np, gguf\n\
             w = gguf.GGUFWriter(sys.argv[1], 'llama')\n\
             w.add_tensor('blk.0.ffn_down.weight', np.random.default_rng(0).standard_normal((64, 256)))\n\
             w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()",
        )
        .arg(&f64_model);
    ok(c);
    let out = tmp("f64-purified.gguf");
    let mut c = organ();
    c.arg("purify").arg(&f64_model).args(["--method", "fractal", "--type", "organ"]).arg("--out").arg(&out);
    let e = fails(c);
    assert!(e.contains("cannot requantize 1 selected tensors") && e.contains("blk.0.ffn_down.weight (F64)"), "{e}");
    assert!(e.contains("--as f16"), "{e}");
    assert!(!out.exists());
    let mut c = organ();
    c.arg("purify")
        .arg(&f64_model)
        .args(["--method", "fractal", "--type", "organ", "--as", "f16"])
        .arg("--out")
        .arg(&out);
    ok(c);
    let bytes = std::fs::read(&out).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    assert_eq!(g.tensor("blk.0.ffn_down.weight").unwrap().ty, organ_core::GgmlType::F16);
}

#[test]
fn an_organ_directory_purifies_to_the_same_tensors_as_its_gguf() {
    if need::smollm2().is_none() {
        return;
    }
    let dir = tmp("smol.organs");
    let mut c = organ();
    c.arg("dissect").arg(smollm2()).arg("--out").arg(&dir);
    ok(c);
    let args = ["--method", "spectral", "--keep", "0.9", "--type", "organ", "--layers", "5-6"];
    let (from_gguf, from_dir, dir_out) = (tmp("pf-gguf.gguf"), tmp("pf-dir.gguf"), tmp("pf-dir.organs"));
    for (model, out) in [(smollm2(), &from_gguf), (dir.clone(), &from_dir), (dir.clone(), &dir_out)] {
        let mut c = organ();
        c.arg("purify").arg(model).args(args).arg("--out").arg(out);
        ok(c);
    }
    let a = std::fs::read(&from_gguf).unwrap();
    let b = std::fs::read(&from_dir).unwrap();
    let (ga, gb) = (Gguf::parse(&a, a.len() as u64).unwrap(), Gguf::parse(&b, b.len() as u64).unwrap());
    assert_eq!(ga.tensors.len(), gb.tensors.len());
    let mut organs = 0;
    for t in &ga.tensors {
        let u = gb.tensor(t.name).unwrap();
        assert_eq!((t.ty, t.shape()), (u.ty, u.shape()), "{}", t.name);
        assert_eq!(t.data(&a).unwrap(), u.data(&b).unwrap(), "{}: same bytes either way", t.name);
        let organ = (t.name.starts_with("blk.5.ffn_") || t.name.starts_with("blk.6.ffn_")) && !t.name.contains("norm");
        organs += usize::from(organ);
    }
    assert_eq!(organs, 6, "layers 5-6: ffn_up, ffn_gate, ffn_down each");
    // Into an organ directory: the purified organs' files carry the same bytes.
    let manifest: Value = serde_json::from_slice(&std::fs::read(dir_out.join("manifest.json")).unwrap()).unwrap();
    let entry = manifest["tensors"].as_array().unwrap().iter().find(|t| t["name"] == "blk.5.ffn_up.weight").unwrap();
    let bin = std::fs::read(dir_out.join(entry["file"].as_str().unwrap())).unwrap();
    let want = ga.tensor("blk.5.ffn_up.weight").unwrap().data(&a).unwrap();
    assert!(bin.ends_with(want), "the organ file holds the purified tensor");
    assert_ne!(want, {
        let s = std::fs::read(smollm2()).unwrap();
        let g = Gguf::parse(&s, s.len() as u64).unwrap();
        g.tensor("blk.5.ffn_up.weight").unwrap().data(&s).unwrap().to_vec()
    });
}
