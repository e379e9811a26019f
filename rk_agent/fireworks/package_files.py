"""The user's files a deploy packs: folders walked with symlinks resolved, credentials left out.

`folder_files` walks a folder (an ``--include`` folder, a metric folder): every file is read
under its own name (a symlink keeps the link's name, never its target's), a symlink that leads
out of the project is refused (`ConfigError`, one line), and credential-like files are left out
by name or by content (`rk_agent.fireworks.secret_files`), each listed with why. `named_file`
reads a file you named yourself (the reward's file, ``--include FILE``): its name is not
judged (you asked for it), but a file holding a credential is refused, since a deploy would
ship the key.

Main names: `folder_files`, `named_file`, `refuse_credentials`, `SKIP_DIRS`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from rk_agent.errors import ConfigError
from rk_agent.fireworks.secret_files import LeftOut, reason_by_content, reason_by_name

__all__ = ["SKIP_DIRS", "folder_files", "named_file", "read_text", "refuse_credentials"]

SKIP_DIRS = frozenset(
    {"__pycache__", ".git", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)
"""Folders never packed."""


def folder_files(
    folder: Path, project: Sequence[Path], known: Mapping[str, str]
) -> tuple[dict[str, str], list[LeftOut]]:
    """Every file of ``folder``: ``{name relative to folder: text}``, and what was left out.

    Args:
        folder: the folder to pack.
        project: the folders a symlink may lead into (the folder itself is always one).
        known: secret values to look for (`rk_agent.fireworks.secret_files.known_secrets`).

    Raises:
        ConfigError: a symlink leads outside ``project`` or nowhere, or a file cannot be read.
    """
    roots = [folder.resolve(), *(p.resolve() for p in project)]
    files: dict[str, str] = {}
    left_out: list[LeftOut] = []
    for rel, path, real in sorted(_walk(folder, roots)):
        reason = reason_by_name(rel)
        if reason is None and real.name != path.name:
            target = reason_by_name(real.name)
            reason = f"a link to {real.name}, {target}" if target else None
        if reason is None:
            text = read_text(path)
            reason = reason_by_content(text, known, rel)
            if reason is None:
                files[rel] = text
                continue
        left_out.append(LeftOut(str(path), reason))
    return files, left_out


def named_file(path: Path, known: Mapping[str, str]) -> str:
    """The text of a file you named; refused when it holds a credential.

    Raises:
        ConfigError: the file holds a credential (`refuse_credentials`), or cannot be read.
    """
    text = read_text(path)
    refuse_credentials(path, text, known)
    return text


def refuse_credentials(path: Path, text: str, known: Mapping[str, str]) -> None:
    """Refuse a file you named that holds a credential.

    Raises:
        ConfigError: ``text`` holds a key format or a known secret's value (the message says
            which and on what line, never the value).
    """
    reason = reason_by_content(text, known, path.name)
    if reason is not None:
        raise ConfigError(
            f"expected {path} to hold no credentials, but it {reason}: a deploy would ship it. "
            "Read the key from an environment variable where the reward runs instead."
        )


def read_text(path: Path) -> str:
    """A packed file's text.

    Raises:
        ConfigError: it cannot be read as UTF-8 text.
    """
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path} for the evaluator package: {exc}") from exc


def _walk(folder: Path, roots: Sequence[Path]) -> Iterator[tuple[str, Path, Path]]:
    """``(name relative to folder, path as found, resolved path)`` of every file."""
    seen: set[Path] = set()

    def visit(directory: Path, prefix: str) -> Iterator[tuple[str, Path, Path]]:
        real_dir = directory.resolve()
        if real_dir in seen:  # a link back up the tree
            return
        seen.add(real_dir)
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            path = Path(entry.path)
            rel = f"{prefix}{entry.name}"
            real = _inside(path, roots, folder) if entry.is_symlink() else path
            if real.is_dir():
                if entry.name not in SKIP_DIRS:
                    yield from visit(path, f"{rel}/")
            elif real.is_file():
                yield rel, path, real

    yield from visit(folder, "")


def _inside(link: Path, roots: Sequence[Path], folder: Path) -> Path:
    """Where ``link`` leads, refused unless inside one of ``roots``."""
    real = link.resolve()
    if not real.exists():
        raise ConfigError(
            f"expected {link} to lead to a file, but it is a symlink to {real}, which does not "
            "exist. Remove the link or point it at a file."
        )
    if not any(real.is_relative_to(root) for root in roots):
        raise ConfigError(
            f"expected every file of {folder} inside the project ({roots[-1]}), but {link} is a "
            f"symlink to {real}, outside it. Copy the file into the project, or remove the link."
        )
    return real
