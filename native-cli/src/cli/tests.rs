//! Every command's flags said as an argv ([`super::argv`]) parse back into the same flags:
//! the server's children get exactly what their requests asked for.

use super::*;
use crate::cmd::eval::JudgeArgs;
use organ_core::report::formats::{CSV, HTML, JSON, RANKING_CSV};
use std::path::PathBuf;

/// `args`' argv parsed again by `organ`'s own parser.
fn reparsed(args: &impl ToArgs) -> Command {
    let argv = std::iter::once("organ".into()).chain(argv(args));
    match Cli::try_parse_from(argv) {
        Ok(cli) => cli.command,
        Err(e) => panic!("{:?} does not parse: {e}", super::argv(args)),
    }
}

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

fn work() -> Work {
    Work { threads: Some(3), stream: true, stats: true }
}

fn judge() -> JudgeArgs {
    JudgeArgs {
        judge: Some(p("/t/text")),
        judge_ctx: 64,
        judge_chunks: Some(3),
        llama_cpp: Some(p("/llama/bin")),
        judge_threads: Some(2),
        judge_gpu_layers: Some("all".into()),
        judge_device: Some("CUDA0,CUDA1".into()),
        logits_cache_max: 0,
    }
}

fn select() -> SelectArgs {
    SelectArgs { layers: Some("1-3,7".into()), types: vec!["organ".into(), "norm".into()], names: vec!["blk.*".into()] }
}

fn report() -> ReportOutputs {
    let files = ReportFiles::default()
        .with(&JSON, Some(p("/r/a.json")))
        .with(&CSV, Some(p("/r/a.csv")))
        .with(&HTML, Some(p("/r/a.html")))
        .with(&RANKING_CSV, Some(p("/r/rank.csv")));
    ReportOutputs {
        files,
        summary_only: true,
        wells: 3,
        all_wells: true,
        verdicts: vec![p("/r/eval.json"), p("/r/eval2.json")],
    }
}

const FORCE: Force = Force { force: true };

#[test]
fn measure_and_merge_round_trip() {
    let m = MeasureArgs {
        models: vec![p("/m/a.gguf"), p("/m/b dir")],
        report: report(),
        work: work(),
        no_cache: true,
        force: FORCE,
        sigma: true,
        experts: true,
        base: Some(p("/base.gguf")),
        ..Default::default()
    };
    assert_eq!(reparsed(&m), Command::Measure(m.clone()));
    let exact = MeasureArgs { sigma: false, exact: true, no_cache: false, cache: Some(p("/c")), ..m };
    assert_eq!(reparsed(&exact), Command::Measure(exact.clone()));
    let fleet = MeasureArgs {
        fleet: Some(p("/fleet")),
        shard: Some("1/4".into()),
        shards: Some(4),
        results: Some(p("s3://b/p")),
        report: ReportOutputs { summary_only: true, wells: 7, ..Default::default() },
        ..Default::default()
    };
    assert_eq!(reparsed(&fleet), Command::Measure(fleet.clone()));
    let merge = MergeArgs { results: p("/results"), report: report(), force: FORCE };
    assert_eq!(reparsed(&merge), Command::Report { what: ReportCommand::Merge(merge.clone()) });
}

#[test]
fn diff_check_inspect_round_trip() {
    let d = DiffArgs {
        outputs: ReportFiles::default()
            .with(&HTML, Some(p("/d.html")))
            .with(&JSON, Some(p("/d.json")))
            .with(&CSV, Some(p("/d.csv"))),
        top: 42,
        only_changed: true,
        fail_on_change: true,
        work: work(),
        force: FORCE,
        ..DiffArgs::new(p("/a.gguf"), p("/b.gguf"))
    };
    assert_eq!(reparsed(&d), Command::Diff(d.clone()));
    let reports = ReportFiles::default().with(&JSON, Some(p("-")));
    let c = CheckArgs {
        model: p("/m"),
        reports,
        work: work(),
        exit_zero: true,
        force: FORCE,
        base: Some(p("/b")),
        derived_from: None,
        imatrix: None,
    };
    assert_eq!(reparsed(&c), Command::Check(c.clone()));
    let c = CheckArgs { base: None, derived_from: Some(p("/src")), imatrix: Some(p("/i.gguf")), ..c };
    assert_eq!(reparsed(&c), Command::Check(c.clone()));
    let i = InspectArgs::new(p("/m.gguf"), true);
    assert_eq!(reparsed(&i), Command::Inspect(i.clone()));
}

