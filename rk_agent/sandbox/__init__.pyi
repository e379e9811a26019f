"""Type information for `rk_agent.sandbox`, and its list of public names (one place)."""

from rk_agent.sandbox.runner import (
    IsolationReport as IsolationReport,
    SandboxLimits as SandboxLimits,
    SandboxMode as SandboxMode,
    SandboxResult as SandboxResult,
    SandboxStatus as SandboxStatus,
    isolation_report as isolation_report,
    process_limit_backend as process_limit_backend,
    require_sandbox as require_sandbox,
    run_python as run_python,
    run_python_async as run_python_async,
    sandbox_mode as sandbox_mode,
)

__all__: list[str]
