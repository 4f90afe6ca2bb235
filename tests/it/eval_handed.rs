//! llama.cpp is handed the files organ opened, never a name to resolve again (issue 28,
//! item 6): a wrapper in place of `llama-perplexity` swaps the model (or a shard of it)
//! for a link to a file outside, as an attacker would between organ's check and the
//! tool's open, records what it was given, and runs the real tool. The tool must read
//! what organ opened: its arguments are `/proc/self/fd/N`, and the figures are the
//! original model's.

use crate::common::*;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The real llama-perplexity (need::… checked it is there).
pub(crate) fn real_perplexity() -> PathBuf {
    PathBuf::from(llama_tool("llama-perplexity").get_program())
}

/// A directory holding a `llama-perplexity` that, on its first run, renames `victim` to
/// `victim.orig` and puts a link to `outside` in its place; on every run appends its
/// arguments to `log` (`arg A` lines), and `read outside: A` for each `-m` argument
/// whose bytes are `outside`'s; then execs the real tool with the same arguments.
pub(crate) fn swapping_wrapper(name: &str, victim: &Path, outside: &Path, log: &Path) -> PathBuf {
    let dir = tmp(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::fs::remove_file(log);
    let (v, o, l, real) = (victim.display(), outside.display(), log.display(), real_perplexity().display().to_string());
    let script = format!(
        "#!/bin/sh\n\
         if [ ! -e '{l}' ]; then mv '{v}' '{v}.orig' && ln -s '{o}' '{v}' || exit 99; fi\n\
         for a in \"$@\"; do printf 'arg %s\\n' \"$a\" >> '{l}'; done\n\
         prev=\n\
         for a in \"$@\"; do\n\
           if [ \"$prev\" = -m ] && cmp -s \"$a\" '{o}'; then echo \"read outside: $a\" >> '{l}'; fi\n\
           prev=$a\n\
         done\n\
         exec '{real}' \"$@\"\n"
    );
    let tool = dir.join("llama-perplexity");
    std::fs::write(&tool, script).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The `-m` arguments the wrapper logged, and whether it saw the tool read outside.
pub(crate) fn logged(log: &Path) -> (Vec<String>, bool) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let args: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("arg ")).collect();
    let models = args.windows(2).filter(|w| w[0] == "-m").map(|w| w[1].to_owned()).collect();
    (models, text.contains("read outside"))
}

/// `organ eval MODEL --text perplexity.txt --ctx 128 --chunks 2 -j 1 --llama-cpp BIN --json OUT`.
fn eval(model: &Path, bin: &Path, json: &Path) -> std::process::Command {
    let mut c = organ();
    c.arg("eval").arg(model).arg("--text").arg(repo().join("tests/data/perplexity.txt"));
    c.args(["--ctx", "128", "--chunks", "2", "-j", LLAMA_THREADS, "--force"]);
    c.arg("--llama-cpp").arg(bin).arg("--json").arg(json);
    c
}

#[test]
fn llama_cpp_reads_the_model_organ_opened_even_when_the_name_is_swapped() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = tmp("handed");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (victim, outside, log) = (dir.join("m.gguf"), tmp("handed-outside.gguf"), tmp("handed.log"));
    std::fs::copy(&model, &victim).unwrap();
    std::fs::write(&outside, b"not the model organ checked").unwrap();
    let json = dir.join("eval.json");
    // Untouched: the figures to compare with (the real tool, on the name).
    let want_json = tmp("handed-want.json");
    ok(eval(&model, real_perplexity().parent().unwrap(), &want_json));
    let want: Value = serde_json::from_slice(&std::fs::read(&want_json).unwrap()).unwrap();

    let bin = swapping_wrapper("handed-bin", &victim, &outside, &log);
    let out = ok(eval(&victim, &bin, &json));
    let (models, outside_read) = logged(&log);
    println!("{}\n-m {models:?}", String::from_utf8_lossy(&out.stdout));
    assert!(std::fs::symlink_metadata(&victim).unwrap().file_type().is_symlink(), "the wrapper swapped the name");
    assert!(!outside_read, "llama-perplexity read the file the name was swapped for");
    assert!(!models.is_empty() && models.iter().all(|m| m.starts_with("/proc/self/fd/")), "{models:?}");
    let got: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(got["perplexity"], want["perplexity"], "the original model's figures");
    assert_eq!(got["model"], victim.display().to_string(), "reports name the model as the user did");
}

#[test]
fn a_split_model_is_handed_shard_by_shard() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = tmp("handed-split");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut split = llama_tool("llama-gguf-split");
    split.args(["--split", "--split-max-size", "40M"]).arg(&model).arg(dir.join("s"));
    ok(split);
    let (first, second) = (dir.join("s-00001-of-00003.gguf"), dir.join("s-00002-of-00003.gguf"));
    let (outside, log) = (tmp("handed-split-outside.gguf"), tmp("handed-split.log"));
    std::fs::write(&outside, b"not a shard organ checked").unwrap();
    let want_json = tmp("handed-split-want.json");
    ok(eval(&model, real_perplexity().parent().unwrap(), &want_json));
    let want: Value = serde_json::from_slice(&std::fs::read(&want_json).unwrap()).unwrap();

    // The second shard, which llama.cpp finds by its name, is swapped.
    let bin = swapping_wrapper("handed-split-bin", &second, &outside, &log);
    let json = dir.join("eval.json");
    ok(eval(&first, &bin, &json));
    let (models, _) = logged(&log);
    assert!(std::fs::symlink_metadata(&second).unwrap().file_type().is_symlink(), "the wrapper swapped the shard");
    assert!(
        models.iter().all(|m| m.starts_with("/proc/self/fd/") && m.ends_with("/s-00001-of-00003.gguf")),
        "{models:?}"
    );
    let got: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(got["perplexity"], want["perplexity"], "the split's figures are the whole model's");
}
