//! issue 50's two `diff` items on SmolLM2 copies made by organ itself: a metadata edit
//! (`organ meta`: a license removed, a name and a chat template changed, a key added) is a
//! change the summary names and `--fail-on-change` fails on; and a model cut by
//! `organ layers --drop 1,2` is compared block by block with the blocks it was in the
//! base, the dropped ones only in the base.

use super::{diff, meta_text};
use crate::common::*;
use serde_json::{json, Value};

#[test]
fn a_metadata_edit_is_a_change_named_on_the_summary_line() {
    let Some(model) = need::smollm2() else { return };
    // The template gains a character past what a summary shows: only the whole bytes
    // (and their hash) tell the two apart.
    let template = format!("{} ", meta_text(&model, "tokenizer.chat_template"));
    let file = tmp("meta-template.jinja");
    std::fs::write(&file, &template).unwrap();
    let edited = tmp("meta-edited.gguf");
    let _ = std::fs::remove_file(&edited);
    let mut c = organ();
    c.arg("meta").arg(&model).args(["--rm", "general.license", "--set", "general.name=Renamed", "--set"]);
    c.arg("organ.note=added").arg("--set-file").arg(format!("tokenizer.chat_template={}", file.display()));
    c.arg("--out").arg(&edited);
    ok(c);

    let csv = tmp("meta-edited.csv");
    let d = diff(&model, &edited, "meta-edited.json", &["--fail-on-change", "--force", "--csv", csv.to_str().unwrap()]);
    assert_eq!(d.code, 1, "--fail-on-change: only the metadata changed, and that is a change\n{}", d.stdout);
    let c = &d.report["counts"];
    assert_eq!((&c["identical"], &c["changed"]), (&json!(SMOLLM2_TENSORS), &json!(0)), "every tensor is the same");
    assert!(
        d.stdout.contains("metadata: 4 keys changed (1 removed, 1 added, 2 changed)"),
        "the summary says the metadata changed:\n{}",
        d.stdout
    );
    let m = &d.report["metadata"];
    assert_eq!(
        m["counts"],
        json!({ "keys_a": 33, "keys_b": 33, "same": 30, "changed": 2, "only_in_a": 1, "only_in_b": 1, "gguf_version_a": 3, "gguf_version_b": 3 })
    );
    // The CSV: a row per key that differs before the tensors' rows, as gguf-dump lists the
    // header first; the tensor rows keep their columns.
    let csv = std::fs::read_to_string(&csv).unwrap();
    let mut rows = csv.lines();
    let head: Vec<&str> = rows.next().unwrap().split(',').collect();
    assert!(head.ends_with(&["name_b", "key", "change", "value_a", "value_b"]), "{head:?}");
    let rows: Vec<&str> = rows.collect();
    assert_eq!(rows.len(), 4 + SMOLLM2_TENSORS, "{csv}");
    assert!(rows[0].starts_with(",,metadata,") && rows[0].contains(",general.license,removed,"), "{}", rows[0]);
    assert!(rows[1].contains(",organ.note,added,,\"STRING = \"\"added\"\"\""), "{}", rows[1]);
    assert!(rows[2].contains(",general.name,changed,"), "{}", rows[2]);
    assert_eq!(m["only_in_a"], json!([{ "key": "general.license", "type": "STRING", "value": "\"apache-2.0\"" }]));
    assert_eq!(m["only_in_b"], json!([{ "key": "organ.note", "type": "STRING", "value": "\"added\"" }]));
    let changed: Vec<&Value> = m["changed"].as_array().unwrap().iter().collect();
    assert_eq!(
        changed[0],
        &json!({ "key": "general.name", "a": { "type": "STRING", "value": "\"Smollm2 135M 8k Lc100K Mix1 Ep2\"" }, "b": { "type": "STRING", "value": "\"Renamed\"" } })
    );
    let t = changed[1];
    assert_eq!(t["key"], "tokenizer.chat_template");
    let cut = |v: &Value| v["value"].as_str().unwrap().split('…').next().unwrap().to_owned();
    assert_eq!(cut(&t["a"]), cut(&t["b"]), "both summaries start the same: {t}");
    assert_ne!(t["a"]["blake3"], t["b"]["blake3"], "the hashes of the whole values differ: {t}");
    assert_eq!(t["b"]["blake3"].as_str().unwrap(), blake3::hash(template.as_bytes()).to_hex().as_str());
    assert!(
        d.stdout.contains("metadata keys only in A (1):\n    general.license  STRING = \"apache-2.0\""),
        "{}",
        d.stdout
    );
    assert!(d.stdout.contains(
        "    general.name\n      A  STRING = \"Smollm2 135M 8k Lc100K Mix1 Ep2\"\n      B  STRING = \"Renamed\""
    ));

    // The model against itself: the same keys, and no change.
    let same = diff(&model, &model, "meta-same.json", &["--fail-on-change"]);
    assert_eq!(same.code, 0, "{}", same.stdout);
    assert!(same.stdout.contains("metadata: the same 33 keys"), "{}", same.stdout);
    assert_eq!(same.report["metadata"]["counts"]["same"], 33);
}

