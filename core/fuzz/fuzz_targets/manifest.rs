//! Any bytes through `organ_core::model::manifest::parse`, the one way an organ directory's
//! manifest.json is read. Whatever parses has every metadata entry decoded and walked,
//! and must write back to JSON that parses to the same manifest.
#![no_main]

use libfuzzer_sys::fuzz_target;
use organ_core::model::manifest::{decode_kv, parse};
use organ_core::gguf::MetaValue;

fn walk(v: &MetaValue<'_>) -> u64 {
    match v {
        MetaValue::Array(a) => a.iter().map(|e| 1 + walk(&e)).sum(),
        _ => 1,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(m) = parse(data) else { return };
    for e in &m.metadata {
        let (_, v) = decode_kv(e).expect("parse checked every entry");
        walk(&v.view().expect("a decoded value has a view"));
    }
    let text = serde_json::to_vec(&m).expect("a parsed manifest writes back");
    let again = parse(&text).expect("what organ writes parses");
    // Debug, so that NaN equals NaN (f32_bits keeps its payload exactly).
    assert_eq!(format!("{:?}", again.metadata), format!("{:?}", m.metadata));
    assert_eq!(format!("{:?}", again.tensors), format!("{:?}", m.tensors));
});
