//! The native side of bench/wasm-vs-native.sh: best of RUNS of `measure_all` on MODEL.
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let file = std::fs::read(&args[1]).expect("read the model");
    let runs: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(5);
    let mut best = f64::MAX;
    let mut n = 0;
    for _ in 0..runs {
        let t = Instant::now();
        n = organ_wasm_core_bench::measure_all(&file);
        best = best.min(t.elapsed().as_secs_f64());
    }
    assert!(n > 0, "the model did not measure");
    println!("{{\"tensors\": {n}, \"best_s\": {best}}}");
}
