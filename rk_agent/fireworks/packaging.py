"""Package a reward function as a Fireworks evaluator: its source, requirements, an entry point.

Main names: `EvaluatorPackage`, `package_reward`, `ENTRY_POINT`.

The archive (a deterministic ``.tar.gz``: same inputs, same bytes, same digest) holds, under one
top directory named after the evaluator::

    <dir>/main.py            the entry point: evaluate(messages, ground_truth, tools, **kwargs)
    <dir>/requirements.txt   pydantic, the reward's requirements, any extra ones
    <dir>/<your_file>.py     the file that defines the reward (and files you include)
    <dir>/rk_agent/...       the parts of rk-agent a reward needs (its decorator, types, rewards)

``main.py`` loads the reward and exposes it in the reward-kit evaluator contract: ``evaluate``
returns ``{"score", "reason", "is_score_valid", "metrics": {name: {"score", "is_score_valid",
"reason"}}, ...}``. It also has ``evaluate_row(row)`` for the eval-protocol contract (a row with
``messages``, ``ground_truth``, ``tools``; it sets ``row.evaluation_result``). Which of the two
the service calls for uploaded code is not documented (see the Fireworks page of the docs);
``entryPoint`` names ``main.py::evaluate``.

Example:
    >>> from rk_agent import reward_function
    >>> package = package_reward("rk_agent.rewards.length:length_reward", directory="len")
    >>> package.entry_point, package.requirements[0]
    ('main.py::evaluate', 'pydantic>=2.7')
    >>> "len/main.py" in package.archive_members()
    True
"""

from __future__ import annotations

import gzip
import hashlib
import importlib
import inspect
import io
import sys
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rk_agent import __version__
from rk_agent.errors import ConfigError
from rk_agent.rewards.registry import RewardLike, get_reward_function

__all__ = ["ENTRY_POINT", "EvaluatorPackage", "package_reward"]

ENTRY_POINT = "main.py::evaluate"
"""The ``entryPoint`` of every packaged reward."""

BASE_REQUIREMENTS = ("pydantic>=2.7",)
"""What the vendored part of rk-agent needs."""

