"""Per-call overhead of @reward_function on a trivial reward, against the bare function.

Run: uv run python benchmarks/bench_decorator.py
Target: overhead under 10 µs per call.
"""

from __future__ import annotations

import timeit
from typing import Any

from figures import figure

from rk_agent import Message, reward_function

CHAT: list[dict[str, Any]] = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4"},
]


def trivial(messages: list[dict[str, Any]], ground_truth: str = "", **kwargs: Any) -> float:
    return 1.0 if messages[-1]["content"] == ground_truth else 0.0


def simple(response: str, answer: str = "") -> float:
    return 1.0 if response == answer else 0.0


def coerced(messages: list[Message], ground_truth: str = "", **kwargs: Any) -> float:
    return 1.0 if messages[-1].text == ground_truth else 0.0


def per_call_us(fn: Any, kwargs: dict[str, Any], number: int = 50_000, repeat: int = 7) -> float:
    times = timeit.repeat(lambda: fn(**kwargs), number=number, repeat=repeat)
    return min(times) / number * 1e6


def main() -> None:
    kwargs = {"messages": CHAT, "ground_truth": "4"}
    bare = per_call_us(trivial, kwargs)
    wrapped = per_call_us(reward_function(trivial), kwargs)
    overhead = wrapped - bare
    print(f"bare function:             {bare:7.2f} µs/call")
    print(f"decorated (messages=...):  {wrapped:7.2f} µs/call")
    print(f"decorator overhead:        {overhead:7.2f} µs/call (target < 10 µs)")

    # The other call shapes, for information: they do more work on purpose.
    simple_bare = per_call_us(simple, {"response": "4", "answer": "4"})
    simple_wrapped = per_call_us(reward_function(simple), kwargs, number=20_000)
    print(
        f"simple signature (response from messages): {simple_wrapped - simple_bare:7.2f} µs "
        "overhead (parses the messages)"
    )
    coerced_wrapped = per_call_us(reward_function(coerced), kwargs, number=20_000)
    print(f"Message coercion of 2 dict messages:       {coerced_wrapped - bare:7.2f} µs overhead")
    print(f"RESULT decorator_overhead_us={overhead:.2f} target_us=10 ok={overhead < 10}")
    figure("@reward_function overhead", overhead, "µs/call", "< 10 µs", overhead < 10)


if __name__ == "__main__":
    main()
