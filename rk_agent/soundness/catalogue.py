"""The catalogue: every built-in probe, and which are played against a kind.

Main names: `catalogue`.
"""

from __future__ import annotations

from rk_agent.soundness.code_probes import CODE_PROBES
from rk_agent.soundness.probes import GENERIC_PROBES, MATH_PROBES, Probe, applies
from rk_agent.soundness.tool_probes import TOOL_PROBES

__all__ = ["catalogue"]


def catalogue(kind: str = "generic") -> list[Probe]:
    """The built-in probes played against a ``kind`` (one of `rk_agent.soundness.probes.KINDS`).

    Example:
        >>> [p.name for p in catalogue("math")][-2:]
        ['unit_trick', 'hedge_range']
    """
    every: list[Probe] = [*GENERIC_PROBES, *MATH_PROBES, *CODE_PROBES, *TOOL_PROBES]
    return [p for p in every if applies(p, kind)]
