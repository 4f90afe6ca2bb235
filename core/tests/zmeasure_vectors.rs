//! Z-measure v1 against `tests/data/z-measure-vectors.json`: indicators and θ to 1e-9
//! relative, and the sampler's first indices exactly.
#![allow(clippy::excessive_precision)] // AS241 constants as Wichura published them.

use organ_core::quant::ElementReader;
use organ_core::zmeasure::{fnv1a64, measure_tensor, measure_values, sample_indices};
use organ_core::GgmlType;
use serde_json::Value;
use std::f64::consts::PI;

fn vectors() -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/z-measure-vectors.json");
    let s = std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (the repo's copy of the spec's vectors)", p.display()));
    serde_json::from_str(&s).unwrap()
}

/// Φ⁻¹ by Wichura's AS241 (PPND16), the algorithm of Python's `statistics.NormalDist.inv_cdf`.
fn inv_norm(p: f64) -> f64 {
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        let num = (((((((2509.0809287301226727 * r + 33430.575583588128105) * r + 67265.770927008700853) * r
            + 45921.953931549871457)
            * r
            + 13731.693765509461125)
            * r
            + 1971.5909503065514427)
            * r
            + 133.14166789178437745)
            * r
            + 3.387132872796366608)
            * q;
        let den = ((((((5226.495278852545925 * r + 28729.085735721942674) * r + 39307.89580009271061) * r
            + 21213.794301586595867)
            * r
            + 5394.1960214247511077)
            * r
            + 687.1870074920579083)
            * r
            + 42.313330701600911252)
            * r
            + 1.0;
        return num / den;
    }
    let mut r = if q <= 0.0 { p } else { 1.0 - p };
    r = (-r.ln()).sqrt();
    let x = if r <= 5.0 {
        let r = r - 1.6;
        let num = ((((((7.7454501427834140764e-4 * r + 0.0227238449892691845833) * r + 0.24178072517745061177) * r
            + 1.27045825245236838258)
            * r
            + 3.64784832476320460504)
            * r
            + 5.7694972214606914055)
            * r
            + 4.6303378461565452959)
            * r
            + 1.42343711074968357734;
        let den = ((((((1.05075007164441684324e-9 * r + 5.475938084995344946e-4) * r + 0.0151986665636164571966)
            * r
            + 0.14810397642748007459)
            * r
            + 0.68976733498510000455)
            * r
            + 1.6763848301838038494)
            * r
            + 2.05319162663775882187)
            * r
            + 1.0;
        num / den
    } else {
        let r = r - 5.0;
        let num = ((((((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r + 0.0012426609473880784386)
            * r
            + 0.026532189526576123093)
            * r
            + 0.29656057182850489123)
            * r
            + 1.7848265399172913358)
            * r
            + 5.4637849111641143699)
            * r
            + 6.6579046435011037772;
        let den = ((((((2.04426310338993978564e-15 * r + 1.4215117583164458887e-7) * r + 1.8463183175100546818e-5)
            * r
            + 7.868691311456132591e-4)
            * r
            + 0.0148753612908506148525)
            * r
            + 0.13692988092273580531)
            * r
            + 0.59983220655588793769)
            * r
            + 1.0;
        num / den
    };
    if q < 0.0 {
        -x
    } else {
        x
    }
}

fn laplace(u: f64) -> f64 {
    if u < 0.5 {
        (2.0 * u).ln()
    } else {
        -(2.0 - 2.0 * u).ln()
    }
}

/// The inputs of §5, float64 formula rounded to f32.
fn input(kind: &str, n: usize) -> Vec<f32> {
    let u = |i: usize| (i as f64 + 0.5) / n as f64;
    let f = |i: usize| -> f64 {
        match kind {
            "ramp" => i as f64,
            "constant" => 1.0,
            "gauss_quantiles" => inv_norm(u(i)),
            "cauchy_quantiles" => (PI * (u(i) - 0.5)).tan(),
            "sparse" => {
                if i % 20 == 0 {
                    1.0
                } else if i % 10 == 0 {
                    -1.0
                } else {
                    0.0
                }
            }
            "hash_uniform" => ((i as u64 * 2654435761) % (1 << 32)) as f64 / 4294967296.0 - 0.5,
            k if k.starts_with("laplace_quantiles") => laplace(u(i)),
            k => panic!("unknown vector kind {k}"),
        }
    };
    let mut x: Vec<f32> = (0..n).map(|i| f(i) as f32).collect();
    if kind.starts_with("laplace_quantiles with") {
        x[7] = f32::NAN;
        x[100] = f32::INFINITY;
        x[2000] = f32::NEG_INFINITY;
    }
    x
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-9 * want.abs().max(1e-300) || got == want
}

#[test]
fn indicators_and_theta_match_the_vectors() {
    let v = vectors();
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() >= 8);
    for c in cases {
        let (kind, name) = (c["kind"].as_str().unwrap(), c["name"].as_str().unwrap());
        let n = c["n"].as_u64().unwrap() as usize;
        let x = input(kind, n);
        // Through the full path: f32 bytes as an F32 tensor, sampled by name.
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let m = measure_tensor(name, GgmlType::F32, n as u64, &bytes).unwrap();
        assert_eq!(m.degenerate, c["degenerate"].as_bool().unwrap(), "{name}");
        assert!(close(m.theta, c["theta"].as_f64().unwrap()), "{name}: theta {} vs {}", m.theta, c["theta"]);
        for (got, key) in [(m.entropy, "entropy"), (m.kurtosis, "kurtosis"), (m.cv, "cv")] {
            match (got, c[key].as_f64()) {
                (Some(g), Some(w)) => assert!(close(g, w), "{name}: {key} {g} vs {w}"),
                (None, None) => {}
                (g, _) => panic!("{name}: {key} {g:?} vs {}", c[key]),
            }
        }
        if kind.contains("NaN") {
            assert_eq!(m.dropped, 3, "{name}: three non-finite values dropped");
        }
    }
}

#[test]
fn sampler_matches_the_vectors() {
    let v = vectors();
    for s in v["sampler"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        assert_eq!(fnv1a64(name.as_bytes()), s["fnv1a64"].as_u64().unwrap(), "{name}");
        let want: Vec<u64> = s["first_indices"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        let got = sample_indices(name, s["n_total"].as_u64().unwrap(), want.len());
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn measure_is_independent_of_how_values_are_read() {
    // The same F32 tensor measured from bytes and from an explicit value list agree exactly.
    let x = input("laplace_quantiles", 4096);
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let a = measure_tensor("t", GgmlType::F32, 4096, &bytes).unwrap();
    let mut r = ElementReader::new(GgmlType::F32, &bytes, 4096).unwrap();
    let b = measure_values((0..4096).map(|i| r.get(i).unwrap()).collect());
    assert_eq!(a, b);
}
