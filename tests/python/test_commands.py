"""organ's commands that write models, evaluate them and plan their quantization, from
Python, against the CLI: each call and `organ CMD … --json FILE` with the same flags
write the same report, byte for byte, print the same text, and write the same model.

Each test runs the CLI first, keeps what it wrote and removes it, then makes the call
with the same output paths (reports name them), and compares.
"""

import ast
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import organ
from conftest import REPO

TEXT = REPO / "tests" / "data" / "perplexity.txt"


def _cli(cli, tmp, args, report=True):
    """`organ ARGS [--json FILE]`, which must succeed: its stdout and its report."""
    j = tmp / "cli-report.json"
    j.unlink(missing_ok=True)
    cmd = [str(cli), *map(str, args)] + (["--json", str(j)] if report else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout, (j.read_text() if j.exists() else None)


def _take(path):
    """What organ wrote at `path` (a file's bytes, a directory's files by name), removed."""
    path = Path(path)
    if path.is_dir():
        got = {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}
        shutil.rmtree(path)
        return got
    got = path.read_bytes()
    path.unlink()
    return got


def _same(cli, tmp, args, call, outs=(), report=True):
    """The CLI's run of ARGS and `call()` write the same report, text and files `outs`."""
    text, want = _cli(cli, tmp, args, report)
    theirs = [_take(o) for o in outs]
    got = call()
    assert got.to_json() == want
    assert got.text == text
    assert [_take(o) for o in outs] == theirs
    return got


@pytest.fixture(scope="session")
def q8(smollm2, tmp_path_factory):
    """SmolLM2 requantized to Q8_0: other bytes, the same shapes."""
    out = tmp_path_factory.mktemp("q8") / "smollm2-q8_0.gguf"
    organ.quantize(smollm2, out, "Q8_0", allow_requantize=True)
    return out


@pytest.fixture(scope="session")
def adapter(smollm2, q8, tmp_path_factory):
    """A LoRA adapter of one tensor, rank 4, from SmolLM2 to its Q8_0 requantization."""
    out = tmp_path_factory.mktemp("lora") / "adapter.gguf"
    organ.lora_extract(smollm2, q8, 4, out, name="blk.0.attn_q.weight")
    return out


@pytest.fixture(scope="session")
def mixtral(smollm2, tmp_path_factory):
    """A Mixtral-layout MoE of two SmolLM2 experts (docs/moe.md)."""
    out = tmp_path_factory.mktemp("moe") / "moe.gguf"
    organ.moe(smollm2, [smollm2, smollm2], out, router="random", seed=5)
    return out


def test_graft_is_the_clis(smollm2, q8, cli, tmp):
    out = tmp / "graft.gguf"
    got = _same(cli, tmp, ["graft", "--donor", q8, "--recipient", smollm2, "--layers", "0-1", "--type", "organ",
                           "--out", out],
                lambda: organ.graft(q8, smollm2, out, layers="0-1", type="organ"), [out])
    assert len(got["tensors"]) == 6 and got["tensors"][0].startswith("blk.0.")
    # A dry run writes nothing, and no report.
    plan = organ.graft(q8, smollm2, layers="0-1", type=["organ"], dry_run=True)
    assert plan.to_json() is None and "dry run: nothing written" in plan.text and not out.exists()
    # What the command refuses: no selection; an output that exists, without force.
    with pytest.raises(organ.OrganError, match="which tensors"):
        organ.graft(q8, smollm2, out)
    organ.graft(q8, smollm2, out, name="blk.3.*")
    with pytest.raises(organ.OrganError, match="already exists"):
        organ.graft(q8, smollm2, out, name="blk.3.*")
    assert organ.graft(q8, smollm2, out, name="blk.3.*", force=True)["out"] == str(out)
    # Never an input, force or not.
    with pytest.raises(organ.OrganError, match="is an input of this run"):
        organ.graft(q8, smollm2, smollm2, name="blk.3.*", force=True)
    # A usage error is clap's message, naming the flag.
    with pytest.raises(organ.OrganError, match="--layers"):
        organ.graft(q8, smollm2, out, layers="0-1", all=True, force=True)


def test_purify_is_the_clis(smollm2, cli, tmp):
    out = tmp / "purified.gguf"
    _same(cli, tmp, ["purify", smollm2, "--method", "fractal", "--strength", "0.3", "--name", "blk.0.attn_q.weight",
                     "--out", out],
          lambda: organ.purify(smollm2, "fractal", out, strength=0.3, name="blk.0.attn_q.weight"), [out])
    with pytest.raises(organ.OrganError, match="fractal or spectral"):
        organ.purify(smollm2, "wavelet", out, all=True)


def test_dissect_is_the_clis(smollm2, cli, tmp):
    d = tmp / "smollm2.organs"
    got = _same(cli, tmp, ["dissect", smollm2, "--out", d, "--measure"],
                lambda: organ.dissect(smollm2, d, measure=True), [d], report=False)
    assert got.to_json() is None and got.text


def test_assemble_is_the_clis(smollm2, cli, tmp):
    d = tmp / "smollm2.organs"
    organ.dissect(smollm2, d)
    out = tmp / "assembled.gguf"
    _same(cli, tmp, ["assemble", d, "--out", out], lambda: organ.assemble(d, out), [out], report=False)
    organ.assemble(d, out)
    assert out.read_bytes() == smollm2.read_bytes()


def test_moe_is_the_clis(smollm2, cli, tmp):
    out = tmp / "moe.gguf"
    _same(cli, tmp, ["moe", "--base", smollm2, "--expert", smollm2, "--expert", smollm2, "--router", "random",
                     "--seed", "5", "--out", out],
          lambda: organ.moe(smollm2, [smollm2, smollm2], out, router="random", seed=5), [out])


def test_experts_extract_is_the_clis(mixtral, cli, tmp):
    out = tmp / "expert1.gguf"
    got = _same(cli, tmp, ["experts", "extract", mixtral, "--expert", "1", "--out", out],
                lambda: organ.experts_extract(mixtral, 1, out), [out])
    assert got.doc


def test_experts_prune_is_the_clis(mixtral, cli, tmp):
    out = tmp / "pruned.gguf"
    _same(cli, tmp, ["experts", "prune", mixtral, "--keep", "1", "--out", out],
          lambda: organ.experts_prune(mixtral, [1], out), [out])


def test_layers_is_the_clis(smollm2, cli, tmp):
    out = tmp / "layers.gguf"
    got = _same(cli, tmp, ["layers", smollm2, "--drop", "28-29", "--out", out],
                lambda: organ.layers(smollm2, out, drop=[28, 29]), [out])
    assert got.doc
    with pytest.raises(organ.OrganError, match="drop|keep"):
        organ.layers(smollm2, out)


def test_lora_extract_is_the_clis(smollm2, q8, cli, tmp):
    out = tmp / "adapter.gguf"
    _same(cli, tmp, ["lora", "extract", "--base", smollm2, "--tuned", q8, "--rank", "4", "--name",
                     "blk.0.attn_q.weight", "--out", out],
          lambda: organ.lora_extract(smollm2, q8, 4, out, name="blk.0.attn_q.weight"), [out])


def test_lora_merge_is_the_clis(smollm2, adapter, cli, tmp):
    out = tmp / "merged.gguf"
    _same(cli, tmp, ["lora", "merge", smollm2, "--lora", f"{adapter}:0.5", "--out", out],
          lambda: organ.lora_merge(smollm2, f"{adapter}:0.5", out), [out])


def test_merge_is_the_clis(smollm2, q8, cli, tmp):
    out = tmp / "merged.gguf"
    _same(cli, tmp, ["merge", "--method", "linear", "--model", f"{smollm2}:0.75", "--model", f"{q8}:0.25",
                     "--out", out],
          lambda: organ.merge(out=out, method="linear", model=[f"{smollm2}:0.75", f"{q8}:0.25"]), [out])


def test_meta_is_the_clis(smollm2, cli, tmp):
    out = tmp / "meta.gguf"
    _same(cli, tmp, ["meta", smollm2, "--set", "general.name=py", "--rm", "general.license", "--out", out],
          lambda: organ.meta(smollm2, out, set="general.name=py", rm=["general.license"]), [out])
    copy = tmp / "copy.gguf"
    shutil.copy(smollm2, copy)
    organ.meta(copy, set=["general.name=in place"], in_place=True)
    assert organ.inspect(copy).metadata["general.name"] == "in place"
    # The tensor edits: the CLI's bytes and report for the same flags.
    out = tmp / "meta-tensors.gguf"
    edits = ["--rename-tensor", r"blk\.(\d+)\.attn_q\.weight=blk.$1.q.weight", "--remove-tensor", "output_norm.weight",
             "--retype-tensor", "blk.0.ffn_down.weight=q8_0"]
    got = _same(cli, tmp, ["meta", smollm2, *edits, "--out", out],
                lambda: organ.meta(smollm2, out, rename_tensor=r"blk\.(\d+)\.attn_q\.weight=blk.$1.q.weight",
                                   remove_tensor=["output_norm.weight"], retype_tensor="blk.0.ffn_down.weight=q8_0"),
                [out])
    assert [c["op"] for c in got["tensor_changes"]][:2] == ["removed", "retyped"]


def test_eval_is_the_clis(smollm2, q8, llama_bin, cli, tmp):
    # No logits cache: the second run would read the first's base back, and say so.
    flags = ["--text", TEXT, "--base", smollm2, "--ctx", "128", "--chunks", "2", "--threads", "2",
             "--llama-cpp", llama_bin, "--logits-cache-max", "0"]
    seen = []
    got = _same(cli, tmp, ["eval", q8, *flags],
                lambda: organ.eval(q8, TEXT, base=smollm2, ctx=128, chunks=2, threads=2, llama_cpp=llama_bin,
                                   logits_cache_max=0, progress=lambda done, total: seen.append((done, total))))
    assert got.doc
    # Progress: llama-perplexity's chunks, in order, to the last.
    assert seen and seen[-1][0] == seen[-1][1] >= 2, seen
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:])), seen