#[test]
fn surgery_round_trips() {
    let d = DissectArgs { model: p("/m.gguf"), out: p("/o"), measure: true, sha256: true, force: FORCE };
    assert_eq!(reparsed(&d), Command::Dissect(d.clone()));
    let a = AssembleArgs { dir: p("/o"), out: p("/m.gguf"), split_max_size: Some("40M".into()), force: FORCE };
    assert_eq!(reparsed(&a), Command::Assemble(a.clone()));
    let g = GraftArgs {
        donor: p("/d"),
        recipient: p("/r"),
        out: Some(p("/g.gguf")),
        select: select(),
        all: false,
        dry_run: true,
        split_max_size: Some("1G".into()),
        sha256: true,
        force: FORCE,
        json: Some(p("/g.json")),
        judge: judge(),
    };
    assert_eq!(reparsed(&g), Command::Graft(g.clone()));
    let mut u = PurifyArgs::new(p("/m"), "spectral".into(), p("/p.gguf"));
    (u.select, u.strength, u.keep, u.as_type, u.only_if_improves) = (select(), 0.25, 0.8, Some("f16".into()), true);
    (u.json, u.split_max_size, u.force, u.judge) = (Some(p("/p.json")), Some("2G".into()), FORCE, judge());
    assert_eq!(reparsed(&u), Command::Purify(u.clone()));
    let every = GraftArgs { select: SelectArgs::default(), all: true, ..g.clone() };
    assert_eq!(reparsed(&every), Command::Graft(every.clone()));
    let every = PurifyArgs { select: SelectArgs::default(), all: true, ..u.clone() };
    assert_eq!(reparsed(&every), Command::Purify(every.clone()));
    // --all and a criterion contradict each other.
    assert!(Cli::try_parse_from([
        "organ", "purify", "/m", "--method", "fractal", "--out", "/o", "--all", "--layers", "1"
    ])
    .is_err());
    let mut m = MoeArgs::new(p("/base"), vec![p("/e0"), p("/e1")], p("/moe.gguf"));
    (m.experts_used, m.router, m.seed, m.ty) = (1, "embed".into(), 9, Some("q8_0".into()));
    (m.prompts, m.negative_prompts) = (vec![p("/p0"), p("/p1")], vec![p("/n0"), p("/n1")]);
    (m.force, m.json, m.judge) = (FORCE, Some(p("/moe.json")), judge());
    assert_eq!(reparsed(&m), Command::Moe(m.clone()));
    let common = experts::Common {
        model: p("/moe"),
        written: Written { out: Some(p("/x.gguf")), dry_run: true, force: FORCE },
        json: Some(p("/x.json")),
        judge: judge(),
    };
    let x = experts::Op::Extract { common: common.clone(), expert: 3 };
    assert_eq!(reparsed(&x), Command::Experts { op: x.clone() });
    let y = experts::Op::Prune { common, keep: "0-3,6".into(), experts_used: Some(2) };
    assert_eq!(reparsed(&y), Command::Experts { op: y.clone() });
    let l = LayersArgs {
        model: p("/m"),
        drop: Some("10-12,15".into()),
        keep: None,
        written: Written { out: Some(p("/l.gguf")), dry_run: true, force: FORCE },
        json: Some(p("/l.json")),
        judge: judge(),
    };
    assert_eq!(reparsed(&l), Command::Layers(l.clone()));
    let k = LayersArgs { drop: None, keep: Some("0-3".into()), ..l };
    assert_eq!(reparsed(&k), Command::Layers(k.clone()));
    // One of --drop and --keep, not both.
    assert!(Cli::try_parse_from(["organ", "layers", "/m", "--out", "/o.gguf"]).is_err());
    assert!(Cli::try_parse_from(["organ", "layers", "/m", "--drop", "1", "--keep", "2", "--out", "/o.gguf"]).is_err());
}

#[test]
fn lora_merge_round_trips() {
    let m = lora::LoraMergeArgs {
        base: p("/base.gguf"),
        lora: vec!["/a.gguf".into(), "/b.gguf:0.5".into()],
        out: p("/m.gguf"),
        ty: "f16".into(),
        json: Some(p("/m.json")),
        force: FORCE,
        judge: judge(),
    };
    let op = lora::Op::Merge(m);
    assert_eq!(reparsed(&op), Command::Lora { op: op.clone() });
}

