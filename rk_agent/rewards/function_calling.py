"""Function-calling rewards: did the model call the right tool, with the right arguments? The code
lives in `rk_agent.rewards.builtin.function_calling`; this module keeps the path Reward Kit's
guides import from (``from rk_agent.rewards.function_calling import ...``, ``from
rk_agent.rewards import function_calling``).
"""

from rk_agent.rewards.builtin.function_calling import *  # noqa: F403  (Reward Kit's path)
from rk_agent.rewards.builtin.function_calling import __all__ as __all__
