"""organ's Python module, installed from its wheel (scripts/build-python.sh), against the
CLI it must agree with and against gguf-py 0.19.0, the format's reference reader.

Run by scripts/test.sh with the test venv's pytest; the fixtures (the model, the CLI) are
conftest.py's. The commands that write models, evaluate and plan: test_commands.py.
"""

import array
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import organ

from conftest import REPO

VECTORS = REPO / "core" / "tests" / "data" / "dequant"


def _cli_files(cli, tmp, args, flags):
    """Runs `organ ARGS --FLAG FILE...` and returns each file's text, by flag."""
    files = {f: tmp / f"cli-{args[0]}.{f}" for f in flags}
    cmd = [str(cli), *map(str, args)]
    for f, p in files.items():
        cmd += [f"--{f}", str(p)]
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    return {f: p.read_text() for f, p in files.items()}


def test_measure_is_the_clis_report_byte_for_byte(smollm2, cli, tmp):
    want = _cli_files(cli, tmp, ["measure", smollm2], ["json", "csv"])
    r = organ.measure(smollm2)
    assert r.to_json() == want["json"]
    assert r.to_csv() == want["csv"]
    # The rows are the CSV's, typed; summary and groups the JSON's.
    assert len(r.tensors) == r.summary["tensors"] == 272
    row = next(t for t in r.tensors if t["tensor"] == "blk.0.attn_q.weight")
    full = next(t for t in r.model["tensors"] if t["name"] == "blk.0.attn_q.weight")
    assert (row["layer"], row["type"], row["theta"], row["organ"]) == (0, full["type"], full["theta"], full["organ"])
    assert [g["group"] for g in r.groups] == [g["group"] for g in r.summary["groups"]]
    assert sum(g["count"] for g in r.groups) == r.summary["measured"]
    df = r.to_pandas()
    assert list(df.columns) == want["csv"].splitlines()[0].split(",")
    assert df["theta"].dtype == np.float64 and len(df) == 272


def test_measure_sigma_is_the_clis(smollm2, cli, tmp):
    want = _cli_files(cli, tmp, ["measure", smollm2, "--sigma"], ["json"])
    assert organ.measure(smollm2, sigma=True, threads=2).to_json() == want["json"]


def test_diff_check_and_inspect_are_the_clis(smollm2, cli, tmp):
    b = tmp / "b.gguf"
    b.write_bytes(smollm2.read_bytes())
    want = _cli_files(cli, tmp, ["diff", smollm2, b], ["json", "csv"])
    d = organ.diff(smollm2, b)
    assert (d.to_json(), d.to_csv()) == (want["json"], want["csv"])
    assert len(d.pairs) == 272 and all(p["identical"] is True for p in d.pairs)
    want = _cli_files(cli, tmp, ["check", smollm2], ["json"])
    c = organ.check(smollm2)
    assert c.to_json() == want["json"] and bool(c) and c.counts["error"] == 0
    shown = subprocess.run([str(cli), "inspect", str(smollm2), "--json"], capture_output=True, text=True, check=True)
    m = organ.inspect(smollm2)
    assert m.to_json() == shown.stdout
    assert m.metadata["general.architecture"] == "llama"
    assert len(m.to_pandas()) == 272


def test_every_tensor_of_smollm2_is_gguf_pys_dequantization_bit_for_bit(smollm2):
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(smollm2)
    assert len(reader.tensors) == 272
    for t in reader.tensors:
        want = dequantize(t.data, t.tensor_type).astype(np.float32)
        got = organ.tensor(smollm2, t.name)
        assert got.shape == want.shape, t.name
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), t.name


# Types whose reference is gguf-py's typed array cast to f32 (docs/testing.md), and types
# whose vectors are ggml's own (gguf-py 0.19.0 names them but cannot dequantize them).
TYPED = {"F64", "I8", "I16", "I32", "I64"}
GGML_ONLY = {"Q1_0", "Q2_0"}


def _vector_model(path):
    """A GGUF of one tensor per type of the repo's dequantization vectors that gguf-py
    writes: each tensor's bytes the vector's input, as gguf-py's writer lays them."""
    from gguf import GGMLQuantizationType, GGUFWriter

    w = GGUFWriter(path, "llama")
    names = []
    for vin in sorted(VECTORS.glob("*.in")):
        ty = getattr(GGMLQuantizationType, vin.stem, None)
        if ty is None:  # Q2_0: a type gguf-py 0.19.0 cannot write
            continue
        raw = np.frombuffer(vin.read_bytes(), dtype=np.uint8)
        w.add_tensor(f"v.{vin.stem}", raw, raw_shape=raw.shape, raw_dtype=ty)
        names.append(vin.stem)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return names


