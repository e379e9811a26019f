"""The sandbox: untrusted Python code run isolated, with limits on everything it can use.

Its own package, at the bottom of the house next to `rk_agent.types`: the code-execution reward,
the code environment and the CLI's ``doctor`` use it; it uses nothing of theirs. The module
`rk_agent.sandbox.runner` documents the isolation and every limit; the modules whose names start
with ``_`` are its private parts (bubblewrap, the launcher, the child's bootstrap, process limits).

Main names: `run_python`, `run_python_async`, `SandboxLimits`, `SandboxMode`, `SandboxResult`,
`SandboxStatus`, `isolation_report`, `IsolationReport`, `require_sandbox`, `sandbox_mode`,
`process_limit_backend`.

Example:
    >>> from rk_agent.sandbox import SandboxLimits, run_python
    >>> run_python("print(6 * 7)", limits=SandboxLimits(timeout_s=5)).stdout  # doctest: +SKIP
    '42\\n'
"""

from rk_agent._lazy import attach_stub

# The public names are listed once, in __init__.pyi (also read by type checkers).
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
