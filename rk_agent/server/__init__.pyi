"""Type information for `rk_agent.server`, and its list of public names (one place)."""

from rk_agent.server.app import (
    API_KEY_ENV as API_KEY_ENV,
    DEFAULT_MAX_BODY_BYTES as DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TIMEOUT_S as DEFAULT_TIMEOUT_S,
    BatchRequest as BatchRequest,
    BatchResponse as BatchResponse,
    EvaluateRequest as EvaluateRequest,
    check_bind as check_bind,
    check_port as check_port,
    create_app as create_app,
    is_loopback as is_loopback,
    load_served_reward as load_served_reward,
    serve_rewards as serve_rewards,
    serving as serving,
    tls_options as tls_options,
)

__all__: list[str]