def test_the_repos_dequantization_vectors_through_a_gguf(tmp):
    from gguf import GGUFReader
    from gguf.quants import dequantize

    path = tmp / "vectors.gguf"
    names = _vector_model(path)
    assert len(names) >= 31, names
    reader = {t.name: t for t in GGUFReader(path).tensors}
    checked = 0
    for name in names:
        got = organ.tensor(path, f"v.{name}").reshape(-1)
        want = np.frombuffer((VECTORS / f"{name}.out").read_bytes(), dtype="<u4")
        assert np.array_equal(got.view(np.uint32), want), name
        t = reader[f"v.{name}"]
        if name in GGML_ONLY:
            continue
        if name in TYPED:  # gguf-py has no dequantize for them: its typed array, cast
            with np.errstate(over="ignore"):
                ref = np.asarray(t.data).astype(np.float32)
        else:
            ref = dequantize(t.data, t.tensor_type)
        assert np.array_equal(got.view(np.uint32), ref.reshape(-1).view(np.uint32)), name
        checked += 1
    assert checked == 31, "every type gguf-py dequantizes"


def test_without_numpy_a_tensor_is_an_array_of_floats(smollm2):
    code = (
        "import sys; sys.modules['numpy'] = None\n"
        "import organ\n"
        f"v = organ.tensor({str(smollm2)!r}, 'blk.0.attn_norm.weight')\n"
        "print(type(v).__name__, v.typecode, len(v), v.tobytes().hex())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:3] == ["array", "f", "576"]
    assert bytes.fromhex(out[3]) == organ.tensor(smollm2, "blk.0.attn_norm.weight").astype("<f4").tobytes()
    assert isinstance(array.array("f"), array.array)


def test_bad_input_raises_organ_error_naming_the_file(tmp, smollm2):
    junk = tmp / "junk.gguf"
    junk.write_bytes(b"GGML" + bytes(60))
    for call in (organ.measure, organ.inspect, organ.check, lambda p: organ.tensor(p, "x")):
        with pytest.raises(organ.OrganError) as e:
            call(junk)
        assert str(junk) in str(e.value) and e.value.kind == "format"
    cut = tmp / "cut.gguf"
    with open(smollm2, "rb") as f:
        cut.write_bytes(f.read(100_000))
    with pytest.raises(organ.OrganError, match=str(cut)):
        organ.measure(cut)
    with pytest.raises(organ.OrganError, match="no tensor named 'nope'|no tensor named \"nope\""):
        organ.tensor(smollm2, "nope")
    with pytest.raises(organ.OrganError, match=str(tmp / "absent.gguf")):
        organ.measure(tmp / "absent.gguf")
    assert issubclass(organ.OrganError, Exception)


def test_import_takes_under_half_a_second():
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import organ"], check=True)
    assert time.perf_counter() - t0 < 0.5


def test_the_gil_is_released_while_measuring(smollm2):
    done = []
    worker = threading.Thread(target=lambda: done.append(organ.measure(smollm2, sigma=True, threads=1)))
    t0 = last = time.perf_counter()
    worker.start()
    gap = 0.0
    while worker.is_alive():
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    took = time.perf_counter() - t0
    assert done and took > 0.5, took
    # Holding the GIL for the measure would stall this loop for the whole call.
    assert gap < 0.2, (gap, took)


def test_progress_reaches_every_tensor(smollm2):
    seen = []
    organ.measure(smollm2, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1] == (272, 272)
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))


def test_ctrl_c_interrupts_a_measure(smollm2):
    code = (
        "import organ, sys\n"
        "print('start', flush=True)\n"
        f"organ.measure({str(smollm2)!r}, sigma=True, threads=1)\n"
        "print('finished')\n"
    )
    # Python raises KeyboardInterrupt only if SIGINT was not ignored when it started, and a
    # command started in the background by a non-interactive shell (a CI runner's) ignores
    # it: the child gets the default disposition back.
    p = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert p.stdout.readline() == "start\n"
    time.sleep(0.3)
    t0 = time.perf_counter()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert "KeyboardInterrupt" in err and "finished" not in out
    assert time.perf_counter() - t0 < 0.5


