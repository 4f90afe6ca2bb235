//! The regressions of the hardening issue, each with the figure it failed by before.

use super::gguf_bytes::{long_u8_array, nested_empty_arrays};
use super::runner::{check, scratch};

/// Before: `organ dissect` of this 12.6 MB file peaked at 1.5 GB (a serde_json tree per
/// empty array for the manifest) and exited 0. Now it is refused by MAX_NESTED_ARRAYS, in
/// about 10 MiB.
#[test]
fn a_million_empty_nested_arrays_are_refused_in_little_memory() {
    let d = scratch("nested-million");
    let f = d.join("nested.gguf");
    std::fs::write(&f, nested_empty_arrays(1_050_000)).unwrap();
    let out = d.join("nested.organs");
    for (label, args) in [
        ("dissect", vec!["dissect".as_ref(), f.as_os_str(), "--out".as_ref(), out.as_os_str()]),
        ("inspect", vec!["inspect".as_ref(), "--json".as_ref(), f.as_os_str()]),
        ("measure", vec!["measure".as_ref(), "--no-cache".as_ref(), f.as_os_str()]),
    ] {
        let o = check(label, &args, Some(&out), &d);
        println!("nested arrays x 1050000, {label}: exit {:?}, peak RSS {} MiB", o.code, o.peak_rss_kib >> 10);
        assert_eq!(o.code, Some(1), "{label}");
        assert!(o.stderr.contains("nested.gguf") && o.stderr.contains("arrays nested in arrays"), "{}", o.stderr);
        assert!(o.peak_rss_kib < 64 << 10, "{label}: peak RSS {} KiB", o.peak_rss_kib);
    }
}

/// Before: a 4 MB u8 array cost a serde_json value per element: `inspect --json` peaked at
/// 357 MiB, `dissect` at 362 MiB and `assemble` at 354 MiB. Now the JSON is written as the
/// array is walked (12 and 23 MiB), and the manifest read back as a stream (assemble holds
/// its ~60 MB of text); the assembled file is the original.
#[test]
fn a_long_array_streams_through_inspect_dissect_and_assemble() {
    let d = scratch("long-array");
    let f = d.join("long.gguf");
    // 52 bytes of header: the file ends aligned, so assemble adds no padding.
    let bytes = long_u8_array((4 << 20) - 20);
    std::fs::write(&f, &bytes).unwrap();
    let dir = d.join("long.organs");
    let back = d.join("back.gguf");
    for (label, args, out) in [
        ("inspect", vec!["inspect".as_ref(), "--json".as_ref(), f.as_os_str()], None),
        ("dissect", vec!["dissect".as_ref(), f.as_os_str(), "--out".as_ref(), dir.as_os_str()], Some(&dir)),
        ("assemble", vec!["assemble".as_ref(), dir.as_os_str(), "--out".as_ref(), back.as_os_str()], Some(&back)),
    ] {
        let o = check(label, &args, out.map(|p| p.as_path()), &d);
        println!("u8 array x 4Mi, {label}: exit {:?}, peak RSS {} MiB", o.code, o.peak_rss_kib >> 10);
        assert_eq!(o.code, Some(0), "{label}: {}", o.stderr);
        // assemble holds the manifest's text (~60 MB of pretty JSON for this array).
        let bound = if label == "assemble" {
            (std::fs::metadata(dir.join("manifest.json")).unwrap().len() >> 10) * 2
        } else {
            0
        };
        assert!(o.peak_rss_kib < (64 << 10) + bound, "{label}: peak RSS {} KiB", o.peak_rss_kib);
    }
    assert!(std::fs::read(&back).unwrap() == bytes, "assembled file differs from the original");
}

/// Before: a manifest was read whole up to 1 GiB before anything was checked (a 920 MB
/// one of 10^7 tensors aborted `assemble`); this 300 MiB (sparse) one cost 300 MiB of RSS.
/// Now anything over manifest::MAX_BYTES (256 MiB) is refused before it is read.
#[test]
fn an_oversized_manifest_is_refused_before_it_is_read() {
    let d = scratch("big-manifest");
    let dir = d.join("big.organs");
    std::fs::create_dir(&dir).unwrap();
    let m = std::fs::File::create(dir.join("manifest.json")).unwrap();
    m.set_len(300 << 20).unwrap();
    let out = d.join("big.gguf");
    let o =
        check("assemble", &["assemble".as_ref(), dir.as_os_str(), "--out".as_ref(), out.as_os_str()], Some(&out), &d);
    println!("manifest of 300 MiB, assemble: exit {:?}, peak RSS {} MiB", o.code, o.peak_rss_kib >> 10);
    assert_eq!(o.code, Some(1));
    assert!(o.stderr.contains("manifest.json") && o.stderr.contains("bytes, more than"), "{}", o.stderr);
    assert!(o.peak_rss_kib < 64 << 10, "peak RSS {} KiB", o.peak_rss_kib);
}
