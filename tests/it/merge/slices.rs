//! mergekit's `slices:` (docs/merge.md): passthrough stacks, slerp with gradients per
//! slice, TIES, DARE and linear over layer ranges, each against the NumPy oracle
//! (tests/oracle/merge_ref.py, which lays the slices out itself); a SmolLM2 stack of 40
//! layers that llama.cpp loads and runs; ranges beyond a model refused by their key.

use super::*;

/// A llama model of `layers` uniform layers: the base's values plus `delta` times seeded
/// noise; tied embeddings (no output.weight), as SmolLM2's.
fn layered(name: &str, seed: u64, delta: f32, layers: u64, salt: u64) -> PathBuf {
    let v = |k: u64, n: usize| -> Vec<f32> {
        let base = noise(salt * 10_000 + k, n);
        let d = noise(seed * 1000 + k, n);
        base.iter().zip(d).map(|(b, d)| b + delta * d).collect()
    };
    let mut ts = vec![t("token_embd.weight", &[64, 10], GgmlType::Q8_0, v(1, 640))];
    for l in 0..layers {
        ts.push(t(&format!("blk.{l}.attn_norm.weight"), &[64], GgmlType::F32, v(10 + 3 * l, 64)));
        ts.push(t(&format!("blk.{l}.attn_q.weight"), &[64, 8], GgmlType::Q8_0, v(11 + 3 * l, 512)));
        ts.push(t(&format!("blk.{l}.ffn_up.weight"), &[64, 16], GgmlType::F16, v(12 + 3 * l, 1024)));
    }
    ts.push(t("output_norm.weight", &[64], GgmlType::F32, v(2, 64)));
    let count = u32::try_from(layers).unwrap();
    write_model_kvs(
        name,
        &[("general.architecture", MetaValue::Str(b"llama")), ("llama.block_count", MetaValue::U32(count))],
        &ts,
    )
}

/// a (6 layers), two finetunes of it (c, d), and b (8 layers, another model).
fn models() -> &'static [PathBuf; 4] {
    static P: OnceLock<[PathBuf; 4]> = OnceLock::new();
    P.get_or_init(|| {
        [
            layered("slices-a.gguf", 0, 0.0, 6, 1),
            layered("slices-b.gguf", 0, 0.0, 8, 2),
            layered("slices-c.gguf", 3, 0.05, 6, 1),
            layered("slices-d.gguf", 4, 0.08, 6, 1),
        ]
    })
}

/// `organ merge CONFIG --out tmp(NAME.gguf)` of `config` (YAML, `{a}`… the models' paths).
fn merge_config(name: &str, config: &str) -> (PathBuf, String, Value) {
    let [a, b, c, d] = models();
    let text = config.replace("{a}", s(a)).replace("{b}", s(b)).replace("{c}", s(c)).replace("{d}", s(d));
    let file = tmp(&format!("{name}.yml"));
    std::fs::write(&file, &text).unwrap();
    let (out, stdout) = merged(&format!("{name}.gguf"), &[s(&file), "--seed", "42"]);
    (out, stdout, organ_native::yaml::to_json(&text).unwrap())
}

