"""Type stubs of organ's Python package (python/organ/): every public function and
class, with the docstrings of the functions themselves (tests/python/ checks they agree)."""

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

_PathLike = Union[str, "os.PathLike[str]"]

__version__: str

class OrganError(Exception):
    """An error of organ's: the message names the file (and offset or tensor) and what was expected. Attributes: `kind` ("format", "io" or "other"), `path` and `offset` when known."""

    kind: str
    """\"format\", \"io\" or \"other\"."""
    path: Optional[str]
    """The file the message names first, when known."""
    offset: Optional[int]
    """The byte offset in that file, when known."""
    organ_tensors_after_stop: int
    """On an interrupted measure: the tensors finished after the stop."""

class _Json:
    """A report held as organ's JSON text, parsed when first read."""
    def __init__(self, json_text: Optional[str]) -> None: ...
    def to_json(self) -> str:
        """The report as organ writes it (``--json FILE``), byte for byte."""
        ...
    @property
    def doc(self) -> Any:
        """The whole report as dicts and lists (the JSON parsed)."""
        ...

class Model(_Json):
    """A model's header, as ``organ inspect --json`` gives it."""
    @property
    def metadata(self) -> Dict[str, Any]:
        """Every metadata key with its value, in file order."""
        ...
    @property
    def tensors(self) -> List[Dict[str, Any]]:
        """One dict per tensor: name, group, organ, layer, type, shape, bytes, offsets."""
        ...
    def to_pandas(self) -> Any:
        """The tensors as a DataFrame (pandas needed)."""
        ...

class _Table(_Json):
    """A report held as organ's JSON and CSV texts, each parsed when first read."""
    def __init__(self, json_text: Optional[str], csv_text: Optional[str]) -> None: ...
    def to_csv(self) -> str:
        """The rows as organ writes them (``--csv FILE``), byte for byte."""
        ...

class Report(_Table):
    """A θ report (Z-measure v1), as ``organ measure --json`` writes it."""
    @property
    def tensors(self) -> List[Dict[str, Any]]:
        """One dict per tensor (and per expert, with experts=True): the CSV's rows."""
        ...
    @property
    def model(self) -> Dict[str, Any]:
        """The model's part of the report (summary, types, every tensor in full)."""
        ...
    @property
    def summary(self) -> Dict[str, Any]:
        """θ_mean, θ_weighted, signal, counts, per-group figures and the wells."""
        ...
    @property
    def groups(self) -> List[Dict[str, Any]]:
        """Per anatomy group: count, mean, min and max θ."""
        ...
    def to_pandas(self) -> Any:
        """The tensors' rows as a DataFrame (pandas needed)."""
        ...

class Comparison(_Table):
    """Two models compared tensor by tensor, as ``organ diff --json`` writes it."""
    @property
    def pairs(self) -> List[Dict[str, Any]]:
        """One dict per pair of tensors (and per expert): the CSV's rows."""
        ...
    @property
    def counts(self) -> Dict[str, Any]:
        """How many pairs are identical, changed, and unmatched."""
        ...
    @property
    def groups(self) -> List[Dict[str, Any]]:
        """Per anatomy group: pairs, how many changed, and by how much."""
        ...
    def to_pandas(self) -> Any:
        """The pairs as a DataFrame (pandas needed)."""
        ...

class Findings(_Json):
    """A model's health check, as ``organ check --json`` writes it."""
    def __init__(self, json_text: Optional[str], has_errors: bool) -> None: ...
    has_errors: bool

    @property
    def findings(self) -> List[Dict[str, Any]]:
        """One dict per finding: severity, code, tensor, message."""
        ...
    @property
    def counts(self) -> Dict[str, Any]:
        """Findings per severity."""
        ...
    def __bool__(self) -> bool:
        """True when the model is healthy (no error finding)."""
        ...
    def to_pandas(self) -> Any:
        """The findings as a DataFrame (pandas needed)."""
        ...

class Outcome:
    """What a command did: its JSON report (``--json FILE``) and the text it printed.

    ``to_json()`` is the report as the command writes it, byte for byte (``None`` when it
    wrote none: a dry run); ``doc`` the report parsed, and ``outcome["key"]`` one of its
    fields; ``text`` what ``organ`` prints on stdout.
    """
    text: str
    """What the command printed on stdout."""

    def __init__(self, text: Optional[str], json_text: Optional[str]) -> None: ...
    def to_json(self) -> Optional[str]:
        """The report as the command writes it with ``--json FILE``, or None."""
        ...
    @property
    def doc(self) -> Any:
        """The report as dicts and lists (the JSON parsed), or None."""
        ...
    def __getitem__(self, key: str) -> Any:
        ...
    def get(self, key: str, default: Any = None) -> Any:
        """A field of the report, or ``default``."""
        ...

class Quantization(Outcome):
    """A quantization: every tensor's types and bytes, and the sizes, as ``organ quantize
    --json`` writes them."""
    @property
    def tensors(self) -> List[Dict[str, Any]]:
        """One dict per tensor in the order written: name, types in and out, bytes."""
        ...

