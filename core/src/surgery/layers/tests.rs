use super::*;

use crate::model::f32_entry as entry;

fn u32v(x: u32) -> OwnedValue {
    OwnedValue::Scalar(MetaValue::U32(x))
}

fn u32s(xs: &[u32]) -> OwnedValue {
    let raw: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    OwnedValue::Array { elem_type: ValueType::U32, len: xs.len() as u64, raw: raw.into() }
}

const P: Provenance<'static> = Provenance { source: "m.gguf", blake3: "abc" };

/// A model of `arch` with `n` layers, two tensors each, `extra` keys.
fn model(arch: &str, n: u64, extra: Vec<(String, OwnedValue)>) -> Model {
    let mut tensors = vec![entry("token_embd.weight", &[8, 10])];
    for l in 0..n {
        tensors.push(entry(&format!("blk.{l}.attn_norm.weight"), &[8 + l]));
        tensors.push(entry(&format!("blk.{l}.ffn_down.weight"), &[8, 4]));
    }
    tensors.push(entry("output_norm.weight", &[8]));
    let mut kvs = vec![
        ("general.architecture".into(), OwnedValue::string(arch)),
        (format!("{arch}.block_count"), u32v(n as u32)),
    ];
    kvs.extend(extra);
    Model { version: 3, kvs, tensors }
}

fn get<'a>(p: &'a LayersPlan, k: &str) -> Option<&'a OwnedValue> {
    p.kvs.iter().find(|(x, _)| x == k).map(|(_, v)| v)
}

fn reasons(r: Result<LayersPlan, Vec<Mismatch>>) -> String {
    r.unwrap_err().into_iter().map(|m| format!("{}: {}", m.tensor, m.reason)).collect::<Vec<_>>().join("\n")
}

#[test]
fn drop_renumbers_the_kept_blocks_and_keeps_their_tensors_whole() {
    let m = model("llama", 4, vec![]);
    let p = plan(&m, Choice::Drop(&[1, 2]), &P).unwrap();
    assert_eq!(p.kept, [0, 3]);
    assert_eq!(p.dropped, [1, 2]);
    let names: Vec<(&str, usize)> = p.tensors.iter().map(|t| (t.name.as_str(), t.pieces[0].tensor)).collect();
    assert_eq!(
        names,
        [
            ("token_embd.weight", 0),
            ("blk.0.attn_norm.weight", 1),
            ("blk.0.ffn_down.weight", 2),
            ("blk.1.attn_norm.weight", 7),
            ("blk.1.ffn_down.weight", 8),
            ("output_norm.weight", 9),
        ]
    );
    assert!(p.tensors.iter().all(|t| t.pieces.len() == 1 && t.pieces[0].start == 0));
    assert_eq!(p.tensors[3].dims, [11]);
    assert_eq!(p.removed.len(), 4);
    assert_eq!(get(&p, "llama.block_count"), Some(&u32v(2)));
    assert_eq!(get(&p, "organ.layers.dropped").and_then(|v| v.as_str()), Some("1,2"));
    // --keep is the complement.
    assert_eq!(plan(&m, Choice::Keep(&[3, 0]), &P).unwrap().tensors, p.tensors);
}

