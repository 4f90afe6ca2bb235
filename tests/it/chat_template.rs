//! `organ check`'s chat-template parse held against llama.cpp's own Jinja parser
//! (tests/oracle/jinja_parse.cpp, built against the common/jinja sources of the llama.cpp
//! scripts/build-llama.sh fetched): on every template llama.cpp ships (models/templates)
//! and on broken copies of each, both must say "parses" or both "does not" (issue 50:
//! `{{ m.content }` passed before).

use crate::common::{fails, llama_dir, need, ok, organ, repo, tmp};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

/// llama.cpp's source tree, beside its bin directory.
fn llama_src() -> PathBuf {
    let src = llama_dir().join("../src");
    assert!(src.join("common/jinja/parser.cpp").exists(), "{}: no llama.cpp sources", src.display());
    src
}

/// tests/oracle/jinja_parse.cpp built against llama.cpp's common/jinja (unoptimized: it
/// compiles in half the time and parses a few hundred templates in well under a second).
fn jinja_parse() -> PathBuf {
    let exe = tmp("jinja_parse");
    if !exe.exists() {
        let src = llama_src();
        let mut c = Command::new("g++");
        c.args(["-std=c++17", "-O0", "-o"]).arg(&exe).arg(repo().join("tests/oracle/jinja_parse.cpp"));
        c.arg("-I").arg(src.join("common")).arg("-I").arg(src.join("vendor")).arg("-I").arg(src.join("ggml/include"));
        let mut sources: Vec<PathBuf> = std::fs::read_dir(src.join("common/jinja"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "cpp"))
            .collect();
        sources.sort();
        c.args(&sources).arg(src.join("common/unicode.cpp")).arg(src.join("common/json.cpp"));
        c.arg(llama_dir().join("../build/ggml/src/libggml-base.a")).arg("-lpthread");
        ok(c);
    }
    exe
}

/// The broken copies of a template: a `}}` cut to `}`, an `endif` or `endfor` removed, an
/// `if` misspelt, a `%}` or `#}` cut, a `)` removed (each at its first place).
fn broken(t: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut cut = |what: &'static str, from: &str, to: &str| {
        if t.contains(from) {
            out.push((what, t.replacen(from, to, 1)));
        }
    };
    cut("}} cut", "}}", "}");
    cut("%} cut", "%}", "%");
    cut("#} cut", "#}", "#");
    cut(") removed", ")", "");
    for (what, tag) in [("endif removed", "endif"), ("endfor removed", "endfor")] {
        // `{%- endif -%}` and its spacings: from the `{%` before the word to the `%}` after.
        if let Some(w) = t.find(&format!(" {tag} ")).or_else(|| t.find(&format!(" {tag}-"))) {
            if let (Some(a), Some(b)) = (t[..w].rfind("{%"), t[w..].find("%}")) {
                out.push((what, format!("{}{}", &t[..a], &t[w + b + 2..])));
            }
        }
    }
    if let Some(i) = t.find("{% if ").or_else(|| t.find("{%- if ")) {
        let j = i + t[i..].find("if ").unwrap();
        out.push(("if misspelt", format!("{}fi{}", &t[..j], &t[j + 2..])));
    }
    out
}

#[test]
fn templates_parse_as_llama_cpp_parses_them() {
    let Some(_) = need::smollm2_and_llama() else { return };
    let dir = tmp("templates");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases: Vec<(String, PathBuf)> = Vec::new();
    let mut shipped: Vec<PathBuf> = std::fs::read_dir(llama_src().join("models/templates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jinja"))
        .collect();
    shipped.sort();
    assert!(shipped.len() >= 50, "{} templates", shipped.len());
    for p in &shipped {
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        let t = std::fs::read_to_string(p).unwrap();
        cases.push((name.clone(), p.clone()));
        for (i, (what, b)) in broken(&t).into_iter().enumerate() {
            let f = dir.join(format!("{name}.{i}.jinja"));
            std::fs::write(&f, b).unwrap();
            cases.push((format!("{name}, {what}"), f));
        }
    }
    let mut c = Command::new(jinja_parse());
    c.args(cases.iter().map(|(_, p)| p));
    let theirs = String::from_utf8(ok(c).stdout).unwrap();
    let theirs: Vec<&str> = theirs.lines().collect();
    assert_eq!(theirs.len(), cases.len());
    let mut differ = Vec::new();
    let mut refused = 0;
    for ((name, p), llama) in cases.iter().zip(&theirs) {
        let ours = organ_core::check::template::parse_error(&std::fs::read(p).unwrap());
        refused += usize::from(ours.is_some());
        if ours.is_some() != llama.starts_with("error") {
            differ.push(format!("{name}: llama.cpp {llama}; organ {ours:?}"));
        }
    }
    eprintln!(
        "{} templates and {} broken copies: organ refuses {refused}, as llama.cpp does",
        shipped.len(),
        cases.len() - shipped.len()
    );
    assert!(differ.is_empty(), "{} of {} differ:\n{}", differ.len(), cases.len(), differ.join("\n"));
    assert!(refused > cases.len() / 2, "the broken copies are refused: {refused}");
}

/// `organ check` on SmolLM2 with the template: an error naming the key, the line
/// and column, and what is wrong; its own template passes.
#[test]
fn check_names_a_template_that_does_not_parse() {
    let Some(model) = need::smollm2() else { return };
    let bad = tmp("bad-template.jinja");
    std::fs::write(&bad, "{% for m in messages %}\n<|im_start|>{{ m.content }<|im_end|>\n{% endfor %}").unwrap();
    let out = tmp("bad-template.gguf");
    let mut c = organ();
    c.arg("meta").arg(&model).arg("--set-file").arg(format!("tokenizer.chat_template={}", bad.display()));
    c.arg("--out").arg(&out).arg("--force");
    ok(c);
    let json = tmp("bad-template.json");
    let mut c = organ();
    c.arg("check").arg(&out).arg("--json").arg(&json).arg("--force");
    let e = fails(c);
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let found: Vec<&Value> =
        r["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "chat_template").collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["severity"], "error");
    let msg = found[0]["message"].as_str().unwrap();
    assert!(msg.starts_with("does not parse as llama.cpp's Jinja: line 2, column 26: a single `}`"), "{msg}\n{e}");
    let own = tmp("own-template.json");
    let mut c = organ();
    c.arg("check").arg(&model).arg("--json").arg(&own).arg("--force");
    let _ = c.output().unwrap();
    let own: Value = serde_json::from_slice(&std::fs::read(&own).unwrap()).unwrap();
    assert!(
        !own["findings"].as_array().unwrap().iter().any(|f| f["kind"] == "chat_template" && f["severity"] == "error"),
        "{own}"
    );
}
