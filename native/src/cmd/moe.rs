//! `organ moe`: a mixture of experts in llama's Mixtral layout from a dense base and dense
//! donors (docs/moe.md). The core plans it ([`organ_core::surgery::moe`]); here the bytes
//! move: the base's tensors and the donors' FFNs as byte ranges copied in the kernel, the
//! routers made in memory, requantization (with `--type`) a chunk at a time.

use crate::model::Model;
use crate::write::pieces::{self, Piece};
use anyhow::{bail, Context, Result};
use organ_core::report::surgery::{self, Surgery};
use organ_core::report::AnyReport;
use organ_core::surgery::moe::{self, Named, Provenance, Router, RouterMode, Source};
use organ_core::GgmlType;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct Options<'a> {
    pub base: &'a Path,
    /// The donors, one expert each, in order.
    pub experts: &'a [PathBuf],
    pub experts_used: u64,
    pub router: RouterMode,
    /// `--prompts`: one file per expert (embed router).
    pub prompts: &'a [PathBuf],
    /// `--negative-prompts`: none, or one file per expert.
    pub negative_prompts: &'a [PathBuf],
    pub seed: u64,
    /// Requantize to this type where the donors' types disagree.
    pub ty: Option<GgmlType>,
    pub out: &'a Path,
    pub force: bool,
    /// `--judge`: evaluate the output against the base (crate::judge).
    pub judge: Option<crate::cmd::eval::Settings>,
    /// Also write the report as JSON.
    pub json: Option<&'a Path>,
}

/// The BLAKE3 of each of `models`' files, computed once per distinct file (by its real
/// path), in parallel.
fn identities(models: &[&Model]) -> Result<Vec<String>> {
    let keys: Vec<PathBuf> =
        models.iter().map(|m| std::fs::canonicalize(&m.path).unwrap_or_else(|_| m.path.clone())).collect();
    let mut first: BTreeMap<&PathBuf, usize> = BTreeMap::new();
    for (i, k) in keys.iter().enumerate() {
        first.entry(k).or_insert(i);
    }
    let distinct: Vec<usize> = first.values().copied().collect();
    let digests: BTreeMap<usize, String> =
        distinct.par_iter().map(|&i| Ok((i, models[i].fingerprint(false)?.blake3))).collect::<Result<_>>()?;
    Ok(keys.iter().map(|k| digests[&first[k]].clone()).collect())
}

/// The provenance of an MoE of `donors` on `base`, with the inputs' BLAKE3 `ids` (the
/// base's first).
fn provenance<'a>(
    base: &'a str,
    donors: &[Model],
    ids: &'a [String],
    router: RouterMode,
    seed: Option<u64>,
    ty: Option<organ_core::GgmlType>,
) -> Provenance<'a> {
    Provenance {
        base: (base, &ids[0]),
        experts: donors.iter().zip(&ids[1..]).map(|(d, id)| (d.label.clone(), id.clone())).collect(),
        router,
        seed,
        ty,
    }
}

/// The largest prompt file read.
const MAX_PROMPT_FILE: u64 = 16 << 20;

fn read_prompts(path: &Path) -> Result<String> {
    let f = crate::input::open(path)?;
    let len = f.metadata().with_context(|| format!("{}: cannot stat", path.display()))?.len();
    if len > MAX_PROMPT_FILE {
        bail!("{}: {len} bytes of prompts, more than the {MAX_PROMPT_FILE} organ reads", path.display());
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX_PROMPT_FILE), &mut text)
        .with_context(|| format!("{}: not UTF-8 text", path.display()))?;
    Ok(text)
}

/// The embed router (mergekit's cheap_embed, [`moe::cheap_embed`]): one prompt file per
/// expert, tokenized by the base's own tokenizer, over the base's token embeddings.
fn embed_router(base: &Model, prompts: &[PathBuf], negative: &[PathBuf], n: usize) -> Result<Router> {
    if prompts.len() != n {
        bail!("--router embed needs one --prompts file per expert: {} given for {n} experts", prompts.len());
    }
    if !negative.is_empty() && negative.len() != n {
        bail!("--negative-prompts: one file per expert, or none: {} given for {n} experts", negative.len());
    }
    let tok = organ_core::tokenizer::Tokenizer::from_model(&base.model)
        .with_context(|| format!("{}: the embed router needs the model's tokenizer", base.label))?;
    let mut experts = Vec::with_capacity(n);
    for (e, p) in prompts.iter().enumerate() {
        let neg = negative.get(e).map(|p| read_prompts(p)).transpose()?;
        let pr = moe::Prompts::tokenize(&tok, &read_prompts(p)?, neg.as_deref())
            .with_context(|| format!("{}: tokenizing expert {e}'s prompts", p.display()))?;
        experts.push(pr);
    }
    let embd = (base.tensors.iter())
        .find(|t| t.name == "token_embd.weight")
        .with_context(|| format!("{}: no token_embd.weight", base.label))?;
    let rows = moe::cheap_embed(embd.ty, embd.bytes(), &embd.dims, &experts)
        .with_context(|| format!("{}: the embed router", base.label))?;
    Ok(Router::Embed { rows })
}

pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    if let Some(s) = &o.judge {
        crate::judge::check(o.base, o.out, false, s)?;
    }
    if o.router != RouterMode::Embed && !(o.prompts.is_empty() && o.negative_prompts.is_empty()) {
        bail!("--prompts and --negative-prompts are for --router embed (the router is {})", o.router.name());
    }
    let base = Model::open(o.base)?;
    let donors = o.experts.iter().map(|p| Model::open(p)).collect::<Result<Vec<_>>>()?;
    let named: Vec<Named<'_, crate::model::Tensor>> =
        donors.iter().map(|d| Named { label: &d.label, model: &d.model }).collect();
    let p = match moe::plan(&Named { label: &base.label, model: &base.model }, &named, o.experts_used, o.ty) {
        Ok(p) => p,
        Err(bad) => {
            bail!(
                "moe refused: {} experts on {} would not load ({}):\n{}",
                donors.len(),
                base.label,
                super::problems(bad.len()),
                super::problem_lines(&bad)
            );
        }
    };
    let router = match o.router {
        RouterMode::Uniform => Router::Uniform,
        RouterMode::Random => Router::Random { seed: o.seed },
        RouterMode::Embed => embed_router(&base, o.prompts, o.negative_prompts, donors.len())?,
    };
    writeln!(
        w,
        "moe plan: {} experts ({} used per token) on {}, {} layers, {} router",
        p.n_expert,
        p.n_used,
        base.label,
        p.layers.len(),
        o.router.name()
    )?;
    for (e, d) in donors.iter().enumerate() {
        writeln!(w, "  expert {e}: {}", d.label)?;
    }
    let requantized: Vec<String> = p.requantized().map(|t| t.name.clone()).collect();
    if let Some(ty) = o.ty {
        writeln!(w, "  requantized to {ty}: {} tensors", requantized.len())?;
    }

    let mut all: Vec<&Model> = vec![&base];
    all.extend(donors.iter());
    let seed = (o.router == RouterMode::Random).then_some(o.seed);
    let mut tensors = Vec::with_capacity(p.tensors.len());
    for t in &p.tensors {
        let pieces = match &t.source {
            Source::Base(i) => {
                let b = &base.tensors[*i];
                vec![Piece::Range { file: b.in_file.clone(), offset: b.offset, len: b.n_bytes }]
            }
            Source::Router { layer, .. } => vec![Piece::Bytes(router.layer_bytes(&p, *layer)?)],
            Source::Stack(parts) => (parts.iter().zip(&donors))
                .map(|(part, d)| {
                    let x = d.tensors.get(part.tensor).context("a planned tensor of no donor")?;
                    let (file, offset, len) = (x.in_file.clone(), x.offset, x.n_bytes);
                    Ok(if part.requantize {
                        Piece::Requantize { file, offset, len, row: x.dims[0], from: x.ty, to: t.ty }
                    } else {
                        Piece::Range { file, offset, len }
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        };
        tensors.push(pieces::Planned { name: t.name.clone(), dims: t.dims.clone(), ty: t.ty, pieces });
    }
    // The inputs' BLAKE3 go into the header, which is written first: the file is written
    // with a placeholder of the same length while they are computed, then the header is
    // written again with them (a digest's hex is always 64 characters).
    let placeholder = vec!["0".repeat(64); all.len()];
    let (ids, staged) = rayon::join(
        || identities(&all),
        || {
            pieces::stage(
                base.version,
                &moe::metadata(&base.kvs, &p, &provenance(&base.label, &donors, &placeholder, o.router, seed, o.ty))?,
                &tensors,
                o.out,
                o.force,
            )
        },
    );
    let (ids, (tmp, len)) = (ids?, staged?);
    let kvs = moe::metadata(&base.kvs, &p, &provenance(&base.label, &donors, &ids, o.router, seed, o.ty))?;
    pieces::rewrite_header(&tmp, base.version, &kvs, &tensors, len)?;
    tmp.commit()?;
    writeln!(w, "wrote {} ({len} bytes)", o.out.display())?;

    let verdict = crate::judge::judged(o.out, o.base, o.judge.as_ref(), w)?;
    if let Some(path) = o.json {
        let report = surgery::Moe {
            base: &base.label,
            experts: donors.iter().map(|d| d.label.as_str()).collect(),
            experts_used: p.n_used,
            router: o.router.name(),
            seed,
            ty: o.ty.map(|t| t.name()),
            requantized: &requantized,
            out: &o.out.display().to_string(),
            bytes: len,
            judge: verdict.as_ref(),
        };
        super::outputs::write_json(AnyReport::Surgery(&Surgery::Moe(report)), path, o.force)?;
    }
    Ok(())
}
