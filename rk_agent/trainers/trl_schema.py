"""A committed snapshot of TRL's ``GRPOConfig`` and ``SFTConfig`` fields, to check options fast.

Importing TRL takes about ten seconds (it imports torch and transformers), so ``rk-agent
train`` checks the user's options against a snapshot of the two config classes instead: each
field's name, type, ``choices`` and default, in ``trl_schema.json`` next to this module. The
snapshot becomes a stand-in dataclass with the same name and fields (`snapshot_config_class`),
which every function of `rk_agent.trainers.trl_args` takes in place of the real class.
`schema_class` picks it when the snapshot was made from the installed TRL and transformers,
and falls back to the real class when they differ, so a newer TRL is never judged by an older
snapshot. The real class still checks everything again when the run builds its arguments.

Regenerate the snapshot after upgrading TRL or transformers (a test fails until then)::

    uv run python -m rk_agent.trainers.trl_schema --write

Main names: `schema_class`, `snapshot_config_class`, `make_snapshot`, `write_snapshot`,
`SNAPSHOT_FILE`, `REGENERATE`.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import json
import sys
import types
import typing
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, Union

from rk_agent.errors import ConfigError

__all__ = [
    "REGENERATE",
    "SNAPSHOT_FILE",
    "make_snapshot",
    "schema_class",
    "snapshot_config_class",
    "write_snapshot",
]

SNAPSHOT_FILE = Path(__file__).with_name("trl_schema.json")
"""The committed snapshot."""

REGENERATE = "uv run python -m rk_agent.trainers.trl_schema --write"
"""The command that rewrites the snapshot from the installed TRL."""

_CLASSES = {"grpo": "GRPOConfig", "sft": "SFTConfig"}
_PACKAGES = ("trl", "transformers")  # the config classes' fields come from both
_PLAIN: dict[str, Any] = {
    "Any": Any,
    "None": type(None),
    **{t.__name__: t for t in (bool, int, float, str, list, dict)},
}


def make_snapshot() -> dict[str, Any]:
    """The snapshot of the installed TRL's config classes, as JSON-ready data (imports TRL).

    Returns:
        ``{"versions": {...}, "enums": {name: [[member, value], ...]}, "classes": {class name:
        {field: {"type": ..., "default": ..., "choices": [...], "const": ...}}}}``. Types are
        ``"int"``, ``"float"``, ``"bool"``, ``"str"``, ``"None"``, ``"Any"``, ``"list"``,
        ``"dict"``, or ``{"union": [...]}``, ``{"list": item}``, ``{"literal": [...]}``,
        ``{"enum": name}``, ``{"class": name}``. A default that JSON cannot hold is left out.
    """
    from trl import GRPOConfig, SFTConfig

    from rk_agent.trainers.trl_args import _field_type, trl_fields

    enums: dict[str, list[list[Any]]] = {}
    classes: dict[str, dict[str, Any]] = {}
    for cls in (GRPOConfig, SFTConfig):
        fields: dict[str, Any] = {}
        for name, field in trl_fields(cls).items():
            entry: dict[str, Any] = {"type": _encode_type(_field_type(cls, field), enums)}
            default = _default_of(field)
            if default is not dataclasses.MISSING:
                entry["default"] = default
            if field.metadata.get("choices") is not None:
                entry["choices"] = list(field.metadata["choices"])
            if "const" in field.metadata:
                entry["const"] = field.metadata["const"]
            fields[name] = entry
        classes[cls.__name__] = fields
    versions = {package: metadata.version(package) for package in _PACKAGES}
    return {"regenerate": REGENERATE, "versions": versions, "enums": enums, "classes": classes}


def write_snapshot(path: str | Path = SNAPSHOT_FILE) -> Path:
    """Write `make_snapshot` to ``path`` (the committed file by default) and return it."""
    path = Path(path)
    path.write_text(snapshot_text(make_snapshot()), encoding="utf-8")
    return path


def snapshot_text(snapshot: dict[str, Any]) -> str:
    """The snapshot as the committed file's JSON text: one enum or field per line, to diff well."""
    sections = []
    for key, value in snapshot.items():
        if key == "classes":
            classes = [f'  "{name}": {_lines(fields, 3)}' for name, fields in value.items()]
            text = "{\n" + ",\n".join(classes) + "\n }"
        else:
            text = _lines(value, 2) if isinstance(value, dict) else json.dumps(value)
        sections.append(f' "{key}": {text}')
    return "{\n" + ",\n".join(sections) + "\n}\n"


def _lines(mapping: dict[str, Any], indent: int) -> str:
    rows = [f"{' ' * indent}{json.dumps(k)}: {json.dumps(v)}" for k, v in mapping.items()]
    return "{\n" + ",\n".join(rows) + "\n" + " " * (indent - 1) + "}"


