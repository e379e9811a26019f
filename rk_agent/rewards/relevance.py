"""Relevance: does the response talk about what the user asked, and answer it directly? The code
lives in `rk_agent.rewards.builtin.relevance`; this module keeps the path Reward Kit's guides
import from (``from rk_agent.rewards.relevance import ...``, ``from rk_agent.rewards import
relevance``).
"""

from rk_agent.rewards.builtin.relevance import *  # noqa: F403  (Reward Kit's path)
from rk_agent.rewards.builtin.relevance import __all__ as __all__