#[test]
fn keeping_every_layer_is_the_source() {
    let m = model("llama", 3, vec![("organ.layers.dropped".into(), OwnedValue::string("5"))]);
    let p = plan(&m, Choice::Keep(&[0, 1, 2]), &P).unwrap();
    assert_eq!(p.kvs, m.kvs);
    assert!(p.dropped.is_empty() && p.removed.is_empty() && p.changed.is_empty());
    assert_eq!(
        p.tensors.iter().map(|t| &t.name).collect::<Vec<_>>(),
        m.tensors.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
}

#[test]
fn per_layer_arrays_keep_the_kept_layers_elements() {
    let extra = vec![
        ("olmo.feed_forward_length".into(), u32s(&[10, 11, 12, 13])),
        ("olmo.attention.head_count".into(), u32s(&[4, 5, 6, 7])),
        ("olmo.attention.head_count_kv".into(), u32v(2)),
        ("olmo.rope.dimension_sections".into(), u32s(&[1, 2, 3, 4])),
        ("tokenizer.ggml.scores".into(), u32s(&[1, 2, 3, 4])),
    ];
    let m = model("olmo", 4, extra);
    let p = plan(&m, Choice::Drop(&[0, 2]), &P).unwrap();
    assert_eq!(get(&p, "olmo.feed_forward_length"), Some(&u32s(&[11, 13])));
    assert_eq!(get(&p, "olmo.attention.head_count"), Some(&u32s(&[5, 7])));
    assert_eq!(get(&p, "olmo.attention.head_count_kv"), Some(&u32v(2)));
    assert_eq!(get(&p, "olmo.rope.dimension_sections"), Some(&u32s(&[1, 2, 3, 4])));
    assert_eq!(get(&p, "tokenizer.ggml.scores"), Some(&u32s(&[1, 2, 3, 4])));
    let changed: Vec<&str> = p.changed.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(changed, ["olmo.block_count", "olmo.feed_forward_length", "olmo.attention.head_count"]);
}

#[test]
fn leading_dense_and_nextn_layers_count_those_kept() {
    let extra = vec![
        ("deepseek2.leading_dense_block_count".into(), u32v(3)),
        ("deepseek2.nextn_predict_layers".into(), u32v(2)),
    ];
    let m = model("deepseek2", 8, extra);
    let p = plan(&m, Choice::Drop(&[1, 2, 6]), &P).unwrap();
    assert_eq!(get(&p, "deepseek2.block_count"), Some(&u32v(5)));
    assert_eq!(get(&p, "deepseek2.leading_dense_block_count"), Some(&u32v(1)));
    assert_eq!(get(&p, "deepseek2.nextn_predict_layers"), Some(&u32v(1)));
    let e = reasons(plan(&m, Choice::Keep(&[6, 7]), &P));
    assert!(e.contains("keeps only multi-token prediction layers"), "{e}");
}

#[test]
fn a_sliding_window_period_is_written_out_for_the_kept_layers() {
    let window = ("gemma3.attention.sliding_window".to_string(), u32v(512));
    let m = model("gemma3", 12, vec![window.clone()]);
    // Period 6: layers 5 and 11 are global. Dropping 0 would make layer 6 (now 5) global.
    let p = plan(&m, Choice::Drop(&[0]), &P).unwrap();
    let want: Vec<u8> = (1..12).map(|l| u8::from(l % 6 != 5)).collect();
    let v = get(&p, "gemma3.attention.sliding_window_pattern").unwrap();
    assert_eq!(v, &OwnedValue::Array { elem_type: ValueType::Bool, len: 11, raw: want.into() });
    // A period given as a number replaces the architecture's.
    let two = ("gemma3.attention.sliding_window_pattern".to_string(), u32v(2));
    let p = plan(&model("gemma3", 4, vec![window.clone(), two]), Choice::Drop(&[0]), &P).unwrap();
    let v = get(&p, "gemma3.attention.sliding_window_pattern").unwrap();
    assert_eq!(v, &OwnedValue::Array { elem_type: ValueType::Bool, len: 3, raw: vec![0u8, 1, 0].into() });
    // No window, no pattern; an array is cut as any per-layer one.
    assert!(get(
        &plan(&model("gemma3", 4, vec![]), Choice::Drop(&[0]), &P).unwrap(),
        "gemma3.attention.sliding_window_pattern"
    )
    .is_none());
    let arr = (
        "gemma3.attention.sliding_window_pattern".to_string(),
        OwnedValue::Array { elem_type: ValueType::Bool, len: 4, raw: vec![1u8, 0, 1, 1].into() },
    );
    let p = plan(&model("gemma3", 4, vec![window, arr]), Choice::Drop(&[2]), &P).unwrap();
    let v = get(&p, "gemma3.attention.sliding_window_pattern").unwrap();
    assert_eq!(v, &OwnedValue::Array { elem_type: ValueType::Bool, len: 3, raw: vec![1u8, 0, 1].into() });
}

#[test]
fn bad_choices_are_refused_with_the_reason() {
    let m = model("llama", 4, vec![]);
    for (choice, want) in [
        (Choice::Drop(&[4][..]), "--drop: layer 4 is out of range: the model has 4 layers (0-3)"),
        (Choice::Drop(&[0, 1, 2, 3]), "--drop: removes all 4 layers"),
        (Choice::Keep(&[]), "--keep: no layer given"),
        (Choice::Drop(&[1, 1]), "--drop: layer 1 is given twice"),
    ] {
        let e = reasons(plan(&m, choice, &P));
        assert!(e.contains(want), "{e}");
    }
    let mut stray = model("llama", 2, vec![]);
    stray.tensors.push(entry("blk.2.attn_norm.weight", &[8]));
    stray.tensors.push(entry("blk.01.attn_norm.weight", &[8]));
    let e = reasons(plan(&stray, Choice::Drop(&[0]), &P));
    assert!(e.contains("blk.2.attn_norm.weight: \"2\" is not a layer") && e.contains("blk.01"), "{e}");
    let m = model("nomic-bert-moe", 4, vec![("nomic-bert-moe.moe_every_n_layers".into(), u32v(2))]);
    assert!(reasons(plan(&m, Choice::Drop(&[0]), &P)).contains("places layers by position"));
    let m = model("olmo", 4, vec![("olmo.attention.sliding_window_pattern".into(), u32s(&[1, 1, 0]))]);
    assert!(reasons(plan(&m, Choice::Drop(&[0]), &P)).contains("3 elements, but the model has 4 layers"));
    let mut m = model("llama", 4, vec![]);
    m.kvs.retain(|(k, _)| k != "llama.block_count");
    assert!(reasons(plan(&m, Choice::Drop(&[0]), &P)).contains("llama.block_count: missing"));
}

#[test]
fn lists_parse_with_ranges_and_refuse_the_malformed() {
    assert_eq!(parse_list("10-12,15").unwrap(), [10, 11, 12, 15]);
    assert_eq!(parse_list(" 3 ").unwrap(), [3]);
    for (bad, want) in [
        ("", "--drop is empty"),
        ("1,,2", "is not a layer number"),
        ("x", "is not a layer number"),
        ("5-2", "runs backwards"),
        ("-3", "is not a layer number"),
        ("0-99999999", "more than 65536 layers"),
    ] {
        // The CLI names the flag before the list's error.
        let e = alloc::format!("--drop {}", parse_list(bad).unwrap_err());
        assert!(e.contains(want), "{bad:?}: {e}");
    }
}
