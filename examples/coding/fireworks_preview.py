"""Preview the coding metric on Fireworks (``:previewEvaluator``), without deploying it.

Run it from the repository root::

    uv run python examples/coding/fireworks_preview.py

With ``FIREWORKS_API_KEY`` set, the metric folder ``metrics/code_tests`` and the samples in
``samples.jsonl`` go to Fireworks. Without it, the script starts rk-agent's fake of the
documented Fireworks API on loopback and previews against that instead, and says so: the fake
runs the code it is sent, as the service does, so the scores are the ones the service should
give. (What the real service does with this request is the documented contract only; see the
Fireworks page of the docs.)
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from pathlib import Path

from rk_agent.evaluation import preview_evaluation
from rk_agent.fireworks.auth import Credentials
from rk_agent.fireworks.client import FireworksClient
from rk_agent.testing import FakeFireworks

HERE = Path(__file__).resolve().parent


def main() -> int:
    with ExitStack() as stack:
        if os.environ.get("FIREWORKS_API_KEY"):
            client = stack.enter_context(FireworksClient())
            print(f"Previewing on Fireworks ({client.api_base}).")
        else:
            fake = stack.enter_context(FakeFireworks(api_key="fw-fake-key", account_id="demo"))
            credentials = Credentials(api_key="fw-fake-key", account_id="demo", api_base=fake.url)
            client = stack.enter_context(FireworksClient(credentials))
            print(
                "FIREWORKS_API_KEY is not set: previewing against rk-agent's fake Fireworks API "
                f"at {fake.url} (a local stand-in for the documented API, not the real service)."
            )
        preview = preview_evaluation(
            metric_folders=[f"code_tests={HERE / 'metrics' / 'code_tests'}"],
            sample_file=str(HERE / "samples.jsonl"),
            max_samples=10,
            on_fireworks=True,
            client=client,
        )
    preview.display()
    return 0 if preview.results and all(r.success for r in preview.results) else 1


if __name__ == "__main__":
    sys.exit(main())
