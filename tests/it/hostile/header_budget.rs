//! The header budget (issue: "large but cap-legal headers cost 1.4× their size"): a
//! header of many long strings, read from a loopback server by range requests, is refused
//! at the budget in little memory, and read under a larger one in memory proportional to
//! it.

use super::gguf_bytes::{header, put_key, STRING};
use super::runner::{check, scratch};
use crate::remote::{serve, Fault};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// A GGUF of `n` string values of 16 MiB each (MAX_STRING_LEN: each is legal), written
/// sparse: the strings are holes, read back as zeros.
fn long_strings_sparse(path: &Path, n: u64) -> u64 {
    let mut f = std::fs::File::create(path).unwrap();
    let mut head = header(0, n);
    for i in 0..n {
        put_key(&mut head, &format!("s{i:02}"), STRING);
        head.extend((16u64 << 20).to_le_bytes());
        f.write_all(&head).unwrap();
        head.clear();
        f.seek(SeekFrom::Current(16 << 20)).unwrap();
    }
    let len = f.stream_position().unwrap();
    f.set_len(len).unwrap();
    len
}

fn honest(a: u64, b: u64, t: u64) -> (u64, u64, u64, u64) {
    (a, b, t, b - a + 1)
}

/// Before: 70 strings of 16 MiB cost `organ inspect URL` 1.52 GiB (a header buffer grown
/// by doubling up to 1 GiB). Now the default budget (32 MiB) refuses it after reading at
/// most that, naming the budget and its flag; and with the budget raised
/// (`--max-header-bytes`), a 96 MiB header is read and printed in about its size: the
/// buffer is reserved once, never copied.
#[test]
fn a_header_of_long_strings_is_bounded_by_the_budget() {
    let d = scratch("header-budget");
    let big = d.join("strings70.gguf");
    long_strings_sparse(&big, 70);
    let url = format!("http://127.0.0.1:{}/strings70.gguf", serve(&big, Fault::Lie(honest)));
    let o = check("inspect-70", &["inspect".as_ref(), "--json".as_ref(), url.as_ref()], None, &d);
    println!("70 strings of 16 MiB, inspect URL: exit {:?}, peak RSS {} MiB", o.code, o.peak_rss_kib >> 10);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("strings70.gguf"), "{}", o.stderr);
    assert!(o.stderr.contains("header budget of 33554432 bytes (--max-header-bytes)"), "{}", o.stderr);
    // The header buffer grows by doubling up to the budget (32 MiB), so the refusal comes
    // with the whole budget read: the budget plus the program (about 16 MiB) and slack.
    assert!(o.peak_rss_kib < 64 << 10, "peak RSS {} MiB", o.peak_rss_kib >> 10);

    let six = d.join("strings6.gguf");
    let len = long_strings_sparse(&six, 6);
    let url = format!("http://127.0.0.1:{}/strings6.gguf", serve(&six, Fault::Lie(honest)));
    let args =
        ["--max-header-bytes".as_ref(), "200000000".as_ref(), "inspect".as_ref(), "--json".as_ref(), url.as_ref()];
    let o = check("inspect-6", &args, None, &d);
    println!(
        "6 strings of 16 MiB ({len} bytes), budget 200 MB: exit {:?}, peak RSS {} MiB",
        o.code,
        o.peak_rss_kib >> 10
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    // The header, and a few MiB of program: not 1.4 times the header.
    let bound = (len >> 10) * 11 / 10 + (16 << 10);
    assert!(o.peak_rss_kib < bound, "peak RSS {} KiB for a header of {} KiB", o.peak_rss_kib, len >> 10);
}
