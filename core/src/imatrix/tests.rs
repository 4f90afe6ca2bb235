//! The importance matrix read from synthetic files laid out as llama-imatrix writes them,
//! and refused where a shape, type, count or value is wrong.

use super::*;
use crate::gguf::writer::{plan, TensorSpec};

/// One tensor of a synthetic imatrix: name, dims, type and its f32 values.
type T<'a> = (&'a str, &'a [u64], GgmlType, &'a [f32]);

fn file(kind: &str, tensors: &[T<'_>]) -> Vec<u8> {
    let mut datasets = Vec::new();
    crate::gguf::MetaArray::encode_strings(&["cal.txt"], &mut datasets).unwrap();
    let kvs = [
        ("general.type", MetaValue::Str(kind.as_bytes())),
        (
            "imatrix.datasets",
            MetaValue::Array(crate::gguf::MetaArray::from_raw(ValueType::String, 1, &datasets).unwrap()),
        ),
        ("imatrix.chunk_count", MetaValue::U32(8)),
        ("imatrix.chunk_size", MetaValue::U32(128)),
    ];
    let specs: Vec<TensorSpec<'_>> = tensors.iter().map(|t| TensorSpec { name: t.0, dims: t.1, ty: t.2 }).collect();
    let layout = plan(3, &kvs, &specs).unwrap();
    let mut b = layout.header.clone();
    b.resize(layout.file_len as usize, 0);
    for (t, (off, _)) in tensors.iter().zip(&layout.tensors) {
        let at = layout.header.len() + *off as usize;
        for (i, v) in t.3.iter().enumerate() {
            b[at + 4 * i..at + 4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
    b
}

const F: GgmlType = GgmlType::F32;

#[test]
fn reads_sums_counts_and_metadata_into_mean_squares() {
    let b = file(
        "imatrix",
        &[
            ("w.in_sum2", &[4, 1], F, &[8.0, 4.0, 0.0, 2.0]),
            ("w.counts", &[1, 1], F, &[4.0]),
            ("w.stats", &[12], F, &[0.0; 12]),
            ("e.in_sum2", &[2, 3], F, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            ("e.counts", &[1, 3], F, &[1.0, 2.0, 0.0]),
        ],
    );
    let m = Imatrix::parse(&b).unwrap();
    assert_eq!(m.datasets, ["cal.txt"]);
    assert_eq!((m.chunk_count, m.chunk_size), (Some(8), Some(128)));
    assert_eq!(m.entries.len(), 2);
    assert_eq!(m.column_weights("w", &[4, 16]).unwrap(), [2.0, 1.0, 0.0, 0.5]);
    let e = m.get("e").unwrap();
    assert_eq!((e.n_in, e.n_mat()), (2, 3));
    assert_eq!(e.mean_squares(1).unwrap(), [1.5, 2.0]);
    // The third expert saw no token: no mean square, and the whole weight is refused.
    assert_eq!(e.mean_squares(2), None);
    let err = m.column_weights("e", &[2, 5, 3]).unwrap_err().to_string();
    assert!(err.contains("matrix 2 saw no token"), "{err}");
    let err = m.column_weights("w", &[8, 16]).unwrap_err().to_string();
    assert!(err.contains("4 columns × 1 matrices, but the weight has 8 × 1"), "{err}");
    assert!(m.column_weights("x", &[4]).unwrap_err().to_string().contains("no entry for x"));
}

#[test]
fn reads_the_legacy_format_as_llama_quantize_does() {
    use super::legacy::write;
    use crate::quantize::QuantImatrix;
    let dat = write(
        &[("w", 4, &[4.0, 8.0]), ("e\0junk", 0, &[3.0]), ("w", 2, &[2.0, 6.0, 1.0])],
        Some((10, "calibration.txt")),
    );
    let m = Imatrix::parse(&dat).unwrap();
    assert!(m.legacy);
    assert_eq!((m.chunk_count, m.datasets.as_slice()), (Some(10), &["calibration.txt".to_string()][..]));
    // A repeated name replaces the first; a name ends at its first NUL, as a C string.
    let w = m.get("w").unwrap();
    assert_eq!((w.n_in, w.counts.as_slice(), w.sum2.as_slice()), (3, &[2.0][..], &[2.0, 6.0, 1.0][..]));
    assert_eq!(w.mean_squares(0).unwrap(), [1.0, 3.0, 0.5]);
    // llama-quantize's weights: the sums over ncall, or as they are when it is not positive.
    let q = QuantImatrix::new(&m, "x.dat", &[], &[]);
    assert_eq!(q.entries["w"], [1.0, 3.0, 0.5]);
    assert_eq!(q.entries["e"], [3.0]);
    assert_eq!(q.chunk_count, 10);
    // The trailer is optional, and only what there is of it is taken.
    let bare = write(&[("w", 1, &[1.0])], None);
    assert_eq!(Imatrix::parse(&bare).unwrap().chunk_count, None);
    let mut cut = bare.clone();
    cut.extend_from_slice(&[7, 0]);
    assert_eq!(Imatrix::parse(&cut).unwrap().chunk_count, Some(7));
    let whole = write(&[("w", 1, &[1.0])], Some((3, "abc")));
    let m = Imatrix::parse(&whole[..whole.len() - 1]).unwrap();
    assert_eq!((m.chunk_count, m.datasets.len()), (Some(3), 0));
}

#[test]
fn refuses_broken_legacy_files_models_and_broken_entries() {
    let err = |b: &[u8]| Imatrix::parse(b).unwrap_err().to_string();
    let e = err(&[1u8, 0, 0, 0, 1, 0, 0, 0, b'w']);
    assert!(e.contains("legacy .dat format: entry 0 of 1: cut short before its call count"), "{e}");
    assert!(err(&[0u8, 0, 0, 0]).contains("no entry count ≥ 1"));
    assert!(err(&[1u8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]).contains("no name length ≥ 0"));
    assert!(err(&[1u8, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f]).contains("its name of 2147483647 bytes runs past the end"));
    let mut big = super::legacy::write(&[("w", 1, &[1.0])], None);
    big[13..17].copy_from_slice(&i32::MAX.to_le_bytes());
    assert!(err(&big).contains("w: its 2147483647 values run past the end"), "{}", err(&big));
    for (v, what) in [(f32::NAN, "NaN"), (-1.0, "-1"), (1e30, "1e30")] {
        let e = err(&super::legacy::write(&[("w", 1, &[0.0, v])], None));
        assert!(e.contains(&format!("w: value 1 is {what}")), "{e}");
    }
    let model = file("model", &[("w.in_sum2", &[4], F, &[0.0; 4]), ("w.counts", &[1], F, &[1.0])]);
    assert!(Imatrix::parse(&model).unwrap_err().to_string().contains("general.type is Some(\"model\")"));
    let cases: [(&[T<'_>], &str); 8] = [
        (&[("w.in_sum2", &[4], F, &[0.0; 4])], "has no w.counts beside it"),
        (&[("w.counts", &[1], F, &[1.0])], "has no .in_sum2 beside it"),
        (&[("w.in_sum2", &[4, 2], F, &[0.0; 8]), ("w.counts", &[1], F, &[1.0])], "expected [1, 2]"),
        (&[("w.in_sum2", &[4], F, &[0.0, -1.0, 0.0, 0.0]), ("w.counts", &[1], F, &[1.0])], "value 1 is -1"),
        (&[("w.in_sum2", &[4], F, &[0.0; 4]), ("w.counts", &[1], F, &[f32::NAN])], "value 0 is NaN"),
        (&[("w.stats", &[12], F, &[0.0; 12])], "no weight was measured"),
        // What llama-imatrix never writes: a fraction of a token, whose mean squares overflow.
        (&[("w.in_sum2", &[4], F, &[3e38; 4]), ("w.counts", &[1], F, &[1e-45])], "count 0 is 1e-45"),
        (&[("w.in_sum2", &[4], F, &[0.0, 3e38, 0.0, 0.0]), ("w.counts", &[1], F, &[2.0])], "value 1 is 3e38"),
    ];
    for (tensors, want) in cases {
        let e = Imatrix::parse(&file("imatrix", tensors)).unwrap_err().to_string();
        assert!(e.contains(want), "{e} lacks {want}");
    }
    let f16 = file("imatrix", &[("w.in_sum2", &[4], GgmlType::F16, &[]), ("w.counts", &[1], F, &[1.0])]);
    assert!(Imatrix::parse(&f16).unwrap_err().to_string().contains("is F16, expected F32"));
}
