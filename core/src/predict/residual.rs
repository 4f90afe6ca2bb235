//! The residual-stream model: how an error in one row of a block's weight reaches the
//! residual stream, and how much energy the stream holds at each depth. A port of the
//! study's `features.py` (R and Ĥ) for llama's pre-norm blocks (RMSNorm, attention with
//! grouped KV heads, SwiGLU), with the input columns' mean squares `w_j` from either
//! source (an importance matrix or the weights alone).
//!
//! Inputs are unit-variance after RMSNorm, so the columns a norm feeds have mean squares
//! `g_j²` (its gain); data-free, `attn_output`'s columns take the energy of their value
//! rows ([`attn_output_columns`]) and `ffn_down`'s `E[silu(g)²]·E[u²]` of their gate and
//! up rows ([`ffn_down_columns`]), gate and up Gaussian. Families with GeGLU take GELU
//! for SiLU; with post-norms, what a half adds is rescaled by them ([`post_norm`]).

use super::family::Activation;
use super::{Kind, Shape};
use crate::error::{Error, Result};
use alloc::vec;
use alloc::vec::Vec;

/// What one weight gives the model: its rows' energies under its input column weights
/// (`Σ_j w_j W_rj²`) and its columns' energies (`Σ_r W_rj²`).
#[derive(Debug, Clone, PartialEq)]
pub struct Energies {
    /// Per row (output), weighted by the input columns.
    pub rows: Vec<f64>,
    /// Per column (input), unweighted.
    pub cols: Vec<f64>,
}

/// The [`Energies`] of a weight of rows of `n_in` values; `cols` are the input column
/// weights (`n_in` of them), or `None` for all ones.
///
/// # Errors
/// [`Error::CountMismatch`] when the lengths disagree.
pub fn energies(values: &[f32], n_in: usize, cols: Option<&[f32]>) -> Result<Energies> {
    if n_in == 0 || values.len() % n_in != 0 || cols.is_some_and(|c| c.len() != n_in) {
        return Err(Error::CountMismatch {
            what: "weight values (whole rows of the column weights' length)",
            expected: n_in as u64,
            got: values.len() as u64,
        });
    }
    let mut col_e = vec![0f64; n_in];
    let rows = values
        .chunks_exact(n_in)
        .map(|row| {
            let mut s = 0f64;
            for (j, &v) in row.iter().enumerate() {
                let v2 = f64::from(v) * f64::from(v);
                col_e[j] += v2;
                s += v2 * cols.map_or(1.0, |c| f64::from(c[j]));
            }
            s
        })
        .collect();
    Ok(Energies { rows, cols: col_e })
}

/// The squares of a norm's gain: the mean squares of the columns it feeds, data-free.
pub fn gain_squares(gain: &[f32]) -> Vec<f32> {
    gain.iter().map(|g| g * g).collect()
}

/// Data-free mean squares of `attn_output`'s columns: head `h`'s column `t` carries value
/// row `t` of its KV group, whose energy under the attention norm's gains is `v.rows`.
///
/// # Errors
/// [`Error::CountMismatch`] when `v.rows` is not `n_head_kv` heads.
pub fn attn_output_columns(shape: &Shape, v: &Energies) -> Result<Vec<f32>> {
    let dh = head_dim(v.rows.len(), shape.n_head_kv, "attn_v rows")?;
    let grp = (shape.n_head / shape.n_head_kv) as usize;
    Ok((0..shape.n_head as usize * dh).map(|c| v.rows[(c / dh / grp) * dh + c % dh] as f32).collect())
}

/// Data-free mean squares of `ffn_down`'s columns: `E[act(g)²]·E[u²]`, with the gate's
/// output `g ~ N(0, gate.rows)` and the up output's mean square `up.rows`.
///
/// # Errors
/// [`Error::CountMismatch`] when gate and up have different row counts.
pub fn ffn_down_columns(act: Activation, gate: &Energies, up: &Energies) -> Result<Vec<f32>> {
    same(gate.rows.len(), up.rows.len(), "ffn_up rows (as ffn_gate's)")?;
    let f = activation(act).0;
    Ok(gate.rows.iter().zip(&up.rows).map(|(&g, &u)| (gauss_mean_square(g, f) * u) as f32).collect())
}

/// What a post-norm (`post_attention_norm`, `post_ffw_norm`: RMSNorm of the half's output
/// `y`, times the gains `g`) does to an error in that half: the stream gets
/// `g ⊙ (y + Δy)/rms(y)`, so to first order row `r`'s error reaches it times
/// `g_r²/ms(y)`, with `ms(y)` the output's mean square (`energy / n_out`).
#[derive(Debug, Clone, PartialEq)]
pub struct PostNorm {
    /// Per output row, `g_r²/ms(y)`: the output projection's row errors' scale.
    pub rows: Vec<f64>,
    /// `mean(g²)/ms(y)`: the scale of an error anywhere before the output projection,
    /// spread over the rows as the output is.
    pub mean: f64,
    /// `Σ_r g_r²`: the energy the half now adds to the stream.
    pub energy: f64,
}

