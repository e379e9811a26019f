"""Math answer correctness: is the final answer of a response equal to the reference answer? The
code lives in `rk_agent.rewards.builtin.math`; this module keeps the path Reward Kit's guides
import from (``from rk_agent.rewards.math import ...``, ``from rk_agent.rewards import math``).
"""

from rk_agent.rewards.builtin.math import *  # noqa: F403  (Reward Kit's path)
from rk_agent.rewards.builtin.math import __all__ as __all__
