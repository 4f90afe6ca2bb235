//! The GGUF reader and writer on synthetic files: valid ones round-trip, hostile ones are
//! refused with an error that names the offset or tensor (never a panic, never a huge
//! allocation), and a prefix says how many bytes it still needs.

mod common;

use common::{small_valid, Raw};
use organ_core::gguf::writer::{plan, plan_like, TensorSpec};
use organ_core::gguf::{MetaArray, MetaValue, ValueType};
use organ_core::limits::*;
use organ_core::{Error, GgmlType, Gguf};

fn parse(b: &[u8]) -> Result<Gguf<'_>, Error> {
    Gguf::parse(b, b.len() as u64)
}

#[test]
fn small_file_parses() {
    let f = small_valid();
    let g = parse(&f).unwrap();
    assert_eq!(g.version, 3);
    assert_eq!(g.architecture(), Some("llama"));
    assert_eq!(g.alignment, 32);
    assert_eq!(g.data_offset % 32, 0);
    let t = g.tensor("blk.0.ffn_up.weight").unwrap();
    assert_eq!((t.ty, t.shape(), t.n_elements, t.n_bytes), (GgmlType::Q8_0, &[32u64][..], 32, 34));
    let q = organ_core::quant::dequantize(t.ty, t.data(&f).unwrap()).unwrap();
    assert_eq!(q[5], 5.0);
    assert_eq!(g.tensor("blk.0.attn_q.weight").unwrap().shape(), &[4, 2]);
}

#[test]
fn version_2_parses_and_1_and_4_do_not() {
    let mut f = small_valid();
    f[4] = 2;
    assert_eq!(parse(&f).unwrap().version, 2);
    for v in [1u8, 4] {
        f[4] = v;
        assert!(matches!(parse(&f), Err(Error::UnsupportedVersion { version }) if version == u32::from(v)));
    }
}

#[test]
fn big_endian_is_refused_clearly() {
    let mut f = small_valid();
    f[4..8].copy_from_slice(&3u32.to_be_bytes());
    let e = parse(&f).unwrap_err();
    assert!(matches!(e, Error::BigEndian { .. }), "{e}");
    assert!(e.to_string().contains("big-endian"));
}

#[test]
fn not_gguf_names_offset_zero() {
    let e = parse(b"PK\x03\x04 this is a zip").unwrap_err();
    assert!(matches!(e, Error::BadMagic { .. }));
    assert!(e.to_string().starts_with("offset 0"), "{e}");
}

#[test]
fn every_prefix_of_a_small_file_is_incomplete_or_truncated_never_a_panic() {
    let f = small_valid();
    let g = parse(&f).unwrap();
    for len in 0..g.data_offset as usize {
        // As a prefix of the real file: Incomplete, with a needed length past the prefix.
        match Gguf::parse(&f[..len], f.len() as u64) {
            Err(Error::Incomplete { needed, .. }) => {
                assert!(needed > len as u64 && needed <= f.len() as u64)
            }
            other => panic!("prefix {len}: {other:?}"),
        }
        // As the whole (truncated) file: an error, never Ok.
        assert!(parse(&f[..len]).is_err(), "truncated at {len}");
    }
}

#[test]
fn chunked_reading_converges() {
    // What the browser does: read a small chunk, ask how much more is needed, repeat.
    let f = small_valid();
    let mut have = 16usize;
    let mut rounds = 0;
    let g = loop {
        rounds += 1;
        match Gguf::parse(&f[..have], f.len() as u64) {
            Ok(g) => break g,
            Err(e) => {
                have = usize::try_from(e.needed_len().expect("only Incomplete")).unwrap().max(have * 2).min(f.len())
            }
        }
    };
    assert_eq!(g.tensors.len(), 2);
    assert!(rounds > 1);
}

fn assert_too_large(e: Error, what: &str) {
    match e {
        Error::TooLarge { what: w, .. } => assert_eq!(w, what, "{e}"),
        other => panic!("expected TooLarge({what}), got {other:?}"),
    }
}

#[test]
fn rejects_string_length_2_pow_63() {
    let f = Raw::header(3, 0, 1).u64(1 << 63).bytes(&[b'k'; 32]).0;
    assert_too_large(parse(&f).unwrap_err(), "string length");
}

#[test]
fn rejects_string_longer_than_cap_even_if_file_is_huge() {
    let f = Raw::header(3, 0, 1).string("k").u32(8).u64(MAX_STRING_LEN + 1).0;
    // Claim a file large enough to hold it: the cap still refuses.
    let e = Gguf::parse(&f, u64::MAX).unwrap_err();
    assert_too_large(e, "string length");
}

