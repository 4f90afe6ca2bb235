//! `slices:`: what is refused by its key, and the layout of a stack (names, sources,
//! gradients per slice, non-layer tensors, metadata).

use super::config::Config;
use super::layout::{Input, Layout};
use crate::gguf::{MetaValue, ValueType};
use crate::model::{Model, OwnedValue};
use alloc::format;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::{json, Value};

fn refused(v: Value, key: &str, reason: &str) {
    let e = Config::from_json(&v).unwrap_err().to_string();
    assert!(e.contains(&format!("merge config {key}: ")) && e.contains(reason), "{key}: {e}");
}

fn src(model: &str, a: u32, b: u32) -> Value {
    json!({"model": model, "layer_range": [a, b]})
}

#[test]
fn slices_are_refused_by_their_key() {
    let pass = |slices: Value| json!({"merge_method": "passthrough", "slices": slices});
    refused(
        json!({"merge_method": "linear", "models": ["a"], "slices": [{"sources": [src("a", 0, 2)]}]}),
        "slices",
        "not both",
    );
    refused(pass(json!([])), "slices", "empty");
    refused(pass(json!({"sources": []})), "slices", "not a list");
    refused(
        pass(json!([{"sources": [src("a", 3, 3)]}])),
        "slices[0].sources[0].layer_range",
        "start must be below end",
    );
    refused(
        pass(json!([{"sources": [src("a", 0, 2)]}, {"sources": [src("b", 5, 1)]}])),
        "slices[1].sources[0].layer_range",
        "[5, 1]",
    );
    for bad in [json!([0]), json!([-1, 2]), json!([0.5, 2]), json!("0-2"), json!([0, 2, 4])] {
        refused(
            pass(json!([{"sources": [{"model": "a", "layer_range": bad}]}])),
            "slices[0].sources[0].layer_range",
            "give [start, end]",
        );
    }
    refused(pass(json!([{"sources": [{"model": "a"}]}])), "slices[0].sources[0].layer_range", "missing");
    refused(
        pass(json!([{"sources": [src("a", 0, 2)], "residual_weight": 0.5}])),
        "slices[0].residual_weight",
        "does not support",
    );
    refused(
        pass(json!([{"sources": [{"model": "a", "layer_range": [0, 2], "layers": 2}]}])),
        "slices[0].sources[0].layers",
        "does not support",
    );
    refused(
        pass(json!([{"sources": [src("a", 0, 2), src("b", 0, 2)]}])),
        "slices[0].sources",
        "one source per slice, not 2",
    );
    refused(
        pass(json!([{"sources": [{"model": "a", "layer_range": [0, 2], "parameters": {"weight": 1}}]}])),
        "slices[0].sources[0].parameters.weight",
        "it reads: scale",
    );
    refused(
        pass(json!([{"sources": [src("a", 0, 2)]}, {"sources": [src("", 0, 2)]}])),
        "slices[1].sources[0].model",
        "missing",
    );
    let slerp =
        |slices: Value| json!({"merge_method": "slerp", "base_model": "a", "parameters": {"t": 0.5}, "slices": slices});
    refused(
        slerp(json!([{"sources": [src("a", 0, 4), src("b", 2, 4)]}])),
        "slices[0].sources[1].layer_range",
        "is 2 layers, slices[0].sources[0]'s is 4",
    );
    refused(
        slerp(json!([{"sources": [src("b", 0, 4), src("c", 0, 4)]}])),
        "slices[0].sources",
        "not among this slice's sources",
    );
    refused(
        slerp(json!([{"sources": [src("a", 0, 4), src("b", 0, 4), src("c", 0, 4)]}])),
        "slices[0].sources",
        "not 2",
    );
    refused(slerp(json!([{"sources": [src("a", 0, 4), src("a", 4, 8)]}])), "slices[0].sources[1].model", "given twice");
    refused(
        json!({"merge_method": "ties", "slices": [{"sources": [src("a", 0, 4), src("b", 0, 4)]}]}),
        "slices[0].base_model",
        "merges onto a base",
    );
    refused(
        json!({"merge_method": "passthrough", "models": ["a", "b"]}),
        "models",
        "passthrough copies one model, not 2",
    );
    // A slice's own base_model serves it.
    let c = Config::from_json(&json!({"merge_method": "ties", "slices": [
        {"sources": [src("a", 0, 4), {"model": "b", "layer_range": [0, 4], "parameters": {"weight": 1, "density": 0.5}}], "base_model": "a"}]}))
    .unwrap();
    assert_eq!(c.inputs(), ["a", "b"]);
}

use crate::model::f32_entry as entry;

