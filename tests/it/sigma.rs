//! θ with its error bar (§7 of docs/z-measure.md): `organ measure --sigma` against
//! `zref.py --sigma`, `organ measure --exact` against `zref.py --exact`, on SmolLM2; the
//! report's new fields, the ranking's marks and the cache's modes.

use crate::common::*;
use serde_json::Value;

/// `organ measure MODEL ARGS --json OUT`, parsed, and the text it printed.
#[track_caller]
fn measure(model: &std::path::Path, args: &[&str], name: &str) -> (Value, String) {
    let json = tmp(name);
    let mut c = organ();
    c.arg("measure").arg(model).args(args).arg("--json").arg(&json).arg("--force");
    let text = String::from_utf8(ok(c).stdout).unwrap();
    (serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap(), text)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn sigma_matches_zref_to_1e_6_degrees() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let want = oracle_json(
        &repo().join("tests/oracle/zref.py"),
        &[model.as_os_str(), "--sigma".as_ref(), "--json".as_ref()],
        "zref-sigma.json",
    );
    let (got, text) = measure(&model, &["--no-cache", "--sigma"], "sigma.json");
    assert_eq!(got["measure"], "z1", "θ itself is unchanged");
    let tensors = got["models"][0]["tensors"].as_array().unwrap();
    let refs = want["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), SMOLLM2_TENSORS);
    assert_eq!(refs.len(), SMOLLM2_TENSORS);
    let mut sampled = 0;
    for (g, w) in tensors.iter().zip(refs) {
        assert_eq!(g["name"], w["name"]);
        let name = w["name"].as_str().unwrap();
        assert!((f(&g["theta"]) - f(&w["theta"])).abs() <= 1e-6, "{name}: θ {} vs {}", g["theta"], w["theta"]);
        assert!((f(&g["sigma"]) - f(&w["sigma"])).abs() <= 1e-6, "{name}: σ {} vs {}", g["sigma"], w["sigma"]);
        match w["draws"].as_array() {
            None => {
                assert_eq!(f(&g["sigma"]), 0.0, "{name}: not sampled");
                assert!(g.get("draws").is_none(), "{name}");
            }
            Some(wd) => {
                sampled += 1;
                let gd = g["draws"].as_array().unwrap();
                assert_eq!(gd.len(), 8, "{name}");
                for (k, (a, b)) in gd.iter().zip(wd).enumerate() {
                    assert!((f(a) - f(b)).abs() <= 1e-6, "{name}: draw {} θ {a} vs {b}", k + 1);
                }
            }
        }
    }
    assert!(sampled > 200, "most of SmolLM2's tensors are sampled: {sampled}");
    let summary = &got["models"][0]["summary"];
    let (gs, ws) = (f(&summary["theta_mean_sigma"]), f(&want["summary"]["theta_mean_sigma"]));
    assert!((gs - ws).abs() <= 1e-6, "σ of θ_mean {gs} vs zref {ws}");
    assert!(gs > 0.0);
    // Wells and the text table show σ beside θ.
    assert!(summary["wells"].as_array().unwrap().iter().all(|w| w["sigma"].is_number()));
    assert!(text.contains(&format!("± {gs:.4}°")), "{text}");
    assert!(text.lines().any(|l| l.contains("θ°") && l.contains("σ°")), "{text}");
    // The report follows the documented schema.
    let mut v = std::process::Command::new(oracle_python());
    v.arg("-c")
        .arg("import json,sys,jsonschema; jsonschema.Draft202012Validator(json.load(open(sys.argv[1]))).validate(json.load(open(sys.argv[2]))); print('valid')")
        .arg(repo().join("docs/report.schema.json"))
        .arg(tmp("sigma.json"));
    assert_eq!(String::from_utf8(ok(v).stdout).unwrap().trim(), "valid");
}

/// The streaming path reads each draw by its own plan: the same report as the memory map.
#[test]
fn sigma_streamed_gives_the_same_report_as_the_memory_map() {
    let Some(model) = need::smollm2() else { return };
    let (mapped, _) = measure(&model, &["--no-cache", "--sigma", "--summary-only"], "sigma-mapped.json");
    let (streamed, _) =
        measure(&model, &["--no-cache", "--sigma", "--stream", "--summary-only"], "sigma-streamed.json");
    assert!(mapped["models"][0]["summary"]["theta_mean_sigma"].is_number());
    assert_eq!(mapped["models"][0], streamed["models"][0]);
}

#[test]
fn exact_matches_zref_to_1e_6_degrees() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let want = oracle_json(
        &repo().join("tests/oracle/zref.py"),
        &[model.as_os_str(), "--exact".as_ref(), "--json".as_ref()],
        "zref-exact.json",
    );
    for (args, name) in [
        (&["--no-cache", "--exact"][..], "exact.json"),
        (&["--no-cache", "--exact", "--stream"], "exact-streamed.json"),
    ] {
        let (got, text) = measure(&model, args, name);
        assert_eq!(got["measure"], "z1-exact", "{args:?}");
        assert!(text.contains("z1-exact"), "{text}");
        let tensors = got["models"][0]["tensors"].as_array().unwrap();
        let refs = want["tensors"].as_array().unwrap();
        assert_eq!(tensors.len(), SMOLLM2_TENSORS);
        for (g, w) in tensors.iter().zip(refs) {
            assert_eq!(g["name"], w["name"]);
            let name = w["name"].as_str().unwrap();
            assert!(
                (f(&g["theta"]) - f(&w["theta"])).abs() <= 1e-6,
                "{name} {args:?}: θ {} vs {}",
                g["theta"],
                w["theta"]
            );
            assert_eq!(f(&g["sigma"]), 0.0, "{name}");
            assert_eq!(g["sampled"], g["n_elements"], "{name}: every value");
        }
        let summary = &got["models"][0]["summary"];
        assert!((f(&summary["theta_mean"]) - f(&want["summary"]["theta_mean"])).abs() <= 1e-6);
        assert_eq!(f(&summary["theta_mean_sigma"]), 0.0);
    }
}