#[test]
fn eval_and_defaults_round_trip() {
    let mut e = EvalArgs::new(p("/m.gguf"), p("/text"));
    (e.base, e.ctx, e.threads, e.chunks) = (Some(p("/base")), 128, Some(2), Some(5));
    (e.json, e.llama_cpp, e.force) = (Some(p("/e.json")), Some(p("/bin")), FORCE);
    (e.lora, e.base_lora) = (vec!["/a.gguf".into(), "/b.gguf:0.5".into()], vec!["/c.gguf:2".into()]);
    e.logits_cache_max = 5 << 20;
    assert_eq!(reparsed(&e), Command::Eval(e.clone()));
    // The constructors the server starts from are clap's defaults.
    let plain = EvalArgs::new(p("/m.gguf"), p("/text"));
    assert_eq!(reparsed(&plain), Command::Eval(plain.clone()));
    let diff = DiffArgs::new(p("/a"), p("/b"));
    let parsed = Cli::try_parse_from(["organ", "diff", "/a", "/b"]).map(|c| c.command).ok();
    assert_eq!(parsed, Some(Command::Diff(diff)));
    let purify = PurifyArgs::new(p("/m"), "fractal".into(), p("/o"));
    let parsed = Cli::try_parse_from(["organ", "purify", "/m", "--method", "fractal", "--out", "/o"]);
    assert_eq!(parsed.map(|c| c.command).ok(), Some(Command::Purify(purify)));
    let moe = MoeArgs::new(p("/b"), vec![p("/e")], p("/o"));
    let parsed = Cli::try_parse_from(["organ", "moe", "--base", "/b", "--expert", "/e", "--out", "/o"]);
    assert_eq!(parsed.map(|c| c.command).ok(), Some(Command::Moe(moe)));
}

#[test]
fn global_flags_round_trip() {
    let remote = RemoteFlags {
        remote_gap: Some(1),
        remote_concurrency: Some(2),
        remote_retries: Some(3),
        remote_max_whole: Some(4),
        remote_speed_limit: Some(5),
        remote_speed_time: Some(6),
    };
    let g = Global {
        no_verify: true,
        progress: crate::progress::Format::Jsonl,
        verbose: true,
        fsync: true,
        remote,
        max_header_bytes: Some(1 << 20),
    };
    let inspect = InspectArgs {
        layers: Some("5-20".into()),
        groups: vec!["organ".into()],
        names: vec!["*ffn*".into()],
        memory: true,
        ctx: Some(8192),
        kv_type: Some("q8_0".into()),
        batch: Some(1024),
        ubatch: Some(256),
        gpu_layers: Some(12),
        ..InspectArgs::new(p("/m"), false)
    };
    let mut args = vec!["organ".into()];
    args.extend(argv(&inspect));
    args.extend(argv(&g));
    let cli = Cli::try_parse_from(args).expect("parses");
    assert_eq!((cli.command, cli.global), (Command::Inspect(inspect), g));
}

#[test]
fn sensitivity_and_recipe_round_trip() {
    let mut m = SensitivityArgs::new(p("/m.gguf"));
    (m.text, m.to, m.select, m.jobs, m.ctx, m.chunks) =
        (Some(p("/text")), Some("q4_0".into()), select(), Some(2), 256, Some(9));
    m.repeat_text = Some(p("/again"));
    m.reports = ReportFiles::default().with(&JSON, Some(p("/s.json"))).with(&CSV, Some(p("/s.csv")));
    m.reports = m.reports.with(&HTML, Some(p("/s.html")));
    (m.no_cache, m.llama_cpp, m.stats, m.force) = (true, Some(p("/bin")), true, FORCE);
    assert_eq!(reparsed(&m), Command::Sensitivity(m.clone()));
    let mut a = SensitivityArgs::new(p("/m.gguf"));
    (a.text, a.ablate, a.seed, a.cache, a.keep_models) =
        (Some(p("/text")), Some("noise".into()), Some(7), Some(p("/c")), Some(p("/k")));
    assert_eq!(reparsed(&a), Command::Sensitivity(a.clone()));
    let mut pr = SensitivityArgs::new(p("/m.gguf"));
    (pr.predict, pr.to, pr.imatrix, pr.truth) = (true, Some("q2_0".into()), Some(p("/i.gguf")), Some(p("/t.json")));
    pr.reports = ReportFiles::default().with(&JSON, Some(p("/p.json"))).with(&CSV, Some(p("/p.csv")));
    assert_eq!(reparsed(&pr), Command::Sensitivity(pr.clone()));

    let mut r = RecipeArgs::new(p("/m.gguf"));
    (r.target_bpw, r.from, r.out, r.json) =
        (Some(4.25), vec![p("/q4.json"), p("/q8.json")], Some(p("/r.txt")), Some(p("/r.json")));
    (r.apply, r.imatrix_file, r.text, r.ctx, r.chunks) =
        (Some(p("/o.gguf")), Some(p("/i.gguf")), Some(p("/held")), 256, Some(3));
    (r.llama_cpp, r.force) = (Some(p("/bin")), FORCE);
    assert_eq!(reparsed(&r), Command::Recipe(r.clone()));
    let mut d = RecipeArgs::new(p("/m.gguf"));
    (d.target_size, d.data_free, d.types) = (Some("90M".into()), true, vec!["Q4_0".into(), "q8_0".into()]);
    assert_eq!(reparsed(&d), Command::Recipe(d.clone()));
    let mut i = RecipeArgs::new(p("/m.gguf"));
    (i.target_bpw, i.imatrix) = (Some(3.0), Some(p("/i.gguf")));
    assert_eq!(reparsed(&i), Command::Recipe(i.clone()));
    // The constructors the server starts from are clap's defaults.
    let parsed = Cli::try_parse_from(["organ", "sensitivity", "/m", "--to", "q4_0", "--predict"]);
    let want = SensitivityArgs { to: Some("q4_0".into()), predict: true, ..SensitivityArgs::new(p("/m")) };
    assert_eq!(parsed.map(|c| c.command).ok(), Some(Command::Sensitivity(want)));
    let parsed = Cli::try_parse_from(["organ", "recipe", "/m", "--target-bpw", "4", "--data-free"]);
    let want = RecipeArgs { target_bpw: Some(4.0), data_free: true, ..RecipeArgs::new(p("/m")) };
    assert_eq!(parsed.map(|c| c.command).ok(), Some(Command::Recipe(want)));
}

