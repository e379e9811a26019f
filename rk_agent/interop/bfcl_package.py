"""bfcl-eval at one boundary: its entries, its tools, its calls and its checker.

Everything the ``bfcl`` source (`rk_agent.interop.bfcl`) takes from bfcl-eval 2026.3.23 goes
through here:

- **the import** (`package`): bfcl-eval makes ``result/``, ``score/`` and ``.file_locks/``
  under ``BFCL_PROJECT_ROOT`` when its ``constants.eval_config`` is imported (by default in the
  folder above its own package, i.e. ``site-packages``); the import runs with that variable
  set to a temporary folder of this process (removed at exit) and restored afterwards;
- **the entries** (`entries`): the package's own loader (``utils.load_dataset_entry``, which
  adds the function docs of the entry's classes and moves ``miss_func``'s held-out functions
  out of them) and its ground truth (``load_ground_truth_entry``), as `Entry` objects;
- **the tools**: each function doc as an OpenAI tool schema (`openai_tool`: BFCL's ``dict``
  is ``object``, ``float`` is ``number``, ``tuple`` is ``array``, its ``response`` is dropped)
  with the check of a call's arguments against it (`ToolSpec.check`);
- **the calls**: a call is run by the package (``execute_multi_turn_func_call``, which keeps
  one instance per class in its module's globals, named ``{model_name}_{entry id}_{class}
  _instance``) only as a string this module builds (`call_string`: the tool's name and each
  validated argument's ``repr``), never from a model's text; `release` deletes an episode's
  instances from those globals;
- **the checker** (`run_checker`): ``multi_turn_checker`` under a fresh name, its own instances
  deleted when it returns.

Main names: `package`, `Entry`, `entries`, `CATEGORIES`, `ToolSpec`, `openai_tool`,
`call_string`, `parse_call`, `execute`, `release`, `run_checker`, `episode_key`.
"""

from __future__ import annotations

import ast
import atexit
import functools
import inspect
import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from rk_agent.envs.tool import decode_arguments
from rk_agent.types import Message

__all__ = [
    "CATEGORIES",
    "VERSION",
    "Entry",
    "ToolSpec",
    "call_string",
    "entries",
    "episode_key",
    "execute",
    "openai_tool",
    "package",
    "parse_call",
    "release",
    "run_checker",
]

VERSION = "2026.3.23"
"""The bfcl-eval release this module was written against."""

CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
"""BFCL v4's multi-turn categories (200 entries each)."""

_TYPES = {
    "dict": "object",
    "object": "object",
    "float": "number",
    "number": "number",
    "integer": "integer",
    "int": "integer",
    "string": "string",
    "str": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "tuple": "array",
    "any": "string",
}
_KEY_PREFIX = "rkagent"
_IMPORT_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}


def package() -> SimpleNamespace:
    """bfcl-eval's modules this source uses, imported once (see the module docstring).

    Attributes of the result: ``utils``, ``runner`` (``multi_turn_utils``), ``checker``
    (``multi_turn_checker``), ``prompts`` (``constants.default_prompts``), ``backend``
    (``constants.executable_backend_config``).
    """
    with _IMPORT_LOCK:
        found = _LOADED.get("package")
        if found is None:
            found = _LOADED["package"] = _import()
        return found


def _import() -> SimpleNamespace:
    fresh = "bfcl_eval.constants.eval_config" not in sys.modules
    previous = os.environ.get("BFCL_PROJECT_ROOT")
    if fresh:
        root = tempfile.mkdtemp(prefix="rk-agent-bfcl-")
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        os.environ["BFCL_PROJECT_ROOT"] = root
    try:
        import bfcl_eval.constants.default_prompts as prompts
        import bfcl_eval.constants.executable_backend_config as backend
        import bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker as checker
        import bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils as runner
        import bfcl_eval.utils as utils
    finally:
        if fresh:
            if previous is None:
                os.environ.pop("BFCL_PROJECT_ROOT", None)
            else:
                os.environ["BFCL_PROJECT_ROOT"] = previous
    return SimpleNamespace(
        utils=utils, runner=runner, checker=checker, prompts=prompts, backend=backend
    )


# ------------------------------------------------------------------------------------ tools


def _schema(value: Any) -> Any:
    """A BFCL parameter schema in JSON Schema's words (recursively)."""
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "type" and isinstance(item, str):
            out[key] = _TYPES.get(item, item)
        elif key == "properties" and isinstance(item, Mapping):
            out[key] = {name: _schema(sub) for name, sub in item.items()}
        elif key == "items":
            out[key] = _schema(item)
        else:
            out[key] = item
    return out


