//! Merges of SmolLM2 and its fine-tunes and requants, run in llama.cpp.

use super::*;

fn parse(f: &[u8]) -> Gguf<'_> {
    Gguf::parse(f, f.len() as u64).unwrap()
}

/// `make-finetune.py BASE tmp(NAME) SEED 0.02 PARTS`.
fn finetune(python: &Path, base: &Path, name: &str, seed: &str, parts: &str) -> PathBuf {
    let out = tmp(name);
    let mut c = Command::new(python);
    c.arg(repo().join("tests/oracle/make-finetune.py")).arg(base).arg(&out).args([seed, "0.02", parts]);
    ok(c);
    out
}

#[test]
fn task_arithmetic_of_two_smollm2_finetunes_is_the_sum_of_their_deltas_and_runs_in_llama_cpp() {
    let Some(model) = need::smollm2_oracle_and_llama() else { return };
    let python = oracle_python();
    let base = smollm2_f16(&model);
    // ΔA on attn_q and ffn_down, ΔB on attn_q and attn_v: attn_q gets both.
    let a = finetune(&python, &base, "merge-smollm2-a.gguf", "1", "attn_q,ffn_down");
    let b = finetune(&python, &base, "merge-smollm2-b.gguf", "2", "attn_q,attn_v");
    let (sum, text) = merged(
        "merge-smollm2-sum.gguf",
        &[
            "--method",
            "task_arithmetic",
            "--base",
            s(&base),
            "--model",
            &format!("{}:1", s(&a)),
            "--model",
            &format!("{}:1", s(&b)),
            "--type",
            "f32",
        ],
    );
    assert!(text.contains("merged 90 tensors, copied 182 byte for byte"), "{text}");
    let map = |p: &Path| std::fs::read(p).unwrap();
    let (fs, fb, fa, fbb) = (map(&sum), map(&base), map(&a), map(&b));
    let (gs, gb, ga, gbb) = (parse(&fs), parse(&fb), parse(&fa), parse(&fbb));
    let vals = |g: &Gguf<'_>, f: &[u8], name: &str| -> Vec<f32> {
        let t = g.tensors.iter().find(|t| t.name == name).unwrap();
        organ_core::quant::dequantize(t.ty, t.data(f).unwrap()).unwrap()
    };
    let (mut merged_count, mut exact) = (0, 0usize);
    for t in &gs.tensors {
        let raw =
            |g: &Gguf<'_>, f: &'_ [u8]| g.tensors.iter().find(|x| x.name == t.name).unwrap().data(f).unwrap().to_vec();
        if raw(&ga, &fa) == raw(&gb, &fb) && raw(&gbb, &fbb) == raw(&gb, &fb) {
            // Untouched: the base's bytes, in its type.
            assert_eq!(t.data(&fs).unwrap(), raw(&gb, &fb), "{}", t.name);
            continue;
        }
        merged_count += 1;
        assert_eq!(t.ty, GgmlType::F32, "{}", t.name);
        let (m, x, y, z) =
            (vals(&gs, &fs, t.name), vals(&gb, &fb, t.name), vals(&ga, &fa, t.name), vals(&gbb, &fbb, t.name));
        // base + ΔA + ΔB, each Δ what its file holds, in f64.
        let want: Vec<f32> = x
            .iter()
            .zip(&y)
            .zip(&z)
            .map(|((&x, &y), &z)| (f64::from(y) + f64::from(z) - f64::from(x)) as f32)
            .collect();
        // Exactly: each Δ of F16 values is exact in f32, their sum exact in f64, and the
        // result rounded once, as here.
        assert!(m == want, "{}: not base + ΔA + ΔB", t.name);
        exact += m.len();
    }
    assert_eq!(merged_count, 90);
    assert!(exact > 10_000_000, "{exact} values merged");
    // In the base's type (F16), llama.cpp loads and runs the merge, and --judge grades it.
    let judged = tmp("merge-smollm2-judged.gguf");
    let _ = std::fs::remove_file(&judged);
    let text_file = tmp("merge-heldout-head.txt");
    let held = std::fs::read_to_string(repo().join("tests/data/texts/heldout.txt")).unwrap();
    let cut = held.char_indices().nth(2400).map_or(held.len(), |(i, _)| i);
    std::fs::write(&text_file, &held[..cut]).unwrap();
    let bin = crate::eval::one_thread_llama_bin();
    let mut c = organ();
    c.args(["merge", "--method", "task_arithmetic", "--base", s(&base), "--model", s(&a), "--model", s(&b)]);
    c.arg("--out").arg(&judged).arg("--judge").arg(&text_file).args(["--judge-ctx", "128", "--llama-cpp", s(&bin)]);
    let out = String::from_utf8(ok(c).stdout).unwrap();
    assert!(out.contains("verdict: "), "{out}");
    llama_generate(&judged, 16);
}

#[test]
fn smollm2_q4_1_merged_with_its_q8_0_requant_is_nearer_each_than_they_are_to_each_other() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let q8 = crate::build::smollm2_q8_0(&model);
    // Linear 0.5/0.5 of two types, written F16 (a Q4_1 or Q8_0 output adds its own
    // rounding: docs/merge.md has those figures too).
    let (mix, text) = merged(
        "merge-q4_1-q8_0.gguf",
        &[
            "--method",
            "linear",
            "--model",
            &format!("{}:0.5", s(&model)),
            "--model",
            &format!("{}:0.5", s(&q8)),
            "--type",
            "f16",
        ],
    );
    assert!(text.contains("Q4_1+Q8_0 -> F16 (--type)"), "{text}");
    let text_file = tmp("merge-kl-heldout-head.txt");
    let held = std::fs::read_to_string(repo().join("tests/data/texts/heldout.txt")).unwrap();
    let cut = held.char_indices().nth(2400).map_or(held.len(), |(i, _)| i);
    std::fs::write(&text_file, &held[..cut]).unwrap();
    let bin = crate::eval::one_thread_llama_bin();
    let kld = |m: &Path, base: &Path, name: &str| -> f64 {
        let json = tmp(name);
        let _ = std::fs::remove_file(&json);
        let mut c = organ();
        c.arg("eval").arg(m).arg("--base").arg(base).arg("--text").arg(&text_file);
        c.args(["--ctx", "128", "-j", LLAMA_THREADS, "--llama-cpp", s(&bin), "--json", s(&json)]);
        ok(c);
        let e: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        e["kl_divergence"]["mean"]["value"].as_f64().unwrap()
    };
    let parents = kld(&q8, &model, "merge-kl-parents.json");
    let (to_q4, to_q8) = (kld(&mix, &model, "merge-kl-q4_1.json"), kld(&mix, &q8, "merge-kl-q8_0.json"));
    eprintln!("KL: Q8_0 from Q4_1 {parents}, the merge from Q4_1 {to_q4}, from Q8_0 {to_q8}");
    assert!(to_q4 < parents && to_q8 < parents, "{to_q4} and {to_q8} against {parents}");
}
