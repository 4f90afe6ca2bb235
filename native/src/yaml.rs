//! A YAML document (a merge configuration) as a JSON value, through yaml-rust2's event
//! parser: YAML 1.2's core schema for plain scalars (null, booleans, numbers), quoted
//! scalars as strings. Aliases are refused (a configuration needs none, and expanding them
//! is how a small file becomes a huge value), and so are nesting past [`MAX_DEPTH`], more
//! than [`MAX_NODES`] values, keys that are not strings, and a key given twice.

use anyhow::{anyhow, bail, Result};
use serde_json::{Map, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// The deepest nesting of lists and mappings read.
const MAX_DEPTH: usize = 32;
/// The most values read.
const MAX_NODES: usize = 100_000;

/// The first document of `text`, as JSON (null when there is none).
///
/// # Errors
/// Text that is not YAML (with its line and column), or one of the refusals above.
pub fn to_json(text: &str) -> Result<Value> {
    // Event by event, not through `Parser::load`: load walks the document by recursion,
    // one frame per level, so 100 KB of `- - - …` overflowed the stack before the depth
    // was ever counted. The parser's own state machine keeps its stack on the heap, and
    // this loop stops at the first refusal, so nothing here grows with the nesting past
    // MAX_DEPTH.
    let mut parser = Parser::new_from_str(text);
    let mut r = Receiver::default();
    loop {
        let (ev, mark) = parser.next_token().map_err(|e| anyhow!("not YAML: {e}"))?;
        if ev == Event::StreamEnd {
            break;
        }
        r.on_event(ev, mark);
        if let Some(e) = r.error {
            return Err(e);
        }
        if r.done.is_some() {
            break;
        }
    }
    Ok(r.done.unwrap_or(Value::Null))
}

/// A list or mapping being read: its values so far, and a mapping's key awaiting its value.
enum Open {
    List(Vec<Value>),
    Map(Map<String, Value>, Option<String>),
}

#[derive(Default)]
struct Receiver {
    stack: Vec<Open>,
    done: Option<Value>,
    nodes: usize,
    error: Option<anyhow::Error>,
}

impl MarkedEventReceiver for Receiver {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() || self.done.is_some() {
            return;
        }
        if let Err(e) = self.event(ev) {
            self.error = Some(e.context(format!("line {}, column {}", mark.line(), mark.col() + 1)));
        }
    }
}

impl Receiver {
    fn event(&mut self, ev: Event) -> Result<()> {
        match ev {
            Event::Alias(_) => bail!("an alias (*name): organ reads configurations without anchors and aliases"),
            Event::Scalar(s, style, _, _) => {
                let v = if style == TScalarStyle::Plain { plain(&s) } else { Value::String(s) };
                self.value(v)
            }
            Event::SequenceStart(..) => self.open(Open::List(Vec::new())),
            Event::MappingStart(..) => self.open(Open::Map(Map::new(), None)),
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Open::List(v)) => self.value(Value::Array(v)),
                Some(Open::Map(m, _)) => self.value(Value::Object(m)),
                None => bail!("an end without a start"),
            },
            _ => Ok(()),
        }
    }

    fn open(&mut self, o: Open) -> Result<()> {
        if self.stack.len() >= MAX_DEPTH {
            bail!("nested deeper than {MAX_DEPTH} levels");
        }
        self.count()?;
        self.stack.push(o);
        Ok(())
    }

    fn count(&mut self) -> Result<()> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            bail!("more than {MAX_NODES} values");
        }
        Ok(())
    }

    fn value(&mut self, v: Value) -> Result<()> {
        if !v.is_array() && !v.is_object() {
            self.count()?;
        }
        match self.stack.last_mut() {
            None => self.done = Some(v),
            Some(Open::List(l)) => l.push(v),
            Some(Open::Map(m, key)) => match key.take() {
                None => match v {
                    Value::String(k) => *key = Some(k),
                    other => bail!("a key that is not a string: {other}"),
                },
                Some(k) => {
                    if m.contains_key(&k) {
                        bail!("key {k:?} given twice");
                    }
                    m.insert(k, v);
                }
            },
        }
        Ok(())
    }
}

/// A plain scalar by YAML 1.2's core schema: null, a boolean, an integer or a float, else
/// a string.
fn plain(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let numeric = s.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.'))
        && s.chars().all(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E' | '_'));
    if numeric {
        if let Ok(i) = s.parse::<i64>() {
            return Value::from(i);
        }
        if let Some(n) = s.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_a_mergekit_config_and_refuses_aliases_and_duplicates() {
        let v = to_json(
            "merge_method: ties\nbase_model: b.gguf\nmodels:\n  - model: a.gguf\n    parameters: {weight: 0.5, \
             density: .7}\nparameters:\n  normalize: true\n  t: [0, 1e-1]\n  name: '1'\n",
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"merge_method": "ties", "base_model": "b.gguf",
                   "models": [{"model": "a.gguf", "parameters": {"weight": 0.5, "density": 0.7}}],
                   "parameters": {"normalize": true, "t": [0, 0.1], "name": "1"}})
        );
        assert!(format!("{:#}", to_json("a: &x [1]\nb: *x\n").unwrap_err()).contains("alias"));
        assert!(format!("{:#}", to_json("a: 1\na: 2\n").unwrap_err()).contains("twice"));
        assert!(to_json("a: [1\n").is_err());
    }

    /// 100 KB of nesting, in each way YAML nests, is refused by its depth: it once
    /// overflowed the stack (issue 46) before the depth was counted.
    #[test]
    fn refuses_deep_nesting_without_overflowing_the_stack() {
        let n = 50_000;
        let compact = format!("{}x\n", "- ".repeat(n));
        let indented: String = (0..n.min(3_000)).map(|i| format!("{}-\n", " ".repeat(i))).collect();
        let mapping: String = (0..n.min(3_000)).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        let flow = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let param = format!("\n{}", compact);
        for text in [&compact, &indented, &mapping, &flow, &param] {
            let e = format!("{:#}", to_json(text).unwrap_err());
            assert!(e.contains("deeper than 32") || e.contains("recursion"), "{e}");
        }
        let just = format!("{}x\n", "- ".repeat(MAX_DEPTH));
        let mut v = to_json(&just).unwrap();
        for _ in 0..MAX_DEPTH {
            v = v.as_array().unwrap()[0].clone();
        }
        assert_eq!(v, json!("x"));
    }
}
