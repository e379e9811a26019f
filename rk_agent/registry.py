"""A registry of names: built-ins, user registrations and entry points, all loaded lazily.

Rewards (`rk_agent.rewards.registry`) and environments (`rk_agent.envs.registry`) each keep one
`NameRegistry`; they add what is particular to them (decorating rewards, checking env classes).

A name resolves to, in order: a value registered at run time, a built-in (a ``"module:attr"``
string, imported only when asked for), or an installed package's entry point in the registry's
group. Unknown names get a "did you mean ...?".

Main names: `NameRegistry`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rk_agent.errors import ConfigError, UnknownNameError
from rk_agent.loading import load_object

if TYPE_CHECKING:
    from importlib import metadata

__all__ = ["NameRegistry"]

T = TypeVar("T")


class NameRegistry(Generic[T]):
    """Names of one kind of thing (``"reward"``, ``"environment"``).

    Args:
        kind: what is registered, for error messages.
        group: the entry-point group other packages contribute to.
        builtins: ``{name: "module:attr"}`` of the built-ins.

    Example:
        >>> registry = NameRegistry[int]("number", "no.such.group", {})
        >>> registry.add("answer", 42)
        >>> registry.lookup("answer")
        42
    """

    def __init__(self, kind: str, group: str, builtins: Mapping[str, str]) -> None:
        self.kind = kind
        self.group = group
        self.builtins = dict(builtins)
        self.registered: dict[str, T | str] = {}
        self._entry_points: dict[str, metadata.EntryPoint] | None = None
        self._lock = threading.Lock()

    def entry_points(self) -> dict[str, metadata.EntryPoint]:
        """The group's entry points, read once (on first use, not at import)."""
        if self._entry_points is None:
            from importlib import metadata

            found = metadata.entry_points(group=self.group)
            self._entry_points = {ep.name: ep for ep in found}
        return self._entry_points

    def names(self) -> set[str]:
        """Every known name."""
        with self._lock:
            registered = set(self.registered)
        return set(self.builtins) | registered | set(self.entry_points())

    def add(self, name: str, value: T | str, *, overwrite: bool = False) -> None:
        """Register ``value`` (or a ``"module:attr"`` string) under ``name``.

        Raises:
            ConfigError: the name is taken and ``overwrite`` is false.
        """
        with self._lock:
            taken = name in self.registered or name in self.builtins
        if (taken or name in self.entry_points()) and not overwrite:
            raise ConfigError(
                f"a {self.kind} named {name!r} is already registered. Pick another name or pass "
                "overwrite=True."
            )
        with self._lock:
            self.registered[name] = value

    def remove(self, name: str) -> None:
        """Forget a run-time registration (built-ins and entry points stay)."""
        with self._lock:
            self.registered.pop(name, None)

    def lookup(self, name: str, *, hint: str = "") -> T | str | metadata.EntryPoint:
        """What ``name`` stands for: a registered value, a ``"module:attr"`` string, or an
        entry point (not loaded).

        Raises:
            UnknownNameError: no such name (with the closest one suggested).
        """
        with self._lock:
            entry = self.registered.get(name)
        if entry is not None:
            return entry
        if name in self.builtins:
            return self.builtins[name]
        found = self.entry_points().get(name)
        if found is not None:
            return found
        raise UnknownNameError(self.kind, name, self.names(), hint=hint)

    def load(self, name: str, *, hint: str = "") -> Any:
        """What ``name`` stands for, loaded: a ``"module:attr"`` string is imported and an entry
        point loaded (`lookup` gives them unloaded).

        Raises:
            UnknownNameError: no such name (with the closest one suggested).
            LoadError: the string or entry point cannot be loaded.
        """
        entry = self.lookup(name, hint=hint)
        if isinstance(entry, str):
            return load_object(entry, kind=self.kind)
        if is_entry_point(entry):
            return entry.load()  # type: ignore[union-attr]
        return entry

    def forget_entry_points(self) -> None:
        """Read the entry points again on next use (after installing a package)."""
        self._entry_points = None

    def __repr__(self) -> str:
        return f"NameRegistry({self.kind!r}, {len(self.names())} names)"


def is_entry_point(value: Any) -> bool:
    """Whether ``value`` is an (unloaded) ``importlib.metadata.EntryPoint``."""
    return type(value).__name__ == "EntryPoint" and hasattr(value, "load")
