"""Repetition penalty: a negative reward for responses that repeat the same n-grams. The code lives
in `rk_agent.rewards.builtin.repetition`; this module keeps the path Reward Kit's guides import
from (``from rk_agent.rewards.repetition import ...``, ``from rk_agent.rewards import
repetition``).
"""

from rk_agent.rewards.builtin.repetition import *  # noqa: F403  (Reward Kit's path)
from rk_agent.rewards.builtin.repetition import __all__ as __all__
