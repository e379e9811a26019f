"""Retrying HTTP calls: how long the server asked us to wait.

Main names: `retry_after_seconds`.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

__all__ = ["retry_after_seconds"]


def retry_after_seconds(headers: Any) -> float | None:
    """The wait a server asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or as an
    HTTP date. ``None`` when it asks for none (or says something unreadable).

    Example:
        >>> retry_after_seconds({"retry-after": "2"})
        2.0
        >>> retry_after_seconds({"retry-after-ms": "250"})
        0.25
    """
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
