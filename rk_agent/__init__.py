"""rk-agent: train LLM agents with reinforcement learning.

Rewards are plain Python functions decorated with `reward_function`; they return an
`EvaluateResult` (a score plus named component metrics). Everything users need is importable
from here:

    >>> from rk_agent import reward_function, EvaluateResult
    >>> @reward_function
    ... def brevity(response: str) -> float:
    ...     return 1.0 if len(response) < 100 else 0.0

Names are imported on first use (PEP 562; ``__init__.pyi`` lists them), and heavy dependencies
(torch, transformers, trl, wandb) only by the parts that use them, so ``import rk_agent`` stays
fast.
"""

from rk_agent._lazy import attach_stub

__version__ = "0.1.0"

# The public names are listed once, in __init__.pyi (also read by type checkers).
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__, extra=("__version__",))
