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

/// `organ sensitivity --text`: before, the text was read whole by its name and tokenized
/// whole. 8 MiB of 0xFF bytes took ~1.8 GB and ~40 s before any evaluation (4 MiB: 897 MB,
/// 20 s); a FIFO blocked the run; a link swapped in under `organ serve` was read outside
/// the root. Now it is opened as every input and tokenized until two contexts are had.
#[test]
fn a_sensitivity_text_is_opened_as_an_input_and_tokenized_in_bounded_memory() {
    let Some(model) = crate::common::need::smollm2_and_llama() else { return };
    let d = scratch("sens-text");
    let llama = crate::common::llama_dir();
    // A regular file as --cache: the run stops right after the texts are checked.
    let cache = d.join("cache-is-a-file");
    std::fs::write(&cache, b"").unwrap();
    let sensitivity = |text: &std::path::Path| -> Vec<std::ffi::OsString> {
        let mut a: Vec<std::ffi::OsString> = ["sensitivity".into(), model.clone().into(), "--text".into()].into();
        a.extend([text.into(), "--to".into(), "q4_0".into(), "--ctx".into(), "128".into()]);
        a.extend(["--cache".into(), cache.clone().into(), "--llama-cpp".into(), llama.clone().into()]);
        a
    };
    let ff = d.join("ff.txt");
    std::fs::write(&ff, vec![0xFFu8; 8 << 20]).unwrap();
    let args = sensitivity(&ff);
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let o = check("sensitivity-ff", &args, None, &d);
    println!("sensitivity --text of 8 MiB of 0xFF: exit {:?}, peak RSS {} MiB", o.code, o.peak_rss_kib >> 10);
    // The text passed (it holds many contexts); the cache, a file, is what stops the run.
    assert!(o.stderr.contains("cache-is-a-file") && o.stderr.contains("cannot create"), "{}", o.stderr);
    assert!(o.peak_rss_kib < 256 << 10, "peak RSS {} KiB", o.peak_rss_kib);

    // A FIFO is refused at once, not waited on.
    let fifo = d.join("fifo.txt");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let args = sensitivity(&fifo);
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let o = check("sensitivity-fifo", &args, None, &d);
    assert!(o.stderr.contains("fifo.txt") && o.stderr.contains("a FIFO, not a regular file"), "{}", o.stderr);

    // Under `organ serve` (ORGAN_CONFINE): a text that leads out of the root is refused.
    let root = d.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let inside = root.join("model.gguf");
    if std::fs::hard_link(&model, &inside).is_err() {
        std::fs::copy(&model, &inside).unwrap();
    }
    let outside = d.join("secret.txt");
    std::fs::write(&outside, "The quick brown fox jumps over the lazy dog. ".repeat(400)).unwrap();
    let link = root.join("text.txt");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let mut c = crate::common::organ();
    c.arg("sensitivity").arg(&inside).arg("--text").arg(&link).args(["--to", "q4_0", "--ctx", "128"]);
    c.arg("--cache").arg(&cache).arg("--llama-cpp").arg(&llama);
    c.env(organ_cli::input::CONFINE_ENV, &root);
    let e = crate::harden::refused(c);
    assert!(e.contains("text.txt") && e.contains("lies outside the served root"), "{e}");
}