#[test]
fn a_cut_model_is_compared_with_the_blocks_it_was() {
    let Some(model) = need::smollm2() else { return };
    let cut = tmp("layers-cut-1-2.gguf");
    let _ = std::fs::remove_file(&cut);
    ok({
        let mut c = organ();
        c.arg("layers").arg(&model).args(["--drop", "1,2", "--out"]).arg(&cut);
        c
    });
    let d = diff(&model, &cut, "layers-cut.json", &["--fail-on-change"]);
    assert_eq!(d.code, 1, "blocks and keys went: a change");
    let r = &d.report;
    let per_block = 9;
    let n = SMOLLM2_TENSORS - 2 * per_block;
    assert_eq!(
        r["counts"],
        json!({ "comparable": n, "identical": n, "changed": 0, "only_in_a": 2 * per_block, "only_in_b": 0, "shape_mismatch": 0 }),
        "every kept block is byte for byte the block it was: {}",
        d.stdout
    );
    assert_eq!(r["layers"], json!({ "by": "organ.layers.dropped", "dropped_a": null, "dropped_b": [1, 2] }));
    let only_a: Vec<&str> = r["only_in_a"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(only_a.iter().all(|n| n.starts_with("blk.1.") || n.starts_with("blk.2.")), "{only_a:?}");
    let pair = |name: &str| r["pairs"].as_array().unwrap().iter().find(|p| p["name"] == name).cloned().unwrap();
    assert_eq!(pair("blk.3.attn_q.weight")["name_b"], "blk.1.attn_q.weight", "the cut's blk.1 is the base's blk.3");
    assert_eq!(pair("blk.29.ffn_down.weight")["name_b"], "blk.27.ffn_down.weight");
    assert!(pair("blk.0.attn_q.weight").get("name_b").is_none(), "a block before the cut keeps its name");
    assert!(
        d.stdout.contains("layers lined up by organ.layers.dropped: B dropped layer(s) 1, 2"),
        "the text says how the layers were lined up:\n{}",
        d.stdout
    );
    assert!(d.stdout.contains("metadata: 5 keys changed (0 removed, 4 added, 1 changed)"), "{}", d.stdout);
    let keys: Vec<&str> =
        r["metadata"]["only_in_b"].as_array().unwrap().iter().map(|k| k["key"].as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "organ.layers.source",
            "organ.layers.source_blake3",
            "organ.layers.source_block_count",
            "organ.layers.dropped"
        ]
    );
    assert_eq!(r["metadata"]["changed"][0]["key"], "llama.block_count");
    // The cut's pairs carry B's name in the CSV too.
    let csv = tmp("layers-cut.csv");
    let mut c = organ();
    c.arg("diff").arg(&model).arg(&cut).arg("--csv").arg(&csv).arg("--force");
    let _ = c.output().unwrap();
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.lines().any(|l| l.starts_with("blk.3.attn_q.weight,") && l.contains(",blk.1.attn_q.weight,")), "{csv}");

    // A file of another GGUF version (v2 and v3 share the layout; the header's field
    // patched): a change, named on the summary line and as gguf-dump's GGUF.version.
    let v2 = tmp("smollm2-v2.gguf");
    let mut bytes = std::fs::read(&model).unwrap();
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&v2, bytes).unwrap();
    let csv = tmp("v2.csv");
    let d = diff(&model, &v2, "v2.json", &["--fail-on-change", "--force", "--csv", csv.to_str().unwrap()]);
    assert_eq!(d.code, 1, "{}", d.stdout);
    assert!(d.stdout.contains("metadata: the same 33 keys; GGUF version 3 in A, 2 in B"), "{}", d.stdout);
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.lines().nth(1).unwrap().ends_with(",GGUF.version,changed,3,2"), "{csv}");

    // The cut as A: the same pairs, the dropped blocks only in B.
    let back = diff(&cut, &model, "layers-cut-back.json", &[]);
    assert_eq!(back.report["counts"]["identical"], n);
    assert_eq!(back.report["counts"]["only_in_b"], 2 * per_block);
    assert_eq!(back.report["layers"]["dropped_a"], json!([1, 2]));
}
