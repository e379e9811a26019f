"""Length rewards: keep responses near a target length, or short when right and long when wrong.
The code lives in `rk_agent.rewards.builtin.length`; this module keeps the path Reward Kit's
guides import from (``from rk_agent.rewards.length import ...``, ``from rk_agent.rewards import
length``).
"""

from rk_agent.rewards.builtin.length import *  # noqa: F403  (Reward Kit's path)
from rk_agent.rewards.builtin.length import __all__ as __all__
