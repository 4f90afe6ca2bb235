"""organ from Python: every command of organ's (inspect, measure, diff and check GGUF
models; graft, purify, dissect, assemble, experts, layers, lora, moe, merge, meta write
them; eval, sensitivity and recipe judge them and plan their quantization; quantize), and
tensors read as arrays.

Every function runs what the `organ` command runs, with the GIL released, and returns what
the command would report: ``to_json()`` is the file ``organ CMD --json`` writes, byte for
byte, and the other attributes are read from it when first asked for. The keyword
arguments of the commands that write are their flags, snake_case, with their defaults.
numpy and pandas are optional: without them, results are lists and dicts, and
``tensor()`` returns an ``array.array('f')``.

Errors are :class:`OrganError` with organ's message (the file, and the offset or tensor);
Ctrl-C interrupts a long call.
"""

import array
import csv
import io
import json
import sys

from . import _organ
from ._commands import (
    Outcome,
    Quantization,
    Sensitivity,
    assemble,
    dissect,
    eval,
    experts_extract,
    experts_prune,
    graft,
    layers,
    lora_extract,
    lora_merge,
    merge,
    meta,
    moe,
    purify,
    quantize,
    recipe,
    report_merge,
    sensitivity,
)
from ._organ import OrganError, __version__

__all__ = [
    "OrganError", "Model", "Report", "Comparison", "Findings", "Outcome", "Quantization", "Sensitivity",
    "inspect", "measure", "diff", "check", "tensor", "quantize", "graft", "purify", "dissect", "assemble",
    "experts_extract", "experts_prune", "layers", "lora_merge", "lora_extract", "moe", "merge", "meta", "eval",
    "sensitivity", "recipe", "report_merge",
]


def _path(p):
    """A path, a path-like or a URL, as the native functions take it."""
    if hasattr(p, "__fspath__"):
        return p.__fspath__()
    if isinstance(p, str):
        return p
    raise TypeError(f"a path or URL is a str or os.PathLike, not {type(p).__name__}")


def _cell(s):
    """A CSV field as Python's value: empty is None, then int, float, bool, else text."""
    if s == "":
        return None
    for kind in (int, float):
        try:
            return kind(s)
        except ValueError:
            pass
    if s in ("true", "false"):
        return s == "true"
    return s


