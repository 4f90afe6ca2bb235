//! Whether a chat template parses as llama.cpp's Jinja parses it (its `common/jinja`, what
//! `llama-server --jinja` renders `tokenizer.chat_template` with): every `{{`, `{%` and
//! `{#` closed, strings ended with escapes it knows, brackets balanced, only the statements
//! it knows (`set`, `if`/`elif`/`else`, `for`/`else`, `macro`, `call`, `filter`, `break`,
//! `continue`, `generation`), each block ended by its own `end…`. The structure, not every
//! expression: a template this passes can still fail on an operator in the wrong place.
//! `tests/it` holds it against that parser on llama.cpp's own templates and broken copies
//! of them.
//!
//! Written here rather than taken from a crate: the Jinja crates (minijinja) need `std`,
//! and what llama.cpp accepts is not Jinja2's grammar (no `raw`, `block` or `with`).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// The first reason `t` would not parse, as "line L, column C: what"; `None` when its
/// structure is sound. Time and memory linear in `t` (the block stack is at most one entry
/// per statement).
pub fn parse_error(t: &[u8]) -> Option<String> {
    Parser { t, pos: 0, open: Vec::new() }.run().err().map(|(at, what)| {
        let (line, column) = line_column(t, at);
        format!("line {line}, column {column}: {what}")
    })
}

/// A block left open: its statement and where it began.
struct Open {
    name: &'static str,
    at: usize,
}

struct Parser<'a> {
    t: &'a [u8],
    pos: usize,
    open: Vec<Open>,
}

type Failure = (usize, String);

/// The blocks and their ends; `else`/`elif` are checked apart.
const BLOCKS: [(&str, &str); 6] = [
    ("if", "endif"),
    ("for", "endfor"),
    ("macro", "endmacro"),
    ("call", "endcall"),
    ("filter", "endfilter"),
    ("set", "endset"),
];

impl Parser<'_> {
    fn run(mut self) -> Result<(), Failure> {
        while let Some(i) = self.next_tag() {
            self.pos = i + 2;
            match self.t[i + 1] {
                b'#' => self.comment(i)?,
                b'{' => {
                    self.inside(i, b'}')?;
                }
                _ => {
                    let words = self.inside(i, b'%')?;
                    self.statement(i, &words)?;
                }
            }
        }
        match self.open.pop() {
            Some(o) => {
                let end = BLOCKS.iter().find(|b| b.0 == o.name).map_or("end", |b| b.1);
                Err((o.at, format!("`{{% {} %}}` is never closed by `{{% {end} %}}`", o.name)))
            }
            None => Ok(()),
        }
    }

    /// Where the next `{{`, `{%` or `{#` begins.
    fn next_tag(&self) -> Option<usize> {
        let t = self.t;
        (self.pos..t.len().saturating_sub(1)).find(|&i| t[i] == b'{' && matches!(t[i + 1], b'{' | b'%' | b'#'))
    }

    fn comment(&mut self, at: usize) -> Result<(), Failure> {
        let end = (self.pos..self.t.len().saturating_sub(1)).find(|&i| self.t[i] == b'#' && self.t[i + 1] == b'}');
        let end = end.ok_or_else(|| (at, String::from("the comment `{#` is never closed by `#}`")))?;
        self.pos = end + 2;
        Ok(())
    }

    /// The inside of `{{ … }}` (`kind` `}`) or `{% … %}` (`kind` `%`) opened at `at`, up to
    /// its end: strings, brackets, and the statement's words at depth 0 with whether a
    /// lone `=` stands among them (a `set` with a value).
    fn inside(&mut self, at: usize, kind: u8) -> Result<Words, Failure> {
        let t = self.t;
        let (open, close) = if kind == b'}' { ("{{", "}}") } else { ("{%", "%}") };
        let mut brackets: Vec<(u8, usize)> = Vec::new();
        let mut words = Words::default();
        if t.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        while self.pos < t.len() {
            let (i, c) = (self.pos, t[self.pos]);
            let next = t.get(i + 1).copied();
            // The end: `}}` only outside a dict literal, as llama.cpp's lexer reads it.
            let ends = |j: usize| {
                t.get(j) == Some(&kind)
                    && t.get(j + 1) == Some(&b'}')
                    && (kind == b'%' || !brackets.iter().any(|b| b.0 == b'{'))
            };
            if ends(i) || (c == b'-' && ends(i + 1)) {
                if let Some(&(b, j)) = brackets.last() {
                    return Err((j, format!("`{}` is never closed before `{close}`", b as char)));
                }
                self.pos = if c == b'-' { i + 3 } else { i + 2 };
                return Ok(words);
            }
            match c {
                b'\'' | b'"' => self.string(i, c)?,
                b'(' | b'[' | b'{' => {
                    brackets.push((c, i));
                    self.pos += 1;
                }
                b')' | b']' | b'}' => {
                    let want = match c {
                        b')' => b'(',
                        b']' => b'[',
                        _ => b'{',
                    };
                    match brackets.pop() {
                        Some((b, _)) if b == want => {}
                        Some((b, j)) => {
                            let (l, col) = line_column(t, j);
                            return Err((
                                i,
                                format!("`{}` closes the `{}` of line {l}, column {col}", c as char, b as char),
                            ));
                        }
                        None if c == b'}' && kind == b'}' => {
                            let (l, col) = line_column(t, at);
                            return Err((
                                i,
                                format!("a single `}}` where `}}}}` would close the `{{{{` of line {l}, column {col}"),
                            ));
                        }
                        None => return Err((i, format!("`{}` closes nothing", c as char))),
                    }
                    self.pos += 1;
                }
                b'=' if next != Some(b'=') && !matches!(t.get(i.wrapping_sub(1)), Some(b'=' | b'!' | b'<' | b'>')) => {
                    words.assigns |= brackets.is_empty();
                    self.pos += 1;
                }
                c if c == b'_' || c.is_ascii_alphabetic() => {
                    let end =
                        (i..t.len()).find(|&j| !(t[j] == b'_' || t[j].is_ascii_alphanumeric())).unwrap_or(t.len());
                    if words.first.is_none() {
                        words.first = Some(String::from_utf8_lossy(&t[i..end]).into_owned());
                    }
                    self.pos = end;
                }
                _ => self.pos += 1,
            }
        }
        Err((at, format!("`{open}` is never closed by `{close}`")))
    }

    /// A string literal opened by `quote` at `at`: its escapes those llama.cpp knows.
    fn string(&mut self, at: usize, quote: u8) -> Result<(), Failure> {
        let t = self.t;
        let mut i = at + 1;
        while i < t.len() {
            match t[i] {
                b'\\' => match t.get(i + 1) {
                    Some(b'n' | b't' | b'r' | b'b' | b'f' | b'v' | b'\\' | b'\'' | b'"') => i += 2,
                    Some(&e) => return Err((i, format!("unknown escape `\\{}` in a string", e as char))),
                    None => break,
                },
                c if c == quote => {
                    self.pos = i + 1;
                    return Ok(());
                }
                _ => i += 1,
            }
        }
        Err((at, format!("the string opened by {} is never closed", quote as char)))
    }

    /// The statement `words` of the `{%` at `at`, held against the open blocks.
    fn statement(&mut self, at: usize, words: &Words) -> Result<(), Failure> {
        let Some(name) = words.first.as_deref() else {
            return Err((at, String::from("`{%` without a statement")));
        };
        if let Some(&(start, _)) = BLOCKS.iter().find(|b| b.0 == name) {
            // `{% set x = … %}` is whole; `{% set x %}…{% endset %}` is a block.
            if !(name == "set" && words.assigns) {
                self.open.push(Open { name: start, at });
            }
            return Ok(());
        }
        if let Some(&(start, end)) = BLOCKS.iter().find(|b| b.1 == name) {
            return match self.open.pop() {
                Some(o) if o.name == start => Ok(()),
                Some(o) => Err((at, format!("`{{% {end} %}}` where the `{{% {} %}}` opened before is open", o.name))),
                None => Err((at, format!("`{{% {end} %}}` ends no `{{% {start} %}}`"))),
            };
        }
        match name {
            "elif" | "else" => {
                let inside = self.open.last().map(|o| o.name);
                let fits = inside == Some("if") || (name == "else" && inside == Some("for"));
                if fits {
                    Ok(())
                } else {
                    Err((
                        at,
                        format!(
                            "`{{% {name} %}}` outside an `{{% if %}}`{}",
                            if name == "else" { " or `{% for %}`" } else { "" }
                        ),
                    ))
                }
            }
            "break" | "continue" | "generation" | "endgeneration" => Ok(()),
            _ => Err((at, format!("llama.cpp's Jinja has no `{{% {name} %}}` statement"))),
        }
    }
}

