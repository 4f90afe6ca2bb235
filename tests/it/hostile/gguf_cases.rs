//! The crafted GGUF files of the hostile set: truncations, bad magic and versions, huge
//! counts and lengths, nested arrays, bad tensors, alignment and names.

use super::gguf_bytes::*;
use super::{Case, CUT_OK, GGUF_OK, MAX_INPUT};
use std::path::Path;

/// Every crafted GGUF file, written into `d`.
pub(super) fn gguf_cases(d: &Path) -> Vec<Case> {
    let mut cases: Vec<(String, Vec<u8>, bool)> = Vec::new();
    let mut bad = |name: &str, b: Vec<u8>| cases.push((name.to_owned(), b, false));
    let good = valid();
    // Truncated everywhere in the header, and in the data.
    let header_len = good.len() - 512;
    for cut in (0..header_len).step_by(7).chain([header_len - 1, header_len, header_len + 100, good.len() - 1]) {
        bad(&format!("cut-at-{cut}"), good[..cut].to_vec());
    }
    bad("bad-magic", [b"GGUL".to_vec(), good[4..].to_vec()].concat());
    for (n, v) in [("v1", 1u32), ("v4", 4), ("big-endian", 3u32.swap_bytes())] {
        let mut b = good.clone();
        b[4..8].copy_from_slice(&v.to_le_bytes());
        bad(&format!("version-{n}"), b);
    }
    for (n, count) in [("max", u64::MAX), ("2p40", 1 << 40), ("cap+1", (1 << 16) + 1), ("one-more", 3)] {
        // One more tensor than written reads the padding as a valid scalar named "".
        if n != "one-more" {
            let mut b = good.clone();
            b[8..16].copy_from_slice(&count.to_le_bytes());
            bad(&format!("tensor-count-{n}"), b);
        }
        let mut b = good.clone();
        b[16..24].copy_from_slice(&count.to_le_bytes());
        bad(&format!("kv-count-{n}"), b);
    }
    for (n, len) in [("max", u64::MAX), ("2p40", 1 << 40), ("cap+1", (16 << 20) + 1), ("past-end", 10_000)] {
        let mut b = good.clone();
        b[24..32].copy_from_slice(&len.to_le_bytes());
        bad(&format!("key-len-{n}"), b);
    }
    for (n, len) in [("max", u64::MAX), ("2p32", 1 << 32), ("past-end", 1000)] {
        let mut b = header(0, 1);
        put_key(&mut b, "a", ARRAY);
        b.extend(U32.to_le_bytes());
        b.extend(len.to_le_bytes());
        b.extend([0; 64]);
        bad(&format!("array-len-{n}"), b);
        let mut b = header(0, 1);
        put_key(&mut b, "s", STRING);
        b.extend(len.to_le_bytes());
        b.extend([b'x'; 64]);
        bad(&format!("string-len-{n}"), b);
    }
    bad("value-type-13", {
        let mut b = header(0, 1);
        put_key(&mut b, "t", 13);
        b.extend([0; 8]);
        b
    });
    bad("array-of-type-99", {
        let mut b = header(0, 1);
        put_key(&mut b, "t", ARRAY);
        b.extend(99u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b
    });
    bad("key-not-utf8", {
        let mut b = header(0, 1);
        put_str(&mut b, b"\xff\xfe");
        b.extend(U8.to_le_bytes());
        b.push(1);
        b
    });
    bad("duplicate-key", {
        let mut b = header(0, 2);
        for _ in 0..2 {
            put_key(&mut b, "general.name", U8);
            b.push(1);
        }
        b
    });
    bad("nested-arrays-over-cap", nested_empty_arrays((1 << 16) + 1));
    bad("nested-arrays-4M", nested_empty_arrays(4 << 20));
    bad("arrays-9-deep", deep_arrays(9));
    cases.push(("arrays-8-deep".into(), deep_arrays(8), true));
    cases.push(("nested-arrays-at-cap".into(), nested_empty_arrays(1 << 16), true));
    cases.push(("u8-array-16M".into(), long_u8_array(16 << 20), true));
    let mut bad = |name: &str, b: Vec<u8>| cases.push((name.to_owned(), b, false));
    // Tensors.
    bad("tensor-past-end", one_tensor(b"w", &[64], F32_TY, 0, 100, None));
    bad("tensor-offset-past-end", one_tensor(b"w", &[8], F32_TY, 1 << 40, 32, None));
    bad("tensor-offset-wraps", one_tensor(b"w", &[8], F32_TY, u64::MAX - 31, 32, None));
    bad("tensor-misaligned", one_tensor(b"w", &[8], F32_TY, 4, 64, None));
    bad("alignment-0", one_tensor(b"w", &[8], F32_TY, 0, 32, Some(0)));
    bad("alignment-3", one_tensor(b"w", &[8], F32_TY, 0, 32, Some(3)));
    bad("alignment-2p30", one_tensor(b"w", &[8], F32_TY, 0, 32, Some(1 << 30)));
    bad("alignment-u8", {
        let mut b = header(1, 1);
        put_key(&mut b, "general.alignment", U8);
        b.push(32);
        put_tensor(&mut b, b"w", &[8], F32_TY, 0);
        pad(&mut b, 32);
        b.extend([0; 32]);
        b
    });
    bad("dims-overflow", one_tensor(b"w", &[1 << 40, 1 << 40], F32_TY, 0, 32, None));
    bad("dims-product-wraps", one_tensor(b"w", &[1 << 32, 1 << 32], F32_TY, 0, 32, None));
    bad("dim-over-i64", one_tensor(b"w", &[u64::MAX], F32_TY, 0, 32, None));
    bad("n-dims-5", one_tensor(b"w", &[1, 1, 1, 1, 1], F32_TY, 0, 32, None));
    bad("n-dims-max", {
        let mut b = header(1, 0);
        put_str(&mut b, b"w");
        b.extend(u32::MAX.to_le_bytes());
        b.extend([0; 64]);
        b
    });
    bad("ggml-type-99", one_tensor(b"w", &[8], 99, 0, 32, None));
    bad("row-not-whole-blocks", one_tensor(b"w", &[31], 2, 0, 32, None));
    bad("tensor-name-70k", one_tensor(&[b'n'; 70_000], &[8], F32_TY, 0, 32, None));
    bad("tensor-name-129", one_tensor(&[b'n'; 129], &[8], F32_TY, 0, 32, None));
    bad("tensor-name-not-utf8", one_tensor(b"\xc3\x28", &[8], F32_TY, 0, 32, None));
    bad("duplicate-tensor", {
        let mut b = header(2, 0);
        put_tensor(&mut b, b"w", &[8], F32_TY, 0);
        put_tensor(&mut b, b"w", &[8], F32_TY, 32);
        pad(&mut b, 32);
        b.extend([0; 64]);
        b
    });
    bad("empty-file", Vec::new());
    bad("not-a-model", b"# organ\nthis is a README".to_vec());
    cases.push(("valid".into(), good.clone(), true));
    cases.push(("tensor-name-with-slashes".into(), one_tensor(b"../../etc/passwd", &[8], F32_TY, 0, 32, None), true));
    cases.push(("tensor-name-at-cap".into(), one_tensor(&[b'n'; 128], &[8], F32_TY, 0, 32, None), true));
    cases.push(("tensor-name-empty".into(), one_tensor(b"", &[8], F32_TY, 0, 32, None), true));
    cases.push((
        "tensors-overlapping".into(),
        {
            let mut b = header(2, 0);
            put_tensor(&mut b, b"a", &[8], F32_TY, 0);
            put_tensor(&mut b, b"b", &[8], F32_TY, 0);
            pad(&mut b, 32);
            floats(&mut b, 8);
            b
        },
        true,
    ));
    cases.push((
        "many-tensors".into(),
        {
            let n = 4000u64;
            let mut b = header(n, 0);
            for i in 0..n {
                put_tensor(&mut b, format!("blk.{i}.w").as_bytes(), &[8], F32_TY, 0);
            }
            pad(&mut b, 32);
            floats(&mut b, 8);
            b
        },
        true,
    ));
    cases
        .into_iter()
        .map(|(name, bytes, valid)| {
            assert!((bytes.len() as u64) < MAX_INPUT, "{name}: input of {} bytes", bytes.len());
            let path = d.join(format!("{name}.gguf"));
            std::fs::write(&path, &bytes).unwrap();
            // A file whose header is whole but whose data is not all there (cut in its
            // padding or data, a tensor past the end): inspect shows it and what is
            // missing, as it does a partial download.
            let cut_in_data = organ_core::Gguf::parse_cut_short(&bytes, bytes.len() as u64).is_ok();
            let ok_for = if valid {
                GGUF_OK
            } else if cut_in_data {
                CUT_OK
            } else {
                &[]
            };
            Case { name, path, ok_for }
        })
        .collect()
}