_SKIP_DIRS = {"__pycache__", ".git", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
_VENDORED = ("rewards",)  # rk_agent subpackages every package carries (besides top-level modules)


@dataclass(frozen=True)
class EvaluatorPackage:
    """A reward packaged for upload.

    Attributes:
        reward_name: the reward's name.
        directory: the archive's top directory.
        files: every file, ``{path relative to the directory: text}``.
        requirements: pip requirements, one per entry.
        entry_point: ``"main.py::evaluate"``.
        archive: the ``.tar.gz`` bytes.
        digest: the archive's SHA-256 (hex); stored as the evaluator's ``commitHash`` so an
            unchanged reward is recognised.
    """

    reward_name: str
    directory: str
    files: dict[str, str] = field(repr=False)
    requirements: tuple[str, ...]
    entry_point: str = ENTRY_POINT
    archive: bytes = field(default=b"", repr=False)
    digest: str = ""

    @property
    def archive_name(self) -> str:
        """The file name used for the upload: ``<directory>.tar.gz``."""
        return f"{self.directory}.tar.gz"

    @property
    def requirements_text(self) -> str:
        """``requirements.txt`` as text."""
        return "".join(f"{line}\n" for line in self.requirements)

    def archive_members(self) -> list[str]:
        """The paths inside the archive."""
        with tarfile.open(fileobj=io.BytesIO(self.archive), mode="r:gz") as tar:
            return tar.getnames()

    def user_files(self) -> dict[str, str]:
        """The files that are not the vendored copy of rk-agent (for listings and previews)."""
        return {k: v for k, v in self.files.items() if not k.startswith("rk_agent/")}


def package_reward(
    reward: RewardLike,
    *,
    directory: str = "evaluator",
    requirements: Sequence[str] = (),
    include: Iterable[str | Path] = (),
) -> EvaluatorPackage:
    """Package a reward (a decorated function, a name, ``file.py::fn`` or ``module:fn``).

    Args:
        reward: the reward.
        directory: the archive's top directory (the evaluator id is a good choice).
        requirements: pip requirements beyond the reward's own (``reward_spec.requirements``).
        include: more files or folders the reward's file imports (placed next to it).

    Raises:
        ConfigError: the reward's source cannot be found (defined in a notebook, a REPL or
            inside a function), or an included path does not exist.
    """
    fn = get_reward_function(reward)
    source = _locate(fn)
    files: dict[str, str] = {}
    files.update(_vendored_files(source.vendor_extra))
    files.update(source.files)
    for extra in include:
        files.update(_included(Path(extra), source.root))
    needed = [*BASE_REQUIREMENTS, *fn.reward_spec.requirements, *requirements]
    reqs = tuple(dict.fromkeys(r.strip() for r in needed if r and r.strip()))
    files["requirements.txt"] = "".join(f"{r}\n" for r in reqs)
    files["main.py"] = _MAIN_TEMPLATE.format(
        version=__version__,
        reward_name=fn.reward_spec.name,
        file=source.file,
        module=source.module,
        attr=source.attr,
    )
    archive = _tar_gz(directory, files)
    return EvaluatorPackage(
        reward_name=fn.reward_spec.name,
        directory=directory,
        files=files,
        requirements=reqs,
        archive=archive,
        digest=hashlib.sha256(archive).hexdigest(),
    )


# ---------------------------------------------------------------------------- finding the source


@dataclass(frozen=True)
class _Source:
    file: str | None  # load this file (relative to main.py) ...
    module: str | None  # ... or import this module
    attr: str
    files: dict[str, str]
    root: Path | None  # where the user's files live, for `include`
    vendor_extra: tuple[str, ...] = ()


def _locate(fn: Any) -> _Source:
    target = inspect.unwrap(fn)
    name = fn.reward_spec.name
    module_name = getattr(target, "__module__", None) or ""
    module = sys.modules.get(module_name)
    attr = _attribute(module, fn, target)
    if module_name == "rk_agent" or module_name.startswith("rk_agent."):
        parts = module_name.split(".")
        extra = (parts[1],) if len(parts) > 2 and parts[1] not in _VENDORED else ()
        return _Source(None, module_name, attr, {}, None, extra)
    try:
        path = Path(inspect.getsourcefile(target) or "")
    except TypeError:
        path = Path()
    if not path.name.endswith(".py") or not path.is_file():
        raise ConfigError(
            f"cannot package reward {name!r}: its source is not in a .py file (was it defined "
            "in a notebook or at the interactive prompt?). Move it into a file, e.g. "
            "my_rewards.py, and deploy 'my_rewards.py::fn'."
        )
    package = module_name.split(".")[0] if "." in module_name else ""
    if package and package != "rk_agent_user" and package in sys.modules:
        # A module inside a package: ship the whole package and import it by name.
        package_file = getattr(sys.modules[package], "__file__", None)
        if package_file:
            package_dir = Path(package_file).parent
            files = {
                f"{package}/{p.relative_to(package_dir).as_posix()}": _read(p)
                for p in _walk(package_dir)
                if p.suffix == ".py"
            }
            return _Source(None, module_name, attr, files, package_dir.parent)
    return _Source(path.name, None, attr, {path.name: _read(path)}, path.parent)


def _attribute(module: Any, fn: Any, target: Any) -> str:
    """The module-level name that holds the reward."""
    if module is not None:
        for key, value in vars(module).items():
            if value is fn or value is target:
                return key
    qualname = getattr(target, "__qualname__", "")
    if not qualname or "<locals>" in qualname:
        raise ConfigError(
            f"cannot package reward {fn.reward_spec.name!r}: it is not defined at the top level "
            "of a module (it was made inside a function). Define it at module level."
        )
    return str(qualname)


def _included(path: Path, root: Path | None) -> dict[str, str]:
    if not path.exists():
        raise ConfigError(f"cannot include {path} in the evaluator: it does not exist.")
    paths = [path] if path.is_file() else [p for p in _walk(path) if p.is_file()]
    out: dict[str, str] = {}
    for p in paths:
        resolved = p.resolve()
        if root is not None and resolved.is_relative_to(root.resolve()):
            arcname = resolved.relative_to(root.resolve()).as_posix()
        else:
            base = path.resolve().parent
            arcname = resolved.relative_to(base).as_posix()
        out[arcname] = _read(p)
    return out


def _vendored_files(extra: Sequence[str]) -> dict[str, str]:
    package_dir = Path(importlib.import_module("rk_agent").__file__ or "").parent
    out: dict[str, str] = {}
    for p in sorted(package_dir.glob("*.py")):
        out[f"rk_agent/{p.name}"] = _read(p)
    for sub in (*_VENDORED, *extra):
        for p in _walk(package_dir / sub):
            if p.is_file() and p.suffix in (".py", ".json"):
                out[f"rk_agent/{p.relative_to(package_dir).as_posix()}"] = _read(p)
    return out


def _walk(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*") if not _SKIP_DIRS.intersection(p.relative_to(folder).parts)
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path} for the evaluator package: {exc}") from exc


def _tar_gz(directory: str, files: dict[str, str]) -> bytes:
    """A reproducible archive: sorted members, fixed times, owners and modes."""
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name in sorted(files):
            data = files[name].encode("utf-8")
            info = tarfile.TarInfo(f"{directory}/{name}")
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


_MAIN_TEMPLATE = '''"""Fireworks evaluator entry point for reward {reward_name!r}.

Generated by rk-agent {version}.

``evaluate(messages, ground_truth=None, tools=None, **kwargs)`` scores one sample and returns
the result as a dict (reward-kit's evaluator contract). ``evaluate_row(row)`` does the same for
an eval-protocol row and sets its ``evaluation_result``.
"""

import asyncio
import importlib
import importlib.util
import inspect
import sys
import threading
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))  # the vendored rk_agent and your files come first

from rk_agent.rewards.decorator import reward_function  # noqa: E402

_FILE = {file!r}
_MODULE = {module!r}
_ATTR = {attr!r}


def _load():
    if _FILE is not None:
        name = Path(_FILE).stem
        spec = importlib.util.spec_from_file_location(name, _HERE / _FILE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(_MODULE)
    obj = module
    for part in _ATTR.split("."):
        obj = getattr(obj, part)
    return reward_function(obj)


REWARD = _load()


def _run(awaitable):
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(awaitable)
    box = {{}}
    thread = threading.Thread(target=lambda: box.update(value=asyncio.run(awaitable)))
    thread.start()
    thread.join()
    return box["value"]


def evaluate(messages, ground_truth=None, tools=None, **kwargs):
    """Score one sample; return the EvaluateResult as a dict."""
    result = REWARD(messages=messages, ground_truth=ground_truth, tools=tools, **kwargs)
    if inspect.isawaitable(result):
        result = _run(result)
    return result.model_dump(mode="json", exclude_none=True)


def evaluate_row(row, **kwargs):
    """Score an eval-protocol row (an object or a dict); set and return its evaluation_result."""
    def get(key):
        return row.get(key) if isinstance(row, dict) else getattr(row, key, None)

    messages = [
        m if isinstance(m, dict) else m.model_dump(exclude_none=True)
        for m in (get("messages") or [])
    ]
    out = evaluate(messages, ground_truth=get("ground_truth"), tools=get("tools"), **kwargs)
    result = {{
        "score": out["score"],
        "reason": out.get("reason"),
        "is_score_valid": out.get("is_score_valid", True),
        "metrics": {{
            k: {{"score": m["score"], "is_score_valid": m.get("is_score_valid", True),
                "reason": m.get("reason")}}
            for k, m in out.get("metrics", {{}}).items()
        }},
    }}
    try:
        from eval_protocol.models import EvaluateResult
    except ImportError:
        pass
    else:
        result = EvaluateResult(**result)
    if isinstance(row, dict):
        row["evaluation_result"] = result
    else:
        row.evaluation_result = result
    return row
'''