#[test]
fn rejects_array_count_2_pow_62() {
    let f = Raw::header(3, 0, 1).string("k").u32(9).u32(0).u64(1 << 62).0;
    assert_too_large(parse(&f).unwrap_err(), "array length");
}

#[test]
fn rejects_array_count_beyond_cap() {
    let f = Raw::header(3, 0, 1).string("k").u32(9).u32(0).u64(MAX_ARRAY_LEN + 1).0;
    assert_too_large(Gguf::parse(&f, u64::MAX).unwrap_err(), "array length");
}

#[test]
fn rejects_array_nesting_deeper_than_cap() {
    let mut r = Raw::header(3, 0, 1).string("k").u32(9);
    for _ in 0..=MAX_DEPTH {
        r = r.u32(9).u64(1);
    }
    let f = r.u32(0).u64(1).u8(0).0;
    assert_too_large(Gguf::parse(&f, u64::MAX).unwrap_err(), "array nesting depth");
}

/// One empty array inside an array is 12 bytes: a 12.6 MB file held a million of them,
/// and `organ dissect` spent 1.5 GB on their JSON. The count is capped over all keys.
#[test]
fn rejects_more_nested_arrays_than_cap_across_keys() {
    let nested = |r: Raw, key: &str, n: u64| {
        let mut r = r.string(key).u32(9).u32(9).u64(n);
        for _ in 0..n {
            r = r.u32(0).u64(0);
        }
        r
    };
    let half = MAX_NESTED_ARRAYS / 2;
    let f = nested(nested(Raw::header(3, 0, 2), "a", half), "b", half).0;
    assert_eq!(parse(&f).unwrap().kvs.len(), 2);
    let f = nested(nested(Raw::header(3, 0, 2), "a", half), "b", half + 1).0;
    assert_too_large(parse(&f).unwrap_err(), "count of arrays nested in arrays");
}

#[test]
fn rejects_tensor_count_beyond_cap_and_beyond_file() {
    assert_too_large(Gguf::parse(&Raw::header(3, MAX_TENSOR_COUNT + 1, 0).0, u64::MAX).unwrap_err(), "tensor count");
    assert_too_large(parse(&Raw::header(3, 1 << 40, 0).0).unwrap_err(), "tensor count");
}

#[test]
fn rejects_kv_count_beyond_cap_and_beyond_file() {
    assert_too_large(Gguf::parse(&Raw::header(3, 0, MAX_KV_COUNT + 1).0, u64::MAX).unwrap_err(), "metadata count");
    assert_too_large(parse(&Raw::header(3, 0, u64::MAX).0).unwrap_err(), "metadata count");
}

#[test]
fn rejects_more_than_max_dims() {
    let f = Raw::header(3, 1, 0).tensor("t", &[1, 1, 1, 1, 1], 0, 0).pad(32).bytes(&[0; 32]).0;
    assert_too_large(parse(&f).unwrap_err(), "tensor dimension count");
}

fn bad_tensor(f: &[u8]) -> (String, String) {
    match parse(f).unwrap_err() {
        Error::BadTensor { tensor, reason, .. } => (tensor, reason),
        other => panic!("expected BadTensor, got {other:?}"),
    }
}

#[test]
fn rejects_dims_whose_product_overflows() {
    let f = Raw::header(3, 1, 0).tensor("big", &[1 << 32, 1 << 32, 1 << 32], 0, 0).pad(32).0;
    let (t, why) = bad_tensor(&f);
    assert_eq!(t, "big");
    assert!(why.contains("elements"), "{why}");
}

#[test]
fn rejects_dim_beyond_int64() {
    let f = Raw::header(3, 1, 0).tensor("neg", &[u64::MAX], 0, 0).pad(32).0;
    assert!(bad_tensor(&f).1.contains("int64"));
}

#[test]
fn rejects_tensor_beyond_end_of_file() {
    let f = Raw::header(3, 1, 0).tensor("w", &[64], 0, 0).pad(32).bytes(&[0; 100]).0;
    let (t, why) = bad_tensor(&f);
    assert_eq!(t, "w");
    assert!(why.contains("beyond the end"), "{why}");
}

#[test]
fn rejects_tensor_offset_that_overflows() {
    let f = Raw::header(3, 1, 0).tensor("w", &[1], 0, u64::MAX - 31).pad(32).bytes(&[0; 32]).0;
    assert!(bad_tensor(&f).1.contains("beyond the end"));
}

#[test]
fn rejects_misaligned_tensor_offset() {
    let f = Raw::header(3, 1, 0).tensor("w", &[1], 0, 4).pad(32).bytes(&[0; 64]).0;
    assert!(bad_tensor(&f).1.contains("alignment"));
}

