//! Throughput of every dequantizer (whole tensors, and sampled single elements) and of
//! the Z-measure on a 100 000-value sample. `cargo bench -p organ-core`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use organ_core::quant::{dequantize_into, ElementReader};
use organ_core::zmeasure::{measure_values, sample_indices};
use organ_core::GgmlType;

/// Deterministic bytes with finite f16 scales (0x3C00 = 1.0 wherever a scale may sit is
/// not needed for speed: random bytes dequantize at the same speed).
fn bytes(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8 & 0x3B // keeps f16 exponents finite
        })
        .collect()
}

fn dequant(c: &mut Criterion) {
    let mut g = c.benchmark_group("dequantize");
    for &ty in GgmlType::ALL.iter().filter(|t| t.can_dequantize()) {
        let blocks = (1 << 20) / ty.block_size(); // 1 Mi elements
        let data = bytes(blocks * ty.type_size());
        let mut out = vec![0f32; blocks * ty.block_size()];
        g.throughput(Throughput::Elements(out.len() as u64));
        g.bench_function(ty.name(), |b| b.iter(|| dequantize_into(ty, black_box(&data), &mut out).unwrap()));
    }
    g.finish();
}

fn sample(c: &mut Criterion) {
    let mut g = c.benchmark_group("gather_100k");
    let n = 1u64 << 22;
    let idx = sample_indices("blk.0.ffn_up.weight", n, 100_000);
    for ty in [
        GgmlType::F16,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::IQ2_XS,
        GgmlType::Q2_0,
    ] {
        let data = bytes(n as usize / ty.block_size() * ty.type_size());
        g.throughput(Throughput::Elements(idx.len() as u64));
        g.bench_function(ty.name(), |b| {
            b.iter(|| ElementReader::new(ty, &data, n).unwrap().gather(black_box(&idx)).unwrap())
        });
    }
    g.finish();
}

fn zmeasure(c: &mut Criterion) {
    let values: Vec<f32> =
        bytes(400_000).chunks_exact(4).map(|b| f32::from(b[0]) * 0.01 - f32::from(b[1]) * 0.003).collect();
    c.bench_function("measure_values_100k", |b| b.iter(|| measure_values(black_box(values.clone()))));
}

criterion_group!(benches, dequant, sample, zmeasure);
criterion_main!(benches);