class Sensitivity(Outcome):
    """Per-tensor sensitivity, as ``organ sensitivity --json`` and ``--csv`` write it."""
    def __init__(self, text: Optional[str], json_text: Optional[str], csv_text: Optional[str] = None) -> None: ...
    def to_csv(self) -> Optional[str]:
        """The rows as the command writes them with ``--csv FILE``, or None."""
        ...
    @property
    def tensors(self) -> List[Dict[str, Any]]:
        """One dict per tensor: the CSV's rows, typed."""
        ...
    def to_pandas(self) -> Any:
        """The tensors' rows as a DataFrame (pandas needed)."""
        ...

def inspect(path: _PathLike) -> Model:
    """The header of a GGUF, split GGUF, organ directory or URL: metadata and tensors,
    as ``organ inspect PATH --json``.

    Parameters:
    path: the model (a path or a URL).

    Returns:
        Model: ``metadata``, ``tensors``, ``to_pandas()``, ``to_json()``.

    Raises:
        OrganError: the file cannot be read or is not a model organ reads.
    """
    ...

def measure(
    path: _PathLike,
    sigma: bool = False,
    exact: bool = False,
    experts: bool = False,
    stream: bool = False,
    threads: Optional[int] = None,
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Report:
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
    ...

def diff(a: _PathLike, b: _PathLike, stream: bool = False, threads: Optional[int] = None) -> Comparison:
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
    ...

def check(
    path: _PathLike,
    stream: bool = False,
    threads: Optional[int] = None,
    derived_from: Optional[_PathLike] = None,
    imatrix: Optional[_PathLike] = None,
) -> Findings:
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
    ...

def tensor(path: _PathLike, name: str, threads: Optional[int] = None) -> Any:
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
    ...

def graft(
    donor: _PathLike,
    recipient: _PathLike,
    out: Optional[_PathLike] = None,
    *,
    layers: Optional[str] = None,
    type: Union[str, Sequence[str]] = (),
    name: Union[str, Sequence[str]] = (),
    all: bool = False,
    dry_run: bool = False,
    split_max_size: Optional[Union[int, str]] = None,
    sha256: bool = False,
    force: bool = False,
    judge: Optional[_PathLike] = None,
    judge_ctx: int = 512,
    judge_chunks: Optional[int] = None,
    llama_cpp: Optional[_PathLike] = None,
    judge_threads: Optional[int] = None,
    judge_gpu_layers: Optional[str] = None,
    judge_device: Optional[str] = None,
    logits_cache_max: Union[int, str] = "1G",
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Outcome:
    """Tensors of ``donor`` transplanted into ``recipient`` (same architecture), as
    ``organ graft``: checked first, refused with the full list of what would not load.

    Parameters:
    donor, recipient: GGUF files, split GGUFs or organ directories (or URLs, the donor).
    out: the result, a ``.gguf`` file or else an organ directory (not needed with
        ``dry_run``).
    layers, type, name: which tensors (``--layers 5-20``, ``--type organ`` (one or a
        list), ``--name PATTERN`` (one or a list)); at least one, or ``all=True``.
    all: every tensor.
    dry_run: plan and check only; nothing written, no report (``to_json()`` is None).
    split_max_size: with a ``.gguf`` out, shards of at most this much tensor data
        (bytes, or ``"500M"``).
    sha256: also record the donor's sha256 beside its BLAKE3.
    force: replace an output that exists (only what organ could have written there,
        never an input).
    judge, judge_ctx, judge_chunks, llama_cpp, judge_threads, judge_gpu_layers, judge_device: ``--judge
        TEXT`` and its flags: the written model evaluated against its parent on TEXT by
        llama.cpp's llama-perplexity (``llama_cpp`` its bin directory), the verdict in
        the report's ``judge``.
    logits_cache_max: ``--logits-cache-max``: the parent's logits kept (ORGAN_CACHE,
        else ~/.cache/organ) for the next judge against it, all kept at most this much
        (bytes, or ``"1G"``; 0 keeps and reads none).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (--judge's chunks), started again at 0 for each stage.

    Returns:
        Outcome: the report ``--json`` writes (donor, recipient, out, selection, tensors,
        judge) and the printed plan in ``text``.

    Raises:
        OrganError: what ``organ graft`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def purify(
    model: _PathLike,
    method: str,
    out: _PathLike,
    *,
    layers: Optional[str] = None,
    type: Union[str, Sequence[str]] = (),
    name: Union[str, Sequence[str]] = (),
    all: bool = False,
    strength: float = 0.5,
    keep: float = 0.95,
    as_: Optional[str] = None,
    only_if_improves: bool = False,
    split_max_size: Optional[Union[int, str]] = None,
    force: bool = False,
    judge: Optional[_PathLike] = None,
    judge_ctx: int = 512,
    judge_chunks: Optional[int] = None,
    llama_cpp: Optional[_PathLike] = None,
    judge_threads: Optional[int] = None,
    judge_gpu_layers: Optional[str] = None,
    judge_device: Optional[str] = None,
    logits_cache_max: Union[int, str] = "1G",
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Outcome:
    """``model``'s tensors denoised (docs/purify.md), as ``organ purify``: each keeps its
    mean, std and type; written with ``organ.purify.*`` metadata.

    Parameters:
    model: a GGUF, split GGUF or organ directory.
    method: ``"fractal"`` or ``"spectral"``.
    out: the result, ``.gguf`` or an organ directory.
    layers, type, name, all: which tensors, as for :func:`graft`.
    strength: fractal: 0..1, how far incoherent coefficients are pulled to 0.
    keep: spectral: the fraction of each row's energy kept.
    as_: write purified tensors as this type (``--as f16``) instead of their own.
    only_if_improves: keep a purified tensor only when its θ rises.
    split_max_size: as for :func:`graft`.
    force: replace an output that exists (only what organ could have written there,
        never an input).
    judge, judge_ctx, judge_chunks, llama_cpp, judge_threads, judge_gpu_layers, judge_device: ``--judge
        TEXT`` and its flags: the written model evaluated against its parent on TEXT by
        llama.cpp's llama-perplexity (``llama_cpp`` its bin directory), the verdict in
        the report's ``judge``.
    logits_cache_max: ``--logits-cache-max``: the parent's logits kept (ORGAN_CACHE,
        else ~/.cache/organ) for the next judge against it, all kept at most this much
        (bytes, or ``"1G"``; 0 keeps and reads none).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (--judge's chunks), started again at 0 for each stage.

    Returns:
        Outcome: the per-tensor report ``--json`` writes, and the printed text.

    Raises:
        OrganError: what ``organ purify`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def dissect(
    model: _PathLike,
    out: _PathLike,
    *,
    measure: bool = False,
    sha256: bool = False,
    force: bool = False,
) -> Outcome:
    """``model`` split into an organ directory ``out`` (one .bin per tensor, manifest.json),
    as ``organ dissect``.

    Parameters:
    model: a GGUF file.
    out: the directory to create.
    measure: also record each tensor's θ in the manifest.
    sha256: also record the source's sha256 (BLAKE3 always is).
    force: replace an output that exists (only what organ could have written there,
        never an input).

    Returns:
        Outcome: what the command prints in ``text`` (it writes no JSON report:
        ``to_json()`` is None; the manifest is ``out/manifest.json``).

    Raises:
        OrganError: what ``organ dissect`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def assemble(
    dir: _PathLike,
    out: _PathLike,
    *,
    split_max_size: Optional[Union[int, str]] = None,
    force: bool = False,
) -> Outcome:
    """The organ directory ``dir`` built back into the GGUF ``out`` (byte-identical to the
    dissected original), as ``organ assemble``.

    Parameters:
    dir: the organ directory.
    out: the GGUF to write.
    split_max_size: write shards ``OUT-0000i-of-0000N.gguf`` of at most this much
        tensor data each instead.
    force: replace an output that exists (only what organ could have written there,
        never an input).

    Returns:
        Outcome: what the command prints in ``text`` (no JSON report: ``to_json()`` is
        None).

    Raises:
        OrganError: what ``organ assemble`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def experts_extract(
    model: _PathLike,
    expert: int,
    out: Optional[_PathLike] = None,
    *,
    dry_run: bool = False,
    force: bool = False,
    judge: Optional[_PathLike] = None,
    judge_ctx: int = 512,
    judge_chunks: Optional[int] = None,
    llama_cpp: Optional[_PathLike] = None,
    judge_threads: Optional[int] = None,
    judge_gpu_layers: Optional[str] = None,
    judge_device: Optional[str] = None,
    logits_cache_max: Union[int, str] = "1G",
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Outcome:
    """Expert ``expert`` of a llama-layout (Mixtral) MoE written as a dense llama model,
    as ``organ experts extract`` (docs/experts.md).

    Parameters:
    model: the mixture of experts (GGUF, split GGUF or organ directory).
    expert: which expert, from 0.
    out: the GGUF to write (not needed with ``dry_run``).
    dry_run: plan only, nothing written.
    force: replace an output that exists (only what organ could have written there,
        never an input).
    judge, judge_ctx, judge_chunks, llama_cpp, judge_threads, judge_gpu_layers, judge_device: ``--judge
        TEXT`` and its flags: the written model evaluated against its parent on TEXT by
        llama.cpp's llama-perplexity (``llama_cpp`` its bin directory), the verdict in
        the report's ``judge``.
    logits_cache_max: ``--logits-cache-max``: the parent's logits kept (ORGAN_CACHE,
        else ~/.cache/organ) for the next judge against it, all kept at most this much
        (bytes, or ``"1G"``; 0 keeps and reads none).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (--judge's chunks), started again at 0 for each stage.

    Returns:
        Outcome: the report ``--json`` writes (tensors sliced and dropped), and the text.

    Raises:
        OrganError: what ``organ experts extract`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def experts_prune(
    model: _PathLike,
    keep: Union[str, Sequence[int]],
    out: Optional[_PathLike] = None,
    *,
    experts_used: Optional[int] = None,
    dry_run: bool = False,
    force: bool = False,
    judge: Optional[_PathLike] = None,
    judge_ctx: int = 512,
    judge_chunks: Optional[int] = None,
    llama_cpp: Optional[_PathLike] = None,
    judge_threads: Optional[int] = None,
    judge_gpu_layers: Optional[str] = None,
    judge_device: Optional[str] = None,
    logits_cache_max: Union[int, str] = "1G",
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Outcome:
    """Some experts of an MoE kept, the others removed along the expert axis, as ``organ
    experts prune`` (docs/experts.md).

    Parameters:
    model: the mixture of experts.
    keep: the experts to keep, ``"0,2,5"`` or ``"0-3,6"`` (or a list of numbers).
    out: the GGUF to write (not needed with ``dry_run``).
    experts_used: experts each token uses in the result (default: the model's, capped).
    dry_run: plan only, nothing written.
    force: replace an output that exists (only what organ could have written there,
        never an input).
    judge, judge_ctx, judge_chunks, llama_cpp, judge_threads, judge_gpu_layers, judge_device: ``--judge
        TEXT`` and its flags: the written model evaluated against its parent on TEXT by
        llama.cpp's llama-perplexity (``llama_cpp`` its bin directory), the verdict in
        the report's ``judge``.
    logits_cache_max: ``--logits-cache-max``: the parent's logits kept (ORGAN_CACHE,
        else ~/.cache/organ) for the next judge against it, all kept at most this much
        (bytes, or ``"1G"``; 0 keeps and reads none).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (--judge's chunks), started again at 0 for each stage.

    Returns:
        Outcome: the report ``--json`` writes, and the text.

    Raises:
        OrganError: what ``organ experts prune`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def layers(
    model: _PathLike,
    out: Optional[_PathLike] = None,
    *,
    drop: Optional[Union[str, Sequence[int]]] = None,
    keep: Optional[Union[str, Sequence[int]]] = None,
    dry_run: bool = False,
    force: bool = False,
    judge: Optional[_PathLike] = None,
    judge_ctx: int = 512,
    judge_chunks: Optional[int] = None,
    llama_cpp: Optional[_PathLike] = None,
    judge_threads: Optional[int] = None,
    judge_gpu_layers: Optional[str] = None,
    judge_device: Optional[str] = None,
    logits_cache_max: Union[int, str] = "1G",
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Outcome:
    """Whole layers removed and the rest renumbered, as ``organ layers``: the kept tensors'
    bytes copied as they are, ``block_count`` and per-layer metadata cut.

    Parameters:
    model: a GGUF, split GGUF or organ directory.
    out: the GGUF to write (not needed with ``dry_run``).
    drop: the layers to remove, ``"10-12,15"`` (or a list of numbers).
    keep: the layers to keep instead (one of ``drop`` and ``keep``).
    dry_run: plan only, nothing written.
    force: replace an output that exists (only what organ could have written there,
        never an input).
    judge, judge_ctx, judge_chunks, llama_cpp, judge_threads, judge_gpu_layers, judge_device: ``--judge
        TEXT`` and its flags: the written model evaluated against its parent on TEXT by
        llama.cpp's llama-perplexity (``llama_cpp`` its bin directory), the verdict in
        the report's ``judge``.
    logits_cache_max: ``--logits-cache-max``: the parent's logits kept (ORGAN_CACHE,
        else ~/.cache/organ) for the next judge against it, all kept at most this much
        (bytes, or ``"1G"``; 0 keeps and reads none).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (--judge's chunks), started again at 0 for each stage.

    Returns:
        Outcome: the report ``--json`` writes (layers kept and dropped, metadata changed).

    Raises:
        OrganError: what ``organ layers`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def lora_merge(
    base: _PathLike,
    lora: Union[str, Sequence[str]],
    out: _PathLike,
    *,
    type: str = 'keep',
    force: bool = False,
    judge: Optional[_PathLike] = None,
    judge_ctx: int = 512,
    judge_chunks: Optional[int] = None,
    llama_cpp: Optional[_PathLike] = None,
    judge_threads: Optional[int] = None,
    judge_gpu_layers: Optional[str] = None,
    judge_device: Optional[str] = None,
    logits_cache_max: Union[int, str] = "1G",
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Outcome:
    """LoRA adapters merged into their base, as ``organ lora merge`` (docs/adapters.md).

    Parameters:
    base: the base model.
    lora: an adapter ``"FILE[:SCALE]"``, or a list of them.
    out: the merged model.
    type: the merged tensors' type: ``"keep"`` (each its own) or a type name.
    force: replace an output that exists (only what organ could have written there,
        never an input).
    judge, judge_ctx, judge_chunks, llama_cpp, judge_threads, judge_gpu_layers, judge_device: ``--judge
        TEXT`` and its flags: the written model evaluated against its parent on TEXT by
        llama.cpp's llama-perplexity (``llama_cpp`` its bin directory), the verdict in
        the report's ``judge``.
    logits_cache_max: ``--logits-cache-max``: the parent's logits kept (ORGAN_CACHE,
        else ~/.cache/organ) for the next judge against it, all kept at most this much
        (bytes, or ``"1G"``; 0 keeps and reads none).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (--judge's chunks), started again at 0 for each stage.

    Returns:
        Outcome: the report ``--json`` writes, and the text.

    Raises:
        OrganError: what ``organ lora merge`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def lora_extract(
    base: _PathLike,
    tuned: _PathLike,
    rank: int,
    out: _PathLike,
    *,
    name: Union[str, Sequence[str]] = (),
    type: str = 'f16',
    force: bool = False,
    judge: Optional[_PathLike] = None,
    judge_ctx: int = 512,
    judge_chunks: Optional[int] = None,
    llama_cpp: Optional[_PathLike] = None,
    judge_threads: Optional[int] = None,
    judge_gpu_layers: Optional[str] = None,
    judge_device: Optional[str] = None,
    logits_cache_max: Union[int, str] = "1G",
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Outcome:
    """A LoRA adapter of rank ``rank`` extracted from ``tuned``, a finetune of ``base``, as
    ``organ lora extract`` (docs/adapters.md).

    Parameters:
    base, tuned: the base model and its finetune.
    rank: the adapter's rank.
    out: the adapter (a GGUF llama.cpp loads with ``--lora``).
    name: only tensors whose name matches (a pattern or a list, ``*`` any text).
    type: the adapter's tensors' type (``"f16"``).
    force: replace an output that exists (only what organ could have written there,
        never an input).
    judge, judge_ctx, judge_chunks, llama_cpp, judge_threads, judge_gpu_layers, judge_device: ``--judge
        TEXT`` and its flags: the written model evaluated against its parent on TEXT by
        llama.cpp's llama-perplexity (``llama_cpp`` its bin directory), the verdict in
        the report's ``judge``.
    logits_cache_max: ``--logits-cache-max``: the parent's logits kept (ORGAN_CACHE,
        else ~/.cache/organ) for the next judge against it, all kept at most this much
        (bytes, or ``"1G"``; 0 keeps and reads none).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (tensors, then --judge's chunks), started again at 0 for each stage.

    Returns:
        Outcome: the report ``--json`` writes (per tensor: rank, energy kept), and the text.

    Raises:
        OrganError: what ``organ lora extract`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def moe(
    base: _PathLike,
    expert: Union[_PathLike, Sequence[_PathLike]],
    out: _PathLike,
    *,
    experts_used: int = 2,
    router: str = 'uniform',
    prompts: Union[_PathLike, Sequence[_PathLike]] = (),
    negative_prompts: Union[_PathLike, Sequence[_PathLike]] = (),
    seed: int = 0,
    type: Optional[str] = None,
    force: bool = False,
    judge: Optional[_PathLike] = None,
    judge_ctx: int = 512,
    judge_chunks: Optional[int] = None,
    llama_cpp: Optional[_PathLike] = None,
    judge_threads: Optional[int] = None,
    judge_gpu_layers: Optional[str] = None,
    judge_device: Optional[str] = None,
    logits_cache_max: Union[int, str] = "1G",
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Outcome:
    """A mixture of experts (llama's Mixtral layout) built from a dense llama ``base`` and
    dense donors of its shapes, one expert each, as ``organ moe`` (docs/moe.md).

    Parameters:
    base: the dense model whose non-FFN tensors the MoE keeps.
    expert: the donors (a path or a list), one expert each, in order.
    out: the GGUF to write.
    experts_used: experts each token uses.
    router: how the routers are made (``"uniform"``, ``"random"``, ``"prompts"``…).
    prompts, negative_prompts: the prompt files of ``router="prompts"``.
    seed: the random router's seed.
    type: the experts' type when the donors' types differ.
    force: replace an output that exists (only what organ could have written there,
        never an input).
    judge, judge_ctx, judge_chunks, llama_cpp, judge_threads, judge_gpu_layers, judge_device: ``--judge
        TEXT`` and its flags: the written model evaluated against its parent on TEXT by
        llama.cpp's llama-perplexity (``llama_cpp`` its bin directory), the verdict in
        the report's ``judge``.
    logits_cache_max: ``--logits-cache-max``: the parent's logits kept (ORGAN_CACHE,
        else ~/.cache/organ) for the next judge against it, all kept at most this much
        (bytes, or ``"1G"``; 0 keeps and reads none).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (--judge's chunks), started again at 0 for each stage.

    Returns:
        Outcome: the report ``--json`` writes, and the text.

    Raises:
        OrganError: what ``organ moe`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def merge(
    config: Optional[_PathLike] = None,
    *,
    out: _PathLike,
    method: Optional[str] = None,
    base: Optional[_PathLike] = None,
    model: Union[str, Sequence[str]] = (),
    t: Optional[float] = None,
    param: Union[str, Sequence[str]] = (),
    type: Optional[str] = None,
    seed: int = 0,
    force: bool = False,
    judge: Optional[_PathLike] = None,
    judge_ctx: int = 512,
    judge_chunks: Optional[int] = None,
    llama_cpp: Optional[_PathLike] = None,
    judge_threads: Optional[int] = None,
    judge_gpu_layers: Optional[str] = None,
    judge_device: Optional[str] = None,
    logits_cache_max: Union[int, str] = "1G",
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Outcome:
    """Finetunes of one base merged as mergekit does (docs/merge.md), as ``organ merge``:
    from a mergekit-style YAML ``config``, or from ``method`` and ``model``.

    Parameters:
    config: a mergekit-style YAML file (or give ``method`` and ``model``).
    out: the merged model.
    method: linear, task_arithmetic, ties, dare_linear, dare_ties or slerp.
    base: the base model (the methods that take one).
    model: a model ``"FILE[:WEIGHT][,density=D]"``, or a list of them.
    t: slerp's interpolation factor.
    param: ``"KEY=VALUE"`` method parameters (a string or a list).
    type: the merged tensors' type (default: each the base's, or the first model's).
    seed: the DARE methods' seed.
    force: replace an output that exists (only what organ could have written there,
        never an input).
    judge, judge_ctx, judge_chunks, llama_cpp, judge_threads, judge_gpu_layers, judge_device: ``--judge
        TEXT`` and its flags: the written model evaluated against its parent on TEXT by
        llama.cpp's llama-perplexity (``llama_cpp`` its bin directory), the verdict in
        the report's ``judge``.
    logits_cache_max: ``--logits-cache-max``: the parent's logits kept (ORGAN_CACHE,
        else ~/.cache/organ) for the next judge against it, all kept at most this much
        (bytes, or ``"1G"``; 0 keeps and reads none).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (--judge's chunks), started again at 0 for each stage.

    Returns:
        Outcome: the report ``--json`` writes, and the text.

    Raises:
        OrganError: what ``organ merge`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def meta(
    model: _PathLike,
    out: Optional[_PathLike] = None,
    *,
    set: Union[str, Sequence[str]] = (),
    set_typed: Union[str, Sequence[str]] = (),
    set_file: Union[str, Sequence[str]] = (),
    rm: Union[str, Sequence[str]] = (),
    rename: Union[str, Sequence[str]] = (),
    rename_tensor: Union[str, Sequence[str]] = (),
    remove_tensor: Union[str, Sequence[str]] = (),
    retype_tensor: Union[str, Sequence[str]] = (),
    in_place: bool = False,
    force: bool = False,
) -> Outcome:
    """``model``'s metadata and tensors edited and the model written with its other
    tensors' data copied as is, as ``organ meta`` (docs/surgery.md).

    Parameters:
    model: a GGUF file.
    out: the result (or ``in_place=True``).
    set: ``"KEY=VALUE[:TYPE]"`` (a string or a list).
    set_typed: ``"KEY=VALUE:TYPE"``.
    set_file: ``"KEY=FILE"``: a string value read from a file (a chat template).
    rm: keys to remove.
    rename: ``"OLD=NEW"``.
    rename_tensor: ``"REGEX=REPLACEMENT"``: every tensor whose whole name the regex
        matches renamed (``$1`` for a group), in order.
    remove_tensor: a tensor's name, or a regex matching whole names: removed.
    retype_tensor: ``"NAME=TYPE"`` (NAME a name or a regex): converted to TYPE
        (``"Q8_0"``, ``"F16"``…) as ``organ quantize`` converts it.
    in_place: replace ``model`` itself (written aside and renamed over it).
    force: replace an output that exists (only what organ could have written there,
        never an input).

    Returns:
        Outcome: the report ``--json`` writes (the keys set, removed, renamed; the
        tensors renamed, removed, retyped; what the check finds broken), and the text.

    Raises:
        OrganError: what ``organ meta`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def eval(
    model: _PathLike,
    text: _PathLike,
    *,
    base: Optional[_PathLike] = None,
    lora: Union[str, Sequence[str]] = (),
    base_lora: Union[str, Sequence[str]] = (),
    ctx: int = 512,
    threads: Optional[int] = None,
    chunks: Optional[int] = None,
    llama_cpp: Optional[_PathLike] = None,
    gpu_layers: Optional[str] = None,
    device: Optional[str] = None,
    logits_cache_max: Union[int, str] = "1G",
    force: bool = False,
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Outcome:
    """``model``'s perplexity on ``text`` and, with ``base``, its KL divergence from the
    base and top-token agreement, measured by llama.cpp's llama-perplexity, as ``organ
    eval`` (docs/judge.md).

    Parameters:
    model: the model (GGUF).
    text: the text file.
    base: the parent to compare with.
    lora, base_lora: adapters ``"FILE[:S]"`` applied to the model, to the base.
    ctx: the context, in tokens.
    threads: llama-perplexity's threads.
    chunks: how many chunks of ``ctx`` tokens to score (default: all).
    llama_cpp: llama.cpp's bin directory (default: ORGAN_LLAMA_CPP, then PATH).
    gpu_layers, device: llama-perplexity's ``-ngl`` and ``--device``.
    logits_cache_max: ``--logits-cache-max``: the base's logits kept (ORGAN_CACHE, else
        ~/.cache/organ) for the next eval against it, all kept at most this much (bytes,
        or ``"1G"``; 0 keeps and reads none).
    force: replace an output that exists (only what organ could have written there,
        never an input).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (llama-perplexity's chunks), started again at 0 for each stage.

    Returns:
        Outcome: the report ``--json`` writes (perplexity, KL, verdict), and the text.

    Raises:
        OrganError: what ``organ eval`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def sensitivity(
    model: _PathLike,
    text: Optional[_PathLike] = None,
    *,
    predict: bool = False,
    imatrix: Optional[_PathLike] = None,
    truth: Optional[_PathLike] = None,
    to: Optional[str] = None,
    ablate: Optional[str] = None,
    seed: Optional[int] = None,
    layers: Optional[str] = None,
    type: Union[str, Sequence[str]] = (),
    name: Union[str, Sequence[str]] = (),
    jobs: Optional[int] = None,
    ctx: int = 128,
    chunks: Optional[int] = None,
    repeat_text: Optional[_PathLike] = None,
    cache: Optional[_PathLike] = None,
    no_cache: bool = False,
    keep_models: Optional[_PathLike] = None,
    llama_cpp: Optional[_PathLike] = None,
    gpu_layers: Optional[str] = None,
    device: Optional[str] = None,
    shard: Optional[str] = None,
    shards: Optional[int] = None,
    results: Optional[_PathLike] = None,
    stats: bool = False,
    force: bool = False,
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Sensitivity:
    """Per-tensor sensitivity, as ``organ sensitivity`` (docs/sensitivity.md): the KL
    divergence of the model with one tensor requantized (``to``) or ablated
    (``ablate``), measured by llama-perplexity; or predicted (``predict=True``).

    Parameters:
    model: the model (GGUF).
    text: the text the KL divergence is measured on (not with ``predict``).
    predict: predict from the weights (and ``imatrix``) instead of measuring;
        ``truth`` a measured report to compare with.
    to: the type each tensor is requantized to; ``ablate``: ``"noise"`` or ``"zero"``
        instead, ``seed`` its seed.
    layers, type, name: which tensors (default: every one).
    jobs: evaluations run at once.
    ctx, chunks: the context, in tokens, and how many chunks are scored.
    repeat_text: a second text, evaluated for the tensors that matter most.
    cache, no_cache: where finished evaluations are kept (resumable), or none.
    keep_models: keep each changed model in this directory.
    llama_cpp, gpu_layers, device: llama.cpp's bin directory and offload.
    shard, shards, results: one shard ``"I/N"`` of a sweep, its results written to
        ``results`` (then no report: ``to_json()`` is None).
    stats: print the bytes written to stderr.
    force: replace an output that exists (only what organ could have written there,
        never an input).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (tensors), started again at 0 for each stage.

    Returns:
        Sensitivity: the report ``--json`` writes, ``to_csv()`` ``--csv``'s, ``tensors``
        its rows, ``to_pandas()``, and the text.

    Raises:
        OrganError: what ``organ sensitivity`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def recipe(
    model: _PathLike,
    *,
    target_bpw: Optional[float] = None,
    target_size: Optional[str] = None,
    from_: Union[_PathLike, Sequence[_PathLike]] = (),
    imatrix: Optional[_PathLike] = None,
    data_free: bool = False,
    types: Union[str, Sequence[str]] = (),
    out: Optional[_PathLike] = None,
    apply: Optional[_PathLike] = None,
    imatrix_file: Optional[_PathLike] = None,
    check_with_llama_quantize: bool = False,
    text: Optional[_PathLike] = None,
    ctx: int = 512,
    chunks: Optional[int] = None,
    threads: Optional[int] = None,
    gpu_layers: Optional[str] = None,
    device: Optional[str] = None,
    llama_cpp: Optional[_PathLike] = None,
    force: bool = False,
    progress: Union[None, bool, Callable[[int, int], object]] = None,
) -> Outcome:
    """A type per tensor chosen to minimise the predicted KL divergence within a size
    budget, as ``organ recipe`` (docs/recipe.md); with ``apply``, the model quantized by
    it.

    Parameters:
    model: the model to quantize.
    target_bpw, target_size: the budget, bits per weight or a size (``"90M"``).
    from_: sensitivity reports (``organ sensitivity --to TYPE --json``), one per type;
        or ``imatrix``, or ``data_free=True``; or both, the reports scaling the
        prediction of the other types per tensor.
    types: the candidate types (a list, or ``"Q4_K,Q6_K"``), with ``imatrix`` or
        ``data_free``.
    out: write llama-quantize's ``--tensor-type`` lines here.
    apply: quantize the model by the recipe into this GGUF; ``imatrix_file`` the
        importance matrix it uses, ``check_with_llama_quantize`` also run
        llama-quantize and compare; ``text``, ``ctx``, ``chunks``, ``threads`` evaluate
        the result on a held-out text.
    gpu_layers, device, llama_cpp: llama-perplexity's offload and bin directory.
    force: replace an output that exists (only what organ could have written there,
        never an input).
    progress: a callable(done, total), or True for a tqdm bar: the command's progress
        bar (tensors predicted; with apply and text, the evaluation's chunks), started again at 0 for each stage.

    Returns:
        Outcome: the report ``--json`` writes (the plan, per tensor), and the text.

    Raises:
        OrganError: what ``organ recipe`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...

def quantize(
    src: _PathLike,
    dst: _PathLike,
    type: str,
    threads: Optional[int] = None,
    *,
    imatrix: Optional[_PathLike] = None,
    include_weights: Union[str, Sequence[str]] = (),
    exclude_weights: Union[str, Sequence[str]] = (),
    allow_requantize: bool = False,
    leave_output_tensor: bool = False,
    pure: bool = False,
    output_tensor_type: Optional[str] = None,
    token_embedding_type: Optional[str] = None,
    tensor_type: Union[str, Sequence[str]] = (),
    tensor_type_file: Optional[_PathLike] = None,
    override_kv: Union[str, Sequence[str]] = (),
    prune_layers: Optional[Union[str, Sequence[int]]] = None,
    keep_split: bool = False,
    dry_run: bool = False,
    force: bool = False,
) -> Quantization:
    """``src`` quantized to ``type`` into ``dst``, as ``organ quantize`` and llama-quantize
    write it, byte for byte (docs/quantize.md).

    Parameters:
    src, dst: the input GGUF and the output.
    type: a type llama-quantize lists (``"Q4_K_M"``, ``"Q8_0"``…).
    threads: worker threads (llama-quantize's THREADS).
    imatrix: an importance matrix; ``include_weights``/``exclude_weights`` the tensors
        it is used for (names, a string or a list).
    allow_requantize: allow tensors already quantized.
    leave_output_tensor: leave output.weight as it is.
    pure: no mix: every quantized tensor in the type's default.
    output_tensor_type, token_embedding_type: those tensors' types.
    tensor_type: ``"PATTERN=TYPE"`` (a string or a list); ``tensor_type_file`` a file
        of them (``organ recipe --out`` writes one).
    override_kv: ``"KEY=TYPE:VALUE"`` set in the header.
    prune_layers: layers to remove (a list of numbers, or ``"3,7"``).
    keep_split: a shard for each of src's, named ``DST-0000i-of-0000N.gguf``.
    dry_run: each tensor's types and the sizes; nothing written.
    force: replace an output that exists (only what organ could have written there,
        never an input).

    Returns:
        Quantization: the report ``--json`` writes (every tensor's types and bytes, the
        sizes): ``tensors``, ``q["bytes_out"]``…; and the printed sizes in ``text``.

    Raises:
        OrganError: what ``organ quantize`` refuses or fails on, with its message; nothing is
            written then (or, for a usage error, the flag named as clap names it).
    """
    ...


def report_merge(
    results: _PathLike,
    *,
    ranking_csv: Optional[_PathLike] = None,
    csv: Optional[_PathLike] = None,
    html: Optional[_PathLike] = None,
    summary_only: bool = False,
    wells: int = 10,
    all_wells: bool = False,
    verdict: Union[_PathLike, Sequence[_PathLike]] = (),
    force: bool = False,
) -> Outcome:
    """The report of shards' results, as ``organ report merge``: a fleet's tables and
    ranking from what ``organ measure --fleet … --shard I/N --results RESULTS`` wrote (the
    report ``organ measure DIR`` writes for the same models), or a sensitivity sweep's
    report from what ``organ sensitivity … --shard I/N --results RESULTS`` wrote (one
    machine's). Results of another model, change or text are refused by name.

    Parameters:
    results: the shards' results: a directory, or ``s3://BUCKET/PREFIX`` (gs://, az://).
    ranking_csv, csv, html: also write the ranking (per-group mean θ), one row per tensor,
        or the static page, to these paths.
    summary_only, wells, all_wells: what ``text`` holds (the summaries only; how many
        wells; wells among every tensor).
    verdict: the JSON of ``organ eval`` (or a surgery's judge), one or a list: each
        verdict shown beside the model it scored (matched by BLAKE3).
    force: replace outputs that exist.

    Returns:
        Outcome: the merged report, ``to_json()`` byte for byte what ``--json`` writes;
        the printed tables in ``text``.

    Raises:
        OrganError: results unfinished, changed, or of another model, sweep or text, with
            organ's message.
    """
    ...
