"""Code-execution reward: run the Python code in a response against test cases, in the sandbox. The
code lives in `rk_agent.rewards.builtin.code_execution`; this module keeps the path Reward Kit's
guides import from (``from rk_agent.rewards.code_execution import ...``, ``from rk_agent.rewards
import code_execution``).
"""

from rk_agent.rewards.builtin.code_execution import *  # noqa: F403  (Reward Kit's path)
from rk_agent.rewards.builtin.code_execution import __all__ as __all__