def openai_tool(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A BFCL function doc as an OpenAI tool schema.

    Example:
        >>> openai_tool({"name": "cd", "description": "Change directory.", "parameters": {
        ...     "type": "dict", "properties": {"folder": {"type": "string"}},
        ...     "required": ["folder"]}, "response": {}})["function"]["parameters"]["type"]
        'object'
    """
    parameters = _schema(doc.get("parameters") or {"type": "dict", "properties": {}})
    parameters["type"] = "object"
    parameters.setdefault("properties", {})
    return {
        "type": "function",
        "function": {
            "name": doc["name"],
            "description": doc.get("description", ""),
            "parameters": parameters,
        },
    }


@dataclass(frozen=True, eq=False)
class ToolSpec:
    """One tool of an entry: its OpenAI schema and the check of a call's arguments."""

    schema: dict[str, Any]

    @property
    def name(self) -> str:
        """The tool's name."""
        return str(self.schema["function"]["name"])

    def check(self, arguments: str | Mapping[str, Any] | None) -> tuple[dict[str, Any], str | None]:
        """The arguments as a dict, or the message the model reads when the schema refuses
        them: not a JSON object, an argument it does not name, a required one missing, a
        number that is not finite.

        The types of the values are not enforced: BFCL passes a call's values to the method as
        they come, and its own ground truth relies on it (``close_ticket(ticket_id=
        'ticket_001')`` where the doc says integer, in 4 entries); a value of another type runs
        as it would there.
        """
        decoded, problem = decode_arguments(self.name, arguments)
        if problem is not None:
            return {}, problem
        parameters = self.schema["function"]["parameters"]
        known = parameters.get("properties", {})
        unknown = [name for name in decoded if name not in known]
        if unknown:
            takes = ", ".join(known) or "no arguments"
            return {}, (
                f"Error: bad arguments for {self.name!r}: no argument named {unknown[0]!r} "
                f"(it takes {takes})."
            )
        missing = [name for name in parameters.get("required", []) if name not in decoded]
        if missing:
            return {}, (
                f"Error: bad arguments for {self.name!r}: {missing[0]!r} is required "
                f"(required: {', '.join(parameters['required'])})."
            )
        if not _finite(decoded):
            return {}, f"Error: bad arguments for {self.name!r}: numbers must be finite."
        return decoded, None


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


_SPECS: dict[str, ToolSpec] = {}


def _spec(doc: Mapping[str, Any]) -> ToolSpec:
    """The `ToolSpec` of a doc, one per distinct schema (entries share their classes' docs)."""
    schema = openai_tool(doc)
    text = json.dumps(schema, sort_keys=True)
    found = _SPECS.get(text)
    if found is None:
        found = _SPECS.setdefault(text, ToolSpec(schema))
    return found


# ---------------------------------------------------------------------------------- entries


@dataclass(frozen=True, eq=False)
class Entry:
    """One multi-turn entry, as the package's loader gives it.

    Attributes:
        id: the entry's id (``multi_turn_base_0``).
        category: its category (``multi_turn_base``).
        turns: the user messages of each turn; a ``miss_func`` turn that adds a function (the
            entry's turn is empty there) holds the package's prompt for it.
        ground_truth: the calls of each turn (the package's ``possible_answer``).
        tools: the tools offered at each turn (a ``miss_func`` entry's grow at its turn).
        added: the names of the tools each turn adds (``{3: ("sort",)}``).
        known: every tool of the entry by name, held-out ones included: BFCL runs a call to
            any method of the entry's classes, offered yet or not (its ground truth of
            ``multi_turn_miss_func_49`` calls ``tail`` two turns before it is offered).
        initial_config: the classes' starting state.
        involved_classes: the classes of the entry's tools.
    """

    id: str
    category: str
    turns: tuple[tuple[Message, ...], ...]
    ground_truth: tuple[tuple[str, ...], ...]
    tools: tuple[tuple[ToolSpec, ...], ...]
    added: Mapping[int, tuple[str, ...]]
    known: Mapping[str, ToolSpec] = field(repr=False)
    initial_config: Mapping[str, Any] = field(repr=False)
    involved_classes: tuple[str, ...]

    @property
    def long_context(self) -> bool:
        """Whether the classes load the long-context scenario (the package's own rule)."""
        return "long_context" in self.category or "composite" in self.category

    def tools_at(self, turn: int) -> tuple[ToolSpec, ...]:
        """The tools offered at ``turn`` (the last turn's after the end)."""
        return self.tools[min(turn, len(self.tools) - 1)]

    def checker_entry(self) -> dict[str, Any]:
        """What ``multi_turn_checker`` reads of a test entry."""
        return {
            "id": self.id,
            "initial_config": self.initial_config,
            "involved_classes": list(self.involved_classes),
        }


def entries(category: str) -> tuple[Entry, ...]:
    """Every entry of one category, in the package's order (loaded once)."""
    with _IMPORT_LOCK:
        found = _LOADED.get(category)
    if found is not None:
        return found
    bfcl = package()
    rows = bfcl.utils.load_dataset_entry(category)
    answers = {
        row["id"]: row["ground_truth"] for row in bfcl.utils.load_ground_truth_entry(category)
    }
    prompt = bfcl.prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    made = tuple(_entry(row, answers[row["id"]], category, prompt) for row in rows)
    with _IMPORT_LOCK:
        return _LOADED.setdefault(category, made)


def _entry(row: dict[str, Any], answer: list[list[str]], category: str, prompt: str) -> Entry:
    missed = {int(turn): docs for turn, docs in (row.get("missed_function") or {}).items()}
    offered = [_spec(doc) for doc in row["function"]]
    turns, tools = [], []
    for index, messages in enumerate(row["question"]):
        if index in missed:
            offered = offered + [_spec(doc) for doc in missed[index]]
            messages = messages or [{"role": "user", "content": prompt}]
        turns.append(tuple(Message.model_validate(m) for m in messages))
        tools.append(tuple(offered))
    return Entry(
        id=row["id"],
        category=category,
        turns=tuple(turns),
        ground_truth=tuple(tuple(calls) for calls in answer),
        tools=tuple(tools),
        added={turn: tuple(doc["name"] for doc in docs) for turn, docs in missed.items()},
        known={spec.name: spec for spec in tools[-1]} if tools else {},
        initial_config=row.get("initial_config") or {},
        involved_classes=tuple(row["involved_classes"]),
    )


# ------------------------------------------------------------------------------------ calls


def call_string(name: str, arguments: Mapping[str, Any]) -> str:
    """The call the package runs: ``name(arg=repr(value), ...)`` of validated JSON values.

    Example:
        >>> call_string("mv", {"source": "a.txt", "destination": "tmp"})
        "mv(source='a.txt', destination='tmp')"
    """
    if not name.isidentifier() or not all(str(k).isidentifier() for k in arguments):
        raise ValueError(f"not a call of identifiers: {name!r} {list(arguments)!r}")
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


def parse_call(call: str, entry: Entry) -> tuple[str, dict[str, Any]]:
    """A ground-truth call string as ``(name, JSON arguments)``; positional arguments are named
    after the method's parameters."""
    node = ast.parse(call, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a call: {call!r}")
    name = node.func.id
    arguments: dict[str, Any] = {}
    if node.args:
        parameters = _parameters(name, entry.involved_classes)
        for index, value in enumerate(node.args):
            arguments[parameters[index]] = ast.literal_eval(value)
    for keyword in node.keywords:
        arguments[str(keyword.arg)] = ast.literal_eval(keyword.value)
    return name, json.loads(json.dumps(arguments))  # tuples as lists, as JSON has them


@functools.cache
def _parameters(name: str, classes: tuple[str, ...]) -> list[str]:
    import importlib

    backend = package().backend
    for class_name in classes:
        module = importlib.import_module(backend.CLASS_FILE_PATH_MAPPING[class_name])
        method = getattr(getattr(module, class_name), name, None)
        if method is not None:
            return [p for p in inspect.signature(method).parameters if p != "self"]
    raise ValueError(f"no class of {classes} has a method {name!r}")


def episode_key() -> str:
    """A name no other episode's instances use (the package keys them by it)."""
    return f"{_KEY_PREFIX}{uuid.uuid4().hex}"


def execute(key: str, entry: Entry, call: str) -> str:
    """Run one call string in the instances of the episode named ``key`` (made at its first
    call from the entry's initial state); the package's result text."""
    results, _ = package().runner.execute_multi_turn_func_call(
        [call],
        entry.initial_config,
        list(entry.involved_classes),
        key,
        entry.id,
        long_context=entry.long_context,
        is_evaL_run=False,
    )
    return str(results[0])


def instance_names(model_name: str, entry: Entry) -> list[str]:
    """The names the package gives the instances of ``model_name``'s run of ``entry``."""
    return [
        re.sub(r"[-./:]", "_", f"{model_name}_{entry.id}_{class_name}_instance")
        for class_name in entry.involved_classes
    ]


def release(model_name: str, entry: Entry) -> None:
    """Delete the instances of ``model_name``'s run of ``entry`` from the package's globals."""
    held = vars(package().runner)
    for name in instance_names(model_name, entry):
        held.pop(name, None)


def held_instances() -> list[str]:
    """The names of every instance this module's runs hold in the package's globals now."""
    return [
        name
        for name in list(vars(package().runner))
        if name.startswith(_KEY_PREFIX) and name.endswith("_instance")
    ]


def run_checker(entry: Entry, decoded: Sequence[Sequence[Sequence[str]]], turns: int) -> dict:
    """``multi_turn_checker`` on the first ``turns`` turns: ``{"valid": True}`` or its error
    (``error_type``, ``error_message``). Its instances are deleted when it returns."""
    key = episode_key()
    try:
        result: dict = package().checker.multi_turn_checker(
            [[list(step) for step in turn] for turn in decoded[:turns]],
            [list(calls) for calls in entry.ground_truth[:turns]],
            entry.checker_entry(),
            entry.category,
            key,
        )
    finally:
        release(f"{key}_eval", entry)
        release(f"{key}_ground_truth_eval", entry)
    return result