def _rows(text):
    """The rows of one of organ's CSV texts, as dicts of Python values."""
    return [{k: _cell(v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]


def _frame(rows):
    import pandas

    return pandas.DataFrame(rows)


def _progress(progress):
    """A progress callback(done, total): the one given, or a tqdm bar for True."""
    if progress is None or progress is False:
        return None, None
    if callable(progress):
        return progress, None
    from tqdm.auto import tqdm

    bar = tqdm(unit="tensor")

    def update(done, total):
        bar.total = total
        bar.n = done
        bar.refresh()

    return update, bar


class _Json:
    """A report held as organ's JSON text, parsed when first read."""

    def __init__(self, json_text):
        self._json = json_text
        self._doc = None

    def to_json(self):
        """The report as organ writes it (``--json FILE``), byte for byte."""
        return self._json

    @property
    def doc(self):
        """The whole report as dicts and lists (the JSON parsed)."""
        if self._doc is None:
            self._doc = json.loads(self._json)
        return self._doc


class Model(_Json):
    """A model's header, as ``organ inspect --json`` gives it."""

    @property
    def metadata(self):
        """Every metadata key with its value, in file order."""
        return {kv["key"]: kv["value"] for kv in self.doc["metadata"]}

    @property
    def tensors(self):
        """One dict per tensor: name, group, organ, layer, type, shape, bytes, offsets."""
        return self.doc["tensors"]

    def to_pandas(self):
        """The tensors as a DataFrame (pandas needed)."""
        return _frame(self.tensors)

    def __repr__(self):
        d = self.doc
        return f"<organ.Model {d['file']}: {len(d['tensors'])} tensors, {d['parameters']} parameters>"


class _Table(_Json):
    """A report held as organ's JSON and CSV texts, each parsed when first read."""

    def __init__(self, json_text, csv_text):
        super().__init__(json_text)
        self._csv = csv_text
        self._rows = None

    def to_csv(self):
        """The rows as organ writes them (``--csv FILE``), byte for byte."""
        return self._csv

    def _csv_rows(self):
        if self._rows is None:
            self._rows = _rows(self._csv)
        return self._rows


class Report(_Table):
    """A θ report (Z-measure v1), as ``organ measure --json`` writes it."""

    @property
    def tensors(self):
        """One dict per tensor (and per expert, with experts=True): the CSV's rows."""
        return self._csv_rows()

    @property
    def model(self):
        """The model's part of the report (summary, types, every tensor in full)."""
        return self.doc["models"][0]

    @property
    def summary(self):
        """θ_mean, θ_weighted, signal, counts, per-group figures and the wells."""
        return self.model["summary"]

    @property
    def groups(self):
        """Per anatomy group: count, mean, min and max θ."""
        return self.summary["groups"]

    def to_pandas(self):
        """The tensors' rows as a DataFrame (pandas needed)."""
        return _frame(self.tensors)

    def __repr__(self):
        s = self.summary
        return (
            f"<organ.Report {self.model['model']}: {s['measured']} of {s['tensors']} tensors measured, "
            f"θ_mean {s['theta_mean']:.3f}>"
        )


class Comparison(_Table):
    """Two models compared tensor by tensor, as ``organ diff --json`` writes it."""

    @property
    def pairs(self):
        """One dict per pair of tensors (and per expert): the CSV's rows."""
        return self._csv_rows()

    @property
    def counts(self):
        """How many pairs are identical, changed, and unmatched."""
        return self.doc["counts"]

    @property
    def groups(self):
        """Per anatomy group: pairs, how many changed, and by how much."""
        return self.doc["groups"]

    def to_pandas(self):
        """The pairs as a DataFrame (pandas needed)."""
        return _frame(self.pairs)


class Findings(_Json):
    """A model's health check, as ``organ check --json`` writes it."""

    def __init__(self, json_text, has_errors):
        super().__init__(json_text)
        self.has_errors = has_errors

    @property
    def findings(self):
        """One dict per finding: severity, code, tensor, message."""
        return self.doc["findings"]

    @property
    def counts(self):
        """Findings per severity."""
        return self.doc["counts"]

    def __bool__(self):
        """True when the model is healthy (no error finding)."""
        return not self.has_errors

    def to_pandas(self):
        """The findings as a DataFrame (pandas needed)."""
        return _frame(self.findings)


def inspect(path):
    """The header of a GGUF, split GGUF, organ directory or URL: metadata and tensors,
    as ``organ inspect PATH --json``.

    Parameters:
    path: the model (a path or a URL).

    Returns:
        Model: ``metadata``, ``tensors``, ``to_pandas()``, ``to_json()``.

    Raises:
        OrganError: the file cannot be read or is not a model organ reads.
    """
    return Model(_organ.inspect(_path(path)))


def measure(path, sigma=False, exact=False, experts=False, stream=False, threads=None, progress=None):
    """Every tensor's θ (Z-measure v1), as ``organ measure``.

    Parameters:
    path: the model (a path or a URL).
    sigma, exact, experts, stream: as ``--sigma``, ``--exact``, ``--experts``,
        ``--stream``.
    threads: worker threads (default: one per core).
    progress: a callable(done, total), or True for a tqdm bar.

    Returns:
        Report: ``tensors`` (the CSV's rows), ``summary``, ``groups``, ``to_json()``,
        ``to_csv()``, ``to_pandas()``.

    Raises:
        OrganError: the model cannot be read or measured.
        KeyboardInterrupt: Ctrl-C; the measure has stopped when it is raised.
    """
    callback, bar = _progress(progress)
    try:
        j, c = _organ.measure(_path(path), sigma, exact, experts, stream, threads, callback)
    finally:
        if bar is not None:
            bar.close()
    return Report(j, c)


def diff(a, b, stream=False, threads=None):
    """Models a and b compared tensor by tensor (Compare v1), as ``organ diff``.

    Parameters:
    a, b: the models (paths or URLs).
    stream: read by positioned reads only (``--stream``).
    threads: worker threads (default: one per core).

    Returns:
        Comparison: ``pairs``, ``counts``, ``groups``, ``to_json()``, ``to_csv()``.

    Raises:
        OrganError: a model cannot be read.
    """
    return Comparison(*_organ.diff(_path(a), _path(b), stream, threads))


def check(path, stream=False, threads=None, derived_from=None, imatrix=None):
    """A model's health without running it (Check k1), as ``organ check``; with
    ``derived_from``, also whether it is that model quantized as its header says
    (``organ check --derived-from``, with the ``imatrix`` it was quantized with): every
    tensor quantized again in memory and compared, a ``derivation`` finding for the
    verdict and each tensor or key that differs.

    Parameters:
    path: the model (a path or a URL).
    stream, threads: as for :func:`diff`.
    derived_from: the model ``path`` should be a quantization of.
    imatrix: the importance matrix it was quantized with (with ``derived_from``).

    Returns:
        Findings: ``findings``, ``counts``, ``has_errors``, ``bool()`` (healthy),
        ``to_json()``.

    Raises:
        OrganError: the model cannot be read (a model with error findings is a result,
        not an exception).
    """
    src = None if derived_from is None else _path(derived_from)
    im = None if imatrix is None else _path(imatrix)
    return Findings(*_organ.check(_path(path), stream, threads, src, im))


def tensor(path, name, threads=None):
    """Tensor ``name`` dequantized to float32: the same bits as gguf-py's ``dequantize``.

    Parameters:
    path: the model (a path or a URL).
    name: the tensor's name.
    threads: worker threads (default: one per core).

    Returns:
        A numpy array of the tensor's shape (numpy's order: outermost first, as
        gguf-py's) when numpy is installed; else an ``array.array('f')`` of its values,
        flat.

    Raises:
        OrganError: no such tensor, a type organ cannot dequantize, or a read that fails.
    """
    data, dims, _ty = _organ.tensor(_path(path), name, threads)
    try:
        import numpy
    except ImportError:
        values = array.array("f")
        values.frombytes(bytes(data))
        if sys.byteorder != "little":
            values.byteswap()
        return values
    return numpy.frombuffer(data, dtype="<f4").reshape(tuple(reversed(dims)) or ())
