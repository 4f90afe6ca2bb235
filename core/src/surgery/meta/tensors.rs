//! Tensor edits of `organ meta` (what gguf-editor and gguf-py's gguf_new_metadata offer):
//! rename tensors by a regular expression, remove tensors, convert tensors to another ggml
//! type. Pure, as the metadata edits are: [`plan`] says which tensors the output has, under
//! which names and types, and [`super::edit_all`] turns that into the new header and the
//! list of [`super::Piece`]s a writer puts after it (`pieces.rs`: input ranges copied as
//! they are, padding, tensors converted by `organ quantize`'s own code).
//!
//! Patterns are the `regex` crate's syntax (its own engine, `regex-automata`, which the
//! core already uses for `--tensor-type` and which builds no_std with alloc, so the CLI,
//! the API's child and the browser match by the same code), on bytes, without Unicode
//! classes (tensor names are ASCII), and must match a tensor's **whole** name. A removal
//! or retype that is a tensor's exact name names that tensor alone.

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::gguf::Gguf;
use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use regex_automata::meta::Regex;
use regex_automata::util::syntax;

/// The longest tensor name ggml loads: `gguf_init_from_file` refuses a name of
/// `GGML_MAX_NAME` (64) bytes or more.
pub const MAX_GGML_NAME_LEN: usize = 63;

/// The longest pattern or replacement organ takes (a tensor name is far shorter).
pub const MAX_PATTERN_LEN: usize = 1024;

/// One edit of the tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorEdit {
    /// Every tensor whose whole name `pattern` matches gets `replacement` (`$1`, `${name}`
    /// for groups, `$$` for a dollar), in the order the renames are given.
    Rename {
        /// The regular expression.
        pattern: String,
        /// What a matched name becomes.
        replacement: String,
    },
    /// Every tensor named `pattern` (or, when no tensor has that name, whose whole name it
    /// matches) leaves the header, and its bytes the data section.
    Remove {
        /// A name or a regular expression.
        pattern: String,
    },
    /// Every tensor named or matched by `pattern` (as for [`TensorEdit::Remove`]) is
    /// converted to `ty`: dequantized, then quantized as `organ quantize` does.
    Retype {
        /// A name or a regular expression.
        pattern: String,
        /// The type it gets.
        ty: GgmlType,
    },
}

impl TensorEdit {
    /// The flag that gives this edit (named in errors).
    pub fn flag(&self) -> &'static str {
        match self {
            TensorEdit::Rename { .. } => "--rename-tensor",
            TensorEdit::Remove { .. } => "--remove-tensor",
            TensorEdit::Retype { .. } => "--retype-tensor",
        }
    }

    /// The edit as its flag's value.
    pub fn spec(&self) -> String {
        match self {
            TensorEdit::Rename { pattern, replacement } => format!("{pattern}={replacement}"),
            TensorEdit::Remove { pattern } => pattern.clone(),
            TensorEdit::Retype { pattern, ty } => format!("{pattern}={ty}"),
        }
    }

    /// Checks what can be checked without the model: a rename's pattern is a regular
    /// expression, and its replacement names only groups it has. (A removal's or retype's
    /// pattern may be a tensor's exact name, which need not be one.)
    ///
    /// # Errors
    /// [`Error::BadSetting`] naming the flag, as [`plan`] would.
    pub fn check(&self) -> Result<()> {
        if let TensorEdit::Rename { replacement, .. } = self {
            check_replacement(self, &whole(self)?, replacement)?;
        }
        Ok(())
    }

    /// Why this edit is refused on a split model (each shard's header lists its own tensors).
    pub fn split_refusal(&self) -> String {
        format!(
            "{} {:?}: tensor edits of a split model are not supported (each shard's header lists its own tensors); \
             merge it into one GGUF (organ assemble, llama-gguf-split --merge) and edit that",
            self.flag(),
            self.spec()
        )
    }

    fn pattern(&self) -> &str {
        match self {
            TensorEdit::Rename { pattern, .. }
            | TensorEdit::Remove { pattern }
            | TensorEdit::Retype { pattern, .. } => pattern,
        }
    }

    fn bad(&self, reason: String) -> Error {
        let spec: String = self.spec().chars().take(120).collect();
        Error::BadSetting { what: format!("{} {spec:?}", self.flag()), reason }
    }

    /// `--rename-tensor REGEX=REPLACEMENT`: split at the first `=`.
    ///
    /// # Errors
    /// [`Error::BadSetting`] naming the flag: no `=`, an empty side, a side too long.
    pub fn rename(spec: &str) -> Result<TensorEdit> {
        let bad = |reason: &str| bad_spec("--rename-tensor", spec, reason);
        let (pattern, replacement) = spec.split_once('=').ok_or_else(|| bad("expected REGEX=REPLACEMENT"))?;
        if pattern.is_empty() || replacement.is_empty() {
            return Err(bad("expected REGEX=REPLACEMENT, both non-empty"));
        }
        let e = TensorEdit::Rename { pattern: pattern.to_owned(), replacement: replacement.to_owned() };
        check_len(&e, replacement)?;
        Ok(e)
    }

    /// `--remove-tensor NAME_OR_REGEX`.
    ///
    /// # Errors
    /// [`Error::BadSetting`] naming the flag: empty, too long.
    pub fn remove(spec: &str) -> Result<TensorEdit> {
        if spec.is_empty() {
            return Err(bad_spec("--remove-tensor", spec, "expected a tensor name or a regular expression"));
        }
        let e = TensorEdit::Remove { pattern: spec.to_owned() };
        check_len(&e, spec)?;
        Ok(e)
    }

    /// `--retype-tensor NAME=TYPE`: split at the last `=`, the type named in any case.
    ///
    /// # Errors
    /// [`Error::BadSetting`] naming the flag: no `=`, an empty side, a type ggml does not have.
    pub fn retype(spec: &str) -> Result<TensorEdit> {
        let bad = |reason: &str| bad_spec("--retype-tensor", spec, reason);
        let (pattern, ty) = spec.rsplit_once('=').ok_or_else(|| bad("expected NAME=TYPE"))?;
        if pattern.is_empty() || ty.is_empty() {
            return Err(bad("expected NAME=TYPE, both non-empty"));
        }
        let ty = GgmlType::from_name(ty)
            .ok_or_else(|| bad(&format!("{ty:?} is not a ggml type (F32, F16, BF16, Q8_0, Q4_K, …)")))?;
        let e = TensorEdit::Retype { pattern: pattern.to_owned(), ty };
        check_len(&e, pattern)?;
        Ok(e)
    }
}

