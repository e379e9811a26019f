"""CPU per request of the policies' HTTP client against the `openai` SDK's request path.

Run: uv run python benchmarks/bench_model_client.py [--requests 3000] [--concurrency 128]

Both send the same chat-completions request (a user message and one tool schema, what a
`tools` episode's turn sends) to the stub server in its own process, ``--concurrency`` at a
time, ``--latency`` seconds per reply (default 100 ms, so the server never hurries the client),
and decode the JSON reply to a dict:

- the SDK: ``AsyncOpenAI.post`` on its ``aiohttp`` transport with the raw reply (no response
  objects), the cheapest way through it, which `OpenAIPolicy` used before;
- `rk_agent.model_client.ModelClient`: plain JSON on one ``aiohttp`` session.

It prints this process's CPU milliseconds per request for each, twice in alternation (the
second round shows the noise), and their ratio. Target: the client at most half the SDK's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_engine import stub_server
from figures import figure

from rk_agent.endpoint_errors import Endpoint
from rk_agent.model_client import ModelClient

BODY: dict[str, Any] = {
    "model": "stub-model",
    "messages": [{"role": "user", "content": "What is 2 + 2? Use the calculator."}],
    "temperature": 1.0,
    "top_p": 1.0,
    "max_tokens": 512,
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "calculator",
                "description": "Evaluate an arithmetic expression.",
                "parameters": {
                    "type": "object",
                    "properties": {"expression": {"type": "string"}},
                    "required": ["expression"],
                },
            },
        }
    ],
    "tool_choice": "auto",
}


async def cpu_per_request(
    send: Callable[[], Awaitable[Any]], requests: int, concurrency: int
) -> float:
    """CPU milliseconds of this process per request, after a warm-up that opens connections."""
    limit = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with limit:
            reply = await send()
            assert reply["choices"][0]["message"], reply

    await asyncio.gather(*(one() for _ in range(concurrency)))
    cpu = time.process_time()
    await asyncio.gather(*(one() for _ in range(requests)))
    return 1000 * (time.process_time() - cpu) / requests


async def sdk(url: str, requests: int, concurrency: int) -> float:
    import importlib

    from openai import DEFAULT_CONNECTION_LIMITS, AsyncOpenAI, DefaultAioHttpClient

    # The SDK's own HTTP library: httpx, or httpx2 in openai 3.x.
    http = importlib.import_module(type(DEFAULT_CONNECTION_LIMITS).__module__.split(".")[0])
    limits = http.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    client = AsyncOpenAI(
        base_url=url, api_key="EMPTY", max_retries=0,
        http_client=DefaultAioHttpClient(limits=limits),
    )  # fmt: skip

    async def send() -> Any:
        response = await client.post("/chat/completions", body=BODY, cast_to=http.Response)
        return json.loads(response.content)

    try:
        return await cpu_per_request(send, requests, concurrency)
    finally:
        await client.close()


async def model_client(url: str, requests: int, concurrency: int) -> float:
    client = ModelClient(
        Endpoint(url=url, model="stub-model", timeout_s=60), max_connections=concurrency
    )
    try:
        return await cpu_per_request(
            lambda: client.request("POST", "/chat/completions", BODY), requests, concurrency
        )
    finally:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--latency", type=float, default=0.1)
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"{os.cpu_count()} cores; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    figures: dict[str, list[float]] = {"sdk": [], "client": []}
    with stub_server(args.latency) as url:
        for _ in range(2):
            figures["sdk"].append(asyncio.run(sdk(url, args.requests, args.concurrency)))
            figures["client"].append(
                asyncio.run(model_client(url, args.requests, args.concurrency))
            )
    sdk_ms, client_ms = min(figures["sdk"]), min(figures["client"])
    print(
        f"{args.requests} requests at concurrency {args.concurrency}, CPU per request: openai SDK "
        f"{' / '.join(f'{v:.3f}' for v in figures['sdk'])} ms, ModelClient "
        f"{' / '.join(f'{v:.3f}' for v in figures['client'])} ms; the client costs "
        f"{client_ms / sdk_ms:.2f}x the SDK (target at most 0.5x)"
    )
    print(f"RESULT sdk_cpu_ms={sdk_ms:.3f} client_cpu_ms={client_ms:.3f}")
    figure("client CPU per request", client_ms, "ms", "<= 0.25 ms (issue 26)", client_ms <= 0.25)
    ratio = client_ms / sdk_ms
    figure("client CPU over the openai SDK's, same run", ratio, "x", "<= 0.5x", ratio <= 0.5)


if __name__ == "__main__":
    main()
