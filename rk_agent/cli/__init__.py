"""The ``rk-agent`` command line (typer). Each command group lives in its own module.

Main names: `app` (the typer application), `main` (the ``rk-agent`` entry point).
"""

from rk_agent._lazy import attach_stub

# The public names are listed once, in __init__.pyi (also read by type checkers).
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
