//! Lists a terminal can hold: lines that differ only in their tensor's layer (`blk.N.`)
//! are shown as one, with a count and the layers (`blk.*.ffn_up.weight … ×30 (layers
//! 0-29)`), unless `--verbose` asks for every line. `experts` prints its plan this way,
//! and a refusal (moe, graft, experts) its problems.

use organ_core::anatomy::classify;
use organ_core::surgery::select::Layers;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether lists are printed whole (the global `--verbose`).
static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Sets `--verbose` for the rest of the process.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

/// Whether `--verbose` was given.
pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// One line of a list: the tensor it is about, and what is said of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub tensor: String,
    pub text: String,
}

/// Lines alike but for their layer, as one: the tensor name with its layer written `*`, the
/// common text, and the layers (one, for a line that stands alone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grouped {
    pub tensor: String,
    pub text: String,
    pub layers: Vec<u32>,
}

/// `lines` with those that differ only in their layer grouped, in the order each group first
/// appears. A line of no layer (`token_embd.weight`) stands alone.
pub fn by_layer(lines: impl IntoIterator<Item = Line>) -> Vec<Grouped> {
    let mut out: Vec<Grouped> = Vec::new();
    let mut at: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
    for l in lines {
        let layer = classify(&l.tensor).layer;
        let pattern = match layer {
            Some(n) => l.tensor.replacen(&format!("blk.{n}."), "blk.*.", 1),
            None => l.tensor.clone(),
        };
        let key = (pattern.clone(), l.text.clone());
        match (layer, at.get(&key)) {
            (Some(n), Some(&i)) => out[i].layers.push(n),
            _ => {
                if layer.is_some() {
                    at.insert(key, out.len());
                }
                let tensor = if layer.is_some() { pattern } else { l.tensor };
                out.push(Grouped { tensor, text: l.text, layers: layer.into_iter().collect() });
            }
        }
    }
    // A group of one layer is shown with its own name.
    for g in &mut out {
        if let [n] = g.layers[..] {
            g.tensor = g.tensor.replacen("blk.*.", &format!("blk.{n}."), 1);
        }
    }
    out
}

/// The lines to print: every one with `--verbose`, else grouped ([`by_layer`]).
pub fn lines(lines: Vec<Line>) -> Vec<Grouped> {
    if verbose() {
        let one = |l: Line| Grouped {
            layers: classify(&l.tensor).layer.into_iter().collect(),
            tensor: l.tensor,
            text: l.text,
        };
        return lines.into_iter().map(one).collect();
    }
    by_layer(lines)
}

impl Grouped {
    /// What follows the line's text: ` ×30 (layers 0-29)` for a group, nothing for one line.
    pub fn count(&self) -> String {
        if self.layers.len() > 1 {
            format!(" ×{} (layers {})", self.layers.len(), Layers::of(&self.layers))
        } else {
            String::new()
        }
    }
}

impl fmt::Display for Grouped {
    /// `TENSOR: TEXT ×N (layers …)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}{}", self.tensor, self.text, self.count())
    }
}

/// Whether any line stands for several: then a note says `--verbose` lists them all.
pub fn any_grouped(g: &[Grouped]) -> bool {
    g.iter().any(|g| g.layers.len() > 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: &str, x: &str) -> Line {
        Line { tensor: t.into(), text: x.into() }
    }

    #[test]
    fn lines_alike_but_for_the_layer_are_one() {
        let mut ls = vec![line("token_embd.weight", "Q8_0"), line("output_norm.weight", "F32")];
        for l in 0..30 {
            ls.push(line(&format!("blk.{l}.ffn_up.weight"), "types differ (Q8_0, Q4_K)"));
            ls.push(line(
                &format!("blk.{l}.ffn_down.weight"),
                if l < 10 { "types differ (Q6_K, Q4_K)" } else { "types differ (Q8_0, Q4_K)" },
            ));
        }
        let g = by_layer(ls);
        let shown: Vec<String> = g.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "token_embd.weight: Q8_0",
                "output_norm.weight: F32",
                "blk.*.ffn_up.weight: types differ (Q8_0, Q4_K) ×30 (layers 0-29)",
                "blk.*.ffn_down.weight: types differ (Q6_K, Q4_K) ×10 (layers 0-9)",
                "blk.*.ffn_down.weight: types differ (Q8_0, Q4_K) ×20 (layers 10-29)",
            ]
        );
        assert!(any_grouped(&g));
    }

    #[test]
    fn a_layer_alone_keeps_its_name() {
        let g = by_layer(vec![line("blk.3.attn_q.weight", "x"), line("blk.4.attn_q.weight", "y")]);
        assert_eq!(g[0].to_string(), "blk.3.attn_q.weight: x");
        assert_eq!(g[1].to_string(), "blk.4.attn_q.weight: y");
        assert!(!any_grouped(&g));
    }

    #[test]
    fn layer_ranges_are_compact() {
        assert_eq!(Layers::of(&[5, 0, 1, 2, 3, 7, 8, 9, 3]).to_string(), "0-3,5,7-9");
        assert_eq!(Layers::of(&[4]).to_string(), "4");
        assert_eq!(Layers::of(&[]).to_string(), "");
        assert_eq!(Layers::of(&[u32::MAX, u32::MAX - 1]).to_string(), format!("{}-{}", u32::MAX - 1, u32::MAX));
    }
}
