"""organ from Python: inspect, measure, diff and check GGUF models, and read tensors.

Every function calls organ's native library (the functions the `organ` command calls),
with the GIL released, and returns what the command would report: ``to_json()`` is the
file ``organ measure --json`` writes, byte for byte, and the other attributes are read
from it when first asked for. numpy and pandas are optional: without them, results are
lists and dicts, and ``tensor()`` returns an ``array.array('f')``.

Errors are :class:`OrganError` with organ's message (the file, and the offset or tensor);
Ctrl-C interrupts a long call.
"""

import array
import csv
import io
import json
import sys

from . import _organ
from ._organ import OrganError, __version__

__all__ = ["OrganError", "Model", "Report", "Comparison", "Findings", "inspect", "measure", "diff", "check", "tensor", "quantize"]


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
    """The header of a GGUF, split GGUF, organ directory or URL: metadata and tensors."""
    return Model(_organ.inspect(_path(path)))


def measure(path, sigma=False, exact=False, experts=False, stream=False, threads=None, progress=None):
    """Every tensor's θ (Z-measure v1), as ``organ measure``.

    sigma, exact, experts, stream: as ``--sigma``, ``--exact``, ``--experts``, ``--stream``.
    threads: worker threads (default: one per core). progress: a callable(done, total),
    or True for a tqdm bar.
    """
    callback, bar = _progress(progress)
    try:
        j, c = _organ.measure(_path(path), sigma, exact, experts, stream, threads, callback)
    finally:
        if bar is not None:
            bar.close()
    return Report(j, c)


def diff(a, b, stream=False, threads=None):
    """Models a and b compared tensor by tensor (Compare v1), as ``organ diff``."""
    return Comparison(*_organ.diff(_path(a), _path(b), stream, threads))


def check(path, stream=False, threads=None, derived_from=None, imatrix=None):
    """A model's health without running it (Check k1), as ``organ check``; with
    ``derived_from``, also whether it is that model quantized as its header says
    (``organ check --derived-from``, with the ``imatrix`` it was quantized with): every
    tensor quantized again in memory and compared, a ``derivation`` finding for the
    verdict and each tensor or key that differs."""
    src = None if derived_from is None else _path(derived_from)
    im = None if imatrix is None else _path(imatrix)
    return Findings(*_organ.check(_path(path), stream, threads, src, im))


def tensor(path, name, threads=None):
    """Tensor ``name`` dequantized to float32: the same bits as gguf-py's ``dequantize``.

    A numpy array of the tensor's shape (numpy's order: outermost first, as gguf-py's)
    when numpy is installed; else an ``array.array('f')`` of its values, flat.
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


def quantize(src, dst, type, threads=None, imatrix=None, include_weights=(), exclude_weights=(),
             pure=False, leave_output_tensor=False, output_tensor_type=None, token_embedding_type=None,
             tensor_types=(), tensor_type_file=None, allow_requantize=False, dry_run=False, force=False,
             override_kv=(), prune_layers=None, keep_split=False):
    """``src`` quantized to ``type`` into ``dst``, as ``organ quantize`` and llama-quantize
    write it, byte for byte; the keywords are llama-quantize's flags (``tensor_types`` its
    repeated ``--tensor-type PATTERN=TYPE``, ``override_kv`` its repeated ``--override-kv
    KEY=TYPE:VALUE``, ``prune_layers`` a list of layer numbers or ``"L0,L1"``,
    ``keep_split`` a shard for each of ``src``'s, named ``DST-0000i-of-0000N.gguf``).

    Returns a dict: ``tensors`` (name, type in, type out) in the order written,
    ``bytes_in`` and ``bytes_out`` (tensor data), ``fell_back`` (tensors whose rows are not
    whole blocks of their type, written in its fallback).
    """
    tensors, bytes_in, bytes_out, fell_back = _organ.quantize(
        _path(src), _path(dst), type, threads, None if imatrix is None else _path(imatrix),
        list(include_weights), list(exclude_weights), pure, leave_output_tensor, output_tensor_type,
        token_embedding_type, list(tensor_types), None if tensor_type_file is None else _path(tensor_type_file),
        allow_requantize, dry_run, force, list(override_kv),
        None if prune_layers is None else (prune_layers if isinstance(prune_layers, str)
                                           else ",".join(str(int(n)) for n in prune_layers)), keep_split)
    return {"tensors": tensors, "bytes_in": bytes_in, "bytes_out": bytes_out, "fell_back": fell_back}

