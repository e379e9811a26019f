"""How to run rk-agent again from the shell the user ran it in.

Hints printed after a command ("Next steps: rk-agent show ...") must work when pasted back. In a
checkout run with ``uv run rk-agent``, the ``rk-agent`` script is not on the shell's ``PATH``
(only on the one ``uv run`` sets up), so a bare ``rk-agent`` there is "command not found".

Main names: `command`.
"""

from __future__ import annotations

import os
import shutil
import sys

__all__ = ["command"]


def command() -> str:
    """``uv run rk-agent`` when started by ``uv run``; ``rk-agent`` when that script is on the
    ``PATH``; else the interpreter with ``-m rk_agent``.

    Example:
        >>> command() in ("uv run rk-agent", "rk-agent") or command().endswith(" -m rk_agent")
        True
    """
    if os.environ.get("UV_RUN_RECURSION_DEPTH") or os.environ.get("UV"):
        return "uv run rk-agent"
    if shutil.which("rk-agent"):
        return "rk-agent"
    return f"{sys.executable} -m rk_agent"
