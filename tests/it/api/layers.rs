//! The layers job: the model it writes is the CLI's, byte for byte; a list that does not
//! parse, or neither or both of drop and keep, is a 400 before any job; a list the model
//! does not have fails the job with the core's reason. Needs nothing beyond the repository.

use super::server::*;
use crate::build::{noise, t, write_model_kvs};
use crate::common::{ok, organ, tmp};
use organ_core::gguf::{MetaArray, MetaValue, ValueType};
use organ_core::GgmlType;
use serde_json::{json, Value};

#[test]
fn layers_job_writes_what_the_cli_writes() {
    let root = make_tiny_root("api-layers");
    let ff: Vec<u8> = [32u32, 48, 64].iter().flat_map(|x| x.to_le_bytes()).collect();
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("llama.block_count", MetaValue::U32(3)),
        ("llama.feed_forward_length", MetaValue::Array(MetaArray::from_raw(ValueType::U32, 3, &ff).unwrap())),
    ];
    let mut ts = vec![t("token_embd.weight", &[32, 4], GgmlType::F32, noise(1, 128))];
    for l in 0..3 {
        ts.push(t(&format!("blk.{l}.attn_norm.weight"), &[32], GgmlType::F32, noise(10 + l, 32)));
        ts.push(t(&format!("blk.{l}.ffn_up.weight"), &[32, 8], GgmlType::Q8_0, noise(20 + l, 256)));
    }
    let model = write_model_kvs("api-layers.gguf", &kvs, &ts);
    std::fs::copy(&model, root.join("three.gguf")).unwrap();
    let s = start(&root, &[]);
    let (st, doc) = get(&s, "/openapi.json");
    assert_eq!(st, 200);
    assert!(doc["paths"]["/api/layers"]["post"].is_object(), "openapi.json documents /api/layers");
    for (body, args) in [
        (json!({ "path": "three.gguf", "drop": "1", "out": "two.gguf" }), ["--drop", "1"]),
        (json!({ "path": "three.gguf", "keep": "0-2" }), ["--keep", "0-2"]),
    ] {
        let end = run_job(&s, "/api/layers", body);
        let outs: Vec<&str> = end["outputs"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        let out = outs.iter().find(|o| o.ends_with(".gguf")).unwrap();
        let cli = tmp(&format!("api-cli-layers{}.gguf", args[1]));
        let mut c = organ();
        c.arg("layers").arg(root.join("three.gguf")).args(args).arg("--out").arg(&cli).arg("--force");
        ok(c);
        assert!(download(&s, out) == std::fs::read(&cli).unwrap(), "{args:?}: the CLI's bytes");
        assert_eq!(end["result"]["source"], "three.gguf", "{end}");
    }
    // Keeping every layer is the input itself.
    assert_eq!(std::fs::read(tmp("api-cli-layers0-2.gguf")).unwrap(), std::fs::read(&model).unwrap());
    let (st, job) = post(&s, "/api/layers", &json!({ "path": "three.gguf", "drop": "0,5" }));
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    assert!(end["error"].as_str().unwrap().contains("layer 5 is out of range: the model has 3 layers"), "{end}");
    for (body, want) in [
        (json!({ "path": "three.gguf", "drop": "1,x" }), "\"x\" is not a layer number"),
        (json!({ "path": "three.gguf", "drop": "" }), "--drop is empty"),
        (json!({ "path": "three.gguf" }), "give one of drop and keep"),
        (json!({ "path": "three.gguf", "drop": "1", "keep": "2" }), "give one of drop and keep"),
        (json!({ "path": "three.gguf", "drop": "1", "out": "x.bin" }), "ending in .gguf"),
    ] {
        let (st, err) = post(&s, "/api/layers", &body);
        assert_eq!(st, 400, "{body}: {err}");
        assert!(err["error"].as_str().unwrap().contains(want), "{body}: {err}");
    }
}
