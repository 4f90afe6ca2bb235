"""What the Python tests need, found as tests/it/common.rs finds it (docs/testing.md):
SmolLM2 at $ORGAN_MODEL or $ORGAN_CACHE/models/, the CLI at $ORGAN_BIN or the release
target, llama.cpp's tools at $ORGAN_LLAMA_BIN or $ORGAN_CACHE/llama.cpp-11434.0.0/bin.
What is missing skips a test, or under CI=true fails it."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _cache():
    return Path(os.environ.get("ORGAN_CACHE") or Path.home() / ".cache" / "organ")


def _need(path, what):
    if path.exists():
        return path
    msg = f"needs {what} ({path}): run scripts/test.sh"
    if os.environ.get("CI", "") not in ("", "0", "false"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def smollm2():
    default = _cache() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return _need(Path(os.environ.get("ORGAN_MODEL") or default), "the model")


@pytest.fixture(scope="session")
def cli():
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    return _need(Path(os.environ.get("ORGAN_BIN") or target / "release" / "organ"), "the release organ")


@pytest.fixture(scope="session")
def llama_bin():
    default = _cache() / "llama.cpp-11434.0.0" / "bin"
    path = Path(os.environ.get("ORGAN_LLAMA_BIN") or default)
    _need(path / "llama-perplexity", "llama.cpp's llama-perplexity")
    return path


@pytest.fixture
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("python-")