/// A llama model of `layers` layers (two tensors each), with a per-layer array, tied
/// embeddings unless `output`.
fn model(layers: u32, output: bool) -> Model {
    let mut tensors = vec![entry("token_embd.weight", &[8, 16])];
    for l in 0..layers {
        tensors.push(entry(&format!("blk.{l}.attn_q.weight"), &[8, 8]));
        tensors.push(entry(&format!("blk.{l}.ffn_up.weight"), &[8, 4]));
    }
    tensors.push(entry("output_norm.weight", &[8]));
    if output {
        tensors.push(entry("output.weight", &[8, 16]));
    }
    let heads: Vec<u8> = (0..layers).flat_map(|l| (100 + l).to_le_bytes()).collect();
    Model {
        version: 3,
        kvs: vec![
            ("general.architecture".into(), OwnedValue::string("llama")),
            ("llama.block_count".into(), OwnedValue::Scalar(MetaValue::U32(layers))),
            (
                "llama.attention.head_count_kv".into(),
                OwnedValue::Array { elem_type: ValueType::U32, len: u64::from(layers), raw: heads.into() },
            ),
        ],
        tensors,
    }
}

fn layout(c: &Value, models: &[&Model]) -> crate::error::Result<Layout> {
    Config::from_json(c).unwrap().layout(models)
}

fn input(model: usize, tensor: &str) -> Input {
    Input { model, tensor: tensor.into() }
}

#[test]
fn a_range_beyond_a_model_is_refused_naming_the_key_and_the_model() {
    let (a, b) = (model(24, false), model(30, false));
    let c = json!({"merge_method": "passthrough", "slices": [
        {"sources": [src("a.gguf", 0, 24)]}, {"sources": [src("b.gguf", 8, 40)]}]});
    let e = layout(&c, &[&a, &b]).unwrap_err().to_string();
    assert_eq!(e, "merge config slices[1].sources[0].layer_range: [8, 40] is beyond b.gguf's 30 layers (0 to 29)");
    let c = json!({"merge_method": "passthrough", "slices": [{"sources": [src("a.gguf", 0, 25)]}]});
    assert!(layout(&c, &[&a]).unwrap_err().to_string().contains("[0, 25] is beyond a.gguf's 24 layers"));
    // A model of other layers is refused by its tensor.
    let mut wide = model(30, false);
    wide.tensors[1] = entry("blk.0.attn_q.weight", &[8, 16]);
    let c = json!({"merge_method": "passthrough", "slices": [
        {"sources": [src("a.gguf", 0, 2)]}, {"sources": [src("w.gguf", 0, 2)]}]});
    let e = layout(&c, &[&a, &wide]).unwrap_err().to_string();
    assert!(e.starts_with("w.gguf: tensor \"blk.0.attn_q.weight\" is [8, 16]"), "{e}");
}

#[test]
fn passthrough_stacks_layers_renumbered_with_the_ends_from_the_first_and_last_slices() {
    let (a, b) = (model(4, false), model(6, false));
    let c = json!({"merge_method": "passthrough", "slices": [
        {"sources": [src("a.gguf", 0, 3)]}, {"sources": [src("b.gguf", 2, 6)]}, {"sources": [src("a.gguf", 3, 4)]}]});
    let l = layout(&c, &[&a, &b]).unwrap();
    let names: Vec<&str> = l.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), 1 + 8 * 2 + 1);
    assert_eq!(names[0], "token_embd.weight");
    assert_eq!(names[names.len() - 1], "output_norm.weight");
    let find = |n: &str| l.tensors.iter().find(|t| t.name == n).unwrap();
    assert_eq!(find("blk.2.ffn_up.weight").parts, [input(0, "blk.2.ffn_up.weight")]);
    assert_eq!(find("blk.3.attn_q.weight").parts, [input(1, "blk.2.attn_q.weight")]);
    assert_eq!(find("blk.6.attn_q.weight").parts, [input(1, "blk.5.attn_q.weight")]);
    assert_eq!(find("blk.7.attn_q.weight").parts, [input(0, "blk.3.attn_q.weight")]);
    assert!(find("blk.7.attn_q.weight").base.is_none());
    assert_eq!(l.layers, [(0, 0), (0, 1), (0, 2), (1, 2), (1, 3), (1, 4), (1, 5), (0, 3)]);
    // The last slice is a's: output_norm is a's, and no output.weight is needed.
    assert_eq!(find("output_norm.weight").parts, [input(0, "output_norm.weight")]);
    let kvs = l.kvs.unwrap().kvs;
    let get = |k: &str| kvs.iter().find(|(x, _)| x == k).unwrap().1.clone();
    assert_eq!(get("llama.block_count").as_u64(), Some(8));
    let OwnedValue::Array { len: 8, raw, .. } = get("llama.attention.head_count_kv") else { panic!() };
    let heads: Vec<u32> = raw.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(heads, [100, 101, 102, 102, 103, 104, 105, 103]);
}

