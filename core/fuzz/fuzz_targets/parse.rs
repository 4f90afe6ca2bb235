//! Any bytes through the GGUF reader, as a whole file and as a prefix of a larger one;
//! whatever parses is walked (metadata arrays, tensor data, Z-measure of small tensors)
//! and written back, and the rewrite must parse to the same header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use organ_core::gguf::writer::plan_like;
use organ_core::gguf::MetaValue;
use organ_core::zmeasure::measure_tensor;
use organ_core::Gguf;

fn walk(v: &MetaValue<'_>, depth: u32) -> u64 {
    match v {
        MetaValue::Array(a) => a.iter().map(|e| 1 + walk(&e, depth + 1)).sum(),
        _ => 1,
    }
}

fuzz_target!(|data: &[u8]| {
    // As a prefix of a file twice as long: either parses, or asks for more, or refuses.
    if let Err(e) = Gguf::parse(data, data.len() as u64 * 2) {
        if let Some(n) = e.needed_len() {
            assert!(n > data.len() as u64);
        }
    }
    let Ok(g) = Gguf::parse(data, data.len() as u64) else { return };
    for kv in &g.kvs {
        walk(&kv.value, 0);
    }
    for t in &g.tensors {
        let bytes = t.data(data).expect("parse checked every tensor lies inside the file");
        if t.n_elements <= 1 << 16 {
            let _ = measure_tensor(t.name, t.ty, t.n_elements, bytes);
        }
    }
    let layout = plan_like(g.version, &g.kvs, &g.tensors).expect("a parsed header can be written back");
    let mut out = layout.header.clone();
    out.resize(layout.file_len as usize, 0);
    let again = Gguf::parse(&out, out.len() as u64).expect("the rewrite parses");
    assert_eq!(again.kvs.len(), g.kvs.len());
    assert_eq!(again.tensors.len(), g.tensors.len());
    for (a, b) in again.tensors.iter().zip(&g.tensors) {
        assert_eq!((a.name, a.shape(), a.ty, a.n_bytes), (b.name, b.shape(), b.ty, b.n_bytes));
    }
});