@functools.cache
def _load() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SNAPSHOT_FILE.read_text(encoding="utf-8"))
    return loaded


def snapshot_config_class(kind: Literal["grpo", "sft"]) -> type:
    """The stand-in for ``trl.GRPOConfig`` or ``trl.SFTConfig`` built from the snapshot.

    A frozen dataclass with the real class's name and, for each field, its type (enums
    rebuilt with the same values), ``choices``/``const`` metadata and default. It is for
    checking options (`rk_agent.trainers.trl_args.validate_trl_values`), not for training.

    Raises:
        ConfigError: ``kind`` is neither ``"grpo"`` nor ``"sft"``.

    Example:
        >>> snapshot_config_class("grpo").__name__
        'GRPOConfig'
    """
    if kind not in _CLASSES:
        raise ConfigError(f"unknown training kind {kind!r}; expected 'grpo' or 'sft'.")
    return _stand_in(_CLASSES[kind])


def schema_class(kind: Literal["grpo", "sft"]) -> type:
    """The class to check ``kind``'s TRL options against, without importing TRL if possible.

    The snapshot's stand-in (`snapshot_config_class`) when the snapshot was made from the
    installed versions of TRL and transformers; otherwise the real class (imports TRL).
    """
    if snapshot_matches_installed():
        return snapshot_config_class(kind)
    from rk_agent.trainers.trl_args import trl_config_class

    return trl_config_class(kind)


def snapshot_matches_installed() -> bool:
    """Whether the snapshot was made from the installed TRL and transformers (reads no code)."""
    try:
        installed = {package: metadata.version(package) for package in _PACKAGES}
    except metadata.PackageNotFoundError:
        return False
    return bool(_load()["versions"] == installed)


@functools.cache
def _stand_in(class_name: str) -> type:
    data = _load()
    enums: dict[str, type[enum.Enum]] = {
        name: typing.cast("type[enum.Enum]", enum.Enum(name, [tuple(m) for m in members]))
        for name, members in data["enums"].items()
    }
    fields = [
        _stand_in_field(name, entry, enums) for name, entry in data["classes"][class_name].items()
    ]
    cls = dataclasses.make_dataclass(class_name, fields, kw_only=True, frozen=True)
    cls.__module__ = __name__
    cls.__doc__ = f"Stand-in for trl.{class_name} from the snapshot in {SNAPSHOT_FILE.name}."
    return cls


def _stand_in_field(
    name: str, entry: dict[str, Any], enums: dict[str, type[enum.Enum]]
) -> tuple[str, Any, Any]:
    metadata_ = {key: entry[key] for key in ("choices", "const") if key in entry}
    tp = _decode_type(entry["type"], enums)
    if "default" not in entry:
        return name, tp, dataclasses.field(metadata=metadata_)
    default = entry["default"]
    if isinstance(default, (list, dict)):
        factory = functools.partial(copy.deepcopy, default)
        return name, tp, dataclasses.field(default_factory=factory, metadata=metadata_)
    return name, tp, dataclasses.field(default=default, metadata=metadata_)


# --------------------------------------------------------------------------------------------
# Types to JSON and back


def _encode_type(tp: Any, enums: dict[str, list[list[Any]]]) -> Any:
    for word, plain in _PLAIN.items():
        if tp is plain:
            return word
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return {"union": [_encode_type(a, enums) for a in args]}
    if origin is Literal:
        return {"literal": list(args)}
    if origin is list:
        return {"list": _encode_type(args[0], enums)} if args else "list"
    if origin is dict:
        return "dict"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        members = [[m.name, m.value] for m in tp]
        if enums.setdefault(tp.__name__, members) != members:
            raise ValueError(f"two enums named {tp.__name__} with different members")
        return {"enum": tp.__name__}
    if isinstance(tp, type):  # a class a YAML value cannot be, e.g. ParallelismConfig
        return {"class": tp.__name__}
    return "Any"


def _decode_type(data: Any, enums: dict[str, type[enum.Enum]]) -> Any:
    if isinstance(data, str):
        return _PLAIN[data]
    ((key, value),) = data.items()
    if key == "union":
        return functools.reduce(lambda a, b: a | b, [_decode_type(v, enums) for v in value])
    if key == "list":
        return list[_decode_type(value, enums)]  # type: ignore[misc]
    if key == "literal":
        return Literal[tuple(value)]
    if key == "enum":
        return enums[value]
    return type(value, (), {"__module__": __name__})  # "class": a type no value can match


def _default_of(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return dataclasses.MISSING
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return dataclasses.MISSING


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rk_agent.trainers.trl_schema --write``: rewrite the committed snapshot."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["--write"]:
        print(f"usage: {REGENERATE}", file=sys.stderr)
        return 2
    print(f"wrote {write_snapshot()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
