"""Samples for the check of every built-in reward: two or three tasks each, whose last message
is the reference reply (the correct answer), with the reward's options."""

from __future__ import annotations

import json
from typing import Any


def _chat(question: str, reply: Any, **fields: Any) -> dict[str, Any]:
    last = reply if isinstance(reply, dict) else {"role": "assistant", "content": reply}
    return {"messages": [{"role": "user", "content": question}, last], **fields}


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{name}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


_WEATHER = {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}
_STOCK = {"name": "get_stock", "arguments": {"symbol": "ACME"}}
_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_stock",
            "description": "A stock's price.",
            "parameters": {"type": "object", "properties": {"symbol": {"type": "string"}}},
        },
    },
]
_PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
_CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
}
_ADD = "```python\ndef add(a, b):\n    return a + b\n```"
_MUL = "```python\ndef mul(a, b):\n    return a * b\n```"

BUILTIN_SAMPLES: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "math": (
        [
            _chat("Ann has 3 apples, buys 4 more. How many?", "3 + 4 = 7.\n#### 7",
                  ground_truth="7"),
            _chat("What is 12 times 3?", "12 x 3 = 36, so \\boxed{36}.", ground_truth="36"),
            _chat("Half of 50?", "Answer: 25", ground_truth="25"),
        ],
        {},
    ),
    "cosine_length": (
        [
            _chat("What is 2 + 2?", "#### 4", ground_truth="4"),
            _chat("What is 9 - 2?", "#### 7", ground_truth="7"),
        ],
        {},
    ),
    "code_execution": (
        [
            _chat(
                "Write `add(a, b)` returning the sum of a and b.",
                _ADD,
                ground_truth=[
                    {"fn_name": "add", "args": [1, 2], "expected": 3},
                    {"fn_name": "add", "args": [5, -7], "expected": -2},
                ],
            ),
            _chat(
                "Write `mul(a, b)` returning the product of a and b.",
                _MUL,
                ground_truth=[
                    {"fn_name": "mul", "args": [2, 3], "expected": 6},
                    {"fn_name": "mul", "args": [-4, 5], "expected": -20},
                ],
            ),
        ],
        {},
    ),
    "function_call": (
        [
            _chat("Weather in Oslo, in Celsius?", _call("get_weather", city="Oslo", unit="c"),
                  ground_truth=_WEATHER, tools=_TOOLS),
            _chat("Price of ACME?", _call("get_stock", symbol="ACME"), ground_truth=_STOCK,
                  tools=_TOOLS),
        ],
        {},
    ),
    "tool_calls": (
        [
            _chat("Weather in Oslo, in Celsius?", _call("get_weather", city="Oslo", unit="c"),
                  ground_truth=[_WEATHER], tools=_TOOLS),
            _chat("Price of ACME?", _call("get_stock", symbol="ACME"), ground_truth=[_STOCK],
                  tools=_TOOLS),
        ],
        {},
    ),
    "format": (
        [
            _chat("2 + 2?", "<think>Two and two.</think>\n<answer>4</answer>"),
            _chat("Capital of France?", "<think>It is Paris.</think>\n<answer>Paris</answer>"),
        ],
        {},
    ),
    "json_schema": (
        [
            _chat("Describe Ada as JSON.", '{"name": "Ada", "age": 36}', ground_truth=_PERSON),
            _chat("Describe Oslo as JSON.", '{"city": "Oslo", "population": 700000}',
                  ground_truth=_CITY),
        ],
        {},
    ),
    "length": (
        [
            _chat("Say hello in five words.", "Hello there, my good friend."),
            _chat("Describe the sea in five words.", "Blue, deep, cold and wide."),
        ],
        {"target_tokens": 5},
    ),
    "repetition": (
        [
            _chat("Describe a cat.", "A small furry animal that purrs when it is happy."),
            _chat("Describe rain.", "Water falling from clouds onto the streets below."),
        ],
        {},
    ),
    "relevance": (
        [
            _chat("What is the capital of France?", "The capital of France is Paris."),
            _chat("Which planet is the largest?", "Jupiter is the largest planet."),
        ],
        {},
    ),
}  # fmt: skip
