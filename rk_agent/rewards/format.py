"""The format reward: does the response have the required structure (tags, or a regex)? The code
lives in `rk_agent.rewards.builtin.format`; this module keeps the path Reward Kit's guides
import from (``from rk_agent.rewards.format import ...``, ``from rk_agent.rewards import
format``).
"""

from rk_agent.rewards.builtin.format import *  # noqa: F403  (Reward Kit's path)
from rk_agent.rewards.builtin.format import __all__ as __all__