#[test]
fn slices_equal_the_numpy_oracle_to_1e_6() {
    let Some(python) = need::oracle() else { return };
    // (name, configuration, output layers, a line of the report)
    let cases: [(&str, &str, u64, &str); 6] = [
        (
            "slices-passthrough",
            "slices:\n  - sources:\n      - model: {a}\n        layer_range: [0, 4]\n  - sources:\n      - model: {b}\n        \
             layer_range: [2, 8]\n  - sources:\n      - model: {a}\n        layer_range: [4, 6]\n\
             merge_method: passthrough\ndtype: float16\n",
            12,
            "slice 1  layers 4-9 from slices-b.gguf 2-7",
        ),
        (
            // b last: its token_embd is the output projection (mergekit's lm_head); a scale.
            "slices-passthrough-scaled",
            "slices:\n  - sources:\n      - model: {a}\n        layer_range: [0, 3]\n        parameters:\n          scale:\n            \
             - filter: mlp\n              value: 0.5\n            - value: 1\n  - sources:\n      - model: {b}\n        \
             layer_range: [3, 8]\nmerge_method: passthrough\ndtype: float32\n",
            8,
            "merged 3 tensors",
        ),
        (
            "slices-slerp",
            "slices:\n  - sources:\n      - model: {a}\n        layer_range: [0, 6]\n      - model: {c}\n        layer_range: [0, 6]\n  \
             - sources:\n      - model: {a}\n        layer_range: [1, 4]\n      - model: {c}\n        layer_range: [1, 4]\n    \
             parameters:\n      t: [1, 0]\nmerge_method: slerp\nbase_model: {a}\nparameters:\n  t:\n    - filter: self_attn\n      \
             value: [0, 0.5, 0.3, 0.7, 1]\n    - filter: mlp\n      value: [1, 0.5, 0.7, 0.3, 0]\n    - value: 0.5\ndtype: float32\n",
            9,
            "merge: slerp of 2 slices, 9 layers onto slices-a.gguf (llama)",
        ),
        (
            "slices-ties",
            "{merge_method: ties, base_model: {a}, dtype: float32, parameters: {weight: 0.5, density: 0.6},\n \
             slices: [{sources: [{model: {a}, layer_range: [0, 5]}, {model: {c}, layer_range: [0, 5], parameters: {weight: \
             [{filter: ffn_up, value: 0.9}, {value: 0.3}]}}, {model: {d}, layer_range: [1, 6], parameters: {density: 0.4}}]}]}\n",
            5,
            "merge: ties of 1 slice, 5 layers",
        ),
        (
            "slices-dare-ties",
            "{merge_method: dare_ties, base_model: {a}, dtype: float32, parameters: {weight: 0.5, density: 0.5},\n \
             slices: [{sources: [{model: {a}, layer_range: [2, 6]}, {model: {c}, layer_range: [2, 6]}, {model: {d}, \
             layer_range: [2, 6]}]}, {sources: [{model: {a}, layer_range: [0, 1]}, {model: {d}, layer_range: [5, 6]}], \
             parameters: {lambda: 1.5}}]}\n",
            5,
            "slice 1  layers 4-4 from slices-a.gguf 0-0 + slices-d.gguf 5-5",
        ),
        (
            "slices-linear",
            "{merge_method: linear, dtype: float32, slices: [{sources: [{model: {c}, layer_range: [0, 6], parameters: \
             {weight: 0.7}}, {model: {d}, layer_range: [0, 6], parameters: {weight: 0.2}}]}]}\n",
            6,
            "merge: linear of 1 slice, 6 layers (llama)",
        ),
    ];
    let mut checks = Vec::new();
    for (name, config, layers, line) in cases {
        let (out, text, spec) = merge_config(name, config);
        assert!(text.contains(line), "{name}: {text}");
        assert!(text.contains("llama.block_count: "), "{name}: {text}");
        let mut c = json!({
            "method": spec["merge_method"], "base": spec.get("base_model"), "slices": spec["slices"],
            "parameters": spec.get("parameters"), "seed": 42, "merged": out, "layers": layers,
        });
        if c["base"].is_null() {
            c.as_object_mut().unwrap().remove("base");
        }
        checks.push(c);
    }
    let list = tmp("slices-oracle-checks.json");
    std::fs::write(&list, serde_json::to_vec(&checks).unwrap()).unwrap();
    let res = tmp("slices-oracle-results.json");
    let mut c = Command::new(python);
    c.arg(repo().join("tests/oracle/merge_ref.py")).arg(&list).arg(&res);
    ok(c);
    let results: Vec<Value> = serde_json::from_slice(&std::fs::read(&res).unwrap()).unwrap();
    assert_eq!(results.len(), checks.len());
    for (r, c) in results.iter().zip(&checks) {
        eprintln!(
            "{}: max rel {} ({}), {} tensors, {} layers",
            r["merged"], r["max_rel"], r["worst"], r["tensors"], r["block_count"]
        );
        assert_eq!(r["block_count"], c["layers"], "{r}");
        assert_eq!(r["layers"], c["layers"], "{r}");
        assert_eq!(r["missing"], json!([]), "{r}");
        assert_eq!(r["unexpected"], json!([]), "{r}");
        assert!(r["max_rel"].as_f64().unwrap() <= 1e-6, "{r}");
    }
    // The scaled passthrough's output projection is b's token_embd, after 2 + 8 × 3 tensors.
    assert_eq!(results[1]["tensors"], 2 + 8 * 3 + 1, "{}", results[1]);
}

