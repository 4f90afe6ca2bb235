//! Fleets measured in shards (`organ measure --fleet DIR --shard I/N --results R`) and
//! merged (`organ report merge R`): three workers, one killed with SIGKILL mid-run and
//! started again, give the tables `organ measure DIR` gives on one machine, byte for byte;
//! the batch engines' variables give the same split; bad values are refused.

use crate::build::*;
use crate::common::*;
use organ_core::GgmlType;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The variables that choose a shard: cleared, so the runner's own never leak in.
const SHARD_VARS: [&str; 5] = [
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_STEP",
];

/// `organ measure --fleet FLEET --results RESULTS ARGS…` with `vars` set (and no other
/// shard variable).
pub fn worker(fleet: &Path, results: &Path, args: &[&str], vars: &[(&str, &str)]) -> Command {
    let mut c = organ();
    for v in SHARD_VARS {
        c.env_remove(v);
    }
    c.envs(vars.iter().copied());
    c.arg("measure").arg("--fleet").arg(fleet).arg("--results").arg(results).args(args);
    c
}

/// The models `worker`'s output lists as its shard's, in order.
pub fn listed(stdout: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(stdout);
    text.lines().filter(|l| l.starts_with("  ")).map(|l| l.rsplit("°  ").next().unwrap().to_owned()).collect()
}

fn link_or_copy(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    if std::fs::hard_link(src, dst).is_err() {
        std::fs::copy(src, dst).unwrap();
    }
}

/// A small model of three tensors, its values drawn from `seed`.
fn small(name: &str, seed: u64) -> PathBuf {
    write_model(
        name,
        "llama",
        &[
            t("token_embd.weight", &[64, 32], GgmlType::Q8_0, noise(seed, 64 * 32)),
            t("blk.0.attn_q.weight", &[64, 64], GgmlType::F32, noise(seed + 1, 64 * 64)),
            t("blk.0.ffn_up.weight", &[64, 96], GgmlType::Q4_0, noise(seed + 2, 64 * 96)),
        ],
    )
}

/// Seven models, sorted by name so that shard 0/3 gets a.gguf, d-organs and g-copy.gguf:
/// SmolLM2 first and a byte-identical copy of it last (one result serves both). Its files
/// are named from `tag`, one per test.
pub fn fleet(model: &Path, tag: &str) -> PathBuf {
    let dir = tmp(&format!("{tag}-fleet"));
    let _ = std::fs::remove_dir_all(&dir);
    link_or_copy(model, &dir.join("a.gguf"));
    link_or_copy(&smollm2_q8_0(model), &dir.join("b-q8_0.gguf"));
    let mut split = llama_tool("llama-gguf-split");
    std::fs::create_dir_all(dir.join("c-split")).unwrap();
    split.args(["--split", "--split-max-size", "40M"]).arg(model).arg(dir.join("c-split/s"));
    ok(split);
    let organs = dissect(&small(&format!("{tag}-organ.gguf"), 10), &format!("{tag}-organs"), &[]);
    std::fs::rename(&organs, dir.join("d-organs")).unwrap();
    std::fs::rename(small(&format!("{tag}-e.gguf"), 20), dir.join("e-small.gguf")).unwrap();
    std::fs::rename(small(&format!("{tag}-f.gguf"), 30), dir.join("f-small.gguf")).unwrap();
    std::fs::copy(model, dir.join("g-copy.gguf")).unwrap();
    dir
}