/// A plain run's report has none of the new fields, and its CSV no σ column.
#[test]
fn plain_reports_have_no_sigma_fields() {
    let Some(model) = need::smollm2() else { return };
    let (plain, text) = measure(&model, &["--no-cache", "--summary-only"], "plain.json");
    let s = plain.to_string();
    for k in ["\"sigma\"", "\"draws\"", "theta_mean_sigma", "distinguishable_from_next"] {
        assert!(!s.contains(k), "{k} in a plain report");
    }
    assert!(!text.contains('±'), "{text}");
    assert_eq!(plain["measure"], "z1");
    let csv = |args: &[&str], name: &str| {
        let p = tmp(name);
        let mut c = organ();
        c.arg("measure").arg(&model).args(args).arg("--summary-only").arg("--csv").arg(&p).arg("--force");
        ok(c);
        std::fs::read_to_string(p).unwrap()
    };
    assert!(csv(&["--no-cache"], "plain.csv").lines().next().unwrap().ends_with(",sampled,dropped"));
    let with = csv(&["--no-cache", "--sigma"], "sigma.csv");
    assert!(with.lines().next().unwrap().ends_with(",sampled,dropped,sigma"));
    assert_eq!(with.lines().count(), 1 + SMOLLM2_TENSORS);
}

/// Two runs of one model have equal θ_mean: not distinguishable, in the JSON and the text.
#[test]
fn the_ranking_marks_models_within_two_sigma() {
    let Some(model) = need::smollm2() else { return };
    let copy = tmp("copy.gguf");
    std::fs::copy(&model, &copy).unwrap();
    let json = tmp("ranking.json");
    let mut c = organ();
    c.arg("measure").arg(&model).arg(&copy).args(["--no-cache", "--sigma", "--summary-only", "--force", "--json"]);
    c.arg(&json);
    let text = String::from_utf8(ok(c).stdout).unwrap();
    let got: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ranking = got["ranking"].as_array().unwrap();
    assert_eq!(ranking[0]["distinguishable_from_next"], false);
    assert!(ranking[1].get("distinguishable_from_next").is_none(), "the last row has no next");
    assert!(f(&ranking[0]["theta_mean_sigma"]) > 0.0);
    assert!(text.contains("≈ next"), "{text}");
}

/// A plain, a σ and an exact report of one model are three cache entries, each returned
/// only to its own mode.
#[test]
fn the_cache_keeps_modes_apart() {
    let Some(model) = need::smollm2() else { return };
    let cache = tmp("cache");
    let _ = std::fs::remove_dir_all(&cache);
    let run = |mode: &[&str], name: &str| {
        let json = tmp(name);
        let mut c = organ();
        c.arg("measure").arg(&model).args(mode).args(["--summary-only", "--force", "--cache"]).arg(&cache);
        c.arg("--json").arg(&json);
        let o = ok(c);
        let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        (v, String::from_utf8(o.stderr).unwrap().contains("taken from the cache"))
    };
    let check = |(v, _): &(Value, bool), mode: &str| {
        let s = &v["models"][0]["summary"];
        match mode {
            "plain" => assert!(s.get("theta_mean_sigma").is_none() && v["measure"] == "z1"),
            "sigma" => assert!(f(&s["theta_mean_sigma"]) > 0.0 && v["measure"] == "z1"),
            _ => assert!(f(&s["theta_mean_sigma"]) == 0.0 && v["measure"] == "z1-exact"),
        }
    };
    let modes: [(&[&str], &str); 3] = [(&[], "plain"), (&["--sigma"], "sigma"), (&["--exact"], "exact")];
    for (args, mode) in modes {
        let first = run(args, &format!("{mode}-1.json"));
        assert!(!first.1, "{mode}: the first run of a mode measures");
        check(&first, mode);
    }
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 3, "one entry per mode");
    for (args, mode) in modes {
        let again = run(args, &format!("{mode}-2.json"));
        assert!(again.1, "{mode}: the second run comes from the cache");
        check(&again, mode);
    }
}

