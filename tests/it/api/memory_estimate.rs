//! `GET /api/inspect?memory=true` (issue 32, point 3): the CLI's `inspect --json --memory`
//! with the same settings, as query parameters; bad settings are 400s before anything
//! runs, a file that is not a model a 422 with the CLI's sentence.

use super::server::*;
use crate::build::*;
use crate::common::{need, ok, organ};
use serde_json::Value;

#[test]
fn inspect_memory_equals_the_cli() {
    if need::smollm2().is_none() {
        return;
    }
    let s = start(&make_root("api-memory-estimate"), &[]);
    let (st, api) = get(&s, "/api/inspect?path=smol.gguf&memory=true&ctx=512&kv_type=q8_0&gpu_layers=12");
    assert_eq!(st, 200, "{api}");
    let mut c = organ();
    c.arg("inspect").arg(s.root.join("smol.gguf"));
    c.args(["--json", "--memory", "--ctx", "512", "--kv-type", "q8_0", "--gpu-layers", "12"]);
    let cli: Value = serde_json::from_slice(&ok(c).stdout).unwrap();
    assert_eq!(api, cli);
    assert_eq!(api["memory"]["ctx"], 512);
    assert_eq!(api["memory"]["weights"]["layers_on_device"], 11);
    assert!(api["memory"]["total"].as_u64().unwrap() > api["memory"]["weights"]["host_mapped"].as_u64().unwrap());
    // llama.cpp's defaults: the training context, f16.
    let (st, d) = get(&s, "/api/inspect?path=smol.gguf&memory=true");
    assert_eq!(st, 200);
    assert_eq!((d["memory"]["ctx"].as_u64(), d["memory"]["kv_type"].as_str()), (Some(8192), Some("F16")));
    // No memory=true, no memory object.
    let (_, plain) = get(&s, "/api/inspect?path=smol.gguf");
    assert!(plain.get("memory").is_none());
}

#[test]
fn bad_settings_and_non_models_are_refused() {
    let s = start(&make_tiny_root("api-memory-bad"), &[]);
    for (query, says) in [
        ("memory=true&ctx=0", "--ctx 0 is out of range"),
        ("memory=true&batch=0", "--batch 0 is out of range"),
        ("memory=true&kv_type=q4_k", "--kv-type q4_k: not a KV cache type"),
        ("ctx=512", "add memory=true"),
        ("memory=true&ctx=-1", "query"),
    ] {
        let (st, j) = get(&s, &format!("/api/inspect?path=smol.gguf&{query}"));
        assert_eq!(st, 400, "{query}: {j}");
        assert!(j["error"].as_str().unwrap_or_default().contains(says), "{query}: {j}");
    }
    // An adapter is not a model llama.cpp runs alone.
    use organ_core::gguf::MetaValue;
    use organ_core::GgmlType;
    let halves = [
        t("blk.0.attn_q.weight.lora_a", &[64, 8], GgmlType::F32, noise(1, 512)),
        t("blk.0.attn_q.weight.lora_b", &[8, 64], GgmlType::F32, noise(2, 512)),
    ];
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("general.type", MetaValue::Str(b"adapter")),
        ("adapter.type", MetaValue::Str(b"lora")),
        ("adapter.lora.alpha", MetaValue::F32(8.0)),
    ];
    let adapter = write_model_kvs("api-memory-adapter.gguf", &kvs, &halves);
    std::fs::copy(&adapter, s.root.join("adapter.gguf")).unwrap();
    let (st, j) = get(&s, "/api/inspect?path=adapter.gguf&memory=true");
    assert_eq!(st, 422, "{j}");
    assert!(j["error"].as_str().unwrap_or_default().contains("is a LoRA adapter, not a model"), "{j}");
}