def test_an_interrupted_command_returns_at_once_and_writes_nothing(smollm2, q8, tmp):
    class Stop(Exception):
        pass

    calls = []

    def stop(done, total):
        calls.append((done, total))
        raise Stop

    # A call first, so that the threads that stay (rayon's pool) are there before counting.
    out = tmp / "adapter.gguf"
    organ.lora_extract(smollm2, q8, 4, out, name="blk.0.attn_q.weight")
    out.unlink()
    tasks = Path(f"/proc/{os.getpid()}/task")
    before = len(list(tasks.iterdir()))
    with pytest.raises(Stop):
        organ.lora_extract(smollm2, q8, 8, out, progress=stop)
    assert len(calls) == 1 and calls[0][0] < calls[0][1], calls
    # The extract runs on to its end on its own thread (its threads end with it), and its
    # adapter is not renamed into place: the temp file is removed.
    deadline = time.monotonic() + 300
    while len(list(tasks.iterdir())) > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(list(tasks.iterdir())) == before
    assert list(tmp.iterdir()) == []
    # The next call is not affected.
    organ.lora_extract(smollm2, q8, 4, out, name="blk.0.attn_q.weight")
    assert out.exists()


@pytest.fixture(scope="session")
def sensitivity(smollm2, llama_bin):
    """One tensor's sensitivity to Q2_K, measured on 2 chunks of 128 tokens."""
    return organ.sensitivity(smollm2, TEXT, to="Q2_K", name="blk.0.ffn_down.weight", ctx=128, chunks=2, jobs=1,
                             no_cache=True, llama_cpp=llama_bin)


