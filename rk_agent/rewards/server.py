"""Deprecated: the reward server is its own package now, `rk_agent.server`.

``from rk_agent.rewards.server import serving`` keeps working, with a `DeprecationWarning`;
import from `rk_agent.server` instead.
"""

import warnings

from rk_agent.server import *  # noqa: F403  (the old module's names, all of them)
from rk_agent.server import __all__ as __all__

warnings.warn(
    "rk_agent.rewards.server moved to rk_agent.server; import from rk_agent.server instead "
    "(the old path will be removed in a later release)",
    DeprecationWarning,
    stacklevel=2,
)
