"""The reward server: a reward behind HTTP, wire-compatible with reward-kit.

Its own package, above `rk_agent.rewards` (it serves rewards; rewards know nothing of it).
`rk_agent.server.app` documents the endpoints and what each failure gets; ``_endpoints`` holds
the request handling, ``_reward_caller`` the calls to the reward (`RewardCaller`),
``_connections`` the deadlines and the connection cap (TLS handshakes included), ``_heads``
the head cap and trailers, ``_budget`` the byte budget of bodies,
``_logs`` the rate-limited logs and ``_access`` the bind check and TLS. ``rk-agent serve`` is
its command line.

Main names: `serve_rewards`, `serving`, `create_app`, `load_served_reward`, `check_bind`,
`check_port`, `is_loopback`, `tls_options`, `EvaluateRequest`, `BatchRequest`,
`BatchResponse`, `API_KEY_ENV`.

Example:
    >>> from rk_agent.server import serving
    >>> with serving("format") as url:
    ...     url.startswith("http://127.0.0.1:")
    True
"""

from rk_agent._lazy import attach_stub

# The public names are listed once, in __init__.pyi (also read by type checkers).
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