/// The [`PostNorm`] of a half whose output carries `energy` (the sum over its rows of
/// their mean squares), normalized by gains `gain` (one per output row).
///
/// # Errors
/// [`Error::CountMismatch`] when there are no gains; [`Error::Unsupported`] when the
/// output carries no energy (the scale is undefined).
pub fn post_norm(energy: f64, gain: &[f32]) -> Result<PostNorm> {
    if gain.is_empty() {
        return Err(Error::CountMismatch { what: "post-norm gains", expected: 1, got: 0 });
    }
    let ms = energy / gain.len() as f64;
    if !(ms > 0.0 && ms.is_finite()) {
        return Err(Error::Unsupported {
            reason: alloc::format!("a post-normed half whose output carries energy {energy}: its scale is undefined"),
        });
    }
    let g2: Vec<f64> = gain.iter().map(|&g| f64::from(g) * f64::from(g)).collect();
    let sum: f64 = g2.iter().sum();
    Ok(PostNorm { rows: g2.iter().map(|g| g / ms).collect(), mean: sum / gain.len() as f64 / ms, energy: sum })
}

/// One block's model: per kind, the weight that carries each row's error into the
/// residual stream, and the energies the block adds to the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    /// Per kind ([`Kind::index`]), one weight per row.
    pub row_weights: [Vec<f64>; 7],
    /// Energy the attention half adds to the residual stream.
    pub attn_energy: f64,
    /// Energy the FFN half adds.
    pub ffn_energy: f64,
}

/// The model of one block from its seven weights' [`Energies`] (rows weighted by each
/// weight's input columns) and the input column weights of `attn_output` and `ffn_down`.
///
/// Row weights: `attn_output` and `ffn_down` 1 (their rows are the stream's dimensions);
/// `attn_v` row `t` of group `j`, `Σ_{h∈j} ‖W_o[:, h·dh+t]‖²`; `attn_q` rows of head `h`,
/// `E‖k_j‖²·E‖o_h‖²/dh²` (a query error moves head h's scores by the keys' energy, and
/// its output by its energy); `attn_k` rows of group `j`, `Σ_{h∈j} E‖q_h‖²·E‖o_h‖²/dh²`;
/// `ffn_gate` row `r`, `‖W_d[:, r]‖²·E[silu'(g)²]·E[u²]`; `ffn_up` row `r`,
/// `‖W_d[:, r]‖²·E[silu(g)²]` (GELU for SiLU in GeGLU families). Post-norms are applied
/// after, by the caller ([`post_norm`]).
///
/// # Errors
/// [`Error::CountMismatch`] when the shapes disagree with each other or with `shape`.
pub fn layer(shape: &Shape, e: [&Energies; 7], o_cols: &[f32], d_cols: &[f32]) -> Result<Layer> {
    let [q, k, v, o, gate, up, down] = e;
    let (nh, nkv) = (shape.n_head as usize, shape.n_head_kv as usize);
    let grp = nh / nkv;
    let dh = head_dim(q.rows.len(), shape.n_head, "attn_q rows")?;
    same(k.rows.len(), nkv * dh, "attn_k rows")?;
    same(v.rows.len(), nkv * dh, "attn_v rows")?;
    same(o.cols.len(), nh * dh, "attn_output columns")?;
    same(o_cols.len(), nh * dh, "attn_output column weights")?;
    same(gate.rows.len(), up.rows.len(), "ffn_up rows (as ffn_gate's)")?;
    same(down.cols.len(), gate.rows.len(), "ffn_down columns (as ffn_gate's rows)")?;
    same(d_cols.len(), gate.rows.len(), "ffn_down column weights")?;
    let head_sum = |x: &[f64], h: usize| x[h * dh..(h + 1) * dh].iter().sum::<f64>();
    let oh: Vec<f64> =
        (0..nh).map(|h| (h * dh..(h + 1) * dh).map(|c| o.cols[c] * f64::from(o_cols[c])).sum()).collect();
    let qe: Vec<f64> = (0..nh).map(|h| head_sum(&q.rows, h)).collect();
    let ke: Vec<f64> = (0..nkv).map(|j| head_sum(&k.rows, j)).collect();
    let dh2 = (dh * dh) as f64;
    let group = |j: usize| j * grp..(j + 1) * grp;
    let rw_q = (0..nh * dh).map(|r| ke[r / dh / grp] * oh[r / dh] / dh2).collect();
    let rw_k = (0..nkv * dh).map(|r| group(r / dh).map(|h| qe[h] * oh[h]).sum::<f64>() / dh2).collect();
    let rw_v = (0..nkv * dh).map(|r| group(r / dh).map(|h| o.cols[h * dh + r % dh]).sum()).collect();
    let (act, act_prime) = activation(shape.family.activation);
    let ff = gate.rows.iter().zip(&up.rows).zip(&down.cols);
    let rw_gate = ff.clone().map(|((&g, &u), &d)| d * gauss_mean_square(g, act_prime) * u).collect();
    let rw_up = ff.map(|((&g, _), &d)| d * gauss_mean_square(g, act)).collect();
    let ones = |n: usize| vec![1f64; n];
    Ok(Layer {
        row_weights: [rw_q, rw_k, rw_v, ones(o.rows.len()), rw_gate, rw_up, ones(down.rows.len())],
        attn_energy: oh.iter().sum(),
        ffn_energy: down.cols.iter().zip(d_cols).map(|(&c, &w)| c * f64::from(w)).sum(),
    })
}

