use super::*;
use crate::zmeasure::{measure_tensor, measure_values, random_tensor};
use alloc::string::ToString;
use proptest::prelude::*;

fn entry(name: &str, ty: GgmlType, dims: &[u64]) -> TensorEntry {
    let n: u64 = dims.iter().product();
    let n_bytes = n / ty.block_size() as u64 * ty.type_size() as u64;
    TensorEntry { name: name.into(), ty, dims: dims.to_vec(), n_elements: n, n_bytes, file: 0, offset: 0 }
}

/// The definition, O(E²): the lowest earlier expert with equal bytes.
fn naive_duplicates(layout: &ExpertLayout, data: &[u8]) -> Vec<Option<u64>> {
    let s = |e: u64| layout.slice(data, e).unwrap();
    (0..layout.count).map(|e| (0..e).find(|&f| s(f) == s(e))).collect()
}

proptest! {
    /// Whatever the chunk size, the search finds what comparing every pair finds.
    #[test]
    fn duplicates_are_what_comparing_every_pair_finds(
        kinds in proptest::collection::vec(0u8..4, 1..12),
        bytes in 1u64..40,
        chunk in 1u64..50,
        late in any::<bool>(),
    ) {
        // Experts of kind k are equal; kind 0's and kind 1's differ only in their last byte
        // (with `late`), so the search must read to the end.
        let layout = ExpertLayout { count: kinds.len() as u64, elements: bytes, bytes };
        let mut data = Vec::new();
        for &k in &kinds {
            let mut x = vec![if late { 7 } else { k }; bytes as usize];
            x[bytes as usize - 1] = k;
            data.extend(x);
        }
        let want = naive_duplicates(&layout, &data);
        let mut s = DuplicateSearch::new(&layout, chunk);
        while let Some((r, experts)) = s.next() {
            prop_assert!(r.end <= bytes && r.end - r.start <= chunk);
            let chunks: Vec<&[u8]> = experts
                .iter()
                .map(|&e| &data[(e * bytes + r.start) as usize..(e * bytes + r.end) as usize])
                .collect();
            s.feed(&chunks).unwrap();
        }
        prop_assert_eq!(s.finish(), want.clone());
        prop_assert_eq!(duplicates_in(&layout, &data).unwrap(), want);
    }
}

#[test]
fn experts_that_differ_early_are_read_once() {
    let layout = ExpertLayout { count: 4, elements: 1000, bytes: 1000 };
    let mut data = vec![0u8; 4000];
    data[1000] = 1; // expert 1 differs from the others in its first byte
    let mut s = DuplicateSearch::new(&layout, 10);
    let mut read = 0;
    while let Some((r, experts)) = s.next() {
        read += (r.end - r.start) * experts.len() as u64;
        let chunks: Vec<&[u8]> =
            experts.iter().map(|&e| &data[(e * 1000 + r.start) as usize..(e * 1000 + r.end) as usize]).collect();
        s.feed(&chunks).unwrap();
    }
    assert_eq!(s.finish(), [None, None, Some(0), Some(0)]);
    assert_eq!(read, 10 + 3 * 1000, "expert 1 left after its first chunk");
    // Wrong chunks are errors, not panics.
    let mut s = DuplicateSearch::new(&layout, 10);
    assert!(s.feed(&[&data[..10]]).is_err());
    assert!(s.feed(&[&data[..9]; 4]).is_err());
    assert!(duplicates_in(&layout, &data[1..]).is_err());
    // One expert, or experts of no bytes.
    assert_eq!(duplicates_in(&ExpertLayout { count: 1, elements: 8, bytes: 8 }, &[0; 8]).unwrap(), [None]);
    assert_eq!(
        duplicates_in(&ExpertLayout { count: 3, elements: 0, bytes: 0 }, &[]).unwrap(),
        [None, Some(0), Some(0)]
    );
}

