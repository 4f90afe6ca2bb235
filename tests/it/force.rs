//! `--force` replaces only what organ could have written (issue 28, item 7): a regular
//! file, or an organ directory for an organ-directory output; a directory, a link (to a
//! device, to a file, to anything), a FIFO are refused with a sentence and left as they
//! were. Standard output is spelled `-`, for reports only, and needs no `--force`.

use crate::common::*;
use crate::harden::{refused, tiny};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fresh(name: &str) -> PathBuf {
    let d = tmp(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn measure(m: &Path, args: &[&std::ffi::OsStr]) -> Command {
    let mut c = organ();
    c.args(["measure", "--no-cache"]).arg(m).args(args);
    c
}

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

#[test]
fn force_replaces_only_a_regular_file_or_an_organ_directory() {
    let m = tiny("force-in.gguf", 3);
    let d = fresh("force");
    let organs = d.join("in.organs");
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(&organs);
    ok(c);

    // Before: `--json DIR --force` deleted the directory with everything in it.
    let dir = d.join("reports");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("keep.txt"), "mine").unwrap();
    let force = || "--force".as_ref();
    for (what, mut c) in [
        ("measure --json", measure(&m, &["--json".as_ref(), dir.as_os_str(), force()])),
        ("measure --ranking-csv", measure(&m, &["--ranking-csv".as_ref(), dir.as_os_str(), force()])),
        ("check --json", {
            let mut c = organ();
            c.arg("check").arg(&m).arg("--json").arg(&dir).arg("--force");
            c
        }),
        ("diff --csv", {
            let mut c = organ();
            c.arg("diff").arg(&m).arg(&m).arg("--csv").arg(&dir).arg("--force");
            c
        }),
        ("assemble --out", {
            let mut c = organ();
            c.arg("assemble").arg(&organs).arg("--out").arg(&dir).arg("--force");
            c
        }),
    ] {
        let o = c.output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{what}: {e}");
        assert!(e.contains("a directory; --force replaces only a regular file"), "{what}: {e}");
        assert_eq!(std::fs::read_to_string(dir.join("keep.txt")).unwrap(), "mine", "{what}");
    }
    // dissect replaces an organ directory only, not any directory.
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(&dir).arg("--force");
    assert!(refused(c).contains("a directory that is not an organ directory"));
    assert_eq!(std::fs::read_to_string(dir.join("keep.txt")).unwrap(), "mine");

    // Before: `--json /dev/stdout --force` turned /dev/stdout (a link to the terminal) into
    // a regular file. Here a link of that shape, to /dev/null.
    let dev = d.join("stdout");
    std::os::unix::fs::symlink("/dev/null", &dev).unwrap();
    let e = refused(measure(&m, &["--json".as_ref(), dev.as_os_str(), force()]));
    assert!(
        e.contains("a device (a link to /dev/null), not a regular file") && e.contains("never through a link"),
        "{e}"
    );
    // Without --force it is not "already exists (a file)" but what it is, and the way to
    // standard output (issue 50).
    let e = refused(measure(&m, &["--json".as_ref(), dev.as_os_str()]));
    assert!(e.contains("a device (a link to /dev/null)") && e.contains("`--json -`"), "{e}");
    assert!(std::fs::symlink_metadata(&dev).unwrap().file_type().is_symlink());
    assert!(std::fs::metadata(&dev).unwrap().file_type().is_char_device());

    // A link to a regular file is neither replaced nor written through.
    let (target, link) = (d.join("target.json"), d.join("link.json"));
    std::fs::write(&target, "keep").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let e = refused(measure(&m, &["--json".as_ref(), link.as_os_str(), force()]));
    assert!(e.contains("a symbolic link to"), "{e}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());

    // A FIFO, refused at once (never opened, so never waited on).
    let fifo = d.join("fifo.json");
    mkfifo(&fifo);
    let e = refused(measure(&m, &["--csv".as_ref(), fifo.as_os_str(), force()]));
    assert!(e.contains("a FIFO, not a regular file") && e.contains("`--json -`"), "{e}");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    // What organ writes is replaced: a regular file, an organ directory.
    ok(measure(&m, &["--json".as_ref(), target.as_os_str(), force()]));
    assert!(serde_json::from_slice::<serde_json::Value>(&std::fs::read(&target).unwrap()).is_ok());
    std::fs::write(organs.join("stale.txt"), "old").unwrap();
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(&organs).arg("--force");
    ok(c);
    assert!(organs.join("manifest.json").is_file() && !organs.join("stale.txt").exists());
}

#[test]
fn standard_output_is_spelled_dash() {
    let m = tiny("dash-in.gguf", 3);
    let d = fresh("dash");
    let run = |mut c: Command| {
        c.current_dir(&d);
        let o = ok(c);
        assert!(!d.join("-").exists(), "a file named - was written");
        String::from_utf8(o.stdout).unwrap()
    };
    // The report alone on stdout: JSON that parses, no text around it.
    let out = run(measure(&m, &["--json".as_ref(), "-".as_ref()]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["models"][0]["tensors"].as_array().unwrap().len(), 3);
    let out = run(measure(&m, &["--csv".as_ref(), "-".as_ref(), "--force".as_ref()]));
    assert!(out.starts_with("model,tensor,") && out.lines().count() == 4, "{out}");
    let mut c = organ();
    c.arg("diff").arg(&m).arg(&m).args(["--json", "-"]);
    let v: serde_json::Value = serde_json::from_str(&run(c)).unwrap();
    assert_eq!(v["compare"], "c1");
    let mut c = organ();
    c.arg("check").arg(&m).args(["--json", "-", "--exit-zero"]);
    let v: serde_json::Value = serde_json::from_str(&run(c)).unwrap();
    assert_eq!(v["check"], "k1");
    // A fleet's merged report.
    let (fleet, results) = (d.join("fleet"), d.join("results"));
    std::fs::create_dir(&fleet).unwrap();
    std::fs::copy(&m, fleet.join("a.gguf")).unwrap();
    let mut c = organ();
    c.arg("measure").arg("--fleet").arg(&fleet).arg("--results").arg(&results).args(["--shard", "0/1"]);
    ok(c);
    let mut c = organ();
    c.args(["report", "merge"]).arg(&results).args(["--ranking-csv", "-"]);
    let out = run(c);
    assert!(out.starts_with("rank,model,") && out.contains("a.gguf"), "{out}");

    // One output at most on stdout; models never.
    let e = refused(measure(&m, &["--json".as_ref(), "-".as_ref(), "--csv".as_ref(), "-".as_ref()]));
    assert!(e.contains("one at most"), "{e}");
    let organs = d.join("in.organs");
    let mut c = organ();
    c.arg("dissect").arg(&m).arg("--out").arg(&organs);
    ok(c);
    let mut c = organ();
    c.arg("assemble").arg(&organs).arg("--out").arg("-").current_dir(&d);
    assert!(refused(c).contains("standard output takes reports"));
    assert!(!d.join("-").exists());
}
