//! The prediction's pieces on small weights worked by hand.

use super::family::{Activation, FAMILIES};
use super::residual::{self, energies, Energies};
use super::*;
use crate::ggml_type::GgmlType;
use crate::imatrix::{Entry, Imatrix};
use crate::model::TensorEntry;
use crate::quantize::QuantImatrix;
use alloc::borrow::Cow;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

const LLAMA: Family = FAMILIES[0];

#[test]
fn kinds_come_from_block_weight_names_only() {
    assert_eq!(Kind::of("blk.12.ffn_down.weight"), Some((Kind::FfnDown, 12)));
    assert_eq!(Kind::of("blk.0.attn_output.weight"), Some((Kind::AttnOutput, 0)));
    for other in ["blk.0.attn_norm.weight", "blk.0.ffn_down_exps.weight", "output.weight", "blk.x.attn_q.weight"] {
        assert_eq!(Kind::of(other), None, "{other}");
    }
    assert_eq!(Kind::AttnV.weight(3), "blk.3.attn_v.weight");
    assert!(Kind::ALL.iter().enumerate().all(|(i, k)| k.index() == i));
}

#[test]
fn round_trips_refuse_what_organ_cannot_quantize() {
    let w: Vec<f32> = (0..128).map(|i| (i as f32 - 60.0) / 17.0).collect();
    let e = round_trip(GgmlType::IQ2_XXS, &w, 64, None).unwrap_err().to_string();
    assert!(e.contains("no quantizer for IQ2_XXS"), "{e}");
    let e = round_trip(GgmlType::Q8_0, &w, 48, None).unwrap_err().to_string();
    assert!(e.contains("rows of 48 values are not whole Q8_0 blocks of 32"), "{e}");
    // F32 is exact, Q8_0 close, Q4_0 further.
    let err = |ty| -> f64 {
        let q = round_trip(ty, &w, 64, None).unwrap();
        row_errors(&w, &q, 64, &[1.0; 64]).unwrap().iter().sum()
    };
    assert_eq!(err(GgmlType::F32), 0.0);
    let (e8, e4) = (err(GgmlType::Q8_0), err(GgmlType::Q4_0));
    assert!(0.0 < e8 && e8 * 50.0 < e4, "{e8} {e4}");
}

/// An importance matrix of one entry, `name`, of `n_mat` matrices of `n_in` columns: sums
/// of squares spread over five orders of magnitude, so that steering changes the blocks.
fn one_entry_imatrix(name: &str, n_in: usize, n_mat: usize) -> Imatrix {
    let sum2 = (0..n_in * n_mat).map(|j| 7.0 * libm::powf(10.0, (j * 7 % 11) as f32 / 2.0)).collect();
    let e = Entry { name: name.into(), n_in, counts: vec![7.0; n_mat], sum2 };
    Imatrix {
        datasets: Vec::new(),
        chunk_count: None,
        chunk_size: None,
        entries: [(name.to_string(), e)].into(),
        legacy: false,
    }
}

/// `dequantize(quantize_weighted(…))`: what `organ quantize --imatrix` writes for the
/// weight, read back.
fn written(ty: GgmlType, w: &[f32], qw: &[f32]) -> Vec<f32> {
    let mut bytes = Vec::new();
    crate::quant::quantize::quantize_weighted(ty, w, qw, &mut bytes).unwrap();
    crate::quant::dequantize(ty, &bytes).unwrap()
}

#[test]
fn round_trips_under_an_imatrix_are_what_the_file_holds() {
    // Two experts of 3 rows of 256: each expert's rows under its own row of weights.
    let (name, n_in) = ("blk.0.ffn_down_exps.weight", 256);
    let im = one_entry_imatrix(name, n_in, 2);
    let qw = QuantImatrix::new(&im, "", &[], &[]).weights(name, &[256, 3, 2]).unwrap().unwrap().to_vec();
    assert_eq!(im.quant_weights_of(name, &[256, 3, 2]).unwrap(), Some(qw.clone()));
    let w: Vec<f32> = (0..6 * n_in as u64).map(|i| crate::random::normal(5, i)).collect();
    for ty in [GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::Q8_0] {
        let q = round_trip(ty, &w, n_in, Some(&qw)).unwrap();
        let mut want = written(ty, &w[..3 * n_in], &qw[..n_in]);
        want.extend(written(ty, &w[3 * n_in..], &qw[n_in..]));
        assert_eq!(q, want, "{ty}");
        // Q8_0's quantizer takes no weights; the others are steered.
        let plain = round_trip(ty, &w, n_in, None).unwrap();
        assert_eq!(q == plain, ty == GgmlType::Q8_0, "{ty}");
    }
    assert!(round_trip(GgmlType::Q4_0, &w, n_in, Some(&qw[..3 * n_in / 2])).is_err());
}

