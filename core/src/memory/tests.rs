use super::*;
use crate::gguf::MetaValue;
use crate::gguf::ValueType;
use crate::model::OwnedValue;
use alloc::vec;

fn u32v(x: u32) -> OwnedValue {
    OwnedValue::Scalar(MetaValue::U32(x))
}

fn u32s(xs: &[u32]) -> OwnedValue {
    let raw: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    OwnedValue::Array { elem_type: ValueType::U32, len: xs.len() as u64, raw: raw.into() }
}

fn bools(xs: &[bool]) -> OwnedValue {
    let raw: Vec<u8> = xs.iter().map(|&b| u8::from(b)).collect();
    OwnedValue::Array { elem_type: ValueType::Bool, len: xs.len() as u64, raw: raw.into() }
}

fn tensor(name: &str, offset: u64, n_bytes: u64) -> TensorEntry {
    TensorEntry {
        name: name.into(),
        ty: GgmlType::F32,
        dims: vec![n_bytes / 4],
        n_elements: n_bytes / 4,
        n_bytes,
        file: 0,
        offset,
    }
}

/// A 4-layer `arch` model: n_embd 256, 8 heads of 32 (2 KV heads), vocabulary 1000,
/// trained context 4096; one 1000-byte tensor per layer after a 4000-byte token_embd,
/// tied output.
fn model(arch: &str, extra: Vec<(&str, OwnedValue)>) -> Model {
    let mut kvs = vec![
        ("general.architecture".into(), OwnedValue::string(arch)),
        (format!("{arch}.block_count"), u32v(4)),
        (format!("{arch}.embedding_length"), u32v(256)),
        (format!("{arch}.context_length"), u32v(4096)),
        (format!("{arch}.attention.head_count"), u32v(8)),
        (format!("{arch}.attention.head_count_kv"), u32v(2)),
        (format!("{arch}.vocab_size"), u32v(1000)),
    ];
    for (k, v) in extra {
        kvs.retain(|(key, _)| *key != format!("{arch}.{k}"));
        kvs.push((format!("{arch}.{k}"), v));
    }
    let mut tensors = vec![tensor("token_embd.weight", 1000, 4000)];
    for il in 0..4u64 {
        tensors.push(tensor(&format!("blk.{il}.attn_q.weight"), 5000 + il * 1000, 1000));
    }
    tensors.push(tensor("output_norm.weight", 9000, 1000));
    Model { version: 3, kvs, tensors }
}

fn est(m: &Model, s: Settings) -> Estimate {
    estimate(m, &s).unwrap()
}

#[test]
fn gqa_kv_is_heads_kv_times_head_size_times_cells() {
    let e = est(&model("llama", vec![]), Settings { ctx: Some(1000), ..Settings::default() });
    // 1000 cells padded to 1024; 2 KV heads × 32 × f16 = 128 bytes a cell a layer.
    assert_eq!(e.ctx, 1024);
    assert_eq!(e.kv, KvCache { cells: 1024, layers: 4, k: 4 * 1024 * 128, v: 4 * 1024 * 128, device: 0 });
    assert_eq!(e.kv_swa, None);
    let q8 = est(&model("llama", vec![]), Settings { ctx: Some(1024), kv_type: GgmlType::Q8_0, ..Settings::default() });
    // 64 elements = 2 blocks of 34 bytes.
    assert_eq!(q8.kv.k, 4 * 1024 * 68);
}

#[test]
fn default_context_is_the_training_one_and_batches_clamp() {
    let e = est(&model("llama", vec![]), Settings::default());
    assert_eq!((e.ctx, e.batch, e.ubatch), (4096, 2048, 512));
    let small = est(&model("llama", vec![]), Settings { ctx: Some(256), ..Settings::default() });
    assert_eq!((small.batch, small.ubatch), (256, 256));
}

#[test]
fn per_layer_head_counts_are_read_per_layer() {
    let m = model("llama", vec![("attention.head_count_kv", u32s(&[2, 0, 4, 2]))]);
    let e = est(&m, Settings { ctx: Some(256), ..Settings::default() });
    // Layer 1 has no KV; layer 2 twice the others'.
    assert_eq!(e.kv.layers, 3);
    assert_eq!(e.kv.k, 256 * 2 * 32 * 2 * (1 + 2 + 1));
}

#[test]
fn sliding_window_layers_get_a_window_sized_cache() {
    let m =
        model("gemma3", vec![("attention.sliding_window", u32v(512)), ("attention.sliding_window_pattern", u32v(2))]);
    let e = est(&m, Settings { ctx: Some(8192), ..Settings::default() });
    // Pattern 2: layers 0 and 2 slide; window 512 + ubatch 512 = 1024 cells.
    let swa = e.kv_swa.unwrap();
    assert_eq!((swa.cells, swa.layers), (1024, 2));
    assert_eq!((e.kv.cells, e.kv.layers), (8192, 2));
    assert_eq!(swa.k, 2 * 1024 * 128);
    // gemma3's default pattern, 6: layer il slides when il % 6 < 5, so all four do.
    let d = est(&model("gemma3", vec![("attention.sliding_window", u32v(512))]), Settings::default());
    assert_eq!((d.kv.layers, d.kv_swa.unwrap().layers), (0, 4));
    // An explicit per-layer pattern wins; a short window in a short context is the context.
    let b = model(
        "gemma3",
        vec![
            ("attention.sliding_window", u32v(512)),
            ("attention.sliding_window_pattern", bools(&[false, false, false, true])),
        ],
    );
    let e = est(&b, Settings { ctx: Some(512), ..Settings::default() });
    assert_eq!((e.kv.layers, e.kv_swa.unwrap().layers, e.kv_swa.unwrap().cells), (3, 1, 512));
    // An architecture without sliding layers ignores the key.
    let l = est(&model("llama", vec![("attention.sliding_window", u32v(512))]), Settings::default());
    assert_eq!(l.kv_swa, None);
}

