//! Which tensors an operation touches: layers (`5-20`, `3,7,9-11`), anatomy groups
//! (`organ`, `skeleton`, …) and name patterns (`*` matches any run of characters).

use super::list;
use crate::anatomy::{classify, Group};
use alloc::string::String;
use alloc::vec::Vec;

/// A set of layers: inclusive ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers(Vec<(u32, u32)>);

impl Layers {
    /// Parses `5-20`, `3,7,9-11`, `12`.
    ///
    /// # Errors
    /// Which part is not a layer or range.
    pub fn parse(s: &str) -> Result<Layers, LayersError> {
        let ranges = list::ranges(s, u64::from(u32::MAX)).map_err(LayersError)?;
        // Each number is at most u32::MAX: the conversion cannot fail.
        let layer = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Ok(Layers(ranges.into_iter().map(|(a, b)| (layer(a), layer(b))).collect()))
    }

    /// Whether `layer` is in the set.
    pub fn contains(&self, layer: u32) -> bool {
        self.0.iter().any(|&(a, b)| (a..=b).contains(&layer))
    }

    /// The set of `layers` (any order, repeats allowed) as the fewest ascending ranges.
    pub fn of(layers: &[u32]) -> Layers {
        let mut sorted = layers.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut out: Vec<(u32, u32)> = Vec::new();
        for n in sorted {
            match out.last_mut() {
                Some((_, b)) if b.checked_add(1) == Some(n) => *b = n,
                _ => out.push((n, n)),
            }
        }
        Layers(out)
    }
}

/// A layer list [`Layers::parse`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayersError(pub list::Fault);

impl core::fmt::Display for LayersError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.0 {
            list::Fault::NotANumber { part } => write!(f, "{part:?} is not a layer number or a range like 5-20"),
            list::Fault::Backwards { part } => write!(f, "range {part:?} runs backwards"),
            // Layers::parse neither refuses an empty list as such nor counts.
            list::Fault::Empty | list::Fault::TooMany { .. } => write!(f, "not a list of layers"),
        }
    }
}

/// A name [`Selection::parse_groups`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupError {
    /// The name, trimmed.
    pub name: String,
}

impl core::fmt::Display for GroupError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?} is not an anatomy group (skeleton, organ, embed, norm, adapter, other)", self.name)
    }
}

/// `0-3,5,7-9`: the form [`Layers::parse`] reads.
impl core::fmt::Display for Layers {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, &(a, b)) in self.0.iter().enumerate() {
            let sep = if i > 0 { "," } else { "" };
            if a == b {
                write!(f, "{sep}{a}")?;
            } else {
                write!(f, "{sep}{a}-{b}")?;
            }
        }
        Ok(())
    }
}

/// A selection of tensors: every given criterion must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Only tensors of these layers (tensors outside `blk.N.` never match).
    pub layers: Option<Layers>,
    /// Only tensors of these anatomy groups.
    pub groups: Vec<Group>,
    /// Only tensors whose name matches one of these patterns.
    pub patterns: Vec<String>,
}

impl Selection {
    /// Whether the tensor called `name` is selected.
    pub fn matches(&self, name: &str) -> bool {
        let a = classify(name);
        if let Some(l) = &self.layers {
            if !a.layer.is_some_and(|n| l.contains(n)) {
                return false;
            }
        }
        if !self.groups.is_empty() && !self.groups.contains(&a.group) {
            return false;
        }
        self.patterns.is_empty() || self.patterns.iter().any(|p| glob(p, name))
    }

    /// Parses group names (`organ`, `skeleton`, `embed`, `norm`, `adapter`, `other`).
    ///
    /// # Errors
    /// The name that is not a group.
    pub fn parse_groups(names: &[String]) -> Result<Vec<Group>, GroupError> {
        names
            .iter()
            .flat_map(|s| s.split(','))
            .map(|s| {
                let s = s.trim();
                Group::from_name(s)
                    .or_else(|| Group::from_name(s.trim_end_matches('s')))
                    .ok_or_else(|| GroupError { name: s.into() })
            })
            .collect()
    }