@pytest.mark.parametrize("stream", [False, True], ids=["mapped", "stream"])
def test_an_interrupted_measure_stops_its_work(smollm2, stream):
    class Stop(Exception):
        pass

    calls = []

    def stop(done, total):
        calls.append(done)
        raise Stop

    tasks = Path(f"/proc/{os.getpid()}/task")
    before = len(list(tasks.iterdir()))
    with pytest.raises(Stop) as stopped:
        organ.measure(smollm2, sigma=True, stream=stream, threads=1, progress=stop)
    # The call returns once the work has stopped and its threads (the work's, its pool's
    # one, and streaming, the measuring ones) are joined: none is left blocked on a
    # channel no one reads, and none of rayon's global pool was started for it.
    assert len(list(tasks.iterdir())) == before
    # It stopped at its first progress, short of 272: on its one thread at most the tensor
    # under way was finished after the stop (the whole run goes on for 2 s mapped, 5 s
    # streaming).
    assert len(calls) == 1 and calls[0] < 272
    assert stopped.value.organ_tensors_after_stop <= 1


def test_quantize_writes_the_clis_file_and_says_what_it_chose(smollm2, cli, tmp):
    # SmolLM2 is Q4_1, so requantizing is asked for; Q4_K_M's rows of 576 fall back.
    types = tmp / "types.txt"
    types.write_text("attn_v=q8_0\n")
    flags = ["--allow-requantize", "--tensor-type", "ffn_up=q5_0", "--tensor-type-file", str(types)]
    ours = tmp / "py.gguf"
    got = organ.quantize(smollm2, ours, "Q4_K_M", threads=2, allow_requantize=True,
                         tensor_type=["ffn_up=q5_0"], tensor_type_file=types)
    theirs = tmp / "cli.gguf"
    subprocess.run([str(cli), "quantize", *flags, str(smollm2), str(theirs), "Q4_K_M", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    assert ours.read_bytes() == theirs.read_bytes()
    by_name = {t["name"]: (t["from"], t["type"]) for t in got.tensors}
    assert len(by_name) == 272
    assert by_name["blk.0.attn_v.weight"] == ("Q4_1", "Q8_0")
    assert by_name["blk.0.ffn_up.weight"] == ("Q4_1", "Q5_0")
    assert got["n_fallback"] > 0 and got["bytes_out"] > got["bytes_in"]
    # What llama-quantize refuses is an OrganError naming it; nothing is written.
    with pytest.raises(organ.OrganError, match="requantizing from type Q4_1 is disabled"):
        organ.quantize(smollm2, tmp / "no.gguf", "Q8_0")
    assert not (tmp / "no.gguf").exists()
    with pytest.raises(organ.OrganError, match="already exists"):
        organ.quantize(smollm2, ours, "Q8_0", allow_requantize=True)
    # A key overridden, layers pruned (a list or the CLI's text), a shard per input shard.
    got = organ.quantize(smollm2, tmp / "py-split.gguf", "Q8_0", allow_requantize=True, keep_split=True,
                         override_kv=["general.name=str:py"], prune_layers=[7, 3])
    flags = ["--allow-requantize", "--keep-split", "--override-kv", "general.name=str:py", "--prune-layers", "3,7"]
    subprocess.run([str(cli), "quantize", *flags, str(smollm2), str(tmp / "cli-split.gguf"), "Q8_0"], check=True,
                   stdout=subprocess.DEVNULL)
    ours, theirs = tmp / "py-split-00001-of-00001.gguf", tmp / "cli-split-00001-of-00001.gguf"
    assert ours.read_bytes() == theirs.read_bytes()
    assert len(got.tensors) == 272 - 2 * 9 and "blk.28.ffn_up.weight" not in {t["name"] for t in got.tensors}


def test_check_derived_from_names_the_tensor_that_is_not_its_source_quantized(smollm2, tmp):
    out = tmp / "derived-q8.gguf"
    organ.quantize(smollm2, out, "Q8_0", allow_requantize=True)
    found = organ.check(out, derived_from=smollm2)
    assert found, found.findings
    verdict = [f for f in found.findings if f["kind"] == "derivation"]
    assert len(verdict) == 1 and "all 272 tensors identical" in verdict[0]["message"], verdict
    # One byte of one tensor changed: that tensor is named.
    from gguf import GGUFReader
    t = next(t for t in GGUFReader(out).tensors if t.name == "blk.5.ffn_down.weight")
    raw = bytearray(out.read_bytes())
    raw[int(t.data_offset) + 1000] ^= 0x10
    changed = tmp / "derived-changed.gguf"
    changed.write_bytes(bytes(raw))
    found = organ.check(changed, derived_from=smollm2)
    assert not found and any(f.get("subject") == "blk.5.ffn_down.weight" for f in found.findings), found.findings
    with pytest.raises(organ.OrganError, match="give derived_from too"):
        organ.check(out, imatrix=out)