#[test]
fn lora_extract_round_trips() {
    let mut x = lora::ExtractArgs::new(p("/b.gguf"), p("/t.gguf"), 16, p("/a.gguf"));
    assert_eq!(reparsed(&lora::Op::Extract(x.clone())), Command::Lora { op: lora::Op::Extract(x.clone()) });
    x.names = vec!["blk.*.attn_*".into(), "*ffn_up*".into()];
    x.ty = "q8_0".into();
    x.json = Some(p("/a.json"));
    x.force = FORCE;
    assert_eq!(reparsed(&lora::Op::Extract(x.clone())), Command::Lora { op: lora::Op::Extract(x.clone()) });
    // A pattern that starts with '-' is still --name's value (issue 46).
    x.names = vec!["-x".into(), "--json".into()];
    assert_eq!(reparsed(&lora::Op::Extract(x.clone())), Command::Lora { op: lora::Op::Extract(x) });
}

#[test]
fn meta_round_trips() {
    let m = MetaArgs {
        model: p("/m.gguf"),
        set: vec!["general.name=a: b:str".into(), "x=[1, 2]:arr[u8]".into(), "y=-1".into()],
        set_typed: vec!["general.url=http://h:8080:str".into()],
        set_file: vec!["tokenizer.chat_template=/t.jinja".into()],
        rm: vec!["general.url".into(), "general.license".into()],
        rename: vec!["a=b".into()],
        rename_tensor: vec![r"blk\.(\d+)\.attn_q\.weight=blk.$1.q".into()],
        remove_tensor: vec!["output.weight".into()],
        retype_tensor: vec!["token_embd.weight=q8_0".into()],
        out: Some(p("/o.gguf")),
        in_place: false,
        json: Some(p("/o.json")),
        force: FORCE,
    };
    assert_eq!(reparsed(&m), Command::Meta(m.clone()));
    let in_place = MetaArgs { out: None, in_place: true, json: None, force: Force::default(), ..m.clone() };
    assert_eq!(reparsed(&in_place), Command::Meta(in_place.clone()));
    // Keys that start with '-' stay the flags' values, not flags of their own (issue 46).
    let dashes = MetaArgs {
        set: vec!["-x=1".into()],
        set_file: vec!["--force=/t.jinja".into()],
        rm: vec!["--in-place".into(), "-".into()],
        rename: vec!["-a=--b".into()],
        remove_tensor: vec!["--force".into()],
        ..m.clone()
    };
    assert_eq!(reparsed(&dashes), Command::Meta(dashes.clone()));
    // One of --out and --in-place, never both.
    assert!(Cli::try_parse_from(["organ", "meta", "/m.gguf", "--set", "a=1"]).is_err());
    assert!(Cli::try_parse_from(["organ", "meta", "/m.gguf", "--out", "/o.gguf", "--in-place"]).is_err());
}

#[test]
fn model_merge_round_trips() {
    let flags = ModelMergeArgs {
        config: None,
        method: Some("dare_ties".into()),
        base: Some(p("/b.gguf")),
        models: vec!["/a.gguf:0.7,density=0.5".into(), "/c.gguf".into()],
        t: Some(0.25),
        params: vec!["normalize=true".into(), "lambda=0.5".into()],
        out: p("/m.gguf"),
        ty: Some("f16".into()),
        seed: 7,
        json: Some(p("/m.json")),
        force: FORCE,
        judge: judge(),
    };
    assert_eq!(reparsed(&flags), Command::Merge(flags.clone()));
    let config =
        ModelMergeArgs { config: Some(p("/ties.yml")), out: p("/m.gguf"), seed: 0, ..ModelMergeArgs::default() };
    assert_eq!(reparsed(&config), Command::Merge(config.clone()));
    // A config or --method, never both.
    assert!(Cli::try_parse_from(["organ", "merge", "/c.yml", "--method", "ties", "--out", "/m.gguf"]).is_err());
    assert!(Cli::try_parse_from(["organ", "merge", "--out", "/m.gguf"]).is_err());
}
