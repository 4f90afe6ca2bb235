//! `organ diff` of mixtures of experts: expert tensors compared expert by expert, as
//! compare_ref.py does.

use super::*;

/// An expert tensor model pair: `blk.0.ffn_up_exps.weight` holds 4 experts of 131 072
/// elements (over the 100 000 of the sampler, so each is sampled as `NAME#e`), experts 1
/// and 3 changed (3 in one value only); `ffn_down_exps` (Q8_0, 8 experts of 16 384: the
/// tensor is sampled, its experts are not) has expert 2 changed;
/// `ffn_gate_exps` changes type (F32 → Q8_0) and holds a NaN in A's expert 0.
fn moe_pair() -> (PathBuf, PathBuf, BTreeMap<&'static str, Vec<bool>>) {
    let up = noise(11, 512 * 256 * 4);
    let mut up_b = up.clone();
    let per = 512 * 256;
    for (v, d) in up_b[per..2 * per].iter_mut().zip(noise(12, per)) {
        *v += 0.02 * d;
    }
    up_b[3 * per + 5] = 0.75;
    let down = noise(13, 256 * 64 * 8);
    let mut down_b = down.clone();
    down_b[2 * 256 * 64..3 * 256 * 64].copy_from_slice(&noise(14, 256 * 64));
    let mut gate = noise(15, 64 * 32 * 2);
    let gate_b = gate.clone();
    gate[7] = f32::NAN;
    let norm = noise(16, 512);
    let a = [
        t("blk.0.attn_norm.weight", &[512], GgmlType::F32, norm.clone()),
        t("blk.0.ffn_up_exps.weight", &[512, 256, 4], GgmlType::F32, up),
        t("blk.0.ffn_down_exps.weight", &[256, 64, 8], GgmlType::Q8_0, down),
        t("blk.0.ffn_gate_exps.weight", &[64, 32, 2], GgmlType::F32, gate),
    ];
    let b = [
        t("blk.0.attn_norm.weight", &[512], GgmlType::F32, norm),
        t("blk.0.ffn_up_exps.weight", &[512, 256, 4], GgmlType::F32, up_b),
        t("blk.0.ffn_down_exps.weight", &[256, 64, 8], GgmlType::Q8_0, down_b),
        t("blk.0.ffn_gate_exps.weight", &[64, 32, 2], GgmlType::Q8_0, gate_b),
    ];
    let identical = BTreeMap::from([
        ("blk.0.ffn_up_exps.weight", vec![true, false, true, false]),
        ("blk.0.ffn_down_exps.weight", vec![true, true, false, true, true, true, true, true]),
        ("blk.0.ffn_gate_exps.weight", vec![false, false]),
    ]);
    (write_model("moe-a.gguf", "llama", &a), write_model("moe-b.gguf", "llama", &b), identical)
}

#[test]
fn expert_tensors_are_compared_per_expert_as_compare_ref_does() {
    let Some(_) = need::oracle() else { return };
    let (a, b, identical) = moe_pair();
    let d = diff(&a, &b, "moe.json", &["--fail-on-change"]);
    assert_eq!(d.code, 1);
    let oracle = compare_ref(&a, &b, "moe-ref.json");
    assert_eq!(matches_oracle(&d.report, &oracle), 14);
    summary_follows_pairs(&d.report);
    // Each expert's θ(A) and θ(B) are its per-expert θ (Z-measure §6), as zref.py gives it
    // for each model.
    for (side, model, key) in [("a", &a, "theta_a"), ("b", &b, "theta_b")] {
        let z = oracle_json(
            &repo().join("tests/oracle/zref.py"),
            &[model.as_os_str(), "--json".as_ref()],
            &format!("moe-zref-{side}.json"),
        );
        let mut n = 0;
        for (p, w) in d.report["pairs"].as_array().unwrap().iter().zip(z["tensors"].as_array().unwrap()) {
            assert_eq!(p["name"], w["name"]);
            for (x, t) in
                p["experts"].as_array().into_iter().flatten().zip(w["experts"].as_array().into_iter().flatten())
            {
                let (g, t) = (x[key].as_f64().unwrap(), t.as_f64().unwrap());
                assert!((g - t).abs() <= 1e-6, "{} expert {}: {key} {g} vs zref {t}", p["name"], x["expert"]);
                n += 1;
            }
        }
        assert_eq!(n, 14, "{side}");
    }
    for p in d.report["pairs"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let Some(want) = identical.get(name) else {
            assert_eq!(p["identical"], true, "{name}");
            continue;
        };
        let got: Vec<bool> = p["experts"].as_array().unwrap().iter().map(|e| e["identical"] == true).collect();
        assert_eq!(&got, want, "{name}: which experts are identical");
        assert_eq!(p["identical"], false, "{name}");
    }
    // The NaN is dropped in expert 0 of the gate only; the one changed value of the up
    // tensor's expert 3 changes its bytes, whether or not the sampler draws it.
    let gate = &d.report["pairs"][3];
    assert_eq!((gate["experts"][0]["dropped"].as_u64(), gate["experts"][1]["dropped"].as_u64()), (Some(1), Some(0)));
    // Streamed, one thread: the same report, byte for byte.
    let csv = tmp("moe-streamed.csv");
    let streamed = diff(&a, &b, "moe-streamed.json", &["--stream", "-j", "1", "--csv", csv.to_str().unwrap()]);
    assert!(streamed.json == d.json, "--stream -j 1 wrote another report on the expert models");
    // Any storage gives the same figures (docs/compare.md): A as an organ directory, B as
    // a split of 3 shards (read from its second), mapped and streamed.
    let dir = dissect(&a, "moe-a.organs", &[]);
    let mut c = organ();
    c.arg("assemble").arg(dissect(&b, "moe-b.organs", &[])).arg("--out").arg(tmp("moe-b-split.gguf"));
    c.args(["--split-max-size", "1M"]);
    ok(c);
    let shard = tmp("moe-b-split-00002-of-00003.gguf");
    for (i, extra) in [&[][..], &["--stream"][..]].into_iter().enumerate() {
        let other = diff(&dir, &shard, &format!("moe-storage-{i}.json"), extra);
        for k in ["counts", "groups", "most_changed", "warnings", "pairs"] {
            assert_eq!(other.report[k], d.report[k], "{k}, organ directory against split {extra:?}");
        }
    }
    // The CSV: a row per pair, then one per expert, with the JSON's figures.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let mut want = Vec::new();
    for p in d.report["pairs"].as_array().unwrap() {
        want.push((p, None));
        for e in p["experts"].as_array().into_iter().flatten() {
            want.push((e, Some(e["expert"].as_u64().unwrap())));
        }
    }
    assert_eq!(rows.len(), want.len(), "{text}");
    let col = |row: &[&str], k: &str| row[head.iter().position(|h| *h == k).unwrap()].to_owned();
    for (row, (w, expert)) in rows.iter().zip(want) {
        assert_eq!(col(row, "expert"), expert.map_or_else(String::new, |e| e.to_string()), "{row:?}");
        for k in ["identical", "cos", "rel_l2", "max_abs", "d_theta", "theta_a", "theta_b", "dropped"] {
            let got = col(row, k);
            let ok = match &w[k] {
                Value::Null => got.is_empty(),
                Value::Bool(b) => got == b.to_string(),
                v => got.parse::<f64>().ok() == v.as_f64(),
            };
            assert!(ok, "{k}: CSV {got:?}, JSON {}: {row:?}", w[k]);
        }
    }
}

// --- A model against itself -----------------------------------------------------------
