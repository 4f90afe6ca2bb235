//! Any type id and bytes through the dequantizers: whole blocks, single blocks and single
//! elements must agree, and nothing may panic. Agreement is bit-for-bit except for NaN
//! payloads, which Rust leaves unspecified (an operation on two NaNs may return either's
//! payload, and the compiler may commute operands differently in each inlined copy):
//! a NaN must stay a NaN.
#![no_main]

use libfuzzer_sys::fuzz_target;
use organ_core::quant::{dequantize, dequantize_block, ElementReader, MAX_BLOCK_SIZE};
use organ_core::GgmlType;

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fuzz_target!(|data: &[u8]| {
    let Some((&id, bytes)) = data.split_first() else { return };
    let Some(ty) = GgmlType::from_id(u32::from(id)) else { return };
    let ts = ty.type_size();
    let whole = bytes.len() / ts * ts;
    let Ok(all) = dequantize(ty, &bytes[..whole]) else { return };
    let n = all.len() as u64;
    let mut r = ElementReader::new(ty, &bytes[..whole], n).expect("whole blocks");
    let mut buf = [0f32; MAX_BLOCK_SIZE];
    for (k, block) in bytes[..whole].chunks_exact(ts).enumerate() {
        dequantize_block(ty, block, &mut buf).expect("one block");
        for j in 0..ty.block_size() {
            let i = k * ty.block_size() + j;
            assert!(same(buf[j], all[i]), "{ty} block {k} element {j}");
            assert!(same(r.get(i as u64).unwrap(), all[i]), "{ty} element {i}");
        }
    }
    let idx: Vec<u64> = (0..n).rev().collect();
    let g = r.gather(&idx).unwrap();
    assert!(g.iter().zip(idx).all(|(&v, i)| same(v, all[i as usize])), "{ty} gather");
});
