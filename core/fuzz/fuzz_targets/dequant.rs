//! Any type id and bytes through the dequantizers: whole blocks, single blocks and single
//! elements must agree, and nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use organ_core::quant::{dequantize, dequantize_block, ElementReader, MAX_BLOCK_SIZE};
use organ_core::GgmlType;

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
            assert_eq!(buf[j].to_bits(), all[i].to_bits());
            assert_eq!(r.get(i as u64).unwrap().to_bits(), all[i].to_bits());
        }
    }
    let idx: Vec<u64> = (0..n).rev().collect();
    let g = r.gather(&idx).unwrap();
    assert!(g.iter().zip(idx).all(|(v, i)| v.to_bits() == all[i as usize].to_bits()));
});
