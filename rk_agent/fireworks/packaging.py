"""Package a reward function as a Fireworks evaluator: its source, requirements, an entry point.

Main names: `EvaluatorPackage`, `package_reward`, `package_metric_folders`, `ENTRY_POINT`.

The archive (a deterministic ``.tar.gz``: same inputs, same bytes, same digest) holds, under one
top directory named after the evaluator::

    <dir>/main.py            the entry point: evaluate(messages, ground_truth, tools, **kwargs)
    <dir>/requirements.txt   pydantic, the reward's requirements, any extra ones
    <dir>/<your_file>.py     the file that defines the reward (and files you include)
    <dir>/rk_agent/...       the parts of rk-agent a reward needs (its decorator, types, rewards)

When one of your files would land on a name the package needs (a reward file called
``main.py``, as Reward Kit's metric folders have, a ``requirements.txt``, an ``rk_agent``
folder), all your files move under ``<dir>/user/`` instead, so nothing is overwritten. Files
of an included folder that hold credentials, by name (``.env*``, ``*.pem``, SSH keys, token and
credentials files, ...) or by content (key formats, the values of the secrets rk-agent knows),
are left out with the reason (``EvaluatorPackage.left_out``,
`rk_agent.fireworks.package_files`); a file named on its own is packed whatever its name, and
refused if it holds a credential. A symlink is packed under its own name, and refused when it
leads out of the project.

Reward Kit's metric folders (`package_metric_folders`, ``NAME=PATH`` pairs) are packed as
``<dir>/<name>/...`` (each folder's files) plus a generated ``metric_folders_evaluator.py`` that
combines their ``evaluate`` functions as ``rk-agent preview --metrics-folders`` does locally.

``main.py`` loads the reward and exposes it in the reward-kit evaluator contract: ``evaluate``
returns ``{"score", "reason", "is_score_valid", "metrics": {name: {"score", "is_score_valid",
"reason"}}, ...}``. It also has ``evaluate_row(row)`` for the eval-protocol contract (a row with
``messages``, ``ground_truth``, ``tools``; it sets ``row.evaluation_result``). Which of the two
the service calls for uploaded code is not documented (see the Fireworks page of the docs);
``entryPoint`` names ``main.py::evaluate``.

Example:
    >>> from rk_agent import reward_function
    >>> package = package_reward("rk_agent.rewards.builtin.length:length_reward", directory="len")
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rk_agent import __version__
from rk_agent.errors import ConfigError
from rk_agent.fireworks.package_files import (
    SKIP_DIRS,
    folder_files,
    named_file,
    read_text,
    refuse_credentials,
)
from rk_agent.fireworks.secret_files import LeftOut, known_secrets
from rk_agent.rewards.registry import RewardLike, get_reward_function

if TYPE_CHECKING:
    from rk_agent.rewards.compose import CombineMethod
    from rk_agent.rewards.metric_folders import MetricFolder

__all__ = ["ENTRY_POINT", "EvaluatorPackage", "package_metric_folders", "package_reward"]

ENTRY_POINT = "main.py::evaluate"
"""The ``entryPoint`` of every packaged reward."""

BASE_REQUIREMENTS = ("pydantic>=2.7",)
"""What the vendored part of rk-agent needs."""

_RESERVED = ("main.py", "requirements.txt")  # and the vendored rk_agent/ folder
_USER_DIR = "user"  # where your files go when one of them would take a reserved name
# rk_agent subpackages every package carries besides the top-level modules (rewards import the
# sandbox that runs model code).
_VENDORED = ("rewards", "sandbox")
_FOLDERS_FILE = "metric_folders_evaluator.py"  # the generated module of a metric-folders package


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
        left_out: files of included folders that hold credentials and were not packed, each
            with why.
        user_dir: the folder (inside the archive's directory) holding your files: ``""``, or
            ``"user"`` when one of them would have taken a name the package needs.
    """

    reward_name: str
    directory: str
    files: dict[str, str] = field(repr=False)
    requirements: tuple[str, ...]
    entry_point: str = ENTRY_POINT
    archive: bytes = field(default=b"", repr=False)
    digest: str = ""
    left_out: tuple[LeftOut, ...] = ()
    user_dir: str = ""

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

    def check_imports(self, timeout_s: float = 120.0) -> None:
        """Import the package's ``main.py`` in a fresh interpreter, as the service will.

        A module the reward needs that is missing here but listed in its requirements is
        not an error (it is installed where the evaluator runs).

        Raises:
            ConfigError: the package cannot be imported, with the error's last line.
        """
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory(prefix="rk-evaluator-") as folder:
            for name, text in self.files.items():
                target = Path(folder, name)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            try:
                done = subprocess.run(
                    [sys.executable, "-I", "-c",
                     f"import sys; sys.path.insert(0, {folder!r}); import main"], cwd=folder,
                    capture_output=True, text=True, timeout=timeout_s,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                raise ConfigError(
                    f"importing the evaluator package for reward {self.reward_name!r} took "
                    f"over {timeout_s:g} s; does the reward's file do work at import time?"
                ) from None
        if done.returncode == 0:
            return
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        missing = last.split("No module named ", 1)[-1].strip("'\"").split(".")[0]
        if last.startswith("ModuleNotFoundError") and _required(missing, self.requirements):
            return
        raise ConfigError(
            f"the evaluator package for reward {self.reward_name!r} cannot be imported: {last}. "
            "Fix the reward's file (or --include what it imports) before deploying."
        )


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
    known = known_secrets()
    user = {name: _screened(name, text, source, known) for name, text in source.files.items()}
    left_out: list[LeftOut] = []
    for extra in include:
        user.update(_included(Path(extra), source.root, left_out, known))
    named = {Path(extra).resolve() for extra in include if not Path(extra).is_dir()}
    left_out = [left for left in left_out if Path(left.path).resolve() not in named]
    needed = [*fn.reward_spec.requirements, *requirements]
    return _assemble(fn.reward_spec.name, source, user, left_out, directory, needed)


def package_metric_folders(
    folders: Iterable[str | MetricFolder] | Mapping[str, str | Path],
    *,
    directory: str = "evaluator",
    method: CombineMethod = "mean",
    weights: Mapping[str, float] | None = None,
    requirements: Sequence[str] = (),
) -> EvaluatorPackage:
    """Package Reward Kit metric folders (``NAME=PATH`` pairs) as one evaluator.

    Each folder's files go under ``<directory>/<name>/``; the entry point combines the folders'
    ``evaluate`` functions as `rk_agent.rewards.metric_folders.metric_folders_reward` does
    locally (the mean of their scores unless ``method``/``weights`` say otherwise). A folder's
    ``requirements.txt`` and its reward's ``requirements`` join the package's.

    Raises:
        ConfigError: a folder is not a valid metric folder (see `parse_metric_folders`), or one
            of its files cannot be read.
        RewardLoadError: a folder's ``main.py`` raised while it was imported.
    """
    from rk_agent.rewards.metric_folders import (
        folder_requirements,
        metric_folders_reward,
        parse_metric_folders,
    )

    parsed = parse_metric_folders(folders)
    fn = metric_folders_reward(parsed, method=method, weights=weights)
    user: dict[str, str] = {}
    left_out: list[LeftOut] = []
    needed: list[str] = []
    known = known_secrets()
    for folder in parsed:
        files, out = folder_files(folder.path, (), known)
        user.update({f"{folder.name}/{name}": text for name, text in files.items()})
        left_out += out
        needed += folder_requirements(folder)
        component = get_reward_function(f"{folder.main}::evaluate")
        needed += component.reward_spec.requirements
    user[_FOLDERS_FILE] = _FOLDERS_TEMPLATE.format(
        version=__version__,
        folders=", ".join(f"({f.name!r}, {f.name!r})" for f in parsed),
        method=method,
        weights=dict(weights) if weights else None,
    )
    source = _Source(_FOLDERS_FILE, None, "evaluate", {}, None)
    return _assemble(fn.reward_spec.name, source, user, left_out, directory,
                     [*needed, *requirements])  # fmt: skip


def _assemble(
    reward_name: str,
    source: _Source,
    user: dict[str, str],
    left_out: list[LeftOut],
    directory: str,
    requirements: Sequence[str],
) -> EvaluatorPackage:
    """The package: the vendored rk-agent, the user's files, requirements.txt and main.py."""
    # Your files never take a name the package needs: on a clash, all of them move to user/.
    clash = any(name in _RESERVED or name.startswith("rk_agent/") for name in user)
    user_dir = _USER_DIR if clash else ""
    files = _vendored_files(source.vendor_extra)
    files.update({f"{user_dir}/{k}" if user_dir else k: v for k, v in user.items()})
    needed = [*BASE_REQUIREMENTS, *requirements]
    reqs = tuple(dict.fromkeys(r.strip() for r in needed if r and r.strip()))
    files["requirements.txt"] = "".join(f"{r}\n" for r in reqs)
    files["main.py"] = _MAIN_TEMPLATE.format(
        version=__version__,
        reward_name=reward_name,
        user_dir=user_dir,
        file=source.file,
        module=source.module,
        attr=source.attr,
    )
    archive = _tar_gz(directory, files)
    return EvaluatorPackage(
        reward_name=reward_name,
        directory=directory,
        files=files,
        requirements=reqs,
        archive=archive,
        digest=hashlib.sha256(archive).hexdigest(),
        left_out=tuple(left_out),
        user_dir=user_dir,
    )


def _required(module: str, requirements: Sequence[str]) -> bool:
    """Whether ``module`` is (by its usual name) one of ``requirements``."""
    import re

    wanted = module.lower().replace("_", "-")
    names = {re.split(r"[\s<>=!~\[;@]", r, maxsplit=1)[0].lower().replace("_", "-")
             for r in requirements}  # fmt: skip
    return wanted in names


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
                f"{package}/{p.relative_to(package_dir).as_posix()}": read_text(p)
                for p in _walk(package_dir)
                if p.suffix == ".py"
            }
            return _Source(None, module_name, attr, files, package_dir.parent)
    return _Source(path.name, None, attr, {path.name: read_text(path)}, path.parent)


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