/// The residual stream's energy before the embedding's first block: the mean over the
/// vocabulary of a token embedding's squared norm (rows of `d_model` values).
pub fn embedding_energy(embedding: &[f32], d_model: usize) -> f64 {
    let rows = embedding.len().checked_div(d_model).unwrap_or(0);
    if rows == 0 {
        return 0.0;
    }
    embedding.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>() / rows as f64
}

/// `Ĥ` per layer, `(attention half, FFN half)`: the stream's energy where the block's
/// attention reads it (the embedding's plus every earlier block's) and where its FFN
/// reads it (plus this block's attention).
pub fn stream_energies(embedding: f64, layers: &[Layer]) -> Vec<(f64, f64)> {
    let mut h = embedding;
    layers
        .iter()
        .map(|l| {
            let at = (h, h + l.attn_energy);
            h += l.attn_energy + l.ffn_energy;
            at
        })
        .collect()
}

/// `R = Σ_r ρ_r ε_r`: the row errors carried into the residual stream.
///
/// # Errors
/// [`Error::CountMismatch`] when the lengths differ.
pub fn carried(row_errors: &[f64], row_weights: &[f64]) -> Result<f64> {
    same(row_errors.len(), row_weights.len(), "row errors (one per row weight)")?;
    Ok(row_errors.iter().zip(row_weights).map(|(e, w)| e * w).sum())
}

/// The stream energy a weight of kind `kind` reads, from [`stream_energies`]'s pair.
pub fn stream_at(kind: Kind, at: (f64, f64)) -> f64 {
    if kind.is_ffn() {
        at.1
    } else {
        at.0
    }
}

fn same(got: usize, expected: usize, what: &'static str) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::CountMismatch { what, expected: expected as u64, got: got as u64 })
    }
}

fn head_dim(rows: usize, heads: u32, what: &'static str) -> Result<usize> {
    let h = heads as usize;
    if h == 0 || rows == 0 || rows % h != 0 {
        return Err(Error::CountMismatch { what, expected: h as u64, got: rows as u64 });
    }
    Ok(rows / h)
}

/// A function of the gate's output.
type Scalar = fn(f64) -> f64;

/// The activation and its derivative.
fn activation(act: Activation) -> (Scalar, Scalar) {
    match act {
        Activation::Silu => (silu, silu_prime),
        Activation::Gelu => (gelu, gelu_prime),
    }
}

const GELU_C: f64 = 0.797_884_560_802_865_4; // √(2/π)
const GELU_A: f64 = 0.044_715;

/// GELU's tanh form, as ggml's `gelu` computes it.
fn gelu(g: f64) -> f64 {
    0.5 * g * (1.0 + libm::tanh(GELU_C * (g + GELU_A * g * g * g)))
}

fn gelu_prime(g: f64) -> f64 {
    let t = libm::tanh(GELU_C * (g + GELU_A * g * g * g));
    0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_A * g * g)
}

fn silu(g: f64) -> f64 {
    g / (1.0 + libm::exp(-g))
}

fn silu_prime(g: f64) -> f64 {
    let s = 1.0 / (1.0 + libm::exp(-g));
    s * (1.0 + g * (1.0 - s))
}

/// `E[f(g)²]` for `g ~ N(0, var)`: the trapezoid rule over ±10 standard deviations in
/// 401 points (the features.py port used 80-point Gauss–Hermite; both agree to 1e-9 for
/// SiLU and its derivative).
fn gauss_mean_square(var: f64, f: fn(f64) -> f64) -> f64 {
    let s = libm::sqrt(var.max(0.0));
    let (n, lim) = (400, 10.0);
    let step = 2.0 * lim / f64::from(n);
    let (mut num, mut den) = (0f64, 0f64);
    for i in 0..=n {
        let z = -lim + step * f64::from(i);
        let w = libm::exp(-0.5 * z * z) * if i == 0 || i == n { 0.5 } else { 1.0 };
        let y = f(s * z);
        num += w * y * y;
        den += w;
    }
    num / den
}

#[cfg(test)]
pub(super) fn gauss_for_tests(act: Activation, var: f64, derivative: bool) -> f64 {
    let (f, d) = activation(act);
    gauss_mean_square(var, if derivative { d } else { f })
}
