"""`rk-agent check tokens` on a run of the embedded model: wall time and peak memory.

The run is played once with the project's own rollout (`prepare_run`, the embedded
SmolLM2-135M through `HFPolicy`, which records every turn's prompt and generated ids) on the
``tools`` environment: ``--episodes`` tasks (default 1,000), one episode each, up to 3 turns of
up to 48 tokens, sampled at temperature 1 (seed 0), ``--batch`` at a time in batches of up to
as many (default 32: the KV cache keeps every conversation, and the tools' system prompt, a
thousand tokens, is prefilled once and reused by every later episode). It is kept in the
system's temporary folder (``rk-agent-bench-check-tokens-<episodes>``) and reused by later
runs; ``--fresh`` plays it again. The check is then timed as a user runs it (a fresh
``python -m rk_agent check tokens RUN --json`` process, the run's own model folder's tokenizer),
and alone in a fresh process after a first tokenizer load has paid for transformers' lazy
imports: its time and that process's peak resident memory.

Issue 27 asks for 1,000 episodes. On 2 shared CPU cores the first batch of 32 took about 2
minutes (every prompt prefilled whole), each later one 40 s or more (the system prompt reused,
48 decoding steps): 1,000 episodes played in 32 minutes, once, and the playing process peaked at
15 GB (its KV cache keeps 64 conversations of a thousand tokens, 50 MB each, beside the
batch's own). ``--batch 16`` keeps half as many and was as fast on short runs (1.31 against
1.25 s an episode after the first batch); its peak was not measured.

Target: none of its own; the check reads one episode at a time, so memory should not grow
with the run.

Run: uv run python benchmarks/bench_check_tokens.py [--episodes 1000] [--batch 32] [--fresh]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import figure
from peak_rss import peak_rss_mb


def play(folder: Path, episodes: int, batch: int) -> float:
    """Play the run into ``folder``, ``batch`` episodes at a time; its wall time in seconds."""
    from rk_agent.policies.hf_policy import HFPolicy
    from rk_agent.rollouts.runner import prepare_run
    from rk_agent.runs.config import RolloutConfig
    from rk_agent.runs.run_dir import RunStatus

    config = RolloutConfig.model_validate(
        {"env": "tools", "n": episodes, "group_size": 1, "max_turns": 3, "concurrency": batch,
         "output": str(folder), "sampling": {"temperature": 1.0, "max_tokens": 48, "seed": 0}}
    )  # fmt: skip
    started = time.perf_counter()
    with prepare_run(config, policy=HFPolicy(max_batch_size=batch)) as run:
        asyncio.run(run.play())
        run.summarize()
        run.finish(RunStatus.FINISHED)
    return time.perf_counter() - started


def check(folder: Path) -> tuple[float, dict]:
    """``rk-agent check tokens RUN --json`` as a user runs it: wall seconds, its report."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "rk_agent", "check", "tokens", str(folder), "--json"],
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"rk-agent check tokens failed ({done.returncode}): {done.stderr}")
    return seconds, json.loads(done.stdout)


def in_process(folder: Path) -> dict[str, float]:
    """`check_tokens` alone in a fresh process, after a first tokenizer load that pays for
    transformers' lazy imports (``first_load``): ``seconds``, ``peak_mb``."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(folder)],
        capture_output=True, text=True, check=True, timeout=3600,
    )  # fmt: skip
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _child(folder: str) -> None:
    from rk_agent.runs.run_dir import read_provenance
    from rk_agent.runs.token_drift import check_tokens, load_tokenizer

    started = time.perf_counter()
    load_tokenizer(folder, None, read_provenance(Path(folder)))  # transformers' lazy imports
    loaded = time.perf_counter()
    report = check_tokens(folder)  # the tokenizer loaded again, the imports done
    seconds = time.perf_counter() - loaded
    peak_mb = peak_rss_mb()
    print(json.dumps({"seconds": seconds, "first_load": loaded - started, "peak_mb": peak_mb,
                      "turns": report.turns_checked}))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000, help="episodes in the run")
    parser.add_argument("--fresh", action="store_true", help="play the run again")
    parser.add_argument("--batch", type=int, default=32, help="episodes played at a time")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    folder = Path(tempfile.gettempdir()) / f"rk-agent-bench-check-tokens-{args.episodes}"
    if args.fresh or not (folder / "summary.json").is_file():
        shutil.rmtree(folder, ignore_errors=True)
        played = play(folder, args.episodes, args.batch)
        print(
            f"played {args.episodes} episodes of the embedded model, {args.batch} at a time, in "
            f"{played:.0f} s ({played / args.episodes:.2f} s an episode; peak RSS "
            f"{peak_rss_mb():,.0f} MB)"
        )
    else:
        print(f"reusing the run in {folder}")
    seconds, report = check(folder)
    alone = in_process(folder)
    turns, episodes = report["turns_checked"], report["episodes_checked"]
    print(
        f"rk-agent check tokens: {episodes} episodes, {turns} turns: {seconds:.1f} s as a "
        f"command (transformers' imports and the first tokenizer load "
        f"{alone['first_load']:.1f} s); the check alone {alone['seconds']:.2f} s "
        f"({turns / alone['seconds']:,.0f} turns/s), peak RSS {alone['peak_mb']:.0f} MB; "
        f"{report['turns_affected']} turns drifted"
    )
    name = f"{episodes:,} episodes of the embedded model"
    figure(f"rk-agent check tokens, {name}", seconds, "s", "", None)
    figure(f"check_tokens alone, {name}", alone["seconds"], "s", "", None)
    figure(f"rk-agent check tokens peak RSS, {name}", alone["peak_mb"], "MB", "", None)


if __name__ == "__main__":
    main()
