"""The commands that write models, evaluate them and plan their quantization, as the
``organ`` binary runs them.

Each function's keyword arguments are its command's flags, snake_case (``dry_run`` is
``--dry-run``; ``from_`` is ``--from``, ``as_`` is ``--as``), with the CLI's defaults. A
call becomes the argv a user would type (only what differs from a default), which
``_organ.command`` parses with the CLI's own flags and runs as the binary does: the same
checks, the same model written to a temp file and renamed into place, ``force=True``
replacing only what organ could have written, never an input. The report the command
writes with ``--json FILE`` comes back as a :class:`Outcome` whose ``to_json()`` is that
file, byte for byte.
"""

import os

from . import _organ

# Keyword arguments whose flag is not their name with "-" for "_" (Python keywords).
_FLAG = {"from_": "from", "as_": "as"}


def _value(v):
    """A flag's or argument's value as argv text."""
    if hasattr(v, "__fspath__"):
        return os.fspath(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v)
    raise TypeError(f"a flag's value is a str, a number or a path, not {type(v).__name__}")


def _numbers(v):
    """A list of layers or experts: the CLI's text (``"0-3,6"``) as is, numbers joined."""
    if v is None or isinstance(v, str):
        return v
    return ",".join(str(int(n)) for n in v)


def _defaults(fn):
    """Every parameter of ``fn`` in order, and the defaults of those that have one."""
    code = fn.__code__
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    defaults = dict(fn.__kwdefaults__ or {})
    given = fn.__defaults__ or ()
    for name, d in zip(names[code.co_argcount - len(given) : code.co_argcount], given):
        defaults[name] = d
    return names, defaults


def _argv(fn, words, values, positional):
    """``organ WORDS… FLAGS… -- POSITIONALS…`` for a call of ``fn`` with ``values``: a flag
    for each keyword argument that is not its default (True a switch, a list or tuple the
    flag repeated), the ``positional`` parameters after ``--`` in their order."""
    names, defaults = _defaults(fn)
    flags, tail = list(words), []
    for name in names:
        if name == "progress":  # the call's, not a flag
            continue
        v = values[name]
        if name in positional:
            if v is not None:
                tail.append(_value(v))
            continue
        if name in defaults and v == defaults[name] and type(v) is type(defaults[name]):
            continue
        if v is None or v is False:
            continue
        flag = "--" + _FLAG.get(name, name.replace("_", "-"))
        if v is True:
            flags.append(flag)
        elif isinstance(v, (list, tuple)):
            flags += [f"{flag}={_value(x)}" for x in v]
        else:
            flags.append(f"{flag}={_value(v)}")
    return flags + ["--", *tail] if tail else flags


class Outcome:
    """What a command did: its JSON report (``--json FILE``) and the text it printed.

    ``to_json()`` is the report as the command writes it, byte for byte (``None`` when it
    wrote none: a dry run); ``doc`` the report parsed, and ``outcome["key"]`` one of its
    fields; ``text`` what ``organ`` prints on stdout.
    """

    def __init__(self, text, json_text):
        self.text = text
        self._json = json_text
        self._doc = None

    def to_json(self):
        """The report as the command writes it with ``--json FILE``, or None."""
        return self._json

    @property
    def doc(self):
        """The report as dicts and lists (the JSON parsed), or None."""
        if self._doc is None and self._json is not None:
            import json

            self._doc = json.loads(self._json)
        return self._doc

    def __getitem__(self, key):
        if self.doc is None:
            raise KeyError(key)
        return self.doc[key]

    def get(self, key, default=None):
        """A field of the report, or ``default``."""
        return default if self.doc is None else self.doc.get(key, default)

    def __repr__(self):
        first = self.text.strip().splitlines()[:1]
        return f"<organ.{type(self).__name__} {first[0] if first else ''}>"


class Quantization(Outcome):
    """A quantization: every tensor's types and bytes, and the sizes, as ``organ quantize
    --json`` writes them."""

    @property
    def tensors(self):
        """One dict per tensor in the order written: name, types in and out, bytes."""
        return self["tensors"]


class Sensitivity(Outcome):
    """Per-tensor sensitivity, as ``organ sensitivity --json`` and ``--csv`` write it."""

    def __init__(self, text, json_text, csv_text=None):
        super().__init__(text, json_text)
        self._csv = csv_text
        self._rows = None

    def to_csv(self):
        """The rows as the command writes them with ``--csv FILE``, or None."""
        return self._csv

    @property
    def tensors(self):
        """One dict per tensor: the CSV's rows, typed."""
        if self._rows is None:
            from . import _rows

            self._rows = [] if self._csv is None else _rows(self._csv)
        return self._rows

    def to_pandas(self):
        """The tensors' rows as a DataFrame (pandas needed)."""
        import pandas

        return pandas.DataFrame(self.tensors)


def _run(fn, words, values, positional=(), reports=("json",), result=Outcome):
    from . import _progress

    callback, bar = _progress(values.get("progress"))
    try:
        text, files = _organ.command(_argv(fn, words, values, positional), list(reports), callback)
    finally:
        if bar is not None:
            bar.close()
    return result(text, *files) if files else result(text, None)


def graft(donor, recipient, out=None, *, layers=None, type=(), name=(), all=False, dry_run=False,
          split_max_size=None, sha256=False, force=False, judge=None, judge_ctx=512, judge_chunks=None,
          llama_cpp=None, judge_threads=None, judge_gpu_layers=None, judge_device=None, logits_cache_max="1G",
          progress=None):
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
    return _run(graft, ["graft"], locals())


