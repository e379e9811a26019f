"""Two small OpenEnv environments, served with OpenEnv's own ``create_app`` on loopback.

Run in the separate environment that has ``openenv==0.10.0`` (its fastmcp needs ``mcp<2``,
rk-agent's environment has mcp 2.x), never imported by the tests themselves:

    $RK_OPENENV_VENV/bin/python tests/interop/openenv/openenv_envs.py guess --port 8123

- ``guess``: an ``MCPEnvironment`` whose tool ``guess(n)`` answers ``higher``, ``lower`` or
  ``correct`` about a secret from 1 to 100 picked by the reset's seed; a wrong guess is a step
  reward of -0.1, the right one 1.0 and ends the episode (MCP tool calls come back with no
  reward from ``MCPEnvironment`` itself, so ``step_async`` puts it on). Episodes of odd seeds
  also offer ``parity()``, ``"even"`` or ``"odd"``: the tools differ per episode.
- ``words``: a text-action game shaped like TextArena's Wordle: the action is
  ``{"message": "[word]"}``, the observation ``{prompt, messages: [{sender_id, content,
  category}]}``; each guess is rewarded with its share of letters in place, the secret word ends
  the episode with 1.0, and six guesses end it anyway.

``GET /counts`` says how many environments (sessions) were built and closed, the most open at
once (``peak``; ``POST /counts/peak`` starts it again), and what every episode was (seed, secret,
actions), so that the tests can count sessions and look for cross-talk
on the server's side. ``--slow S`` makes every step take S seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import threading
from typing import Any

import uvicorn
from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

WORDS = ["crane", "slate", "pious", "mango", "light", "quart", "dwarf", "brick", "vivid", "nymph"]

_lock = threading.Lock()
COUNTS: dict[str, Any] = {"built": 0, "closed": 0, "peak": 0, "episodes": []}
SLOW = {"s": 0.0}


def _built() -> dict[str, Any]:
    with _lock:
        COUNTS["built"] += 1
        COUNTS["peak"] = max(COUNTS["peak"], COUNTS["built"] - COUNTS["closed"])
        episode: dict[str, Any] = {"seed": None, "secret": None, "actions": []}
        COUNTS["episodes"].append(episode)
        return episode


def _closed() -> None:
    with _lock:
        COUNTS["closed"] += 1


class GuessEnv(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self.record = _built()
        self.secret = 0
        self.done = False
        self._state = State(step_count=0)
        mcp = FastMCP("guess")

        @mcp.tool()
        def guess(n: int) -> str:
            """Guess the secret number (1 to 100)."""
            self.record["actions"].append(n)
            if n == self.secret:
                self.done = True
                return "correct"
            return "higher" if n < self.secret else "lower"

        @mcp.tool()
        def parity() -> str:
            """Whether the secret number is even or odd."""
            return "even" if self.secret % 2 == 0 else "odd"

        super().__init__(mcp)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Any:
        self.secret = random.Random(seed).randint(1, 100)
        self.done = False
        self.record.update(seed=seed, secret=self.secret)
        self._state = State(episode_id=episode_id, step_count=0)
        text = "Find the secret number from 1 to 100 with the guess tool."
        return Observation(done=False, reward=None, metadata={"prompt": text})

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kw: Any) -> Any:
        return Observation(done=False, reward=None, metadata={"error": "call a tool"})

    async def step_async(self, action: Action, timeout_s: float | None = None, **kw: Any) -> Any:
        if SLOW["s"]:
            await asyncio.sleep(SLOW["s"])
        observation = await super().step_async(action, timeout_s=timeout_s, **kw)
        self._state.step_count += 1
        seed = self.record["seed"]
        if isinstance(action, ListToolsAction) and seed is not None and seed % 2 == 0:
            observation.tools = [t for t in observation.tools if t.name != "parity"]
        if isinstance(action, CallToolAction) and action.tool_name == "guess":
            observation.reward = 1.0 if self.done else -0.1
            observation.done = self.done
        return observation

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        _closed()
        super().close()


class WordAction(Action):
    message: str


class WordObservation(Observation):
    prompt: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)


class WordsEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self.record = _built()
        self.secret = ""
        self.guesses = 0
        self._state = State(step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Any:
        self.secret = random.Random(seed).choice(WORDS)
        self.guesses = 0
        self.record.update(seed=seed, secret=self.secret)
        self._state = State(episode_id=episode_id, step_count=0)
        prompt = (
            "Guess the five-letter word. Write your guess in brackets, e.g. [crane]. "
            f"Words: {', '.join(WORDS)}."
        )
        return WordObservation(
            prompt=prompt, messages=[{"sender_id": -1, "content": prompt, "category": "PROMPT"}]
        )

    def step(self, action: Any, timeout_s: float | None = None, **kw: Any) -> Any:
        if SLOW["s"]:
            import time

            time.sleep(SLOW["s"])
        self._state.step_count += 1
        self.record["actions"].append(action.message)
        guess = action.message.strip().strip("[]").strip().lower()
        self.guesses += 1
        marks = "".join(
            "G" if i < len(guess) and guess[i] == c else "Y" if c in guess else "X"
            for i, c in enumerate(self.secret)
        )
        done = guess == self.secret or self.guesses >= 6
        reward = 1.0 if guess == self.secret else marks.count("G") / 5
        text = f"{guess}: {marks}" + (" (solved)" if guess == self.secret else "")
        return WordObservation(
            done=done, reward=reward,
            messages=[{"sender_id": -1, "content": text, "category": "FEEDBACK"}],
        )  # fmt: skip

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        _closed()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("env", choices=["guess", "words"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-sessions", type=int, default=64)
    parser.add_argument("--slow", type=float, default=0.0)
    args = parser.parse_args()
    SLOW["s"] = args.slow
    if args.env == "guess":
        app = create_app(
            GuessEnv, CallToolAction, Observation, max_concurrent_envs=args.max_sessions
        )
    else:
        app = create_app(WordsEnv, WordAction, WordObservation,
                         max_concurrent_envs=args.max_sessions)  # fmt: skip

    @app.get("/counts")
    def counts() -> dict[str, Any]:
        with _lock:
            episodes = [dict(e) for e in COUNTS["episodes"] if e["seed"] is not None]
            return {**COUNTS, "episodes": episodes}

    @app.post("/counts/peak")
    def restart_peak() -> dict[str, Any]:
        with _lock:
            COUNTS["peak"] = COUNTS["built"] - COUNTS["closed"]
            return {"peak": COUNTS["peak"]}

    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
