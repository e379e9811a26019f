"""LLM-as-a-judge: an OpenAI-compatible model grades the response against a rubric. The code lives
in `rk_agent.rewards.builtin.llm_judge`; this module keeps the path Reward Kit's guides import
from (``from rk_agent.rewards.llm_judge import ...``, ``from rk_agent.rewards import
llm_judge``).
"""

from rk_agent.rewards.builtin.llm_judge import *  # noqa: F403  (Reward Kit's path)
from rk_agent.rewards.builtin.llm_judge import __all__ as __all__