fn bad_spec(flag: &str, spec: &str, reason: &str) -> Error {
    let spec: String = spec.chars().take(120).collect();
    Error::BadSetting { what: format!("{flag} {spec:?}"), reason: reason.into() }
}

fn check_len(e: &TensorEdit, text: &str) -> Result<()> {
    for t in [e.pattern(), text] {
        if t.len() > MAX_PATTERN_LEN {
            return Err(e.bad(format!("{} bytes, more than the {MAX_PATTERN_LEN} organ takes", t.len())));
        }
    }
    Ok(())
}

/// What a tensor edit did, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TensorChange {
    /// `renamed`, `removed` or `retyped`.
    pub op: &'static str,
    /// The tensor's name in the input.
    pub tensor: String,
    /// A rename's new name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// A retype's types, before and after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_type: Option<&'static str>,
    /// See [`TensorChange::from_type`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_type: Option<&'static str>,
}

impl TensorChange {
    /// The change on one line, as `organ meta` prints it (names made printable).
    pub fn line(&self) -> String {
        let name = crate::gguf::display::printable(&self.tensor);
        match (&self.to, self.from_type, self.to_type) {
            (Some(to), ..) => format!("{:<8} tensor {name} → {}", self.op, crate::gguf::display::printable(to)),
            (None, Some(a), Some(b)) => format!("{:<8} tensor {name} {a} → {b}", self.op),
            _ => format!("{:<8} tensor {name}", self.op),
        }
    }
}

/// One tensor of the output, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// Its index in the input's tensors.
    pub input: usize,
    /// Its name in the output.
    pub name: String,
    /// Its type in the output.
    pub ty: GgmlType,
}

/// The tensors' fate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorPlan {
    /// The output's tensors, in the input's order.
    pub kept: Vec<Kept>,
    /// What changed, tensor by tensor.
    pub changes: Vec<TensorChange>,
    /// Whether the data section is laid out again (a tensor removed or retyped); else it is
    /// copied as it is, the offsets unchanged.
    pub relaid: bool,
}

/// A pattern: a tensor's exact name (for removals and retypes), else a regular expression
/// that must match the whole name.
enum Matcher {
    Exact(String),
    Re(Regex),
}

impl Matcher {
    fn new(e: &TensorEdit, names: &[&str]) -> Result<Matcher> {
        let text = e.pattern();
        match !matches!(e, TensorEdit::Rename { .. }) && names.contains(&text) {
            true => Ok(Matcher::Exact(text.to_owned())),
            false => whole(e).map(Matcher::Re),
        }
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::Exact(text) => name == text,
            Matcher::Re(re) => re.is_match(name.as_bytes()),
        }
    }
}

/// The edit's pattern as a regular expression matching whole names.
fn whole(e: &TensorEdit) -> Result<Regex> {
    let text = e.pattern();
    // Compiled alone first, so that the wrapping cannot change its meaning (`a)|(b`).
    compile(e, text)?;
    compile(e, &format!(r"\A(?:{text})\z"))
}

