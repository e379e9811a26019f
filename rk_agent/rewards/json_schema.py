"""The JSON-schema reward: is the response JSON, and does it validate against a schema? The code
lives in `rk_agent.rewards.builtin.json_schema`; this module keeps the path Reward Kit's guides
import from (``from rk_agent.rewards.json_schema import ...``, ``from rk_agent.rewards import
json_schema``).
"""

from rk_agent.rewards.builtin.json_schema import *  # noqa: F403  (Reward Kit's path)
from rk_agent.rewards.builtin.json_schema import __all__ as __all__