def _screened(name: str, text: str, source: _Source, known: Mapping[str, str]) -> str:
    """A file of the reward's own source, refused when it holds a credential."""
    refuse_credentials(source.root / name if source.root else Path(name), text, known)
    return text


def _included(
    path: Path, root: Path | None, left_out: list[LeftOut], known: Mapping[str, str]
) -> dict[str, str]:
    """The files of an ``include`` entry, named as they sit beside the reward's file.

    A folder's credential-like files go to ``left_out``; a file named on its own is packed
    whatever its name (the user asked for it), but never when it holds a credential.
    """
    if not path.exists():
        raise ConfigError(f"cannot include {path} in the evaluator: it does not exist.")
    base = path.parent.resolve() / path.name  # the entry's own name, even when it is a link
    if root is not None and base.is_relative_to(root.resolve()):
        arc = base.relative_to(root.resolve()).as_posix()
    else:
        arc = path.name
    if not path.is_dir():
        return {arc: named_file(path, known)}
    project = (root,) if root is not None else ()
    files, out = folder_files(path, project, known)
    left_out += out
    return {f"{arc}/{name}": text for name, text in files.items()}


def _vendored_files(extra: Sequence[str]) -> dict[str, str]:
    package_dir = Path(importlib.import_module("rk_agent").__file__ or "").parent
    out: dict[str, str] = {}
    for p in sorted([*package_dir.glob("*.py"), *package_dir.glob("*.pyi")]):
        out[f"rk_agent/{p.name}"] = read_text(p)  # a .pyi may list the lazily imported names
    for sub in (*_VENDORED, *extra):
        for p in _walk(package_dir / sub):
            if p.is_file() and p.suffix in (".py", ".pyi", ".json"):
                out[f"rk_agent/{p.relative_to(package_dir).as_posix()}"] = read_text(p)
    return out


