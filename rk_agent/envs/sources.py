"""Environments from elsewhere: ``SCHEME:REST`` names an environment of an outside source.

``make_env("reasoning-gym:chain_sum")``, ``--env bfcl:multi_turn_base``, ``env:
openenv:ws://127.0.0.1:8000`` in a config: wherever an environment is named, a name whose part
before the first ``:`` is a registered source's scheme is handed to that source, which builds
a `ChatEnv` class from the rest (`EnvSource.env_class`); the keyword arguments go to that class
as to any other.

Sources are entry points of the ``rk_agent.env_sources`` group, ``scheme = "package.module:
OBJECT"`` where ``OBJECT`` is an `EnvSource`; rk-agent's own (``reasoning-gym``, ...) are
entry points of its package metadata, so this module names none of them, and each needs its own
extra (``pip install 'rk-agent[reasoning-gym]'``). A source's module must import without its
foreign package: `EnvSource.packages` says which top-level modules it needs, checked with
``importlib.util.find_spec`` (`EnvSource.installed`) before anything is imported, and a
missing one is a `NotAvailableError` of one line naming the install command.

**Precedence.** A name is tried, in order, as: ``file.py::attr`` (it holds ``::``); a source
spec (the part before the first ``:`` is a registered scheme); ``package.module:attr``; a
registered name or Gymnasium id. A module that shares a scheme's name is reached through its
package (``mypkg.bfcl:Env``) or a file path; schemes are lower-case words with ``-`` or ``_``,
never dotted.

Main names: `EnvSource`, `SOURCES`, `SOURCE_GROUP`, `split_source_spec`, `get_source`,
`list_sources`, `SourceInfo`.

Example:
    >>> split_source_spec("reasoning-gym:chain_sum")
    ('reasoning-gym', 'chain_sum')
    >>> split_source_spec("pkg.module:Env") is None, split_source_spec("env.py::Env") is None
    (True, True)
"""

from __future__ import annotations

import importlib.util
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rk_agent.errors import ConfigError, NotAvailableError, extra_install_hint
from rk_agent.registry import NameRegistry

if TYPE_CHECKING:
    from rk_agent.envs.base import ChatEnv

__all__ = [
    "SOURCES",
    "SOURCE_GROUP",
    "EnvSource",
    "SourceInfo",
    "get_source",
    "list_sources",
    "split_source_spec",
]

SOURCE_GROUP = "rk_agent.env_sources"
"""The entry-point group of environment sources."""

SOURCES: NameRegistry[EnvSource] = NameRegistry("environment source", SOURCE_GROUP, {})
"""Every source by scheme (entry points, and sources registered at run time with
``SOURCES.add(scheme, source)``)."""

_SCHEME = re.compile(r"[a-z][a-z0-9_-]*")