#[test]
fn predictions_round_trip_as_the_file_is_written() {
    // A weight of 4 rows of 256 in block 0, its columns weighted by the matrix (or not).
    let (name, n_in) = ("blk.0.attn_q.weight", 256);
    let im = one_entry_imatrix(name, n_in, 1);
    let w: Vec<f32> = (0..4 * n_in as u64).map(|i| crate::random::normal(9, i)).collect();
    let t = TensorEntry {
        name: name.into(),
        ty: GgmlType::F32,
        dims: vec![256, 4],
        n_elements: 1024,
        n_bytes: 4096,
        file: 0,
        offset: 0,
    };
    let cols = im.column_weights(name, &t.dims).unwrap();
    let mut block_cols: [Vec<f32>; 7] = Default::default();
    block_cols[0] = cols.clone();
    let layer =
        residual::Layer { row_weights: core::array::from_fn(|_| vec![1.0; 4]), attn_energy: 1.0, ffn_energy: 1.0 };
    let blocks = vec![steps::Block { layer, cols: block_cols, scales: Default::default(), stream: (1.0, 1.0) }];
    let stream = steps::Stream { blocks, others: Vec::new() };
    let job = steps::RoundTripJob { tensor: 0, layer: 0, by: steps::By::Residual(Kind::AttnQ) };
    let types = vec![GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q8_0];
    let shape = Shape { n_layer: 1, n_head: 1, n_head_kv: 1, family: LLAMA };
    for imatrix in [Some(&im), None] {
        let p = Predictor {
            residual: Some(shape),
            others: Vec::new(),
            types: types.clone(),
            calibration: Calibration::IMATRIX,
            imatrix: imatrix.map(Cow::Borrowed),
        };
        let got = p.predict(&stream, &job, &t, &w).unwrap();
        for (o, &ty) in got.options.iter().zip(&types) {
            let q = match imatrix {
                Some(_) => written(ty, &w, &im.quant_weights_of(name, &t.dims).unwrap().unwrap()),
                None => round_trip(ty, &w, n_in, None).unwrap(),
            };
            let e: f64 = row_errors(&w, &q, n_in, &cols).unwrap().iter().sum();
            assert_eq!((o.ty, o.weighted_error), (ty, e), "{ty}, imatrix {}", imatrix.is_some());
        }
    }
}

#[test]
fn row_errors_weight_columns_per_matrix() {
    // Two matrices (experts) of one row of 2 columns each.
    let w = [1.0, 2.0, 3.0, 4.0];
    let q = [2.0, 2.0, 3.0, 6.0];
    assert_eq!(row_errors(&w, &q, 2, &[3.0, 5.0]).unwrap(), [3.0, 20.0]);
    assert_eq!(row_errors(&w, &q, 2, &[3.0, 5.0, 7.0, 0.5]).unwrap(), [3.0, 2.0]);
    assert!(row_errors(&w, &q, 2, &[1.0; 3]).is_err());
    assert!(row_errors(&w, &q[..3], 2, &[1.0; 2]).is_err());
}