def _walk(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*") if not SKIP_DIRS.intersection(p.relative_to(folder).parts)
    )


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


_FOLDERS_TEMPLATE = '''"""Reward Kit metric folders, combined into one reward.

Generated by rk-agent {version}.

Each folder beside this file holds a main.py that defines evaluate(); the combined score is
their {method} (see rk_agent.rewards.metric_folders).
"""

from pathlib import Path

from rk_agent.rewards.metric_folders import MetricFolder, metric_folders_reward

_HERE = Path(__file__).resolve().parent

evaluate = metric_folders_reward(
    [MetricFolder(name, _HERE / folder) for name, folder in [{folders}]],
    method={method!r},
    weights={weights!r},
)
'''


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
_USER = _HERE / {user_dir!r}  # your files (in user/ when one of them was called main.py)
for _path in dict.fromkeys((str(_USER), str(_HERE))):
    if _path not in sys.path:
        sys.path.insert(0, _path)  # the vendored rk_agent and your files come first

from rk_agent.rewards.decorator import reward_function  # noqa: E402

_FILE = {file!r}
_MODULE = {module!r}
_ATTR = {attr!r}


def _load():
    if _FILE is not None:
        name = Path(_FILE).stem
        if name == "main":  # this entry point is `main`; your main.py gets another name
            name = "user_main"
        spec = importlib.util.spec_from_file_location(name, _USER / _FILE)
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
