"""Type information for `rk_agent.cli`, and its list of public names (one place)."""

from rk_agent.cli.app import app as app, main as main

__all__: list[str]