#[test]
fn energies_and_the_block_model_by_hand() {
    // rows [1, 2], [3, 0] weighted by columns [2, 1].
    let e = energies(&[1.0, 2.0, 3.0, 0.0], 2, Some(&[2.0, 1.0])).unwrap();
    assert_eq!(e, Energies { rows: vec![6.0, 18.0], cols: vec![10.0, 4.0] });
    assert!(energies(&[1.0; 3], 2, None).is_err());
    // 2 heads of dim 1 sharing one KV head; d_model 2; ff 1.
    let shape = Shape { n_layer: 1, n_head: 2, n_head_kv: 1, family: LLAMA };
    let q = Energies { rows: vec![2.0, 3.0], cols: vec![0.0; 2] };
    let k = Energies { rows: vec![5.0], cols: vec![0.0; 2] };
    let v = Energies { rows: vec![7.0], cols: vec![0.0; 2] };
    let o = Energies { rows: vec![0.0; 2], cols: vec![11.0, 13.0] };
    let gate = Energies { rows: vec![0.0], cols: vec![0.0; 2] };
    let up = Energies { rows: vec![4.0], cols: vec![0.0; 2] };
    let down = Energies { rows: vec![0.0; 2], cols: vec![17.0] };
    let o_cols = residual::attn_output_columns(&shape, &v).unwrap();
    assert_eq!(o_cols, [7.0, 7.0]);
    let d_cols = residual::ffn_down_columns(Activation::Silu, &gate, &up).unwrap();
    assert_eq!(d_cols, [0.0]); // silu of a gate that is always 0
    let l = residual::layer(&shape, [&q, &k, &v, &o, &gate, &up, &down], &o_cols, &d_cols).unwrap();
    let (oh0, oh1) = (11.0 * 7.0, 13.0 * 7.0);
    assert_eq!(l.row_weights[0], [5.0 * oh0, 5.0 * oh1]);
    assert_eq!(l.row_weights[1], [2.0 * oh0 + 3.0 * oh1]);
    assert_eq!(l.row_weights[2], [11.0 + 13.0]);
    assert_eq!(l.row_weights[3], [1.0, 1.0]);
    // silu'(0) = 1/2, silu(0) = 0.
    assert!((l.row_weights[4][0] - 17.0 * 0.25 * 4.0).abs() < 1e-12);
    assert_eq!(l.row_weights[5], [0.0]);
    assert_eq!((l.attn_energy, l.ffn_energy), (oh0 + oh1, 0.0));
    let h = residual::stream_energies(2.0, &[l.clone(), l.clone()]);
    assert_eq!(h, [(2.0, 2.0 + oh0 + oh1), (2.0 + oh0 + oh1, 2.0 + 2.0 * (oh0 + oh1))]);
    assert_eq!(residual::stream_at(Kind::FfnUp, h[0]), h[0].1);
    assert_eq!(residual::carried(&[1.0, 2.0], &[3.0, 4.0]).unwrap(), 11.0);
    // A shape that does not fit is refused.
    let bad = Shape { n_head: 3, ..shape };
    assert!(residual::layer(&bad, [&q, &k, &v, &o, &gate, &up, &down], &o_cols, &d_cols).is_err());
    assert_eq!(residual::embedding_energy(&[1.0, 2.0, 3.0, 4.0], 2), 15.0);
}

#[test]
fn gaussian_expectations_of_silu() {
    // silu(g) → relu(g) for a wide gate: E[relu²] = var/2; silu' → step: E = 1/2.
    let wide = residual::gauss_for_tests(Activation::Silu, 1e4, false);
    assert!((wide / 5e3 - 1.0).abs() < 0.01, "{wide}");
    assert!((residual::gauss_for_tests(Activation::Silu, 1e4, true) - 0.5).abs() < 0.01);
    // A narrow gate: silu(g) ≈ g/2, silu'(g) ≈ 1/2.
    assert!((residual::gauss_for_tests(Activation::Silu, 1e-6, false) / 0.25e-6 - 1.0).abs() < 1e-3);
    assert!((residual::gauss_for_tests(Activation::Silu, 1e-6, true) - 0.25).abs() < 1e-6);
}

#[test]
fn calibration_recovers_its_own_predictions_and_ranks_them() {
    let truth = Calibration { exponent: 0.4, log_factor: [-2.0, -1.0, 0.0, 0.5, 1.0, 1.5, 2.0] };
    let points: Vec<calibrate::Point> = (0..70)
        .map(|i| {
            let k = Kind::ALL[i % 7];
            let rel = 0.01 * (1.0 + (i * 37 % 70) as f64);
            (k, rel, truth.predict(k, rel))
        })
        .collect();
    let fit = Calibration::fit(&points, None).unwrap();
    assert!((fit.exponent - 0.4).abs() < 1e-9, "{fit:?}");
    assert!(fit.log_factor.iter().zip(truth.log_factor).all(|(a, b)| (a - b).abs() < 1e-9));
    let fixed = Calibration::fit(&points, Some(1.0)).unwrap();
    assert_eq!(fixed.exponent, 1.0);
    let a = agreement(&points.iter().map(|&(k, r, y)| (k, fit.predict(k, r), y)).collect::<Vec<_>>());
    assert!((a.overall - 1.0).abs() < 1e-12 && (a.within_mean - 1.0).abs() < 1e-12, "{a:?}");
    assert_eq!(a.within.len(), 7);
    assert!(Calibration::fit(&[(Kind::AttnQ, 0.0, 1.0)], None).is_none());
    // Ties take their mean rank: ranks [0, 1.5, 1.5, 3] against [0, 1, 2, 3].
    let r = spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 2.0, 3.0, 4.0]);
    assert!((r - 4.5 / libm::sqrt(4.5 * 5.0)).abs() < 1e-12, "{r}");
    assert!(spearman(&[1.0], &[1.0]).is_nan());
}