#[test]
fn three_workers_one_killed_merge_to_the_one_machine_tables() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let fleet = fleet(&model, "shards");
    let results = tmp("shards-results");
    let _ = std::fs::remove_dir_all(&results);

    // Workers 1 and 2 run to the end while worker 0 is killed after its first model.
    let spawn = |i: usize| {
        let mut c = worker(&fleet, &results, &["--shard", &format!("{i}/3")], &[]);
        c.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap()
    };
    three_workers_one_killed(spawn);
    assert!(!results.join("shard-0-of-3.json").exists(), "worker 0 was killed before it finished");

    // Until shard 0 is done, merge names what is missing.
    let mut m = organ();
    m.arg("report").arg("merge").arg(&results);
    let e = fails(m);
    assert!(e.contains("shard 0/3 not finished") && e.contains("a.gguf, d-organs, g-copy.gguf"), "{e}");

    // Started again, worker 0 takes a.gguf from the results; g-copy.gguf, the same bytes, too.
    let again = ok(worker(&fleet, &results, &["--shard", "0/3"], &[]));
    let out = String::from_utf8(again.stdout.clone()).unwrap();
    assert!(out.contains("  in results") && out.contains("a.gguf"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("  in results") && l.ends_with("g-copy.gguf")), "{out}");
    assert_eq!(listed(&again.stdout), ["a.gguf", "d-organs", "g-copy.gguf"]);
    let dead_temps =
        std::fs::read_dir(&results).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with('.'));
    assert_eq!(dead_temps.count(), 0, "the killed worker's temp entries are swept");

    // The merge is what one machine prints and writes for the same directory.
    let mut m = organ();
    m.args(["report", "merge"]).arg(&results);
    let csv = merges_as_one_machine(m, &fleet, "shards");
    let merged_csv = tmp("shards-merged.csv");

    // Kubernetes' and Slurm's variables choose the same shards (all in the results now).
    let by_flag: Vec<Vec<String>> =
        (0..3).map(|i| listed(&ok(worker(&fleet, &results, &["--shard", &format!("{i}/3")], &[])).stdout)).collect();
    for (i, want) in by_flag.iter().enumerate() {
        let index = i.to_string();
        let k8s = ok(worker(&fleet, &results, &["--shards", "3"], &[("JOB_COMPLETION_INDEX", &index)]));
        assert_eq!(&listed(&k8s.stdout), want, "JOB_COMPLETION_INDEX={i}");
        let id = (5 + i).to_string();
        let slurm =
            [("SLURM_ARRAY_TASK_ID", id.as_str()), ("SLURM_ARRAY_TASK_MIN", "5"), ("SLURM_ARRAY_TASK_COUNT", "3")];
        let s = ok(worker(&fleet, &results, &[], &slurm));
        assert_eq!(&listed(&s.stdout), want, "SLURM_ARRAY_TASK_ID={id}");
        assert!(String::from_utf8_lossy(&s.stdout).contains(&format!("shard {i}/3 done: 0 measured")));
    }

    // Bad values, and another split of the same results, are refused before any work.
    for (args, vars, want) in [
        (&["--shard", "3/3"][..], &[][..], "--shard 3/3: shard 3 is out of range: 3 shards are numbered 0 to 2"),
        (&["--shards", "3"], &[("JOB_COMPLETION_INDEX", "3")], "JOB_COMPLETION_INDEX=3: shard 3 is out of range"),
        (&["--shards", "3"], &[("JOB_COMPLETION_INDEX", "one")], "JOB_COMPLETION_INDEX=one: \"one\" is not a number"),
        (&["--shard", "1/3"], &[("JOB_COMPLETION_INDEX", "2")], "conflicting shard indexes"),
        (&["--shards", "3"], &[], "--shards 3 gives how many shards there are but not which one"),
        (
            &[],
            &[("SLURM_ARRAY_TASK_ID", "3"), ("SLURM_ARRAY_TASK_MIN", "0"), ("SLURM_ARRAY_TASK_COUNT", "3")],
            "shard 3 is out of range",
        ),
        (&["--shard", "0/4"], &[], "this fleet is split in 3 shards, not 4: use another --results"),
    ] {
        let e = fails(worker(&fleet, &results, args, vars));
        assert!(e.contains(want), "{args:?} {vars:?}: {e}");
    }

    // A result of another report schema, or cut short, is named by merge, never used: its
    // bytes are not those its index recorded.
    let r = results.join(one_result(&results));
    let bytes = std::fs::read(&r).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    v["definition"]["report_schema"] = 99.into();
    for (planted, want) in
        [(serde_json::to_vec(&v).unwrap(), "its BLAKE3 is"), (bytes[..bytes.len() / 2].to_vec(), "its BLAKE3 is")]
    {
        std::fs::write(&r, planted).unwrap();
        let mut m = organ();
        m.args(["report", "merge"]).arg(&results);
        let e = fails(m);
        assert!(e.contains(&r.display().to_string()) && e.contains(want), "{e}");
    }
    // A worker measures such a result again (it is shard 1's first model, b-q8_0.gguf).
    let again = ok(worker(&fleet, &results, &["--shard", "1/3"], &[]));
    assert!(String::from_utf8_lossy(&again.stderr).contains("measured again"));
    let out = String::from_utf8(again.stdout).unwrap();
    assert!(out.lines().any(|l| l.starts_with("  measured") && l.ends_with("b-q8_0.gguf")), "{out}");
    let mut m = organ();
    m.args(["report", "merge", "--force"]).arg(&results).arg("--ranking-csv").arg(&merged_csv);
    ok(m);
    assert_eq!(std::fs::read(&merged_csv).unwrap(), csv);
}