#[test]
fn mla_caches_the_latent_in_k_and_no_v() {
    let m = model(
        "deepseek2",
        vec![
            ("attention.head_count_kv", u32v(1)),
            ("attention.key_length", u32v(576)),
            ("attention.value_length", u32v(512)),
            ("attention.key_length_mla", u32v(192)),
            ("attention.value_length_mla", u32v(128)),
        ],
    );
    let e = est(&m, Settings { ctx: Some(256), ..Settings::default() });
    assert!(e.mla);
    assert_eq!((e.kv.k, e.kv.v), (4 * 256 * 576 * 2, 0));
}

#[test]
fn gpu_layers_count_the_output_first_then_the_last_layers() {
    let m = model("llama", vec![]);
    let cpu = est(&m, Settings::default());
    // token_embd at 1000 .. output_norm's end at 10000.
    assert_eq!(cpu.weights, Weights { host_mapped: 9000, device: 0, layers_on_device: 0, output_on_device: false });
    let one = est(&m, Settings { gpu_layers: 1, ..Settings::default() });
    // The output layer: output_norm, and token_embd again for the tied output.
    assert_eq!(one.weights, Weights { host_mapped: 8000, device: 5000, layers_on_device: 0, output_on_device: true });
    let three = est(&m, Settings { gpu_layers: 3, ..Settings::default() });
    assert_eq!(three.weights, Weights { host_mapped: 6000, device: 7000, layers_on_device: 2, output_on_device: true });
    assert_eq!(three.kv.device, three.kv.bytes() / 2);
    let all = est(&m, Settings { gpu_layers: 99, ..Settings::default() });
    assert_eq!(all.weights, Weights { host_mapped: 4000, device: 9000, layers_on_device: 4, output_on_device: true });
    assert_eq!(all.kv.device, all.kv.bytes());
}

#[test]
fn total_is_the_sum_of_the_parts() {
    let e = est(&model("llama", vec![]), Settings { ctx: Some(512), ..Settings::default() });
    assert_eq!(e.output, 4000);
    assert_eq!(e.compute, 1000 * 512 * 4 + 512 * 512 * 2 + 5 * 256 * 512 * 4);
    assert_eq!(e.total, e.weights.host_mapped + e.weights.device + e.kv.bytes() + e.output + e.compute);
}

#[test]
fn rejects() {
    let m = model("llama", vec![]);
    let err = |m: &Model, s: Settings| estimate(m, &s).unwrap_err();
    assert!(matches!(
        err(&m, Settings { ctx: Some(0), ..Settings::default() }),
        MemoryError::Setting(Setting::Ctx, 0, _)
    ));
    assert!(matches!(err(&m, Settings { ctx: Some(MAX_CTX + 1), ..Settings::default() }), MemoryError::Setting(..)));
    assert!(matches!(err(&m, Settings { batch: 0, ..Settings::default() }), MemoryError::Setting(Setting::Batch, ..)));
    assert!(matches!(
        err(&m, Settings { kv_type: GgmlType::Q4_K, ..Settings::default() }),
        MemoryError::Setting(Setting::KvType, ..)
    ));
    // Heads of 16: a q8_0 block of 32 does not divide them, as llama.cpp says.
    let small = model("llama", vec![("attention.key_length", u32v(16)), ("attention.value_length", u32v(16))]);
    let e = err(&small, Settings { kv_type: GgmlType::Q8_0, ..Settings::default() });
    assert_eq!(e, MemoryError::KvType(GgmlType::Q8_0, "K", 16));
    let mut adapter = m.clone();
    adapter.kvs.push(("general.type".into(), OwnedValue::string("adapter")));
    assert_eq!(err(&adapter, Settings::default()), MemoryError::Adapter);
    let mut headless = m.clone();
    headless.kvs.retain(|(k, _)| k != "llama.block_count");
    assert_eq!(err(&headless, Settings::default()), MemoryError::NotAModel("no llama.block_count".into()));
    let mut short = m.clone();
    short.kvs.push(("llama.attention.head_count".into(), u32s(&[8, 8])));
    short.kvs.retain(|(k, v)| k != "llama.attention.head_count" || matches!(v, OwnedValue::Array { .. }));
    assert!(matches!(err(&short, Settings::default()), MemoryError::BadKey(..)));
    let mut mamba = model("mamba", vec![]);
    mamba.kvs.push(("mamba.ssm.state_size".into(), u32v(16)));
    assert_eq!(err(&mamba, Settings::default()), MemoryError::Recurrent("mamba".into()));
}