fn compile(e: &TensorEdit, text: &str) -> Result<Regex> {
    Regex::builder()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .configure(Regex::config().nfa_size_limit(Some(1 << 20)))
        .build(text)
        .map_err(|err| e.bad(format!("not a regular expression (the regex crate's syntax): {err}")))
}

/// Checks a replacement against the pattern's groups: a `$1` or `${name}` the pattern
/// does not have would be an empty string (the regex crate's rule), and `$1a` is the
/// group named `1a`, which is surely not what was meant.
fn check_replacement(e: &TensorEdit, re: &Regex, replacement: &str) -> Result<()> {
    let info = re.group_info();
    let groups = info.group_len(regex_automata::PatternID::ZERO);
    let missing: core::cell::RefCell<Option<String>> = core::cell::RefCell::new(None);
    let miss = |g: String| {
        missing.borrow_mut().get_or_insert(g);
    };
    regex_automata::util::interpolate::string(
        replacement,
        |i, _| {
            if i >= groups {
                miss(format!("${i}"));
            }
        },
        |name| {
            let i = info.to_index(regex_automata::PatternID::ZERO, name);
            if i.is_none() {
                miss(format!("${{{name}}}"));
            }
            i
        },
        &mut String::new(),
    );
    match missing.into_inner() {
        None => Ok(()),
        Some(g) => Err(e.bad(format!(
            "the replacement names group {g}, which the pattern does not have (it has {} groups; write ${{1}}x \
             for group 1 followed by x)",
            groups.saturating_sub(1)
        ))),
    }
}

