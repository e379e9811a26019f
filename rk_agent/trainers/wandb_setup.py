"""Weights & Biases for training runs: on when installed, offline without a key, never a prompt.

`plan_wandb` decides, without importing wandb or calling anything that could ask for a login,
how a run logs: online when an API key is found (``WANDB_API_KEY``, ``WANDB_IDENTITY_TOKEN_FILE``
or a ``.netrc`` entry for the W&B host, the places wandb itself looks), otherwise offline into
the run's directory, with a note saying how to upload it later. `apply_wandb` sets wandb's
environment variables when training starts (never at import). What rk-agent adds to a W&B
config goes through `rk_agent.secrets.redact` first.

Main names: `WandbPlan`, `plan_wandb`, `apply_wandb`, `restore_environ`, `finish_wandb`,
`find_api_key_source`.

Example::

    plan = plan_wandb(config.wandb, config.output_dir)
    for line in plan.notes:
        print(line)
    apply_wandb(plan)
    args = build_trl_args(GRPOConfig, {"report_to": plan.report_to, **config.trl}, ...)
"""

from __future__ import annotations

import importlib.util
import netrc
import os
import re
import secrets
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from rk_agent.errors import NotAvailableError
from rk_agent.secrets import REDACTED

if TYPE_CHECKING:
    from rk_agent.trainers.config import WandbSettings

__all__ = [
    "REDACTED",
    "WandbPlan",
    "apply_wandb",
    "find_api_key_source",
    "finish_wandb",
    "plan_wandb",
    "restore_environ",
]

WandbMode = Literal["online", "offline", "disabled"]
_DEFAULT_HOST = "https://api.wandb.ai"


@dataclass(frozen=True)
class WandbPlan:
    """How a training run logs to W&B.

    Attributes:
        report_to: the value for TRL's ``report_to`` (``["wandb"]`` or ``[]``).
        mode: ``"online"``, ``"offline"`` or ``"disabled"``.
        directory: where wandb writes (its ``wandb/`` folder goes inside), or ``None``.
        project: the W&B project.
        notes: lines to show the user before training (never a key).
    """

    report_to: list[str]
    mode: WandbMode
    directory: Path | None = None
    project: str = "rk-agent"
    notes: list[str] = field(default_factory=list)


def plan_wandb(
    settings: WandbSettings,
    output_dir: str | Path,
    *,
    environ: Mapping[str, str] | None = None,
    installed: bool | None = None,
) -> WandbPlan:
    """Decide how the run logs to W&B; nothing is imported, prompted or sent.

    The mode is the config's ``wandb.mode``, else ``WANDB_MODE`` from the environment, else
    online when a key is found and offline when not. Asking for online without a key logs
    offline instead (wandb would otherwise stop at a login prompt) and says so.

    Args:
        settings: the ``wandb`` section of the train config.
        output_dir: the run's directory; offline runs land in ``output_dir/wandb/``.
        environ: the environment to read (default ``os.environ``).
        installed: whether wandb is installed (``None``: look for it).

    Raises:
        NotAvailableError: ``wandb.enabled: true`` but wandb is not installed.
    """
    env = os.environ if environ is None else environ
    if installed is None:
        installed = importlib.util.find_spec("wandb") is not None
    asked_mode = settings.mode or _env_mode(env)
    if settings.enabled is False or asked_mode == "disabled":
        return WandbPlan([], "disabled", project=settings.project)
    if not installed:
        if settings.enabled:
            raise NotAvailableError(
                "wandb logging is on (wandb.enabled: true) but wandb is not installed; "
                "install it with `pip install wandb`, or set wandb.enabled: false."
            )
        note = "wandb: not installed, so not logging to W&B (`pip install wandb` turns it on)."
        return WandbPlan([], "disabled", project=settings.project, notes=[note])
    directory = Path(output_dir)
    key_source = find_api_key_source(env)
    sync = f"upload later with `wandb sync {directory}/wandb/offline-run-*`"
    if key_source is None:
        why = "no API key" if asked_mode != "online" else "mode online but no API key found"
        note = f"wandb: {why}, logging offline to {directory}; {sync}"
        return WandbPlan(["wandb"], "offline", directory, settings.project, [note])
    if asked_mode == "offline":
        note = f"wandb: logging offline to {directory} (mode offline); {sync}"
        return WandbPlan(["wandb"], "offline", directory, settings.project, [note])
    note = f"wandb: logging to project {settings.project!r} (key from {key_source})."
    return WandbPlan(["wandb"], "online", directory, settings.project, [note])


def _env_mode(env: Mapping[str, str]) -> WandbMode | None:
    mode = env.get("WANDB_MODE", "").strip().lower()
    if mode in ("online", "run"):
        return "online"
    if mode in ("offline", "dryrun"):
        return "offline"
    if mode == "disabled":
        return "disabled"
    return None