/// What a statement's inside holds: its first word, and whether a lone `=` stands outside
/// brackets.
#[derive(Default)]
struct Words {
    first: Option<String>,
    assigns: bool,
}

/// The 1-based line and column (in bytes) of `at`.
fn line_column(t: &[u8], at: usize) -> (usize, usize) {
    let before = &t[..at.min(t.len())];
    let line = before.iter().filter(|&&c| c == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&c| c != b'\n').count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::parse_error;

    #[test]
    fn sound_templates_pass() {
        for t in [
            "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m.content }}<|im_end|>\n{% endfor %}",
            "{%- set x = {'a': {'b': 1}} -%}{{ x['a'] }}{# a } comment #}",
            "{% set body %}text{% endset %}{% if a == b %}1{% elif a != 'x\\n' %}2{% else %}3{% endif %}",
            "{% for x in y %}{% if x %}{% break %}{% endif %}{% else %}none{% endfor %}{% generation %}a{% endgeneration %}",
            "{% macro f(a, b=1) %}{{ a }}{% endmacro %}{% call(u) f(1) %}x{% endcall %}{% filter upper %}y{% endfilter %}",
            "{{ {'a': 1} }}",
        ] {
            assert_eq!(parse_error(t.as_bytes()), None, "{t}");
        }
    }

    #[test]
    fn broken_templates_are_named_where() {
        for (t, want) in [
            ("{{ m.content }", "line 1, column 14: a single `}` where `}}` would close the `{{` of line 1, column 1"),
            ("{{ m.content", "line 1, column 1: `{{` is never closed by `}}`"),
            ("a\n{% if x %}b", "line 2, column 1: `{% if %}` is never closed by `{% endif %}`"),
            ("{% endfor %}", "ends no `{% for %}`"),
            ("{% for x in y %}{% endif %}", "`{% endif %}` where the `{% for %}` opened before is open"),
            ("{% raw %}x{% endraw %}", "llama.cpp's Jinja has no `{% raw %}` statement"),
            ("{{ 'a\\q' }}", "unknown escape `\\q`"),
            ("{{ f(a }}", "`(` is never closed before `}}`"),
            ("{{ a] }}", "`]` closes nothing"),
            ("{{ 'abc }}", "the string opened by ' is never closed"),
            ("{# x", "the comment `{#` is never closed"),
            ("{% elif x %}", "outside an `{% if %}`"),
            ("{%  %}", "`{%` without a statement"),
        ] {
            let got = parse_error(t.as_bytes()).unwrap_or_default();
            assert!(got.contains(want), "{t}: {got}");
        }
    }
}