def purify(model, method, out, *, layers=None, type=(), name=(), all=False, strength=0.5, keep=0.95, as_=None,
           only_if_improves=False, split_max_size=None, force=False, judge=None, judge_ctx=512, judge_chunks=None,
           llama_cpp=None, judge_threads=None, judge_gpu_layers=None, judge_device=None, logits_cache_max="1G",
           progress=None):
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
    return _run(purify, ["purify"], locals(), ("model",))


def dissect(model, out, *, measure=False, sha256=False, force=False):
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
    return _run(dissect, ["dissect"], locals(), ("model",), ())


def assemble(dir, out, *, split_max_size=None, force=False):
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
    return _run(assemble, ["assemble"], locals(), ("dir",), ())


def experts_extract(model, expert, out=None, *, dry_run=False, force=False, judge=None, judge_ctx=512,
                    judge_chunks=None, llama_cpp=None,
                    judge_threads=None, judge_gpu_layers=None, judge_device=None, logits_cache_max="1G", progress=None):
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
    return _run(experts_extract, ["experts", "extract"], locals(), ("model",))


def experts_prune(model, keep, out=None, *, experts_used=None, dry_run=False, force=False, judge=None,
                  judge_ctx=512, judge_chunks=None,
                  llama_cpp=None, judge_threads=None, judge_gpu_layers=None, judge_device=None, logits_cache_max="1G",
                  progress=None):
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
    keep = _numbers(keep)
    return _run(experts_prune, ["experts", "prune"], locals(), ("model",))


def layers(model, out=None, *, drop=None, keep=None, dry_run=False, force=False, judge=None, judge_ctx=512,
           judge_chunks=None, llama_cpp=None,
           judge_threads=None, judge_gpu_layers=None, judge_device=None, logits_cache_max="1G", progress=None):
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
    drop, keep = _numbers(drop), _numbers(keep)
    return _run(layers, ["layers"], locals(), ("model",))


def lora_merge(base, lora, out, *, type="keep", force=False, judge=None, judge_ctx=512,
               judge_chunks=None, llama_cpp=None,
               judge_threads=None, judge_gpu_layers=None, judge_device=None, logits_cache_max="1G", progress=None):
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
    return _run(lora_merge, ["lora", "merge"], locals(), ("base",))


def lora_extract(base, tuned, rank, out, *, name=(), type="f16", force=False, judge=None, judge_ctx=512,
                 judge_chunks=None, llama_cpp=None,
                 judge_threads=None, judge_gpu_layers=None, judge_device=None, logits_cache_max="1G", progress=None):
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
    return _run(lora_extract, ["lora", "extract"], locals())


def moe(base, expert, out, *, experts_used=2, router="uniform", prompts=(), negative_prompts=(), seed=0,
        type=None, force=False, judge=None, judge_ctx=512, judge_chunks=None,
        llama_cpp=None, judge_threads=None,
        judge_gpu_layers=None, judge_device=None, logits_cache_max="1G", progress=None):
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
    return _run(moe, ["moe"], locals())


def merge(config=None, *, out, method=None, base=None, model=(), t=None, param=(), type=None, seed=0,
          force=False, judge=None, judge_ctx=512, judge_chunks=None,
          llama_cpp=None, judge_threads=None, judge_gpu_layers=None,
          judge_device=None, logits_cache_max="1G", progress=None):
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
    return _run(merge, ["merge"], locals(), ("config",))


def meta(model, out=None, *, set=(), set_typed=(), set_file=(), rm=(), rename=(), rename_tensor=(),
         remove_tensor=(), retype_tensor=(), in_place=False, force=False):
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
    return _run(meta, ["meta"], locals(), ("model",))


def eval(model, text, *, base=None, lora=(), base_lora=(), ctx=512, threads=None, chunks=None, llama_cpp=None,
         gpu_layers=None, device=None, logits_cache_max="1G", force=False, progress=None):
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
    return _run(eval, ["eval"], locals(), ("model",))


def sensitivity(model, text=None, *, predict=False, imatrix=None, truth=None, to=None, ablate=None, seed=None,
                layers=None, type=(), name=(), jobs=None, ctx=128, chunks=None, repeat_text=None, cache=None,
                no_cache=False, keep_models=None, llama_cpp=None, gpu_layers=None, device=None, shard=None,
                shards=None, results=None, stats=False, force=False, progress=None):
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
    reports = () if results is not None else ("json", "csv")
    return _run(sensitivity, ["sensitivity"], locals(), ("model",), reports, Sensitivity)


def recipe(model, *, target_bpw=None, target_size=None, from_=(), imatrix=None, data_free=False, types=(),
           out=None, apply=None, imatrix_file=None, check_with_llama_quantize=False, text=None, ctx=512,
           chunks=None, threads=None, gpu_layers=None, device=None, llama_cpp=None, force=False, progress=None):
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
    return _run(recipe, ["recipe"], locals(), ("model",))


def quantize(src, dst, type, threads=None, *, imatrix=None, include_weights=(), exclude_weights=(),
             allow_requantize=False, leave_output_tensor=False, pure=False, output_tensor_type=None,
             token_embedding_type=None, tensor_type=(), tensor_type_file=None, override_kv=(), prune_layers=None,
             keep_split=False, dry_run=False, force=False):
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
    prune_layers = _numbers(prune_layers)
    return _run(quantize, ["quantize"], locals(), ("src", "dst", "type", "threads"), ("json",), Quantization)


def report_merge(results, *, ranking_csv=None, csv=None, html=None, summary_only=False, wells=10, all_wells=False,
                 verdict=(), force=False):
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
    return _run(report_merge, ["report", "merge"], locals(), ("results",))
