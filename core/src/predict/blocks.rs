//! Step 2 of the residual model ([`super::steps::Predictor::stream`]): each block's model
//! from its seven weights' energies (and its post-norms' gains), and the stream's energy at
//! each depth.

use super::jobs::{entry, results_mismatch, tensor, Block, Energy};
use super::residual::{self, Energies, Layer};
use super::{Kind, Shape};
use crate::error::{Error, Result};
use crate::imatrix::Imatrix;
use crate::model::{Model, TensorEntry};
use alloc::format;
use alloc::string::ToString;
use alloc::vec::Vec;
use core::borrow::Borrow;

/// Per block, each kind's energies and input columns (when step 1 gave them), and the
/// post-norms' gains.
type Gathered = ([Energies; 7], [Option<Vec<f32>>; 7], Option<[Vec<f32>; 2]>);

/// The blocks of a model of `shape`, from `results` in step 1's order (each block's seven
/// weights and post-norms, then the embedding); `model` gives the shapes of `attn_output`
/// and `ffn_down`, whose columns `imatrix` gives when there is one.
///
/// # Errors
/// Results not of those jobs; shapes that disagree within a block; a weight missing
/// from the importance matrix; a post-normed half whose output carries no energy.
pub fn blocks<T: Borrow<TensorEntry>>(
    shape: &Shape,
    imatrix: Option<&Imatrix>,
    model: &Model<T>,
    results: &mut impl Iterator<Item = Energy>,
) -> Result<Vec<Block>> {
    let n = shape.n_layer as usize;
    let mut gathered: Vec<Gathered> = Vec::with_capacity(n);
    for l in 0..shape.n_layer {
        let mut e: [Option<Energies>; 7] = Default::default();
        let mut c: [Option<Vec<f32>>; 7] = Default::default();
        for k in Kind::ALL {
            match results.next() {
                Some(Energy::Weight { energies, cols }) => (e[k.index()], c[k.index()]) = (Some(energies), cols),
                _ => return Err(results_mismatch(&k.weight(l))),
            }
        }
        let post = match shape.family.post_norms {
            true => {
                let [a, f] = shape.family.post_norm_names(l);
                match (results.next(), results.next()) {
                    (Some(Energy::Norm(ga)), Some(Energy::Norm(gf))) => Some([ga, gf]),
                    _ => return Err(results_mismatch(&format!("{a} and {f}"))),
                }
            }
            false => None,
        };
        gathered.push((e.map(|x| x.unwrap_or_else(empty)), c, post));
    }
    let h0 = match results.next() {
        Some(Energy::Embedding(h)) => h,
        _ => return Err(results_mismatch("token_embd.weight")),
    };
    let mut layers = Vec::with_capacity(n);
    for (l, (e, cols, post)) in gathered.into_iter().enumerate() {
        let l32 = l as u32;
        let (o_cols, d_cols) = match imatrix {
            Some(im) => {
                let col = |k: Kind| {
                    let t: &TensorEntry = entry(tensor(model, &k.weight(l32))?);
                    im.column_weights(&t.name, &t.dims)
                };
                (col(Kind::AttnOutput)?, col(Kind::FfnDown)?)
            }
            None => (
                residual::attn_output_columns(shape, &e[2])?,
                residual::ffn_down_columns(shape.family.activation, &e[4], &e[5])?,
            ),
        };
        let refs: [&Energies; 7] = core::array::from_fn(|i| &e[i]);
        let in_block = |err: Error| Error::BadLayout { tensor: format!("blk.{l}"), reason: err.to_string() };
        let mut layer = residual::layer(shape, refs, &o_cols, &d_cols).map_err(in_block)?;
        let mut scales: [Vec<f64>; 7] = Default::default();
        if let Some([ga, gf]) = post {
            post_normed(&mut layer, &mut scales, (&e[3], &e[6]), [&ga, &gf]).map_err(in_block)?;
        }
        let mut cols = cols;
        cols[Kind::AttnOutput.index()] = Some(o_cols);
        cols[Kind::FfnDown.index()] = Some(d_cols);
        layers.push((layer, cols.map(Option::unwrap_or_default), scales));
    }
    let only: Vec<Layer> = layers.iter().map(|l| l.0.clone()).collect();
    let stream = residual::stream_energies(h0, &only);
    Ok(layers
        .into_iter()
        .zip(stream)
        .map(|((layer, cols, scales), stream)| Block { layer, cols, scales, stream })
        .collect())
}

/// A block behind post-norms: each half's errors reach the stream scaled by its
/// [`residual::PostNorm`] (the projection's rows each by their own, the others by the
/// mean), and the half adds the gains' energy to the stream. `outputs` are the energies of
/// `attn_output` and `ffn_down`, whose rows the gains must match.
fn post_normed(
    layer: &mut Layer,
    scales: &mut [Vec<f64>; 7],
    outputs: (&Energies, &Energies),
    gains: [&[f32]; 2],
) -> Result<()> {
    let halves = [(layer.attn_energy, outputs.0, Kind::AttnOutput), (layer.ffn_energy, outputs.1, Kind::FfnDown)];
    for ((energy, out, projection), g) in halves.into_iter().zip(gains) {
        if g.len() != out.rows.len() {
            let what = if projection == Kind::AttnOutput { "post_attention_norm gains" } else { "post_ffw_norm gains" };
            return Err(Error::CountMismatch { what, expected: out.rows.len() as u64, got: g.len() as u64 });
        }
        let p = residual::post_norm(energy, g)?;
        for k in Kind::ALL.into_iter().filter(|k| k.is_ffn() == projection.is_ffn()) {
            let rw = &mut layer.row_weights[k.index()];
            if k == projection {
                rw.iter_mut().zip(&p.rows).for_each(|(w, s)| *w *= s);
                scales[k.index()] = p.rows.clone();
            } else {
                rw.iter_mut().for_each(|w| *w *= p.mean);
                scales[k.index()] = alloc::vec![p.mean];
            }
        }
        match projection {
            Kind::AttnOutput => layer.attn_energy = p.energy,
            _ => layer.ffn_energy = p.energy,
        }
    }
    Ok(())
}

fn empty() -> Energies {
    Energies { rows: Vec::new(), cols: Vec::new() }
}
