"""Two OpenEnv servers built with the ``openenv`` package, shared by the tests here (starting one
takes seconds: OpenEnv's imports)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.interop.openenv.servers import openenv_server


@pytest.fixture(scope="session")
def guess_url() -> Iterator[str]:
    """OpenEnv's server of the MCP game ``guess`` (tools ``guess``, and ``parity`` on odd seeds)."""
    with openenv_server("guess") as (url, _):
        yield url


@pytest.fixture(scope="session")
def words_url() -> Iterator[str]:
    """OpenEnv's server of the text-action word game (``{"message": "[word]"}``)."""
    with openenv_server("words") as (url, _):
        yield url