/// Plans `edits` on the tensors of `g`: every removal first (by input names), then every
/// retype (by input names, among the kept tensors), then the renames in the order given,
/// each on the names the previous left.
///
/// # Errors
/// [`Error::BadSetting`] naming the flag and its value: a pattern that does not parse or
/// matches nothing, every tensor removed, a tensor retyped twice or to a type organ cannot
/// write there (a type it has no quantizer for, one that needs an importance matrix, a
/// row its blocks do not divide), a new name empty, too long, not UTF-8 or given to two
/// tensors.
pub fn plan(g: &Gguf<'_>, edits: &[TensorEdit]) -> Result<TensorPlan> {
    let names: Vec<&str> = g.tensors.iter().map(|t| t.name).collect();
    let mut kept = alloc::vec![true; names.len()];
    // Each change with its order: removals, retypes, renames, each in the input's order.
    let mut changes: Vec<((u8, usize), TensorChange)> = Vec::new();
    // Removals.
    for e in edits.iter().filter(|e| matches!(e, TensorEdit::Remove { .. })) {
        let m = Matcher::new(e, &names)?;
        let hits: Vec<usize> = (0..names.len()).filter(|&i| m.matches(names[i])).collect();
        if hits.is_empty() {
            return Err(e.bad(nothing(e)));
        }
        for i in hits {
            if core::mem::replace(&mut kept[i], false) {
                let c =
                    TensorChange { op: "removed", tensor: names[i].into(), to: None, from_type: None, to_type: None };
                changes.push(((0, i), c));
            }
        }
    }
    if !names.is_empty() && !kept.contains(&true) {
        let e = edits.iter().rev().find(|e| matches!(e, TensorEdit::Remove { .. }));
        let reason =
            format!("with the removals every one of the {} tensors would go; a GGUF model keeps some", names.len());
        return Err(
            e.map_or(Error::BadSetting { what: "--remove-tensor".into(), reason: reason.clone() }, |e| e.bad(reason))
        );
    }
    // Retypes.
    let mut types: BTreeMap<usize, GgmlType> = BTreeMap::new();
    for e in edits {
        let TensorEdit::Retype { ty, .. } = e else { continue };
        let m = Matcher::new(e, &names)?;
        let all: Vec<usize> = (0..names.len()).filter(|&i| m.matches(names[i])).collect();
        let hits: Vec<usize> = all.iter().copied().filter(|&i| kept[i]).collect();
        if hits.is_empty() {
            return Err(e.bad(match all.is_empty() {
                true => nothing(e),
                false => "it matches only tensors --remove-tensor removes".into(),
            }));
        }
        let mut changed = 0;
        for i in hits {
            if types.insert(i, *ty).is_some() {
                return Err(e.bad(format!(
                    "tensor {:?} is retyped by an earlier --retype-tensor too; give one type a tensor",
                    names[i]
                )));
            }
            let t = &g.tensors[i];
            if t.ty == *ty {
                continue;
            }
            check_retype(e, t, *ty)?;
            changed += 1;
            let (from_type, to_type) = (Some(t.ty.name()), Some(ty.name()));
            changes.push(((1, i), TensorChange { op: "retyped", tensor: t.name.into(), to: None, from_type, to_type }));
        }
        if changed == 0 {
            return Err(e.bad(format!("every tensor it matches is {ty} already: nothing to convert")));
        }
    }
    // Renames, in order, each on the names the previous left.
    let mut now: Vec<String> = names.iter().map(|&n| n.to_owned()).collect();
    for e in edits {
        let TensorEdit::Rename { replacement, .. } = e else { continue };
        let re = whole(e)?;
        check_replacement(e, &re, replacement)?;
        let mut caps = re.create_captures();
        let mut hit = false;
        for i in (0..now.len()).filter(|&i| kept[i]) {
            re.captures(now[i].as_bytes(), &mut caps);
            if !caps.is_match() {
                continue;
            }
            hit = true;
            let mut out = Vec::new();
            caps.interpolate_bytes_into(now[i].as_bytes(), replacement.as_bytes(), &mut out);
            now[i] = new_name(e, &now[i], out)?;
        }
        if !hit {
            return Err(e.bad(nothing(e)));
        }
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for i in (0..now.len()).filter(|&i| kept[i]) {
        if let Some(j) = seen.insert(now[i].as_str(), i) {
            let e = edits.iter().rev().find(|e| matches!(e, TensorEdit::Rename { .. }));
            let reason = format!(
                "{:?} and {:?} would both be named {:?}; a GGUF file's tensor names are unique",
                names[j], names[i], now[i]
            );
            return Err(e.map_or(Error::BadSetting { what: "--rename-tensor".into(), reason: reason.clone() }, |e| {
                e.bad(reason)
            }));
        }
        if now[i] != names[i] {
            let to = Some(now[i].clone());
            let c = TensorChange { op: "renamed", tensor: names[i].into(), to, from_type: None, to_type: None };
            changes.push(((2, i), c));
        }
    }
    let relaid = kept.contains(&false) || types.iter().any(|(&i, &ty)| g.tensors[i].ty != ty);
    let kept = (0..names.len())
        .filter(|&i| kept[i])
        .map(|i| Kept {
            input: i,
            name: core::mem::take(&mut now[i]),
            ty: types.get(&i).copied().unwrap_or(g.tensors[i].ty),
        })
        .collect();
    changes.sort_by_key(|(order, _)| *order);
    Ok(TensorPlan { kept, changes: changes.into_iter().map(|(_, c)| c).collect(), relaid })
}

fn nothing(e: &TensorEdit) -> String {
    let regex = "it matches no tensor's whole name (organ inspect lists the names)";
    match e {
        TensorEdit::Rename { .. } => regex.into(),
        _ => format!("no tensor has this name, and as a regular expression {regex}"),
    }
}

/// A renamed tensor's new name, checked as ggml loads names.
fn new_name(e: &TensorEdit, old: &str, bytes: Vec<u8>) -> Result<String> {
    let name = String::from_utf8(bytes).map_err(|_| e.bad(format!("{old:?} would get a name that is not UTF-8")))?;
    if name.is_empty() {
        return Err(e.bad(format!("{old:?} would get an empty name")));
    }
    if name.len() > MAX_GGML_NAME_LEN {
        return Err(e.bad(format!(
            "{old:?} would be named {:?}, {} bytes: ggml loads names of at most {MAX_GGML_NAME_LEN} bytes",
            name.chars().take(80).collect::<String>(),
            name.len()
        )));
    }
    Ok(name)
}

/// Whether organ can convert `t` to `ty` as `organ quantize` would.
fn check_retype(e: &TensorEdit, t: &crate::gguf::TensorInfo<'_>, ty: GgmlType) -> Result<()> {
    let name = t.name;
    if !t.ty.can_dequantize() {
        return Err(e.bad(format!("tensor {name:?} is {}, which organ cannot decode", t.ty)));
    }
    if crate::recipe::accept::needs_imatrix(name, ty) || crate::quant::quantize::requires_imatrix(ty) {
        return Err(e.bad(format!(
            "{ty} needs an importance matrix (llama-quantize refuses it without one): organ quantize --imatrix FILE \
             --tensor-type {name}={ty} writes it"
        )));
    }
    if !crate::quant::quantize::can_quantize(ty) {
        return Err(e.bad(format!("organ cannot quantize to {ty} (organ quantize --help lists the types it writes)")));
    }
    let row = t.shape().first().copied().unwrap_or(1);
    let bs = ty.block_size() as u64;
    if row % bs != 0 {
        return Err(
            e.bad(format!("tensor {name:?} has rows of {row} values, which {ty}'s blocks of {bs} do not divide"))
        );
    }
    Ok(())
}