#[test]
fn rejects_row_not_multiple_of_block() {
    let f = Raw::header(3, 1, 0).tensor("q", &[31], 2, 0).pad(32).bytes(&[0; 64]).0;
    assert!(bad_tensor(&f).1.contains("block size 32"));
}

#[test]
fn rejects_unknown_ggml_type() {
    let f = Raw::header(3, 1, 0).tensor("q", &[32], 4, 0).pad(32).bytes(&[0; 64]).0;
    assert!(bad_tensor(&f).1.contains("unknown ggml type id 4"));
}

#[test]
fn rejects_duplicate_tensor_names() {
    let f = Raw::header(3, 2, 0).tensor("w", &[8], 0, 0).tensor("w", &[8], 0, 32).pad(32).bytes(&[0; 64]).0;
    assert!(matches!(parse(&f).unwrap_err(), Error::DuplicateTensor { tensor, .. } if tensor == "w"));
}

#[test]
fn rejects_duplicate_keys() {
    let f = Raw::header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2).0;
    assert!(matches!(parse(&f).unwrap_err(), Error::DuplicateKey { key, .. } if key == "a"));
}

#[test]
fn rejects_alignment_zero_non_power_of_two_and_wrong_type() {
    for a in [0u32, 3, 48, 1 << 30] {
        let f = Raw::header(3, 0, 1).kv_u32("general.alignment", a).0;
        assert!(matches!(parse(&f).unwrap_err(), Error::BadMetadata { .. }), "alignment {a}");
    }
    let f = Raw::header(3, 0, 1).string("general.alignment").u32(10).u64(32).0;
    let e = parse(&f).unwrap_err();
    assert!(e.to_string().contains("UINT32"), "{e}");
}

#[test]
fn rejects_unknown_value_type() {
    let f = Raw::header(3, 0, 1).string("k").u32(13).u32(0).0;
    assert!(matches!(parse(&f).unwrap_err(), Error::BadValueType { code: 13, .. }));
}

#[test]
fn rejects_non_utf8_names() {
    let f = Raw::header(3, 0, 1).u64(2).bytes(&[0xff, 0xfe]).u32(4).u32(0).0;
    assert!(matches!(parse(&f).unwrap_err(), Error::BadUtf8 { what: "metadata key", .. }));
}

#[test]
fn nested_arrays_and_every_value_type_round_trip() {
    // An array of arrays of strings, and one value of every scalar type.
    let inner = |r: Raw, items: &[&str]| {
        let mut r = r.u32(8).u64(items.len() as u64);
        for s in items {
            r = r.string(s);
        }
        r
    };
    let mut r = Raw::header(3, 0, 13).string("nested").u32(9).u32(9).u64(2);
    r = inner(r, &["a", "bc"]);
    r = inner(r, &[]);
    let r = r
        .string("u8")
        .u32(0)
        .u8(200)
        .string("i8")
        .u32(1)
        .u8(0xff)
        .string("u16")
        .u32(2)
        .bytes(&60000u16.to_le_bytes())
        .string("i16")
        .u32(3)
        .bytes(&(-5i16).to_le_bytes())
        .string("u32")
        .u32(4)
        .u32(7)
        .string("i32")
        .u32(5)
        .bytes(&(-7i32).to_le_bytes())
        .string("f32")
        .u32(6)
        .bytes(&1.5f32.to_le_bytes())
        .string("bool")
        .u32(7)
        .u8(1)
        .string("str")
        .u32(8)
        .string("hé")
        .string("u64")
        .u32(10)
        .u64(u64::MAX)
        .string("i64")
        .u32(11)
        .bytes(&i64::MIN.to_le_bytes())
        .string("f64")
        .u32(12)
        .bytes(&(-0.25f64).to_le_bytes());
    let f = r.pad(32).0;
    let g = parse(&f).unwrap();
    let MetaValue::Array(a) = g.get("nested").unwrap() else { panic!() };
    assert_eq!((a.elem_type, a.len), (ValueType::Array, 2));
    let first: Vec<MetaValue<'_>> = a.iter().collect();
    let MetaValue::Array(a0) = first[0] else { panic!() };
    let strs: Vec<&str> = a0.iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(strs, ["a", "bc"]);
    assert_eq!(g.get("i64"), Some(&MetaValue::I64(i64::MIN)));
    assert_eq!(g.get("str").unwrap().as_str(), Some("hé"));
    assert_eq!(g.get("f64"), Some(&MetaValue::F64(-0.25)));
    // Writing it back gives the same bytes.
    let layout = plan_like(g.version, &g.kvs, &g.tensors).unwrap();
    assert_eq!(layout.header, f);
}