def find_api_key_source(environ: Mapping[str, str] | None = None) -> str | None:
    """Where wandb would find credentials, or ``None``; the key itself is never returned.

    Looks where wandb 0.31 looks, without calling it: ``WANDB_API_KEY``,
    ``WANDB_IDENTITY_TOKEN_FILE``, then the ``.netrc`` file (``NETRC``, else ``~/.netrc`` or
    ``~/_netrc``) for the host of ``WANDB_BASE_URL`` (default ``api.wandb.ai``).
    """
    env = os.environ if environ is None else environ
    for name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE"):
        if env.get(name):
            return name
    path = _netrc_path(env)
    if path is None:
        return None
    try:
        entries = netrc.netrc(str(path))
    except (OSError, netrc.NetrcParseError):
        return None
    host = urlsplit(env.get("WANDB_BASE_URL") or _DEFAULT_HOST).netloc
    found = entries.authenticators(host) if host else None
    return str(path) if found and found[2] else None


def _netrc_path(env: Mapping[str, str]) -> Path | None:
    if env.get("NETRC"):
        return Path(env["NETRC"]).expanduser()
    home = env.get("HOME") or env.get("USERPROFILE")
    if not home:
        return None
    for name in (".netrc", "_netrc"):
        if (Path(home) / name).is_file():
            return Path(home) / name
    return None


def apply_wandb(
    plan: WandbPlan, *, resume: bool = False, environ: MutableMapping[str, str] | None = None
) -> dict[str, str | None]:
    """Set wandb's environment variables for the plan; call it when training starts.

    Sets ``WANDB_MODE`` (offline mode never asks for a login), ``WANDB_DIR`` (created),
    ``WANDB_PROJECT`` (read by transformers' ``WandbCallback``) and ``WANDB_SILENT`` (rk-agent
    prints the plan's notes instead of wandb's banner). A disabled plan sets only
    ``WANDB_MODE=disabled``, so a stray ``wandb.init`` does nothing.

    With a run directory, the W&B run id is kept in ``<directory>/wandb/rk-agent-run-id`` and
    set as ``WANDB_RUN_ID``: a training run resumed from a checkpoint (``resume=True``)
    continues the same W&B run (``WANDB_RESUME=allow``; offline, its new offline-run folder
    carries the same id, and ``wandb sync`` appends it), a fresh one gets a new id.

    Args:
        plan: from `plan_wandb`.
        resume: whether training resumes from a checkpoint in the plan's directory.
        environ: the environment to change (default ``os.environ``).

    Returns:
        The previous values (``None``: was unset), so a caller can put them back.
    """
    env = os.environ if environ is None else environ
    values: dict[str, str] = {"WANDB_MODE": plan.mode}
    if plan.mode != "disabled":
        values |= {"WANDB_PROJECT": plan.project, "WANDB_SILENT": "true"}
        if plan.directory is not None:
            plan.directory.mkdir(parents=True, exist_ok=True)
            values["WANDB_DIR"] = str(plan.directory.resolve())
            values["WANDB_RUN_ID"] = _run_id(plan.directory / "wandb" / _RUN_ID_FILE, resume)
            if resume:
                values["WANDB_RESUME"] = "allow"
    names = [*values, "WANDB_RESUME"]
    previous = {name: env.get(name) for name in names}
    env.pop("WANDB_RESUME", None)
    env.update(values)
    return previous


def restore_environ(
    previous: Mapping[str, str | None], environ: MutableMapping[str, str] | None = None
) -> None:
    """Put back what `apply_wandb` changed (``None``: the variable was unset)."""
    env = os.environ if environ is None else environ
    for name, value in previous.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value


_RUN_ID_FILE = "rk-agent-run-id"


def _run_id(path: Path, resume: bool) -> str:
    """The run's W&B id: the stored one when resuming, else a new one (stored)."""
    if resume and path.is_file():
        stored = path.read_text().strip()
        if re.fullmatch(r"[a-z0-9]{1,64}", stored):
            return stored
    run_id = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(8))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run_id + "\n")
    return run_id


def finish_wandb() -> None:
    """Finish the active wandb run and stop wandb's service, so a run's files are complete.

    transformers' ``WandbCallback`` leaves the run open after ``train()``; call this after it.
    wandb 0.31 writes an offline run's ``.wandb`` file from a service process, and only the
    service's shutdown guarantees the file is flushed. Does nothing when wandb was never
    imported.
    """
    wandb = sys.modules.get("wandb")
    if wandb is None:
        return
    if getattr(wandb, "run", None) is not None:
        wandb.finish()
    teardown = getattr(wandb, "teardown", None)
    if teardown is not None:
        teardown()