#[test]
fn sigma_and_exact_do_not_go_together() {
    let mut c = organ();
    c.args(["measure", "x.gguf", "--sigma", "--exact"]);
    let o = c.output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
}

/// A llama GGUF at `path` with one 256 × 1024 F32 feed-forward tensor of pseudo-random
/// values (sampled: N > 100 000, so it has draws), from the core's writer.
fn write_noise_model(path: &std::path::Path) {
    use organ_core::gguf::writer::{plan, TensorSpec};
    use organ_core::gguf::MetaValue;
    let dims = [256u64, 1024];
    let kvs = [("general.architecture", MetaValue::Str(b"llama"))];
    let spec = TensorSpec { name: "blk.0.ffn_up.weight", dims: &dims, ty: organ_core::GgmlType::F32 };
    let layout = plan(3, &kvs, &[spec]).unwrap();
    let mut bytes = layout.header.clone();
    bytes.resize(usize::try_from(layout.file_len).unwrap(), 0);
    let at = layout.header.len() + usize::try_from(layout.tensors[0].0).unwrap();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for v in bytes[at..at + 4 * 256 * 1024].chunks_exact_mut(4) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.copy_from_slice(&((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5).to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

/// A fleet directory with `--sigma`: SmolLM2 twice (equal θ_mean: not distinguishable) and
/// a model of noise (far from them: distinguishable). Every neighbour's mark follows §7's
/// rule, worked out here from the report's θ_mean and σ, and is the same in the JSON, the
/// ranking CSV and the text.
#[test]
fn a_fleet_ranking_marks_neighbours_by_twice_the_larger_sigma() {
    let Some(model) = need::smollm2() else { return };
    let fleet = tmp("sigma-fleet");
    let _ = std::fs::remove_dir_all(&fleet);
    std::fs::create_dir_all(fleet.join("nested")).unwrap();
    std::fs::copy(&model, fleet.join("a.gguf")).unwrap();
    std::fs::copy(&model, fleet.join("nested/b.gguf")).unwrap();
    write_noise_model(&fleet.join("noise.gguf"));
    let csv = tmp("sigma-fleet-rank.csv");
    let (got, text) = measure(
        &fleet,
        &["--no-cache", "--sigma", "--summary-only", "--ranking-csv", csv.to_str().unwrap()],
        "sigma-fleet.json",
    );
    let ranking = got["ranking"].as_array().unwrap();
    assert_eq!(ranking.len(), 3);
    let mut want = Vec::new();
    for (r, next) in ranking.iter().zip(&ranking[1..]) {
        let sigma = f(&r["theta_mean_sigma"]).max(f(&next["theta_mean_sigma"]));
        want.push((f(&r["theta_mean"]) - f(&next["theta_mean"])).abs() >= 2.0 * sigma);
    }
    let marks: Vec<bool> = ranking[..2].iter().map(|r| r["distinguishable_from_next"].as_bool().unwrap()).collect();
    assert_eq!(marks, want, "{ranking:?}");
    assert!(want.contains(&true) && want.contains(&false), "both kinds of neighbours: {want:?}");
    assert!(ranking[2].get("distinguishable_from_next").is_none());
    assert!(f(&ranking.iter().find(|r| r["model"] == "noise.gguf").unwrap()["theta_mean_sigma"]) > 0.0);

    let csv = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} in {head:?}"));
    let (model_col, sigma_col, dist_col) = (col("model"), col("theta_mean_sigma"), col("distinguishable_from_next"));
    for (line, r) in lines.zip(ranking) {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells[model_col], r["model"].as_str().unwrap());
        assert_eq!(cells[sigma_col].parse::<f64>().unwrap(), f(&r["theta_mean_sigma"]));
        let mark = r.get("distinguishable_from_next").map_or(String::new(), |d| d.to_string());
        assert_eq!(cells[dist_col], mark, "{line}");
    }

    let rows: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("ranking (")).skip(2).take(3).collect();
    for (line, r) in rows.iter().zip(ranking) {
        assert!(line.contains(r["model"].as_str().unwrap()), "{line}");
        assert_eq!(line.contains("≈ next"), r["distinguishable_from_next"] == false, "{line}");
    }
}

/// `organ diff` says in one line that Compare v1 reads both models at the same positions,
/// which cancels most of the sampling noise in dθ: in its text and on its static page.
#[test]
fn diff_reports_say_the_same_positions_cancel_the_noise() {
    let Some(model) = need::smollm2() else { return };
    let html = tmp("same-positions.html");
    let mut c = organ();
    c.arg("diff").arg(&model).arg(&model).arg("--html").arg(&html).arg("--force");
    let text = String::from_utf8(ok(c).stdout).unwrap();
    let line = organ_core::report::SAME_POSITIONS;
    assert!(line.contains("same sampled positions") && line.contains("dθ"), "{line}");
    assert_eq!(text.lines().filter(|l| *l == line).count(), 1, "{text}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(&format!("<div class=\"mute\" id=\"same-positions\">{line}</div>")),
        "the static page says it too"
    );
}