/// Runs `merge` (`organ report merge RESULTS`) with `--ranking-csv` and `--json`, and
/// `organ measure FLEET --no-cache` with the same: the files are byte-identical, and so is
/// the text printed. Files named from `tag`. The ranking CSV.
#[track_caller]
pub fn merges_as_one_machine(mut merge: std::process::Command, fleet: &Path, tag: &str) -> Vec<u8> {
    let (merged_csv, merged_json) = (tmp(&format!("{tag}-merged.csv")), tmp(&format!("{tag}-merged.json")));
    merge.arg("--ranking-csv").arg(&merged_csv).arg("--json").arg(&merged_json);
    let merged = ok(merge);
    let (one_csv, one_json) = (tmp(&format!("{tag}-one.csv")), tmp(&format!("{tag}-one.json")));
    let mut one = organ();
    one.arg("measure").arg(fleet).arg("--no-cache").arg("--ranking-csv").arg(&one_csv).arg("--json").arg(&one_json);
    let one = ok(one);
    let csv = std::fs::read(&merged_csv).unwrap();
    assert_eq!(csv, std::fs::read(&one_csv).unwrap(), "--ranking-csv differs");
    assert_eq!(String::from_utf8_lossy(&csv).lines().count(), 8, "a header and seven models");
    assert!(std::fs::read(&merged_json).unwrap() == std::fs::read(&one_json).unwrap(), "--json differs");
    assert_eq!(String::from_utf8(merged.stdout).unwrap(), String::from_utf8(one.stdout).unwrap());
    csv
}

/// The name of one model's result in `results`.
fn one_result(results: &Path) -> String {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("shard-1-of-3.json")).unwrap()).unwrap();
    index["results"][0]["result"].as_str().unwrap().to_owned()
}

/// Starts workers 1, 2 and 0 of a 7-model fleet in 3 shards by `spawn(i)` (stdout piped),
/// kills worker 0 with SIGKILL once it has measured its first model (a.gguf), and waits for
/// 1 and 2, which must finish their two models each.
#[track_caller]
pub fn three_workers_one_killed(spawn: impl Fn(usize) -> Child) {
    let (w1, w2) = (spawn(1), spawn(2));
    let mut w0 = spawn(0);
    let mut lines = BufReader::new(w0.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "shard 0/3: 3 of 7 models");
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("  measured") && first.ends_with("a.gguf"), "{first}");
    w0.kill().unwrap(); // SIGKILL, in the middle of its second or third model
    assert!(!w0.wait().unwrap().success());
    for w in [w1, w2] {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success());
        assert_eq!(listed(&out.stdout).len(), 2, "{}", String::from_utf8_lossy(&out.stdout));
    }
}
