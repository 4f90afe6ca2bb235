//! `organ report merge` believes nothing it reads (docs/fleet.md): a shard index that maps
//! a model to another's result, a result whose figures were changed, a result of another
//! model or definition are each refused naming both files; `fleet.json` as a link to a
//! device, an index that is a FIFO and files over their caps are refused before a byte is
//! read, in little memory and no time; 100 000 models merge in linear time; a large result
//! merges in bounded memory.

use crate::build::*;
use crate::common::*;
use crate::hostile::runner::{run, Outcome};
use organ_core::GgmlType;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A small model of two tensors, its values drawn from `seed`.
fn small(path: &Path, seed: u64) {
    let p = write_model(
        &format!("m{seed}.gguf"),
        "llama",
        &[
            t("token_embd.weight", &[64, 32], GgmlType::Q8_0, noise(seed, 64 * 32)),
            t("blk.0.attn_q.weight", &[64, 64], GgmlType::F32, noise(seed + 1, 64 * 64)),
        ],
    );
    std::fs::rename(p, path).unwrap();
}

/// A fleet of a.gguf, b.gguf, c.gguf measured in two shards (0: a, c; 1: b) into results
/// named from `tag`: the results directory.
fn measured(tag: &str) -> PathBuf {
    let fleet = tmp(&format!("{tag}-fleet"));
    let results = tmp(&format!("{tag}-results"));
    let _ = std::fs::remove_dir_all(&fleet);
    let _ = std::fs::remove_dir_all(&results);
    std::fs::create_dir_all(&fleet).unwrap();
    for (i, m) in ["a", "b", "c"].iter().enumerate() {
        small(&fleet.join(format!("{m}.gguf")), 100 * (i as u64 + 1));
    }
    for shard in ["0/2", "1/2"] {
        let mut c = organ();
        c.arg("measure").arg("--fleet").arg(&fleet).arg("--results").arg(&results).args(["--shard", shard]);
        c.env_remove("JOB_COMPLETION_INDEX").env_remove("SLURM_ARRAY_TASK_ID");
        ok(c);
    }
    results
}

fn merge(results: &Path) -> std::process::Command {
    let mut c = organ();
    c.args(["report", "merge", "--summary-only"]).arg(results);
    c
}

