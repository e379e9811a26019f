"""Deprecated: the ``openai`` error boundary moved to `rk_agent.openai_errors`, and ``redact`` to
`rk_agent.secrets`.

``from rk_agent.rollouts.openai_errors import translate_error`` keeps working, with a
`DeprecationWarning`; import from `rk_agent.openai_errors` (and `rk_agent.secrets.redact`)
instead. The boundary moved below rewards and rollouts so that the LLM judge can use it too.
"""

import warnings

from rk_agent.openai_errors import *  # noqa: F403  (the old module's names, all of them)
from rk_agent.openai_errors import __all__ as _moved
from rk_agent.secrets import redact as _redact

__all__ = _moved

warnings.warn(
    "rk_agent.rollouts.openai_errors moved to rk_agent.openai_errors; import from "
    "rk_agent.openai_errors instead, and redact from rk_agent.secrets (the old path will be "
    "removed in a later release)",
    DeprecationWarning,
    stacklevel=2,
)


def redact(text: str, key: str) -> str:
    """Deprecated: ``text`` with ``key`` replaced by ``***``; use ``rk_agent.secrets.redact(text,
    [key])``."""
    return _redact(text, [key])
