"""What the verifiers source costs: the import, scoring an episode, starting its tool servers.

Run: uv run python benchmarks/bench_verifiers.py [--episodes N] [--imports N] [--exec-resets N]

Measured on the test tasksets of tests/interop/verifiers_tasksets (Hub tasksets cannot be
installed here), each figure the median of its runs:

- ``import verifiers.v1`` in a fresh interpreter, and the first ``make_env`` of a taskset in
  one (what the first episode of a run waits for);
- scoring one episode: the environment's ``verifiers`` reward on a finished conversation of
  ``vf_scored`` (two weighted rewards, three metrics): the Trace built from the transcript and
  the task's own ``Task.score``, run on the environment's event loop from the caller's thread;
  and a whole episode without tools (reset, one answer, the score);
- an episode's tool servers: the reset of a ``vf_toolbox`` episode, which starts its task's
  notebook server and connects to it and to the taskset's shared server, with the servers
  forked from a warm process (the default) and started as verifiers starts them
  (``python -m``, ``tool_launch="exec"``); and one tool call over MCP.

No target of its own: the figures are for the docs (docs/environments-from-elsewhere.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from figures import figure

TASKSETS = Path(__file__).parents[1] / "tests" / "interop" / "verifiers_tasksets"


def fresh(code: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(TASKSETS)}
    timed = f"import time; t = time.perf_counter()\n{code}\nprint(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", timed], capture_output=True, text=True,
                         check=True, env=env)  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def timed(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--imports", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--resets", type=int, default=10)
    parser.add_argument("--exec-resets", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(TASKSETS))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(TASKSETS), os.environ.get("PYTHONPATH")] if p
    )

    imports = statistics.median(fresh("import verifiers.v1") for _ in range(args.imports))
    first_env = statistics.median(
        fresh("from rk_agent import make_env\nmake_env('verifiers:vf_scored').close()")
        for _ in range(args.imports)
    )
    print(f"import verifiers.v1: {imports:.2f} s; first make_env of a taskset: {first_env:.2f} s")
    figure("verifiers: import verifiers.v1", imports, "s", "none", None)
    figure("verifiers: first make_env (import included)", first_env, "s", "none", None)

    from rk_agent import make_env
    from rk_agent.types import Message, ToolCall

    env = make_env("verifiers:vf_scored")
    env.reset(options={"task_index": 1})
    reply = Message(role="assistant", content="15")
    env.play_turn(reply)
    session = env._state.scratch["session"]  # type: ignore[union-attr]
    messages = [*env._state.messages]  # type: ignore[union-attr]
    assert session.verify(messages).score == 1.0
    score_s = timed(lambda: session.verify(messages), args.episodes)

    def episode() -> None:
        env.reset(options={"task_index": 1})
        assert env.play_turn(reply).episode.score == 1.0  # type: ignore[union-attr]

    episode_s = timed(episode, args.episodes)
    env.close()
    print(f"scoring one episode: {score_s * 1000:.2f} ms; a whole episode without tools: "
          f"{episode_s * 1000:.2f} ms (median of {args.episodes})")  # fmt: skip
    figure("verifiers: score one episode (Trace + Task.score)", score_s * 1000, "ms", "none", None)
    figure("verifiers: one episode without tools", episode_s * 1000, "ms", "none", None)

    call = ToolCall.model_validate({"id": "c", "type": "function", "function": {
        "name": "notebook_lookup", "arguments": json.dumps({"key": "colour"})}})  # fmt: skip
    for launch, resets in (("fork", args.resets), ("exec", args.exec_resets)):
        env = make_env("verifiers:vf_toolbox", tool_launch=launch)
        env.reset(options={"task_index": 0})  # the shared server, the helper: once per env
        reset_s = timed(lambda env=env: env.reset(options={"task_index": 0}), resets)
        call_s = timed(lambda env=env: env.run_tool(call), 20)
        env.close()
        print(f"tool servers ({launch}): reset {reset_s:.3f} s (median of {resets}); a tool call "
              f"{call_s * 1000:.1f} ms")  # fmt: skip
        figure(
            f"verifiers: episode reset with its tool server ({launch})", reset_s, "s", "none", None
        )
        figure(f"verifiers: one MCP tool call ({launch})", call_s * 1000, "ms", "none", None)


if __name__ == "__main__":
    main()
