"""Tokens/s of `HFPolicy`'s dynamic batching vs one request at a time, on the embedded model.

Run: ``uv run python benchmarks/bench_hf_batching.py [--concurrency 8] [--max-tokens 48]``

``--concurrency`` episodes run at once; each makes ``--rounds`` calls in turn (its reply and a
follow-up question are appended between calls, as in a multi-turn episode), so later rounds
test that batches re-form on their own. Both runs use the same model object, the same prompts
and greedy decoding; every reply is exactly ``--max-tokens`` tokens long (``min_new_tokens``
equal to ``max_tokens``: end-of-sequence is ignored), so the two runs do the same work.
"One at a time" is the same policy with ``batching=False``: the worker takes one request per
``model.generate``. Target: batching at least 3x faster at concurrency 8.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import torch
from figures import figure

from rk_agent.policies.hf_policy import BatchStats, HFPolicy
from rk_agent.policies.local_model import resolve_model
from rk_agent.policies.policy import SamplingParams
from rk_agent.types import Message

TARGET = 3.0
TOPICS = ("rivers", "volcanoes", "bees", "chess", "bridges", "comets", "tea", "glaciers")


async def _episode(policy: HFPolicy, index: int, rounds: int, sampling: SamplingParams) -> int:
    topic = TOPICS[index % len(TOPICS)]
    messages = [
        Message(role="system", content="You are a helpful assistant."),
        Message(role="user", content=f"Tell me about {topic} (episode {index})."),
    ]
    tokens = 0
    for _ in range(rounds):
        out = await policy.generate(messages, None, sampling)
        tokens += len(out.token_ids or [])
        messages += [out.message, Message(role="user", content="Tell me more.")]
    return tokens


async def _run(policy: HFPolicy, concurrency: int, rounds: int, max_tokens: int) -> float:
    sampling = SamplingParams(temperature=0, max_tokens=max_tokens)
    await policy.generate([Message(role="user", content="Hi")], None, sampling)  # warm-up
    policy.stats = BatchStats()
    started = time.perf_counter()
    counts = await asyncio.gather(
        *(_episode(policy, i, rounds, sampling) for i in range(concurrency))
    )
    elapsed = time.perf_counter() - started
    expected = concurrency * rounds * max_tokens
    if sum(counts) != expected:
        raise SystemExit(f"expected {expected} tokens, got {sum(counts)}: the runs are not equal")
    return sum(counts) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model folder or hub id (default: embedded)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2, help="calls per episode")
    parser.add_argument("--max-tokens", type=int, default=48, help="new tokens per call (exact)")
    parser.add_argument("--max-wait-ms", type=float, default=20.0)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(args.model)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    fixed = {"min_new_tokens": args.max_tokens}  # ignore EOS: every reply has max_tokens tokens

    results = {}
    for batching in (True, False):
        policy = HFPolicy(
            model,
            tokenizer=tokenizer,
            batching=batching,
            max_batch_size=args.concurrency,
            max_wait_ms=args.max_wait_ms,
            generate_kwargs=fixed,
        )
        results[batching] = asyncio.run(
            _run(policy, args.concurrency, args.rounds, args.max_tokens)
        )
        sizes = dict(sorted(policy.stats.sizes.items()))
        print(
            f"{'dynamic batching' if batching else 'one at a time':>17}: "
            f"{results[batching]:8.1f} tokens/s   (batch sizes {sizes})"
        )
        policy.close()

    ratio = results[True] / results[False]
    figure("dynamic batching over one at a time", ratio, "x", f">= {TARGET:.0f}x", ratio >= TARGET)
    print(
        f"{'speed-up':>17}: {ratio:8.2f}x        (target >= {TARGET:.0f}x: "
        f"{'met' if ratio >= TARGET else 'NOT met'})"
    )
    print(
        f"model {path} on {device} ({dtype}, {torch.get_num_threads()} threads, "
        f"{os.cpu_count()} CPUs); concurrency {args.concurrency}, {args.rounds} calls per "
        f"episode, exactly {args.max_tokens} new tokens per call (EOS ignored), greedy"
    )


if __name__ == "__main__":
    main()
