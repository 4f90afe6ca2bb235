//! Tests of the measure's entry points (zmeasure/mod.rs): sigma and exact modes, and the
//! compact bitmap path.

mod sigma_tests {
    use super::super::*;

    fn tensor(ty: GgmlType, n: u64) -> Vec<u8> {
        random_tensor(ty, n, 0x2545_F491_4F6C_DD1D)
    }

    #[test]
    fn population_std_is_numpys() {
        assert_eq!(population_std(&[]), 0.0);
        assert_eq!(population_std(&[3.0; 8]), 0.0);
        // np.std([1, 2, 3, 4, 5, 6, 7, 8]) = sqrt(5.25)
        assert_eq!(population_std(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]), libm::sqrt(5.25));
        assert_eq!(population_std(&[2.0, 4.0]), 1.0);
    }

    /// Draw k is the measure of the tensor under the name `NAME@k`, whether the tensor is
    /// dequantized whole (Q8_0, small) or element by element (Q4_K, large).
    #[test]
    fn each_draw_is_the_tensor_measured_under_its_seed_name() {
        for (ty, n) in [(GgmlType::Q8_0, 32 * 8_000u64), (GgmlType::Q4_K, 256 * 40_000)] {
            let data = tensor(ty, n);
            let name = "blk.2.ffn_down.weight";
            let (m, draws) = measure_tensor_draws(name, ty, n, &data).unwrap();
            assert_eq!(m, measure_tensor(name, ty, n, &data).unwrap(), "{ty:?}");
            let draws = draws.expect("a sampled tensor has draws");
            for (k, d) in (1..).zip(draws) {
                let want = measure_tensor(&draw_name(name, k), ty, n, &data).unwrap().theta;
                assert_eq!(d.to_bits(), want.to_bits(), "{ty:?} draw {k}");
            }
            assert!(population_std(&draws) > 0.0, "{ty:?}: the draws differ");
        }
    }

    #[test]
    fn unsampled_tensors_have_no_draws_and_exact_uses_every_value() {
        let (ty, n) = (GgmlType::F16, 50_000);
        let data = tensor(ty, n);
        let (m, draws) = measure_tensor_draws("t", ty, n, &data).unwrap();
        assert!(draws.is_none());
        assert_eq!(m, measure_tensor_exact(ty, n, &data).unwrap());
        let (ty, n) = (GgmlType::Q8_0, 32 * 10_000);
        let data = tensor(ty, n);
        let exact = measure_tensor_exact(ty, n, &data).unwrap();
        assert_eq!(exact.sampled, n);
        assert_eq!(exact, measure_values(crate::quant::dequantize(ty, &data).unwrap()));
        assert!(measure_tensor_exact(ty, n, &data[1..]).is_err());
        assert_eq!(measure_tensor_in(Mode::Exact, "t", ty, n, &data).unwrap(), (exact, None));
        assert_eq!(Mode::Exact.label(), "z1-exact");
        assert_eq!(Mode::Sigma.label(), "z1");
    }
}

mod compact_tests {
    use super::super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_bitmap_gives_what_sorting_gives(
            ix in proptest::collection::vec(0u64..5_000_000, 1..2000),
            bs in prop_oneof![Just(1u64), Just(32), Just(256)],
        ) {
            let p = SamplePlan::Sample(ix);
            prop_assert_eq!(p.compact(bs), p.compact_by_sorting(bs));
        }
    }

    proptest! {
        /// The browser's entry point gives the measure of [`measure_values`] and the
        /// finite values, sorted.
        #[test]
        fn measure_and_sorted_values_together_as_apart(
            bits in proptest::collection::vec(any::<u32>(), 0..3000),
            levels in 1u32..50,
        ) {
            let x: Vec<f32> = bits
                .iter()
                .map(|&b| if b % 97 == 0 { f32::from_bits(b) } else { (b % levels) as f32 * 0.01 - 0.2 })
                .collect();
            let (m, sorted) = measure_values_sorted(x.clone());
            prop_assert_eq!(m, measure_values(x.clone()));
            let mut finite: Vec<f32> = x.into_iter().filter(|v| v.is_finite()).collect();
            finite.sort_by(f32::total_cmp);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&sorted), bits(&finite));
        }
    }

    /// Both ways of drawing the sample give the same bits, for every type.
    #[test]
    fn whole_tensor_and_single_elements_sample_alike() {
        for &ty in GgmlType::ALL.iter().filter(|t| t.can_dequantize()) {
            let n = 256 * 800;
            let data = random_tensor(ty, n, 0x2545_F491_4F6C_DD1D);
            let whole = sample_values_by("blk.1.ffn_gate.weight", ty, n, &data, true).unwrap();
            let single = sample_values_by("blk.1.ffn_gate.weight", ty, n, &data, false).unwrap();
            assert_eq!(whole.len(), SAMPLE_SIZE, "{ty:?}");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&whole), bits(&single), "{ty:?}");
        }
    }

    #[test]
    fn whole_tensors_and_real_samples_compact_alike() {
        for (name, n, bs) in
            [("a", 1000, 32), ("blk.0.ffn_up.weight", 884_736, 32), ("token_embd.weight", 28_311_552, 256)]
        {
            let p = SamplePlan::new(name, n);
            assert_eq!(p.compact(bs), p.compact_by_sorting(bs), "{name}");
        }
    }
}