#[test]
fn large_weights_are_predicted_from_an_even_sample_of_their_rows() {
    // SmolLM2's largest block weight is whole; a 7B's ffn_up keeps ⌈2^21 / 4096⌉ = 512 rows.
    assert_eq!(sampled_rows(576, 1536), (0..576).collect::<Vec<_>>());
    let rows = sampled_rows(11008, 4096);
    assert_eq!(rows.len(), 512);
    assert!(rows.windows(2).all(|w| w[0] < w[1]) && rows[0] == 10 && rows[511] == 10997, "{rows:?}");
    // One row longer than the budget is still one row; nothing of nothing.
    assert_eq!(sampled_rows(3, ROUND_TRIP_VALUES + 256), vec![1]);
    assert!(sampled_rows(0, 4096).is_empty());

    // Two experts of 4 rows of 256, steered by their own weights: each picked row's error is
    // the one the whole weight's round trip gives it, times rows / picked.
    let (name, n_in) = ("blk.0.ffn_down_exps.weight", 256);
    let im = one_entry_imatrix(name, n_in, 2);
    let qw = im.quant_weights_of(name, &[256, 4, 2]).unwrap().unwrap();
    let cols = im.column_weights(name, &[256, 4, 2]).unwrap();
    let w: Vec<f32> = (0..8 * n_in as u64).map(|i| crate::random::normal(11, i)).collect();
    let picked = [1, 3, 4, 6];
    for ty in [GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::IQ4_NL] {
        for qw in [Some(&qw[..]), None] {
            let whole = round_trip(ty, &w, n_in, qw).and_then(|q| row_errors(&w, &q, n_in, &cols)).unwrap();
            let got = sampled_row_errors(ty, &w, n_in, qw, &cols, &picked).unwrap();
            let want: Vec<f64> = (0..8).map(|r| if picked.contains(&r) { 2.0 * whole[r] } else { 0.0 }).collect();
            assert_eq!(got, want, "{ty}");
            // Every row picked: the whole weight's errors, unscaled.
            let all: Vec<usize> = (0..8).collect();
            assert_eq!(sampled_row_errors(ty, &w, n_in, qw, &cols, &all).unwrap(), whole, "{ty}");
        }
    }
    for bad in [&[3, 1][..], &[2, 8], &[]] {
        let e = sampled_row_errors(GgmlType::Q4_0, &w, n_in, None, &cols, bad).unwrap_err().to_string();
        assert!(e.contains("sampled rows"), "{bad:?}: {e}");
    }
}

#[test]
fn a_sample_of_rows_estimates_the_whole_weights_error() {
    // 600 rows of 4096 (2.4 M values): 512 rows predict the sum within a percent, for rows
    // whose spread differs (every tenth row three times the others).
    let (rows, n_in) = (600usize, 4096usize);
    let w: Vec<f32> = (0..(rows * n_in) as u64)
        .map(|i| crate::random::normal(3, i) * if (i as usize / n_in) % 10 == 0 { 3.0 } else { 1.0 })
        .collect();
    let picked = sampled_rows(rows, n_in);
    assert_eq!(picked.len(), 512);
    let cols = vec![1.0; n_in];
    let whole: f64 =
        round_trip(GgmlType::Q4_0, &w, n_in, None).and_then(|q| row_errors(&w, &q, n_in, &cols)).unwrap().iter().sum();
    let est: f64 = sampled_row_errors(GgmlType::Q4_0, &w, n_in, None, &cols, &picked).unwrap().iter().sum();
    assert!((est / whole - 1.0).abs() < 0.01, "{est} against {whole}");
}