#[test]
fn outliers_follow_the_median_and_mad_rule() {
    assert_eq!(median(&[]), 0.0);
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    // m = 10, deviations 0, 1, 1, 0, 3.1 → MAD = 1: 3.1 > 3 is an outlier.
    assert_eq!(outliers(&[10.0, 11.0, 9.0, 10.0, 13.1]), [false, false, false, false, true]);
    // Exactly 3 × MAD is not (strictly greater).
    assert_eq!(outliers(&[10.0, 11.0, 9.0, 10.0, 13.0]), [false; 5]);
    // MAD = 0 (most experts equal): no outliers, however far one lies.
    assert_eq!(outliers(&[5.0, 5.0, 5.0, 80.0]), [false; 4]);
    assert!(outliers(&[]).is_empty());
}

#[test]
fn rows_carry_flags_and_sigma() {
    let m = |theta: f64| Measurement {
        theta,
        entropy: None,
        kurtosis: None,
        cv: None,
        degenerate: false,
        sampled: 1,
        dropped: 0,
    };
    let measured =
        [(m(10.0), None), (m(11.0), Some([1.0, 3.0, 1.0, 3.0, 1.0, 3.0, 1.0, 3.0])), (m(9.0), None), (m(40.0), None)];
    let rows = expert_rows(&measured, &[None, None, Some(0), None], true);
    assert_eq!(rows.iter().map(|r| r.outlier).collect::<Vec<_>>(), [false, false, false, true]);
    assert_eq!(rows[1].sigma, Some(1.0));
    assert_eq!(rows[0].sigma, Some(0.0), "measured on every value");
    assert_eq!(rows[2].duplicate_of, Some(0));
    assert_eq!(expert_rows(&measured, &[], false)[1].sigma, None);
}

/// Expert e is measured as a tensor of its own named `NAME#e`; reading its plan gives the
/// same measure as the memory map, in every mode.
#[test]
fn an_expert_is_its_slice_measured_under_its_own_name() {
    let (ty, dims) = (GgmlType::Q4_1, [512u64, 256, 3]);
    let t = entry("blk.1.ffn_up_exps.weight", ty, &dims);
    let layout = ExpertLayout::required(&t).unwrap().unwrap();
    assert_eq!((layout.count, layout.elements), (3, 512 * 256));
    let data = random_tensor(ty, t.n_elements, 0x1234_5678);
    for mode in [Mode::Sampled, Mode::Sigma, Mode::Exact] {
        for e in 0..3 {
            let (m, draws) = measure_expert(mode, &t.name, ty, &layout, e, &data).unwrap();
            let slice = layout.slice(&data, e).unwrap();
            let name = format!("blk.1.ffn_up_exps.weight#{e}");
            if mode != Mode::Exact {
                assert_eq!(m, measure_tensor(&name, ty, layout.elements, slice).unwrap());
            }
            assert_eq!(draws.is_some(), mode == Mode::Sigma);
            for k in 0..=if mode == Mode::Sigma { crate::zmeasure::DRAWS } else { 0 } {
                let (plan, at) = expert_plan(mode, &t.name, ty, &layout, e, k, 4096, 1 << 16).unwrap();
                let mut buf = plan.buffer();
                for (i, r) in plan.ranges.iter().enumerate() {
                    let s = (at + r.offset) as usize;
                    plan.fill(i, &data[s..s + r.len as usize], &mut buf).unwrap();
                }
                let got = measure_values(plan.values(&buf).unwrap());
                let want = if k == 0 { m.theta } else { draws.unwrap()[k - 1] };
                assert_eq!(got.theta.to_bits(), want.to_bits(), "{mode:?} expert {e} draw {k}");
            }
        }
    }
    assert!(layout.slice(&data, 3).is_err());
}

#[test]
fn a_tensor_named_as_experts_that_is_not_one_is_an_error_when_experts_are_asked_for() {
    let two = entry("blk.0.ffn_up_exps.weight", GgmlType::F32, &[8, 8]);
    assert_eq!(ExpertLayout::of(&two).unwrap(), None);
    let msg = ExpertLayout::required(&two).unwrap_err().to_string();
    assert!(msg.contains("blk.0.ffn_up_exps.weight") && msg.contains("2 dims"), "{msg}");
    let none = entry("blk.0.ffn_up_exps.weight", GgmlType::F32, &[8, 8, 0]);
    assert!(ExpertLayout::required(&none).unwrap_err().to_string().contains("no experts"));
    let many = entry("blk.0.ffn_up_exps.weight", GgmlType::F32, &[1, 1, crate::limits::MAX_EXPERTS + 1]);
    assert!(ExpertLayout::required(&many).unwrap_err().to_string().contains("limit"));
    assert_eq!(ExpertLayout::required(&entry("blk.0.ffn_up.weight", GgmlType::F32, &[8, 8])).unwrap(), None);
}