class EnvSource:
    """One outside ecosystem's environments, named ``SCHEME:REST``.

    Subclass it, set the class attributes and implement `build_class`; an instance is what the
    entry point names. `env_class` checks the foreign package is installed, then builds (once
    per ``REST``) the `ChatEnv` class the rest names; the same spec gives the same class.

    Attributes:
        summary: one line for ``rk-agent envs list``.
        form: how a name of this source is written (``"reasoning-gym:NAME[,NAME...]"``).
        packages: the top-level modules it imports (``("reasoning_gym",)``).
        extra: rk-agent's extra that installs them (``"reasoning-gym"``); ``None`` for a
            third-party source, whose `install_hint` says what to install.

    Example::

        class MySource(EnvSource):
            summary = "games of my_games"
            form = "my-games:GAME"
            packages = ("my_games",)

            def build_class(self, rest: str) -> type[ChatEnv]:
                return make_game_class(rest)

        # pyproject.toml: [project.entry-points."rk_agent.env_sources"]
        # my-games = "my_package.source:SOURCE"
        SOURCE = MySource()
    """

    summary: ClassVar[str] = ""
    form: ClassVar[str] = "SCHEME:REST"
    packages: ClassVar[tuple[str, ...]] = ()
    extra: ClassVar[str | None] = None

    def __init__(self) -> None:
        self.scheme = self.form.partition(":")[0]
        self._classes: dict[str, type[ChatEnv]] = {}
        self._lock = threading.Lock()

    def build_class(self, rest: str) -> type[ChatEnv]:
        """The `ChatEnv` class that ``SCHEME:rest`` names (the foreign package is installed).

        Raises:
            ConfigError: ``rest`` names nothing the source has (say what it has).
        """
        raise NotImplementedError

    def wants(self, rest: str) -> list[str]:
        """What building ``SCHEME:rest`` does beyond installed code, for the refusal of a run
        from elsewhere (`rk_agent.runs.run_wants`): ``["connect to URL"]``, ``["import the
        module M"]``; ``[]`` (the default) when it only uses installed packages."""
        return []

    def missing(self) -> list[str]:
        """The modules of `packages` that cannot be found (``[]``: installed)."""
        return [name for name in self.packages if importlib.util.find_spec(name) is None]

    def installed(self) -> bool:
        """Whether every module of `packages` can be found (nothing is imported)."""
        return not self.missing()

    def install_hint(self) -> str:
        """How to install what the source needs."""
        if self.extra is None:
            return f"install {', '.join(self.packages)}"
        return extra_install_hint(self.extra)

    def require(self) -> None:
        """Raise `NotAvailableError` (one line, naming the install command) unless installed."""
        missing = self.missing()
        if missing:
            raise NotAvailableError(
                f"environment source {self.scheme!r} needs {', '.join(missing)}, which is not "
                f"installed: {self.install_hint()}."
            )

    def env_class(self, rest: str) -> type[ChatEnv]:
        """The class ``SCHEME:rest`` names, built once per ``rest``.

        Raises:
            NotAvailableError: the foreign package is not installed.
            ConfigError: ``rest`` names nothing the source has.
        """
        with self._lock:
            found = self._classes.get(rest)
        if found is not None:
            return found
        self.require()
        if not rest:
            raise ConfigError(
                f"environment {self.scheme + ':'!r} names nothing after the scheme; write it as "
                f"{self.form}."
            )
        built = self.build_class(rest)
        with self._lock:
            return self._classes.setdefault(rest, built)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.scheme!r})"


def split_source_spec(spec: str) -> tuple[str, str] | None:
    """``(scheme, rest)`` when ``spec`` names a registered source's environment, else ``None``.

    ``file.py::attr`` is never a source spec, nor is a name whose part before the first ``:``
    is not a registered scheme (``package.module:attr``).
    """
    scheme, colon, rest = spec.partition(":")
    if not colon or rest.startswith(":") or not _SCHEME.fullmatch(scheme):
        return None
    return (scheme, rest) if scheme in SOURCES.names() else None


def get_source(scheme: str) -> EnvSource:
    """The source registered under ``scheme``, loaded.

    Raises:
        UnknownNameError: no source has that scheme.
        ConfigError: the entry point is not an `EnvSource`.
    """
    source = SOURCES.load(scheme)
    if not isinstance(source, EnvSource):
        raise ConfigError(
            f"environment source {scheme!r} is a {type(source).__name__}, not an EnvSource: "
            f"the {SOURCE_GROUP} entry point must name an instance of "
            "rk_agent.envs.sources.EnvSource."
        )
    source.scheme = scheme
    return source


@dataclass(frozen=True)
class SourceInfo:
    """A source as ``rk-agent envs list`` shows it.

    Attributes:
        scheme: its scheme.
        form: how its names are written.
        summary: one line.
        installed: whether its foreign package is installed.
        install: how to install it (``""`` when installed).
    """

    scheme: str
    form: str
    summary: str
    installed: bool
    install: str


def list_sources() -> list[SourceInfo]:
    """Every registered source, sorted by scheme; one that cannot be loaded is listed with the
    error as its summary."""
    out = []
    for scheme in sorted(SOURCES.names()):
        try:
            source = get_source(scheme)
        except (ConfigError, ImportError) as exc:
            out.append(SourceInfo(scheme, f"{scheme}:...", f"(cannot be loaded: {exc})", False, ""))
            continue
        installed = source.installed()
        hint = "" if installed else source.install_hint()
        out.append(SourceInfo(scheme, source.form, source.summary, installed, hint))
    return out
