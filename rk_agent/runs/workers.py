"""Rollout workers, the parts that need no Ray: their options, and how a lost worker is recorded.

``rk-agent rollout --workers N`` (``RolloutConfig.workers``) plays a run's episodes on N Ray
actors instead of in this process; `rk_agent.rollouts.ray_workers` does that. This module is
what the configuration and the run directory need to know about it, importable without Ray:

- `RayOptions`: where the workers run (a local Ray started for the run, or a cluster to join)
  and what each one reserves (CPUs, custom resources for sandbox-heavy environments);
- `WorkerFailure` and `WorkerFailureKind`: the typed record of a worker that died (killed, out
  of memory, node lost) or broke; its unfinished episodes are played again on another worker,
  and the record is appended to the run's ``worker_failures.jsonl``;
- `import_ray`: Ray, or a `NotAvailableError` saying how to install it.

Main names: `RayOptions`, `WorkerFailure`, `WorkerFailureKind`, `import_ray`, `RAY_INSTALL_HINT`,
`LOCAL_MODEL_REFUSED`.
"""

from __future__ import annotations

import importlib
from datetime import UTC, datetime
from enum import Enum
from types import ModuleType

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from rk_agent.errors import NotAvailableError

__all__ = [
    "LOCAL_MODEL_REFUSED",
    "RAY_INSTALL_HINT",
    "RayOptions",
    "WorkerFailure",
    "WorkerFailureKind",
    "import_ray",
]

RAY_INSTALL_HINT = (
    "Install the extra: `pip install 'rk-agent[ray]'` (or `uv add 'rk-agent[ray]'`; in a "
    "checkout of rk-agent, `uv sync --extra ray`), or leave out --workers to play every episode "
    "in this process."
)
"""How to get Ray, for the error raised when it is missing."""

LOCAL_MODEL_REFUSED = (
    "--workers copies the policy into every worker, and a model loaded in this process "
    "(--provider local, the embedded model) is not copied. Serve it (vLLM: `vllm serve MODEL`) "
    "and pass --base-url http://HOST:8000/v1 --model MODEL, or leave out --workers."
)
"""Why a model loaded in this process cannot play on workers, and what to do instead."""


class RayOptions(BaseModel):
    """Where rollout workers run and what each reserves (used when ``workers`` is set).

    Attributes:
        address: a Ray cluster to join: ``auto`` (the cluster ``ray start`` made on this
            machine), ``HOST:PORT`` (its GCS) or ``ray://HOST:PORT`` (Ray Client). ``None``
            starts a local Ray for the run and stops it afterwards. The workers must be able
            to import rk-agent and the environment's code there.
        num_cpus: CPUs each worker reserves (Ray's ``num_cpus``; fractions allowed).
        resources: custom Ray resources each worker reserves, e.g. ``{"sandbox": 1}`` to place
            workers only on nodes started with ``--resources '{"sandbox": 4}'``.
        dashboard: start Ray's dashboard with a local Ray (off: quieter and lighter).
        object_store_mb: the object store of a local Ray, in MB (trajectories pass through it).
        max_restarts: workers started in place of lost ones during a run; once spent, the run
            goes on with the workers left (and stops with a `WorkerError` when none is left).
    """

    model_config = ConfigDict(extra="forbid")

    address: str | None = None
    num_cpus: float = Field(default=1.0, ge=0)
    resources: dict[str, float] = Field(default_factory=dict)
    dashboard: bool = False
    object_store_mb: int = Field(default=200, ge=75)
    max_restarts: int = Field(default=3, ge=0)


class WorkerFailureKind(str, Enum):
    """Why a rollout worker was lost."""

    DIED = "died"
    """Its process ended: killed (``SIGKILL``, ``ray.kill``) or crashed."""
    OUT_OF_MEMORY = "out_of_memory"
    """Ray's memory monitor (or the OS) killed it for using too much memory."""
    NODE_LOST = "node_lost"
    """The machine it ran on left the cluster."""
    ERROR = "error"
    """It raised instead of playing (e.g. its environments or policy could not be built);
    it is stopped, and its episodes go to another worker."""


class WorkerFailure(BaseModel):
    """One lost worker: a line of the run's ``worker_failures.jsonl``.

    Attributes:
        worker: the worker's number (0 to N-1; a worker started in place of a lost one takes
            its number).
        kind: why it was lost.
        message: what Ray (or the worker) said.
        replayed: ids of the episodes it had not finished, played again on another worker.
        at: when the driver noticed (UTC).
    """

    model_config = ConfigDict(extra="allow")

    worker: int
    kind: WorkerFailureKind
    message: str
    replayed: list[str] = Field(default_factory=list)
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @field_serializer("at")
    def _iso(self, value: datetime) -> str:
        return value.isoformat(timespec="seconds")


def import_ray() -> ModuleType:
    """Import Ray.

    Raises:
        NotAvailableError: Ray is not installed (the message says how to install it).
    """
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise NotAvailableError(
            f"--workers plays episodes on Ray actors, but Ray cannot be imported ({exc}). "
            f"{RAY_INSTALL_HINT}"
        ) from exc
