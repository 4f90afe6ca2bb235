use super::accept::{accepts, quantizable, tensor_type_arg, Refusal};
use super::size::{tensor_bytes, Account};
use super::solve::solve;
use super::{Curve, Error, Point};
use crate::ggml_type::GgmlType;
use alloc::string::ToString;
use alloc::vec::Vec;
use proptest::prelude::*;

/// Every combination of options: the least cost within the budget, if any fits.
fn brute(curves: &[Curve], budget: u64, account: Account) -> Option<f64> {
    let mut best: Option<f64> = None;
    let mut idx = alloc::vec![0usize; curves.len()];
    loop {
        let w: u64 = idx.iter().enumerate().map(|(i, &o)| account.charge(curves[i].options[o].bytes)).sum();
        let c: f64 = idx.iter().enumerate().map(|(i, &o)| curves[i].options[o].cost).sum();
        if w <= budget && best.is_none_or(|b| c < b) {
            best = Some(c);
        }
        let mut i = 0;
        loop {
            if i == idx.len() {
                return best;
            }
            idx[i] += 1;
            if idx[i] < curves[i].options.len() {
                break;
            }
            idx[i] = 0;
            i += 1;
        }
    }
}

fn curves_strategy() -> impl Strategy<Value = Vec<Curve>> {
    let point =
        (1u64..200, 0u32..1000).prop_map(|(bytes, c)| Point { ty: GgmlType::Q8_0, bytes, cost: f64::from(c) / 100.0 });
    prop::collection::vec(prop::collection::vec(point, 1..5), 1..6)
        .prop_map(|cs| cs.into_iter().enumerate().map(|(i, options)| Curve { name: i.to_string(), options }).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// Against every combination: within the budget, never better than the optimum, and
    /// the optimum never below the lower bound it reports; an error exactly when nothing fits.
    #[test]
    fn solve_against_brute_force(curves in curves_strategy(), budget in 0u64..900, file in any::<bool>()) {
        let account = if file { Account::File } else { Account::Data };
        let best = brute(&curves, budget, account);
        match (solve(&curves, budget, account), best) {
            (Ok(s), Some(best)) => {
                let charged: u64 = s.choices.iter().enumerate().map(|(i, &(o, _))| account.charge(curves[i].options[o].bytes)).sum();
                prop_assert_eq!(charged, s.charged);
                prop_assert!(charged <= budget);
                let cost: f64 = s.choices.iter().enumerate().map(|(i, &(o, _))| curves[i].options[o].cost).sum();
                prop_assert!((cost - s.cost).abs() < 1e-9);
                prop_assert!(s.cost >= best - 1e-9, "{} below the optimum {}", s.cost, best);
                prop_assert!(s.lower_bound <= best + 1e-9, "bound {} above the optimum {}", s.lower_bound, best);
            }
            (Err(Error::BudgetTooSmall { need, budget: b }), None) => {
                prop_assert!(need > b);
            }
            (r, best) => prop_assert!(false, "solve gave {:?}, brute force {:?}", r, best),
        }
    }
}

#[test]
fn convex_curves_are_solved_exactly_at_hull_points() {
    // Two curves whose every point is on its hull; a budget that lands on hull points.
    let curve = |name: &str, pts: &[(u64, f64)]| Curve {
        name: name.into(),
        options: pts.iter().map(|&(bytes, cost)| Point { ty: GgmlType::Q4_0, bytes, cost }).collect(),
    };
    let curves = [curve("a", &[(10, 8.0), (20, 2.0), (40, 1.0)]), curve("b", &[(10, 4.0), (20, 3.0), (40, 0.0)])];
    // a: slopes 0.6, 0.05; b: 0.1 then 0.15 is not convex: its hull is (10,4) -> (40,0) at
    // 4/30. At 60 bytes a's first and b's only segment fit, a's second (0.05) does not.
    let s = solve(&curves, 60, Account::Data).unwrap();
    assert_eq!(s.choices.iter().map(|c| c.0).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(s.charged, 60);
    assert!((s.cost - 2.0).abs() < 1e-12 && (s.lower_bound - 2.0).abs() < 1e-12);
    assert!((s.lambda - 4.0 / 30.0).abs() < 1e-12);
}

#[test]
fn smollm2_rows_decide_the_k_quants() {
    let arch = "llama";
    let (q, ffn_down) = ([576u64, 576], [1536u64, 576]);
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q2_K, GgmlType::IQ4_XS] {
        assert_eq!(
            accepts(arch, "blk.0.attn_q.weight", &q, GgmlType::F16, ty, false),
            Err(Refusal::Row { n_in: 576, block: 256 })
        );
        assert_eq!(accepts(arch, "blk.0.ffn_down.weight", &ffn_down, GgmlType::F16, ty, false), Ok(()));
    }
    assert_eq!(accepts(arch, "blk.0.attn_q.weight", &q, GgmlType::F16, GgmlType::Q4_0, false), Ok(()));
    assert_eq!(
        accepts(arch, "blk.0.attn_q.weight", &q, GgmlType::F16, GgmlType::Q1_0, false),
        Err(Refusal::Row { n_in: 576, block: 128 })
    );
    assert_eq!(
        accepts(arch, "blk.0.ffn_down.weight", &ffn_down, GgmlType::F16, GgmlType::IQ2_XXS, false),
        Err(Refusal::NeedsImatrix)
    );
    assert_eq!(accepts(arch, "blk.0.ffn_down.weight", &ffn_down, GgmlType::F16, GgmlType::IQ2_XXS, true), Ok(()));
    assert_eq!(
        accepts(arch, "blk.0.attn_norm.weight", &[576], GgmlType::F32, GgmlType::Q8_0, false),
        Err(Refusal::Copied)
    );
    assert_eq!(accepts(arch, "blk.0.attn_norm.weight", &[576], GgmlType::F32, GgmlType::F32, false), Ok(()));
    assert_eq!(
        accepts(arch, "blk.0.ffn_down.weight", &ffn_down, GgmlType::F16, GgmlType::Q8_K, false),
        Err(Refusal::NotWritable)
    );
    assert!(!quantizable(arch, "blk.0.ffn_gate_inp.weight", &[576, 8]));
    assert!(!quantizable(arch, "blk.0.attn_q.weight", &[576, 1]));
    assert!(quantizable(arch, "token_embd.weight", &[576, 49152]));
}

#[test]
fn sizes_are_rows_times_row_bytes() {
    assert_eq!(tensor_bytes(GgmlType::Q4_K, &[1536, 576]), Some(576 * 6 * 144));
    assert_eq!(tensor_bytes(GgmlType::Q4_K, &[576, 576]), None);
    assert_eq!(tensor_bytes(GgmlType::Q8_0, &[576, 576]), Some(576 * 18 * 34));
    assert_eq!(tensor_bytes(GgmlType::F16, &[576]), Some(1152));
    assert_eq!(Account::File.charge(1152), 1152);
    assert_eq!(Account::File.charge(1153), 1184);
    assert_eq!(Account::Data.charge(1153), 1153);
}

#[test]
fn tensor_type_args_are_anchored_and_escaped() {
    assert_eq!(tensor_type_arg("blk.0.attn_q.weight", GgmlType::Q4_K).unwrap(), r"^blk\.0\.attn_q\.weight$=q4_k");
    assert_eq!(tensor_type_arg("a+b(c)", GgmlType::F16).unwrap(), r"^a\+b\(c\)$=f16");
    assert!(tensor_type_arg("Blk.0", GgmlType::F16).is_err());
    assert!(tensor_type_arg("a b", GgmlType::F16).is_err());
    assert!(tensor_type_arg("a=b", GgmlType::F16).is_err());
}
