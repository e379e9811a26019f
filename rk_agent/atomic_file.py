"""Writing a small file atomically: a reader sees the old file or the new one, never half.

The text goes to a temporary file beside the target (hidden, named after it and the writing
process), which is then renamed over the target: on POSIX a rename within one folder replaces
the target in one step, so a crash or a kill mid-write leaves the previous file whole (and at
most a stray temporary file, overwritten by that process's next write). Run records, summaries,
provenance and configs are written this way.

Main names: `write_atomic`.

Example:
    >>> from pathlib import Path
    >>> import tempfile
    >>> path = write_atomic(Path(tempfile.mkdtemp()) / "run.json", '{"status": "running"}')
    >>> path.read_text()
    '{"status": "running"}'
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) in one step; its folder is made if missing.

    Writers in several processes (a trainer's ranks) each use a temporary file of their own;
    the last rename wins.

    Returns:
        The file written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(target)
    return target
