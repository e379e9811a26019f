"""Deprecated: the sandbox is its own package now, `rk_agent.sandbox`.

``from rk_agent.rewards.sandbox import run_python`` keeps working, with a `DeprecationWarning`;
import from `rk_agent.sandbox` instead.
"""

import warnings

from rk_agent.sandbox import *  # noqa: F403  (the old module's names, all of them)
from rk_agent.sandbox import __all__ as __all__

warnings.warn(
    "rk_agent.rewards.sandbox moved to rk_agent.sandbox; import from rk_agent.sandbox instead "
    "(the old path will be removed in a later release)",
    DeprecationWarning,
    stacklevel=2,
)