def test_sensitivity_is_the_clis(smollm2, sensitivity, llama_bin, cli, tmp):
    flags = ["--text", TEXT, "--to", "Q2_K", "--name", "blk.0.ffn_down.weight", "--ctx", "128", "--chunks", "2",
             "--jobs", "1", "--no-cache", "--llama-cpp", llama_bin]
    want_csv = tmp / "cli.csv"
    text, want = _cli(cli, tmp, ["sensitivity", smollm2, *flags, "--csv", want_csv])
    got = sensitivity
    assert (got.to_json(), got.to_csv(), got.text) == (want, want_csv.read_text(), text)
    assert [(t["name"], t["changed_type"]) for t in got.tensors] == [("blk.0.ffn_down.weight", "Q2_K")]
    assert len(got.to_pandas()) == 1


def test_recipe_is_the_clis(smollm2, sensitivity, cli, tmp):
    sens = tmp / "sens.json"
    sens.write_text(sensitivity.to_json())
    out = tmp / "recipe.txt"
    # A budget only the measured tensor in Q2_K fits (SmolLM2 is 5.74 bpw; 5.7281 with it).
    _same(cli, tmp, ["recipe", smollm2, "--target-bpw", "5.735", "--from", sens, "--out", out],
          lambda: organ.recipe(smollm2, target_bpw=5.735, from_=[sens], out=out), [out])
    # What the command refuses. (A data-free recipe predicts every tensor in every type:
    # seconds more than this test is worth.)
    with pytest.raises(organ.OrganError, match="the smallest target is"):
        organ.recipe(smollm2, target_bpw=4.5, from_=sens)


def test_quantize_report_is_the_clis(smollm2, cli, tmp):
    out = tmp / "q.gguf"
    got = _same(cli, tmp, ["quantize", "--allow-requantize", "--pure", smollm2, out, "Q5_0", "2"],
                lambda: organ.quantize(smollm2, out, "Q5_0", 2, allow_requantize=True, pure=True), [out])
    assert len(got.tensors) == 272


def test_report_merge_is_the_clis(smollm2, q8, cli, tmp):
    # A fleet of two models measured in two shards by the CLI, merged by both (copies:
    # a fleet's directory is read without following links).
    models = tmp / "fleet"
    models.mkdir()
    shutil.copy(smollm2, models / "a.gguf")
    shutil.copy(q8, models / "b.gguf")
    results = tmp / "results"
    for shard in ("0/2", "1/2"):
        _cli(cli, tmp, ["measure", "--fleet", models, "--shard", shard, "--results", results], report=False)
    got = _same(cli, tmp, ["report", "merge", results, "--summary-only", "--wells", "3"],
                lambda: organ.report_merge(results, summary_only=True, wells=3))
    assert len(got["models"]) == 2
    with pytest.raises(organ.OrganError, match="no such results directory"):
        organ.report_merge(tmp / "no-results")