#[test]
fn a_display_marks_an_outlier_only_beyond_the_noise_and_never_a_copy() {
    let x = |e: u64, theta: f64, sigma: Option<f64>, dup: Option<u64>| ExpertTheta {
        expert: e,
        theta,
        degenerate: false,
        sigma,
        outlier: false,
        duplicate_of: dup,
        standing: Standing::Typical,
    };
    let flag = |mut rows: Vec<ExpertTheta>| {
        let out = outliers(&rows.iter().map(|r| r.theta).collect::<Vec<_>>());
        for (r, o) in rows.iter_mut().zip(out) {
            r.outlier = o;
        }
        rows
    };
    use Standing::*;
    // Median 10, MAD 1: expert 4 at 20 is a §6 outlier.
    let thetas = [10.0, 11.0, 9.0, 10.0, 20.0];
    let rows = |sigma: Option<f64>| flag((0..5).map(|e| x(e, thetas[e as usize], sigma, None)).collect());
    // Measured on every value: no noise, the §6 outlier stands.
    assert_eq!(standings(&rows(None), false), [Typical, Typical, Typical, Typical, Outlier]);
    // Sampled without σ: unknown.
    assert_eq!(standings(&rows(None), true)[4], Unconfirmed);
    // σ 4°: 10° from the median is beyond 2σ = 8°; σ 5°: 10° is not beyond 10°.
    assert_eq!(standings(&rows(Some(4.0)), true)[4], Outlier);
    assert_eq!(standings(&rows(Some(5.0)), true)[4], WithinNoise);
    // Its own σ small, its tensor's typical σ large: the larger counts.
    let mut r = rows(Some(6.0));
    r[4].sigma = Some(0.5);
    assert_eq!(standings(&r, true)[4], WithinNoise);
    // The MoE: experts 1-3 byte-identical to expert 0, θ spread by sampling alone.
    // However far a copy lies, it is never an outlier, nor is the expert it copies.
    let moe = flag(vec![
        x(0, 47.1, None, None),
        x(1, 80.4, None, Some(0)),
        x(2, 48.0, None, Some(0)),
        x(3, 47.5, None, Some(0)),
        x(4, 47.3, None, None),
    ]);
    assert!(moe[1].outlier, "§6's figure is kept");
    assert_eq!(standings(&moe, false), [Copy, Copy, Copy, Copy, Typical]);
    assert_eq!(standings(&moe, true), [Copy, Copy, Copy, Copy, Typical]);
    assert!(standings(&moe, true).iter().all(|s| !s.marked()));
    // set_standings: the JSON's `standing`, from the tensor's own sampling.
    let mut set = moe.clone();
    set_standings(&mut set, 5 * 200_000, 100_000);
    assert_eq!(set.iter().map(|x| x.standing).collect::<Vec<_>>(), standings(&moe, true));
    let json = serde_json::to_value(&set[1]).unwrap();
    assert_eq!((json["standing"].as_str(), json["outlier"].as_bool()), (Some("copy"), Some(true)));
    let mut un = rows(None);
    set_standings(&mut un, 5 * 200_000, 100_000);
    assert_eq!(serde_json::to_value(&un[4]).unwrap()["standing"], "noise_not_measured");
    for s in [Typical, Copy, WithinNoise, Outlier, Unconfirmed] {
        assert_eq!(serde_json::to_value(s).unwrap(), s.name(), "the CSV's word is the JSON's");
    }
    assert!(standings(&[], true).is_empty());
}

#[test]
fn slices_are_sampled_when_the_tensor_was_and_each_is_large() {
    let n = 8 * 200_000;
    assert!(slices_sampled(n, 100_000, 8));
    // exact mode read every value.
    assert!(!slices_sampled(n, n, 8));
    // Slices of 100 000 elements are measured whole.
    assert!(!slices_sampled(8 * 100_000, 100_000, 8));
}
