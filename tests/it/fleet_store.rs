//! A fleet's results in an object store (`organ measure --fleet DIR --shard I/3 --results
//! s3://BUCKET/PREFIX`, `organ report merge s3://…`), against moto's S3 server on
//! loopback: three workers, one killed with SIGKILL mid-run and started again, merge to
//! the tables `organ measure DIR` gives on one machine, byte for byte; the store's
//! conditional create keeps the first worker's fleet file; what is missing or broken in
//! the bucket is named by its URL.

use crate::common::*;
use crate::fleet_shards::{fleet, listed, merges_as_one_machine, three_workers_one_killed, worker};
use crate::moto::Moto;
use crate::store::Server;
use std::path::Path;
use std::process::Stdio;

/// Every key under `prefix/` of `bucket`, one a line.
fn keys(moto: &Moto, bucket: &str, prefix: &str) -> Vec<String> {
    let list = "for o in s3.list_objects_v2(Bucket=sys.argv[1], Prefix=sys.argv[2]).get('Contents', []): \
                print(o['Key'])";
    moto.boto3(list, &[bucket, &format!("{prefix}/")]).lines().map(str::to_owned).collect()
}

#[test]
fn three_workers_into_s3_one_killed_merge_to_the_one_machine_tables() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let Some(python) = need::moto() else { return };
    let moto = Moto::start(&python);
    moto.boto3("s3.create_bucket(Bucket='fleet')", &[]);
    let fleet = fleet(&model, "store");
    let url = "s3://fleet/run-1";
    let results = Path::new(url);
    let worker = |args: &[&str]| {
        let mut c = worker(&fleet, results, args, &[]);
        moto.env(&mut c);
        c
    };

    // Workers 1 and 2 run to the end while worker 0 is killed after its first model. All
    // three start together: one creates fleet.json, the others find it.
    three_workers_one_killed(|i| {
        worker(&["--shard", &format!("{i}/3")]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap()
    });

    // Until shard 0 is done, merge names what is missing, by URL.
    let merge = || {
        let mut m = moto.organ();
        m.args(["report", "merge", url]);
        m
    };
    let e = fails(merge());
    assert!(
        e.contains(&format!("{url}/: shard 0/3 not finished")) && e.contains("a.gguf, d-organs, g-copy.gguf"),
        "{e}"
    );

    // Started again, worker 0 takes a.gguf from the bucket; g-copy.gguf, the same bytes, too.
    let again = ok(worker(&["--shard", "0/3"]));
    let out = String::from_utf8(again.stdout.clone()).unwrap();
    assert!(out.lines().any(|l| l.starts_with("  in results") && l.ends_with("a.gguf")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("  in results") && l.ends_with("g-copy.gguf")), "{out}");
    assert!(out.contains(&format!("{url}/shard-0-of-3.json")), "{out}");
    assert_eq!(listed(&again.stdout), ["a.gguf", "d-organs", "g-copy.gguf"]);
    // The kill left nothing but whole objects of organ's: six results (a.gguf and
    // g-copy.gguf share one), three indexes, the fleet file.
    let mut stored = keys(&moto, "fleet", "run-1");
    stored.sort();
    assert_eq!(stored.len(), 10, "{stored:?}");
    assert_eq!(
        stored[..4],
        ["run-1/fleet.json", "run-1/shard-0-of-3.json", "run-1/shard-1-of-3.json", "run-1/shard-2-of-3.json"]
    );
    assert!(stored[4..].iter().all(|k| k.starts_with("run-1/z1-") && k.ends_with(".json")), "{stored:?}");

    // The merge is what one machine prints and writes for the same directory.
    let csv = merges_as_one_machine(merge(), &fleet, "store");

    // Another split of the same prefix: the store refuses the second create of fleet.json
    // (If-None-Match: *), so the worker reads the first and stops; the results still merge.
    let e = fails(worker(&["--shard", "0/4"]));
    assert!(e.contains(&format!("{url}/fleet.json: this fleet is split in 3 shards, not 4")), "{e}");

    // A result cut short in the bucket: merge names its URL; the worker measures it again.
    let cut = "import json\n\
               idx = json.loads(s3.get_object(Bucket='fleet', Key='run-1/shard-1-of-3.json')['Body'].read())\n\
               key = 'run-1/' + idx['results'][0]['result']\n\
               body = s3.get_object(Bucket='fleet', Key=key)['Body'].read()\n\
               s3.put_object(Bucket='fleet', Key=key, Body=body[:len(body) // 2])\n\
               print(key)";
    let key = moto.boto3(cut, &[]).trim().to_owned();
    let e = fails(merge());
    assert!(e.contains(&format!("s3://fleet/{key}: its BLAKE3 is")), "{e}");
    let again = ok(worker(&["--shard", "1/3"]));
    assert!(String::from_utf8_lossy(&again.stderr).contains("measured again"));
    let out = String::from_utf8(again.stdout).unwrap();
    assert!(out.lines().any(|l| l.starts_with("  measured") && l.ends_with("b-q8_0.gguf")), "{out}");
    let merged_csv = tmp("store-again.csv");
    let mut m = merge();
    m.arg("--ranking-csv").arg(&merged_csv);
    ok(m);
    assert_eq!(std::fs::read(&merged_csv).unwrap(), csv);

    // A prefix with no fleet in it, a bucket that does not exist, a URL that is no store's:
    // each an error naming the URL.
    for (results, says) in [
        ("s3://fleet/run-2", "s3://fleet/run-2/fleet.json: not there: not the results of organ measure --fleet"),
        (
            "s3://no-such-bucket/run-1",
            "s3://no-such-bucket/run-1/fleet.json: cannot read: no such object (or no such bucket)",
        ),
        (
            "https://example.invalid/run-1",
            "https://example.invalid/run-1: results go to a directory or an object store",
        ),
    ] {
        let mut m = moto.organ();
        m.args(["report", "merge", results]);
        let e = fails(m);
        assert!(e.contains(says), "{results}: {e}");
    }
    let mut w = crate::fleet_shards::worker(&fleet, Path::new("s3://no-such-bucket/run-1"), &["--shard", "0/3"], &[]);
    moto.env(&mut w);
    let e = fails(w);
    assert!(e.contains("s3://no-such-bucket/run-1/fleet.json") && e.contains("no such bucket"), "{e}");
}