#[test]
fn writer_round_trips_a_small_file_byte_for_byte() {
    let f = small_valid();
    let g = parse(&f).unwrap();
    let layout = plan_like(g.version, &g.kvs, &g.tensors).unwrap();
    let mut out = layout.header.clone();
    out.resize(layout.file_len as usize, 0);
    for (t, &(off, n)) in g.tensors.iter().zip(&layout.tensors) {
        let at = layout.header.len() + off as usize;
        out[at..at + n as usize].copy_from_slice(t.data(&f).unwrap());
    }
    assert_eq!(out, f);
}

#[test]
fn writer_builds_new_files_that_parse_back() {
    let mut names = Vec::new();
    MetaArray::encode_strings(&["x", "yz"], &mut names).unwrap();
    let arr = MetaArray::from_raw(ValueType::String, 2, &names).unwrap();
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("general.alignment", MetaValue::U32(64)),
        ("organ.test.list", MetaValue::Array(arr)),
    ];
    let specs = [
        TensorSpec { name: "a", dims: &[256, 2], ty: GgmlType::Q4_K },
        TensorSpec { name: "b", dims: &[3], ty: GgmlType::F16 },
    ];
    let layout = plan(3, &kvs, &specs).unwrap();
    assert_eq!(layout.alignment, 64);
    let mut f = layout.header.clone();
    f.resize(layout.file_len as usize, 0);
    let g = parse(&f).unwrap();
    assert_eq!(g.tensors[0].n_bytes, 2 * 144);
    assert_eq!(g.tensors[1].offset, 320); // 288 rounded up to 64
    assert_eq!(g.get("organ.test.list").map(|v| v.value_type()), Some(ValueType::Array));
    // Refusals: row not a multiple of the block, duplicates, bad alignment.
    assert!(plan(3, &[], &[TensorSpec { name: "a", dims: &[100], ty: GgmlType::Q4_K }]).is_err());
    assert!(plan(3, &[("k", MetaValue::U8(1)), ("k", MetaValue::U8(2))], &[]).is_err());
    assert!(plan(3, &[("general.alignment", MetaValue::U32(3))], &[]).is_err());
    assert!(MetaArray::from_raw(ValueType::String, 3, &names).is_err());
}

#[test]
fn rejects_tensor_name_longer_than_cap() {
    let name = "n".repeat(MAX_TENSOR_NAME_LEN as usize);
    let f = Raw::header(3, 1, 0).tensor(&name, &[8], 0, 0).pad(32).bytes(&[0; 32]).0;
    assert_eq!(parse(&f).unwrap().tensors[0].name, name);
    let name = "n".repeat(MAX_TENSOR_NAME_LEN as usize + 1);
    let f = Raw::header(3, 1, 0).tensor(&name, &[8], 0, 0).pad(32).bytes(&[0; 32]).0;
    assert_too_large(parse(&f).unwrap_err(), "tensor name length");
}

/// Three 12 MiB strings: every one under MAX_STRING_LEN, the header past the budget. Read
/// whole or a prefix at a time, the parser refuses it, and never asks for more than the
/// budget.
#[test]
fn rejects_header_past_the_budget_whole_or_read_in_pieces() {
    let budget = max_header_bytes();
    assert_eq!(budget, DEFAULT_MAX_HEADER_BYTES);
    let mut r = Raw::header(3, 0, 3);
    for k in ["a", "b", "c"] {
        r = r.string(k).u32(8).u64(12 << 20).bytes(&vec![b'x'; 12 << 20]);
    }
    let f = r.0;
    let is_budget =
        |e: &Error| matches!(e, Error::HeaderBudget { needed, limit, .. } if *needed > budget && *limit == budget);
    let e = parse(&f).unwrap_err();
    assert!(is_budget(&e), "{e:?}");
    assert!(e.to_string().contains("--max-header-bytes"), "{e}");
    let mut have = 1 << 20;
    let e = loop {
        match Gguf::parse(&f[..have], f.len() as u64) {
            Err(e) if e.needed_len().is_some() => {
                let n = e.needed_len().unwrap();
                assert!(n <= budget, "asked for {n} bytes");
                have = n as usize;
            }
            r => break r.unwrap_err(),
        }
    };
    assert!(is_budget(&e), "{e:?}");
    // Two of them fit.
    let mut r = Raw::header(3, 0, 2);
    for k in ["a", "b"] {
        r = r.string(k).u32(8).u64(12 << 20).bytes(&vec![b'x'; 12 << 20]);
    }
    assert_eq!(parse(&r.0).unwrap().kvs.len(), 2);
}
