"""The ``rk-agent`` command line (typer). Each command group lives in its own module."""

from rk_agent.cli.app import app, main

__all__ = ["app", "main"]