fn read(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn write(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// A copy of the results directory `from`, to break one way.
fn copy_of(from: &Path, name: &str) -> PathBuf {
    let to = tmp(name);
    let _ = std::fs::remove_dir_all(&to);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    to
}

/// `organ ARGS` through the hostile runner (bounded in time, with its own peak RSS); how
/// long it took.
fn timed(args: &[&OsStr], name: &str) -> (Outcome, Duration) {
    let start = Instant::now();
    let o = run(args, &tmp(&format!("{name}.stderr")));
    (o, start.elapsed())
}

#[test]
fn a_result_is_tied_to_its_model_its_definition_and_its_bytes() {
    let results = measured("tied");
    let merged = String::from_utf8(ok(merge(&results)).stdout).unwrap();
    assert!(merged.contains("ranking (3 models"), "{merged}");
    let index0 = results.join("shard-0-of-2.json");
    let v0 = read(&index0);
    let v1 = read(&results.join("shard-1-of-2.json"));
    let (a, b) = (&v0["results"][0], &v1["results"][0]);
    assert_eq!((a["model"].as_str(), b["model"].as_str()), (Some("a.gguf"), Some("b.gguf")));
    let (a_result, b_result) = (a["result"].as_str().unwrap(), b["result"].as_str().unwrap());
    let (a_id, b_id) = (a["model_blake3"].as_str().unwrap(), b["model_blake3"].as_str().unwrap());
    // The index records the bytes of each result and the identity of its model.
    assert_eq!(
        a["result_blake3"].as_str().unwrap(),
        blake3::hash(&std::fs::read(results.join(a_result)).unwrap()).to_hex().as_str()
    );
    assert!(a_result.contains(a_id), "a result is named by its model's identity");
    assert_eq!(v0["definition"], read(&results.join("fleet.json"))["definition"]);

    // Before: the merge printed a.gguf with b's θ, exit 0.
    let r = copy_of(&results, "tied-mapped");
    let mut v = v0.clone();
    v["results"][0]["result"] = b_result.into();
    write(&r.join("shard-0-of-2.json"), &v);
    let e = fails(merge(&r));
    let at = r.join("shard-0-of-2.json").display().to_string();
    assert!(e.contains(&at) && e.contains(b_result) && e.contains("a.gguf") && e.contains(a_id), "{e}");

    // Before: a result with a forged θ was accepted.
    let r = copy_of(&results, "tied-forged");
    let mut f = read(&r.join(a_result));
    let theta = f["report"]["summary"]["theta_mean"].as_f64().unwrap();
    f["report"]["summary"]["theta_mean"] = (theta + 10.0).into();
    std::fs::write(r.join(a_result), serde_json::to_vec(&f).unwrap()).unwrap();
    let e = fails(merge(&r));
    assert!(e.contains(&r.join(a_result).display().to_string()) && e.contains("BLAKE3"), "{e}");
    assert!(e.contains(&r.join("shard-0-of-2.json").display().to_string()), "{e}");

    // b's report planted under a's result name, its BLAKE3 put in the index: the result
    // names b's identity, the index a's.
    let r = copy_of(&results, "tied-planted");
    let planted = std::fs::read(r.join(b_result)).unwrap();
    std::fs::write(r.join(a_result), &planted).unwrap();
    let mut v = v0.clone();
    v["results"][0]["result_blake3"] = blake3::hash(&planted).to_hex().as_str().into();
    write(&r.join("shard-0-of-2.json"), &v);
    let e = fails(merge(&r));
    assert!(e.contains(a_id) && e.contains(b_id) && e.contains("a.gguf"), "{e}");

    // An index of another definition than the fleet's.
    let r = copy_of(&results, "tied-definition");
    let mut v = v0.clone();
    v["definition"]["mode"] = "sigma".into();
    write(&r.join("shard-0-of-2.json"), &v);
    let e = fails(merge(&r));
    assert!(e.contains("measured under") && e.contains("sigma") && e.contains("fleet.json"), "{e}");

    // Results of an earlier organ (format 1) are refused with the advice to measure again.
    let r = copy_of(&results, "tied-format1");
    let mut v = read(&r.join("fleet.json"));
    v["organ_fleet"] = 1.into();
    write(&r.join("fleet.json"), &v);
    let e = fails(merge(&r));
    assert!(e.contains("format 1") && e.contains("measure the fleet again"), "{e}");
}

#[test]
fn the_merge_reads_only_regular_files_and_checks_their_size_first() {
    let results = measured("regular");
    let index0 = read(&results.join("shard-0-of-2.json"));
    let a_result = index0["results"][0]["result"].as_str().unwrap().to_owned();
    let sparse = |p: &Path, len: u64| {
        let _ = std::fs::remove_file(p);
        std::fs::File::create(p).unwrap().set_len(len).unwrap();
    };
    /// (name, how the results are broken, what the error says)
    type Case<'a> = (&'a str, Box<dyn Fn(&Path) + 'a>, &'a str);
    let cases: Vec<Case> = vec![
        // Before: 2.53 GiB before "larger than 1073741824".
        (
            "zero",
            Box::new(|r: &Path| {
                std::fs::remove_file(r.join("fleet.json")).unwrap();
                std::os::unix::fs::symlink("/dev/zero", r.join("fleet.json")).unwrap();
            }),
            "a device, not a regular file",
        ),
        // Before: blocked forever.
        (
            "fifo",
            Box::new(|r: &Path| {
                let p = r.join("shard-1-of-2.json");
                std::fs::remove_file(&p).unwrap();
                let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
                // SAFETY: a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
            }),
            "a FIFO, not a regular file",
        ),
        ("big-fleet", Box::new(move |r: &Path| sparse(&r.join("fleet.json"), (16 << 20) + 1)), "bytes, over the"),
        ("big-index", Box::new(move |r: &Path| sparse(&r.join("shard-0-of-2.json"), 1 << 30)), "bytes, over the"),
        ("big-result", Box::new(move |r: &Path| sparse(&r.join(&a_result), (16 << 20) + 1)), "bytes, over the"),
    ];
    for (name, break_it, want) in cases {
        let r = copy_of(&results, &format!("regular-{name}"));
        break_it(&r);
        let (o, took) = timed(&["report".as_ref(), "merge".as_ref(), r.as_os_str()], &format!("regular-{name}"));
        println!("{name}: exit {:?} in {took:?}, peak RSS {} MiB", o.code, o.peak_rss_kib >> 10);
        assert!(!o.timed_out, "{name}: still running after 30 s");
        assert_eq!(o.code, Some(1), "{name}: {}", o.stderr);
        assert!(o.stderr.contains(want), "{name}: {}", o.stderr);
        assert!(took < Duration::from_secs(10), "{name}: {took:?}");
        assert!(o.peak_rss_kib < 64 << 10, "{name}: peak RSS {} KiB", o.peak_rss_kib);
    }
}

/// Before: merging N index entries was quadratic (100 000: 42 s). The index is checked
/// whole before any result is read: here it fails at the first result, which is not there.
#[test]
fn merging_is_linear_in_the_fleet() {
    const N: usize = 100_000;
    let results = measured("linear");
    let fleet = read(&results.join("fleet.json"));
    let real = read(&results.join("shard-0-of-2.json"));
    let some = real["results"][0]["result"].as_str().unwrap();
    // `z1-<identity>-<definition digest>.json`: the digest is the fleet's definition's.
    let digest = some.rsplit('-').next().unwrap();
    let r = tmp("linear-big");
    let _ = std::fs::remove_dir_all(&r);
    std::fs::create_dir_all(&r).unwrap();
    let models: Vec<String> = (0..N).map(|i| format!("m{i:06}.gguf")).collect();
    let entries: Vec<Value> = (models.iter().enumerate())
        .map(|(i, m)| {
            let id = format!("{i:064x}");
            serde_json::json!({
                "model": m,
                "model_blake3": id,
                "result": format!("z1-{id}-{digest}"),
                "result_blake3": "0".repeat(64),
            })
        })
        .collect();
    let mut f = fleet.clone();
    f["shards"] = 1.into();
    f["models"] = models.into();
    write(&r.join("fleet.json"), &f);
    let index = serde_json::json!({
        "organ_fleet": fleet["organ_fleet"],
        "shard": 0,
        "shards": 1,
        "definition": fleet["definition"],
        "results": entries,
    });
    write(&r.join("shard-0-of-1.json"), &index);
    let (o, took) = timed(&["report".as_ref(), "merge".as_ref(), r.as_os_str()], "linear-big");
    println!("{N} models: exit {:?} in {took:?}, peak RSS {} MiB", o.code, o.peak_rss_kib >> 10);
    assert!(!o.timed_out, "still running after 30 s");
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("missing: the report of m000000.gguf"), "{}", o.stderr);
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(o.peak_rss_kib < 256 << 10, "peak RSS {} KiB", o.peak_rss_kib);
}

