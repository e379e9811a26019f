"""The reward server: a reward behind HTTP, wire-compatible with reward-kit.

Its own package, above `rk_agent.rewards` (it serves rewards; rewards know nothing of it).
`rk_agent.server.app` documents the endpoints and what each failure gets; ``_endpoints`` holds
the request handling. ``rk-agent serve`` is its command line.

Main names: `serve_rewards`, `serving`, `create_app`, `load_served_reward`, `check_bind`,
`check_port`, `is_loopback`, `EvaluateRequest`, `BatchRequest`, `BatchResponse`, `API_KEY_ENV`.

Example:
    >>> from rk_agent.server import serving
    >>> with serving("format") as url:
    ...     url.startswith("http://127.0.0.1:")
    True
"""

from rk_agent.server.app import (
    API_KEY_ENV,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TIMEOUT_S,
    BatchRequest,
    BatchResponse,
    EvaluateRequest,
    check_bind,
    check_port,
    create_app,
    is_loopback,
    load_served_reward,
    serve_rewards,
    serving,
)

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_TIMEOUT_S",
    "BatchRequest",
    "BatchResponse",
    "EvaluateRequest",
    "check_bind",
    "check_port",
    "create_app",
    "is_loopback",
    "load_served_reward",
    "serve_rewards",
    "serving",
]
