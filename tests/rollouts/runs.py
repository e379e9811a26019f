"""Real runs for the rescore and compare tests: the real engine, a policy with no model.

`play_run` plays an environment with a `FunctionPolicy` into a run directory, as
``rk-agent rollout`` does; `arithmetic_tasks` writes a task file for the ``math`` environment and
`answering` answers chosen tasks of it right and the rest wrong, so that a test knows every
outcome.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from rk_agent.policies.function_policy import FunctionPolicy
from rk_agent.rollouts.runner import prepare_run
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_dir import RunStatus


def play_run(path: Path, fn: Callable[..., Any], **config: Any) -> Path:
    """Play a run with ``fn`` as the policy (config: `RolloutConfig` fields) into ``path``."""
    run_config = RolloutConfig.model_validate({"concurrency": 4, **config, "output": str(path)})
    with prepare_run(run_config, policy=FunctionPolicy(fn)) as run:
        asyncio.run(run.play())
        run.summarize()
        run.finish(RunStatus.FINISHED)
    return path


def arithmetic_tasks(path: Path, numbers: Collection[int]) -> Path:
    """Tasks ``What is i + i?`` (id ``t<i>``, kind ``even``/``odd``) for the math env."""
    rows = [
        {
            "id": f"t{i}",
            "prompt": f"What is {i} + {i}?",
            "ground_truth": str(2 * i),
            "metadata": {"kind": "even" if i % 2 == 0 else "odd"},
        }
        for i in numbers
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def answering(solved: Collection[int]) -> Callable[..., str]:
    """A policy that answers task ``i`` right when ``i`` is in ``solved``, else wrong."""

    def reply(messages: list[Any], tools: Any) -> str:
        i = int(re.findall(r"What is (\d+) \+", messages[-1].text)[0])
        return f"#### {2 * i if i in solved else -1}"

    return reply


def file_hashes(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by its SHA-256 (to show a folder was not touched)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def repeated_run(run: Path, path: Path, episodes: int) -> Path:
    """A run of ``episodes`` tasks of one sample each, made of ``run``'s lines over and over
    (each with its own id, task and task index): a big run without playing it."""
    import yaml

    lines = (run / "trajectories.jsonl").read_text().splitlines()
    path.mkdir()
    with (path / "trajectories.jsonl").open("w") as out:
        for i in range(episodes):
            episode = json.loads(lines[i % len(lines)])
            episode.update(id=f"{i}-0", task_index=i, sample=0)
            episode["task"] = {**episode["task"], "id": f"task-{i}"}
            out.write(json.dumps(episode, separators=(",", ":")) + "\n")
    config = yaml.safe_load((run / "config.yaml").read_text())
    config.update(n=episodes, group_size=1, output=str(path))
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    return path