#[test]
fn tied_embeddings_of_another_last_model_become_its_output_projection() {
    let (a, b) = (model(4, false), model(6, false));
    let c = json!({"merge_method": "passthrough", "slices": [
        {"sources": [src("a.gguf", 0, 2)]}, {"sources": [src("b.gguf", 4, 6)]}]});
    let l = layout(&c, &[&a, &b]).unwrap();
    let last = l.tensors.last().unwrap();
    assert_eq!((last.name.as_str(), &last.parts), ("output.weight", &vec![input(1, "token_embd.weight")]));
    assert_eq!(l.tensors[0].parts, [input(0, "token_embd.weight")]);
    let norm = l.tensors.iter().find(|t| t.name == "output_norm.weight").unwrap();
    assert_eq!(norm.parts, [input(1, "output_norm.weight")]);
    // With their own output.weight, each model's is taken, nothing added.
    let (a, b) = (model(4, true), model(6, true));
    let l = layout(&c, &[&a, &b]).unwrap();
    assert_eq!(l.tensors.iter().filter(|t| t.name == "output.weight").count(), 1);
    assert_eq!(l.tensors.last().unwrap().parts, [input(1, "output.weight")]);
}

#[test]
fn gradients_run_within_each_slice_and_the_ends_are_at_t_0() {
    let (a, b) = (model(8, false), model(8, false));
    let c = json!({"merge_method": "slerp", "base_model": "a.gguf",
        "parameters": {"t": [{"filter": "self_attn", "value": [0, 1]}, {"value": 0.25}]},
        "slices": [
            {"sources": [src("a.gguf", 0, 3), src("b.gguf", 0, 3)]},
            {"sources": [src("a.gguf", 3, 8), src("b.gguf", 3, 8)], "parameters": {"t": [1, 0]}},
            {"sources": [src("a.gguf", 7, 8), src("b.gguf", 7, 8)]}]});
    let l = layout(&c, &[&a, &b]).unwrap();
    let t = |n: &str| l.tensors.iter().find(|x| x.name == n).unwrap().params.t;
    assert_eq!([t("blk.0.attn_q.weight"), t("blk.1.attn_q.weight"), t("blk.2.attn_q.weight")], [0.0, 0.5, 1.0]);
    assert_eq!(t("blk.1.ffn_up.weight"), 0.25);
    // The second slice's own t, from 1 down to 0 over its 5 layers, for every tensor.
    assert_eq!([t("blk.3.ffn_up.weight"), t("blk.4.attn_q.weight"), t("blk.7.attn_q.weight")], [1.0, 0.75, 0.0]);
    // A slice of one layer is at t = 1; the tensors outside the layers at t = 0.
    assert_eq!(t("blk.8.attn_q.weight"), 1.0);
    assert_eq!(t("token_embd.weight"), 0.25);
    let x = l.tensors.iter().find(|x| x.name == "blk.4.attn_q.weight").unwrap();
    assert_eq!(
        (x.base.clone().unwrap(), x.parts.clone()),
        (input(0, "blk.4.attn_q.weight"), vec![input(1, "blk.4.attn_q.weight")])
    );
    let kvs = l.kvs.unwrap().kvs;
    assert_eq!(kvs.iter().find(|(k, _)| k == "llama.block_count").unwrap().1.as_u64(), Some(9));
}

#[test]
fn a_sources_own_parameters_come_before_the_slices_and_the_merges() {
    let (a, b, base) = (model(4, false), model(4, false), model(4, false));
    let c = json!({"merge_method": "task_arithmetic", "base_model": "base.gguf",
        "parameters": {"weight": 0.5},
        "slices": [{"sources": [src("base.gguf", 0, 4),
                                {"model": "a.gguf", "layer_range": [0, 4], "parameters": {"weight": [{"filter": "mlp", "value": 2}]}},
                                src("b.gguf", 0, 4)],
                    "parameters": {"weight": 0.7}}]});
    let l = layout(&c, &[&base, &a, &b]).unwrap();
    let w = |n: &str| l.tensors.iter().find(|x| x.name == n).unwrap().params.weights.clone();
    assert_eq!(w("blk.1.ffn_up.weight"), [2.0, 0.7]);
    assert_eq!(w("blk.1.attn_q.weight"), [0.7, 0.7]);
}