#[test]
fn a_layer_range_beyond_a_model_is_refused_by_its_key_and_nothing_is_written() {
    let [a, b, ..] = models();
    let cases = [
        (
            format!(
                "slices:\n  - sources:\n      - model: {a}\n        layer_range: [0, 4]\n  - sources:\n      - model: {b}\n        \
                 layer_range: [2, 9]\nmerge_method: passthrough\n",
                a = s(a),
                b = s(b)
            ),
            format!("merge config slices[1].sources[0].layer_range: [2, 9] is beyond {}'s 8 layers (0 to 7)", s(b)),
        ),
        (
            format!("slices:\n  - sources:\n      - model: {}\n        layer_range: [4, 2]\nmerge_method: passthrough\n", s(a)),
            "merge config slices[0].sources[0].layer_range: [4, 2] has no layer".into(),
        ),
        (
            format!(
                "slices:\n  - sources:\n      - model: {a}\n        layer_range: [0, 4]\n      - model: {b}\n        \
                 layer_range: [0, 4]\nmerge_method: passthrough\n",
                a = s(a),
                b = s(b)
            ),
            "merge config slices[0].sources: passthrough copies one source per slice, not 2".into(),
        ),
    ];
    let out = tmp("slices-refused.gguf");
    let _ = std::fs::remove_file(&out);
    for (i, (config, want)) in cases.iter().enumerate() {
        let file = tmp(&format!("slices-refused-{i}.yml"));
        std::fs::write(&file, config).unwrap();
        let mut c = organ();
        c.arg("merge").arg(&file).arg("--out").arg(&out);
        let err = fails(c);
        assert!(err.contains(want.as_str()), "{config}\n{err}");
        assert!(!out.exists(), "{config} wrote {}", out.display());
    }
}

#[test]
fn a_smollm2_stack_of_40_layers_has_block_count_40_and_runs_in_llama_cpp() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let q8 = crate::build::smollm2_q8_0(&model);
    // Layers 0-19 of the Q4_1 model, then 10-29 of its Q8_0 requant: both tie their
    // output projection to token_embd, so the Q8_0's becomes output.weight.
    let config = tmp("slices-smollm2.yml");
    std::fs::write(
        &config,
        format!(
            "slices:\n  - sources:\n      - model: {}\n        layer_range: [0, 20]\n  - sources:\n      - model: {}\n        \
             layer_range: [10, 30]\nmerge_method: passthrough\n",
            s(&model),
            s(&q8)
        ),
    )
    .unwrap();
    let (out, text) = merged("slices-smollm2-40.gguf", &[s(&config)]);
    assert!(text.contains("llama.block_count: 30 → 40"), "{text}");
    assert!(text.contains("merged 0 tensors, copied 363 byte for byte"), "{text}");
    let bytes = std::fs::read(&out).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    assert_eq!(g.get("llama.block_count").and_then(|v| v.as_u64()), Some(40));
    assert_eq!(g.tensors.len(), 2 + 40 * 9 + 1);
    let (q8b, modelb) = (std::fs::read(&q8).unwrap(), std::fs::read(&model).unwrap());
    let (gq, gm) = (Gguf::parse(&q8b, q8b.len() as u64).unwrap(), Gguf::parse(&modelb, modelb.len() as u64).unwrap());
    let data =
        |g: &Gguf<'_>, f: &[u8], n: &str| g.tensors.iter().find(|t| t.name == n).unwrap().data(f).unwrap().to_vec();
    assert_eq!(data(&g, &bytes, "blk.25.ffn_down.weight"), data(&gq, &q8b, "blk.15.ffn_down.weight"));
    assert_eq!(data(&g, &bytes, "blk.19.attn_q.weight"), data(&gm, &modelb, "blk.19.attn_q.weight"));
    assert_eq!(data(&g, &bytes, "output.weight"), data(&gq, &q8b, "token_embd.weight"));
    assert_eq!(data(&g, &bytes, "token_embd.weight"), data(&gm, &modelb, "token_embd.weight"));
    let said = llama_generate(&out, 16);
    eprintln!("the stack of 40 layers says: {said}");
}