    /// A one-line description, for plans and provenance.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(l) = &self.layers {
            parts.push(alloc::format!("layers {l}"));
        }
        if !self.groups.is_empty() {
            let g: Vec<&str> = self.groups.iter().map(|g| g.name()).collect();
            parts.push(alloc::format!("types {}", g.join(",")));
        }
        if !self.patterns.is_empty() {
            parts.push(alloc::format!("names {}", self.patterns.join(",")));
        }
        if parts.is_empty() {
            "all tensors".into()
        } else {
            parts.join("; ")
        }
    }

    /// Why this selection matched none of `names`, in words that help the next try:
    /// `layers 40-50 matches no tensor: the model has layers 0-29`, `names ffn_up matches no
    /// tensor: a pattern matches whole names (did you mean *ffn_up*?)`.
    pub fn none_matched<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> String {
        let names: Vec<&str> = names.into_iter().collect();
        let mut hints = Vec::new();
        if self.layers.is_some() {
            let layers = names.iter().filter_map(|n| classify(n).layer);
            match layers.clone().min().zip(layers.max()) {
                Some((a, b)) => hints.push(alloc::format!("the model has layers {a}-{b}")),
                None => hints.push("the model has no blk.N. layers".into()),
            }
        }
        for p in self.patterns.iter().filter(|p| !p.contains('*')) {
            if names.iter().any(|n| n.contains(p.as_str())) {
                hints.push(alloc::format!("a pattern matches whole names (did you mean *{p}*?)"));
            }
        }
        let missing: Vec<&str> =
            self.groups.iter().filter(|g| !names.iter().any(|n| classify(n).group == **g)).map(|g| g.name()).collect();
        if !missing.is_empty() {
            hints.push(alloc::format!("the model has no {} tensors", missing.join(" or ")));
        }
        let mut s = alloc::format!("{} matches no tensor", self.describe());
        if !hints.is_empty() {
            s.push_str(": ");
            s.push_str(&hints.join("; "));
        }
        s
    }
}

/// `*` matches any run of characters (including none); everything else matches itself.
pub fn glob(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn layers_and_globs() {
        let l = Layers::parse("5-20, 22").unwrap();
        assert!(l.contains(5) && l.contains(20) && l.contains(22) && !l.contains(21) && !l.contains(4));
        assert!(Layers::parse("20-5").is_err());
        assert!(Layers::parse("x").is_err());
        assert!(glob("blk.*.ffn_*", "blk.3.ffn_up.weight"));
        assert!(glob("*", ""));
        assert!(!glob("blk.*.attn_*", "blk.3.ffn_up.weight"));
        assert!(glob("*weight", "a.weight") && !glob("*weight", "a.bias"));
    }

    #[test]
    fn layers_of_a_list_write_the_form_parse_reads() {
        let l = Layers::of(&[9, 3, 7, 10, 11, 3]);
        assert_eq!(l.to_string(), "3,7,9-11");
        assert_eq!(Layers::parse(&l.to_string()), Ok(l));
        assert_eq!(Layers::parse("5-20, 22").unwrap().to_string(), "5-20,22");
    }

    #[test]
    fn selection_combines_criteria() {
        let s = Selection {
            layers: Some(Layers::parse("5-20").unwrap()),
            groups: Selection::parse_groups(&["organs".into()]).unwrap(),
            patterns: Vec::new(),
        };
        assert!(s.matches("blk.5.ffn_up.weight"));
        assert!(!s.matches("blk.5.attn_q.weight"));
        assert!(!s.matches("blk.4.ffn_up.weight"));
        assert!(!s.matches("token_embd.weight"));
        assert_eq!(s.describe(), "layers 5-20; types organ");
    }
}
