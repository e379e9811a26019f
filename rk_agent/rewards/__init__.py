"""Reward functions: the decorator, `RewardFunction`, composition and the registry.

The reward API is importable from here as well as from ``rk_agent``, the way Reward Kit's
guides write it::

    >>> from rk_agent.rewards import reward_function, register_reward_function, EvaluateResult
    >>> @register_reward_function("short_answer")
    ... @reward_function
    ... def short_answer(response: str) -> float:
    ...     return 1.0 if len(response) < 100 else 0.0
    >>> from rk_agent.rewards import get_reward_function
    >>> get_reward_function("short_answer")(response="42").score
    1.0
    >>> from rk_agent.rewards import unregister_reward_function
    >>> unregister_reward_function("short_answer")

The built-in rewards live in `rk_agent.rewards.builtin`, apart from this API; their Reward Kit
paths stay importable too (``from rk_agent.rewards import math, format``).
Names load on first use (PEP 562; ``__init__.pyi`` lists them), so importing one reward
module does not load the others.
"""

from rk_agent._lazy import attach_stub

# The public names are listed once, in __init__.pyi (also read by type checkers).
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
