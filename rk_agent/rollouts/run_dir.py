"""A run directory: where a rollout run keeps everything it produced.

```text
RUN_DIR/
├── config.yaml          the resolved configuration (no API keys)
├── run.json             versions of the packages, start time, status
├── trajectories.jsonl   one finished episode per line, appended as each finishes
├── dropped.jsonl        groups dropped by the failure policy, with the reason
└── summary.json         the statistics of the finished episodes
```

Each trajectory is written with a single ``write`` of a whole line and flushed, so a crash or
Ctrl-C leaves every finished episode readable; a torn last line (a crash mid-write) is ignored
when reading and cut off before a resumed run appends to the file.

Main names: `RunDir`.
"""

from __future__ import annotations

import json
import platform
import threading
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rk_agent.errors import ConfigError, DataError
from rk_agent.rollouts.config import RolloutConfig
from rk_agent.rollouts.trajectory import Trajectory

__all__ = ["RunDir"]

_PACKAGES = ("rk-agent", "openai", "transformers", "torch", "trl", "gymnasium", "pydantic")


class RunDir:
    """One run's directory. Create with `RunDir.create`, reopen with `RunDir.open`."""

    TRAJECTORIES = "trajectories.jsonl"
    DROPPED = "dropped.jsonl"
    CONFIG = "config.yaml"
    MANIFEST = "run.json"
    SUMMARY = "summary.json"

    def __init__(self, path: Path, config: RolloutConfig) -> None:
        self.path = path
        self.config = config
        self._lock = threading.Lock()

    @classmethod
    def create(cls, path: str | Path, config: RolloutConfig) -> RunDir:
        """Make a new run directory and write its config and manifest.

        Raises:
            ConfigError: the directory already holds a run (use ``--resume`` to finish it).
        """
        path = Path(path)
        if (path / cls.TRAJECTORIES).exists() or (path / cls.CONFIG).exists():
            raise ConfigError(
                f"{path} already holds a run. Finish it with `--resume {path}`, or choose "
                "another --output."
            )
        path.mkdir(parents=True, exist_ok=True)
        run = cls(path, config)
        run._write_config()
        run._write_manifest(status="running")
        (path / cls.TRAJECTORIES).touch()
        return run

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """Open an existing run (for ``--resume`` and ``rk-agent show``).

        Raises:
            ConfigError: there is no run there, or its config is unreadable.
        """
        path = Path(path)
        config_file = path / cls.CONFIG
        if not config_file.is_file():
            raise ConfigError(
                f"{path} is not a run directory: {cls.CONFIG} is missing. Point at a directory "
                "made by `rk-agent rollout`."
            )
        from rk_agent.rollouts.config import load_rollout_config

        return cls(path, load_rollout_config(config_file))

    # ------------------------------------------------------------------ writing

    def append(self, trajectory: Trajectory) -> None:
        """Append one finished episode (a whole line, flushed)."""
        self._append_line(self.TRAJECTORIES, trajectory.model_dump_json(exclude_none=True))

    def append_dropped(self, task_index: int, reason: str, trajectories: list[Trajectory]) -> None:
        """Log a group dropped by the failure policy."""
        line = json.dumps(
            {
                "task_index": task_index,
                "reason": reason,
                "trajectories": [json.loads(t.model_dump_json()) for t in trajectories],
            }
        )
        self._append_line(self.DROPPED, line)

    def write_summary(self, summary: Any) -> None:
        """Write ``summary.json`` (atomically: a reader never sees half a file)."""
        text = summary.model_dump_json(indent=2) if hasattr(summary, "model_dump_json") else (
            json.dumps(summary, indent=2)
        )  # fmt: skip
        self._write_atomic(self.SUMMARY, text)

    def finish(self, status: str) -> None:
        """Record the run's final status (``finished``, ``interrupted``, ``failed``)."""
        self._write_manifest(status=status)

    def _append_line(self, name: str, line: str) -> None:
        data = (line + "\n").encode("utf-8")
        with self._lock, (self.path / name).open("ab") as handle:
            handle.write(data)
            handle.flush()

    def _write_atomic(self, name: str, text: str) -> None:
        temporary = self.path / f".{name}.tmp"
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(self.path / name)

    def _write_config(self) -> None:
        import yaml

        data = self.config.model_dump(mode="json")
        self._write_atomic(self.CONFIG, yaml.safe_dump(data, sort_keys=False))

    def _write_manifest(self, status: str) -> None:
        manifest_file = self.path / self.MANIFEST
        manifest: dict[str, Any] = {}
        if manifest_file.is_file():
            manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        now = datetime.now(UTC).isoformat(timespec="seconds")
        manifest.setdefault("started_at", now)
        manifest.setdefault("python", platform.python_version())
        manifest.setdefault("packages", _versions())
        manifest["seed"] = self.config.seed
        manifest["status"] = status
        manifest["updated_at"] = now
        self._write_atomic(self.MANIFEST, json.dumps(manifest, indent=2))

    # ------------------------------------------------------------------ reading

    def read_trajectories(self) -> list[Trajectory]:
        """Every finished trajectory. A torn last line is skipped.

        Raises:
            DataError: a complete line that is not a trajectory (file and line named).
        """
        file = self.path / self.TRAJECTORIES
        if not file.is_file():
            return []
        out: list[Trajectory] = []
        raw = file.read_bytes()
        lines = raw.split(b"\n")
        complete = lines[:-1]  # the last item is "" or a torn line without its newline
        for number, line in enumerate(complete, start=1):
            if not line.strip():
                continue
            try:
                out.append(Trajectory.model_validate_json(line))
            except ValidationError as exc:
                raise DataError(
                    f"not a trajectory: {str(exc).splitlines()[0]}", path=str(file), line=number
                ) from exc
        return out

    def repair(self) -> int:
        """Cut a torn last line off ``trajectories.jsonl``; return the bytes removed."""
        file = self.path / self.TRAJECTORIES
        if not file.is_file():
            return 0
        raw = file.read_bytes()
        keep = raw.rfind(b"\n") + 1
        if keep == len(raw):
            return 0
        with file.open("r+b") as handle:
            handle.truncate(keep)
        return len(raw) - keep

    def read_summary(self) -> dict[str, Any] | None:
        """The saved ``summary.json``, if any."""
        file = self.path / self.SUMMARY
        if not file.is_file():
            return None
        data: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
        return data


def _versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out