# --- the package's surface: every function typed, documented, and its flags the CLI's ---

PKG = Path(organ.__file__).parent

# Each function of a command, and the command's words.
COMMANDS = {
    "graft": ["graft"], "purify": ["purify"], "dissect": ["dissect"], "assemble": ["assemble"],
    "experts_extract": ["experts", "extract"], "experts_prune": ["experts", "prune"], "layers": ["layers"],
    "lora_merge": ["lora", "merge"], "lora_extract": ["lora", "extract"], "moe": ["moe"], "merge": ["merge"],
    "meta": ["meta"], "eval": ["eval"], "sensitivity": ["sensitivity"], "recipe": ["recipe"],
    "quantize": ["quantize"], "report_merge": ["report", "merge"],
}
# The report files the functions ask for themselves, and the CLI's help.
NOT_KEYWORDS = {"json", "csv", "html", "help"}


def test_every_command_is_a_function_whose_keywords_are_its_flags_with_their_defaults():
    from organ._commands import _FLAG, _defaults, _value

    for fn_name, words in COMMANDS.items():
        fn = getattr(organ, fn_name)
        names, defaults = _defaults(fn)
        flags = {"--" + _FLAG.get(n, n.replace("_", "-")): n for n in names}
        for long, default in organ._organ.defaults(words):
            if long in NOT_KEYWORDS:
                continue
            assert f"--{long}" in flags, f"{fn_name} has no keyword for --{long}"
            name = flags[f"--{long}"]
            if default:
                assert name in defaults and _value(defaults[name]) == default[0], (fn_name, long, default)
            elif name in defaults:
                assert defaults[name] in (None, False, ()), (fn_name, long, defaults[name])


def _stub():
    return ast.parse((PKG / "__init__.pyi").read_text())


def test_the_stubs_name_every_public_function_and_class_with_its_docstring():
    assert (PKG / "py.typed").exists()
    tree = _stub()
    stubbed = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    public = set(organ.__all__)
    assert public == {n for n in stubbed if not n.startswith("_")}
    assert public == {n for n in dir(organ) if not n.startswith("_") and n not in ("annotations",)
                      and callable(getattr(organ, n)) and getattr(organ, n).__module__.lstrip("_").startswith("organ")}
    for name in public:
        node, obj = stubbed[name], getattr(organ, name)
        assert ast.get_docstring(node, clean=False) == obj.__doc__, name
        if isinstance(node, ast.FunctionDef):
            for part in ("Returns:", "Raises:"):
                assert part in obj.__doc__, (name, part)
            import inspect as python_inspect

            params = list(python_inspect.signature(obj).parameters)
            args = node.args
            assert params == [a.arg for a in args.args + args.kwonlyargs], name


def test_stubtest_finds_the_stubs_true_to_the_module(tmp):
    mypy = Path(sys.executable).parent / "stubtest"
    if not mypy.exists():
        msg = "needs mypy's stubtest in the test venv (scripts/build-python.sh installs it)"
        if os.environ.get("CI", "") not in ("", "0", "false"):
            pytest.fail(msg)
        pytest.skip(msg)
    # The stubs are the package's (organ/__init__.pyi); its private modules have none, and
    # mypy reads their source only to follow what __init__ imports.
    config = tmp / "mypy.ini"
    config.write_text("[mypy]\n[mypy-organ._commands]\nignore_errors = True\n")
    r = subprocess.run([str(mypy), "organ", "--ignore-missing-stub", "--mypy-config-file", str(config)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_call_is_the_argv_a_user_would_type(tmp):
    from organ._commands import _argv

    values = dict(donor=tmp / "a.gguf", recipient="b.gguf", out=None, layers="0-1", type=("organ", "norm"),
                  name=(), all=False, dry_run=True, split_max_size=None, sha256=False, force=False, judge=None,
                  judge_ctx=512, judge_chunks=None, llama_cpp=None, judge_threads=None, judge_gpu_layers=None,
                  judge_device=None, logits_cache_max="1G")
    assert _argv(organ.graft, ["graft"], values, ()) == [
        "graft", f"--donor={tmp / 'a.gguf'}", "--recipient=b.gguf", "--layers=0-1", "--type=organ", "--type=norm",
        "--dry-run"]
    # Positional arguments go after `--`, so that one starting with `-` is not a flag.
    assert _argv(organ.assemble, ["assemble"], dict(dir="-d", out="o.gguf", split_max_size=None, force=False),
                 ("dir",)) == ["assemble", "--out=o.gguf", "--", "-d"]