/// Before: a 62 MB result was accepted at 581 MiB of RSS. Now it is refused from its size
/// (over 16 MiB), and a result just under that, of rows as a measure writes them, merges
/// in bounded memory.
#[test]
fn a_large_result_merges_in_bounded_memory() {
    let results = measured("large");
    let index0 = results.join("shard-0-of-2.json");
    let mut v = read(&index0);
    let name = v["results"][0]["result"].as_str().unwrap().to_owned();
    let mut f = read(&results.join(&name));
    let row = f["report"]["tensors"][1].clone();
    let one = serde_json::to_vec(&row).unwrap().len();
    let rows = (14 << 20) / (one + 1);
    let tensors: Vec<Value> = (0..rows)
        .map(|i| {
            let mut t = row.clone();
            t["name"] = format!("blk.{}.attn_q.weight", i).into();
            t
        })
        .collect();
    f["report"]["tensors"] = tensors.into();
    let bytes = serde_json::to_vec(&f).unwrap();
    println!("a result of {} rows, {} bytes", rows, bytes.len());
    assert!(bytes.len() > 12 << 20 && bytes.len() < 16 << 20, "{}", bytes.len());
    std::fs::write(results.join(&name), &bytes).unwrap();
    v["results"][0]["result_blake3"] = blake3::hash(&bytes).to_hex().as_str().into();
    write(&index0, &v);
    let (json, csv) = (tmp("large-merged.json"), tmp("large-ranking.csv"));
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(&csv);
    let args = [
        "report".as_ref(),
        "merge".as_ref(),
        "--summary-only".as_ref(),
        results.as_os_str(),
        "--json".as_ref(),
        json.as_os_str(),
        "--ranking-csv".as_ref(),
        csv.as_os_str(),
    ];
    let (o, took) = timed(&args, "large");
    let mib = bytes.len() >> 20;
    println!("merge of a {mib} MiB result: exit {:?} in {took:?}, peak RSS {} MiB", o.code, o.peak_rss_kib >> 10);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let ranking = std::fs::read_to_string(&csv).unwrap();
    assert!(ranking.lines().any(|l| l.contains(",a.gguf,")), "{ranking}");
    assert!(o.peak_rss_kib < 256 << 10, "peak RSS {} KiB", o.peak_rss_kib);

    assert!(std::fs::metadata(&json).unwrap().len() > bytes.len() as u64, "every row is in the merged report");

    // The 62 MB result is refused from its size.
    let mut big = bytes;
    big.resize(62_000_000, b' ');
    std::fs::write(results.join(&name), &big).unwrap();
    std::fs::remove_file(&json).unwrap();
    std::fs::remove_file(&csv).unwrap();
    let (o, _) = timed(&args, "large-over");
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("62000000 bytes, over the 16777216"), "{}", o.stderr);
    assert!(o.peak_rss_kib < 64 << 10, "peak RSS {} KiB", o.peak_rss_kib);
}
