"""Whether a run is this user's own: a per-user key signs every run config rk-agent writes.

A run folder is data, and it may come from anywhere: a colleague's upload, a hand-made folder.
Its config can name files, commands, URLs and environment variables
(`rk_agent.runs.run_wants`), so the commands that build a run again from its config
(``replay``, ``rescore``, ``rollout --fork``, ``rollout --resume``) do so only when the run is
one rk-agent wrote on this machine for this user, or when the user opts in with ``--trust-run``
(`require_trust`); otherwise they refuse in one line that says what the run wanted.

**The proof.** A random 32-byte key, made on first use in rk-agent's cache folder
(``$RK_AGENT_CACHE``, see `rk_agent.policies.local_model.cache_dir`), as ``run-key``: readable
by its owner only (0600), created atomically (written whole under a temporary name, then
linked into place, so two processes that race keep the first key). When rk-agent writes a
run's config it writes beside it ``config.yaml.hmac``: an HMAC-SHA256, under that key, of the
config's exact bytes and of the real path of the run's folder (`sign_config`). Reading a run,
the signature is checked (`is_signed`): a folder made by hand, made on another machine or by
another user, copied or moved to another path, or whose config was edited, does not verify. A
key that another user could read (or that is not a plain file of this user's) vouches for
nothing, and signs nothing.

A training run signs its ``rk_agent_config.yaml`` the same way (`signed_training_env`: its
episodes' environment is trusted when the signed config names that very environment).

Main names: `sign_config`, `is_signed`, `remove_signature`, `signed_training_env`,
`require_trust`, `signature_file`, `key_file`, `KEY_FILE`, `SIGNATURE_SUFFIX`,
`TRAINING_CONFIG_FILE`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import stat
from pathlib import Path

from rk_agent.atomic_file import write_atomic
from rk_agent.errors import UntrustedRunError

__all__ = [
    "KEY_FILE",
    "SIGNATURE_SUFFIX",
    "TRAINING_CONFIG_FILE",
    "is_signed",
    "key_file",
    "remove_signature",
    "require_trust",
    "sign_config",
    "signature_file",
    "signed_training_env",
]

logger = logging.getLogger(__name__)

KEY_FILE = "run-key"
"""The key's file name in rk-agent's cache folder."""
SIGNATURE_SUFFIX = ".hmac"
"""A config's signature is the file of its name with this suffix (``config.yaml.hmac``)."""
TRAINING_CONFIG_FILE = "rk_agent_config.yaml"
"""A training run's config (`rk_agent.trainers.config.save_train_config`)."""

_VERSION = "hmac-sha256-v1"
_DOMAIN = b"rk-agent run config\0"
_KEY_BYTES = 32


def key_file() -> Path:
    """Where this user's key is kept: ``run-key`` in rk-agent's cache folder."""
    from rk_agent.policies.local_model import cache_dir

    return cache_dir() / KEY_FILE


def signature_file(config: str | os.PathLike[str]) -> Path:
    """The signature of a config file: ``config.yaml`` -> ``config.yaml.hmac``."""
    path = Path(config)
    return path.with_name(path.name + SIGNATURE_SUFFIX)


def sign_config(
    config: str | os.PathLike[str], *, folder: str | os.PathLike[str] | None = None
) -> bool:
    """Sign a config rk-agent just wrote, for the run folder it is read in.

    Args:
        config: the config file.
        folder: the run's folder when it will be another than the config's own now (a
            rescore written under a temporary name, then renamed).

    Returns:
        Whether it was signed (not when no usable key can be had: the run is then trusted only
        with ``--trust-run``, and a warning says why).
    """
    path = Path(config)
    key = _key(create=True)
    if key is None:
        return False
    tag = _tag(key, path.read_bytes(), Path(folder) if folder is not None else path.parent)
    write_atomic(signature_file(path), f"{_VERSION} {tag}\n")
    return True


def remove_signature(config: str | os.PathLike[str]) -> None:
    """Remove a config's signature, if any (a config that must not be vouched for)."""
    signature_file(config).unlink(missing_ok=True)


def is_signed(config: str | os.PathLike[str]) -> bool:
    """Whether ``config`` is signed by this user's key, as it is now and where it is now."""
    path = Path(config)
    try:
        version, _, tag = signature_file(path).read_text(encoding="utf-8").strip().partition(" ")
        data = path.read_bytes()
    except (OSError, UnicodeDecodeError):
        return False
    key = _key(create=False)
    if key is None or version != _VERSION:
        return False
    return hmac.compare_digest(tag, _tag(key, data, path.parent))


def signed_training_env(folder: str | os.PathLike[str], env: str) -> bool:
    """Whether ``folder`` is a training run whose signed config names the environment ``env``
    (what its episodes record), so that its episodes' environment is this user's choice."""
    import yaml

    config = Path(folder) / TRAINING_CONFIG_FILE
    if not is_signed(config):
        return False
    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and data.get("env") == env


def require_trust(
    source: str | os.PathLike[str],
    wants: list[str],
    *,
    trust_run: bool,
    signed: bool,
    doing: str,
) -> None:
    """Refuse to build a run that would do ``wants`` unless it is signed or trusted.

    Args:
        source: the run (its folder, or a trajectories file).
        wants: what building it would do (`rk_agent.runs.run_wants`); none: nothing to
            refuse.
        trust_run: the user opted in (``--trust-run``).
        signed: the run's config is signed by this user's key (`is_signed`).
        doing: what the command does with it, for the message (``"replaying it"``).

    Raises:
        UntrustedRunError: it wants something, is not signed and is not trusted.
    """
    if not wants or trust_run or signed:
        return
    raise UntrustedRunError(
        f"{source} is not a run rk-agent wrote on this machine (no valid signature of its "
        f"config by this user's key: it was made elsewhere or by hand, moved, or edited), and "
        f"{doing} would {'; '.join(wants)}. If you trust this run, give --trust-run "
        "(trust_run=True in Python).",
        path=str(source),
        wants=list(wants),
    )


def _tag(key: bytes, data: bytes, folder: Path) -> str:
    """The HMAC of a config's bytes read in ``folder`` (its real path: a link to it is it)."""
    mac = hmac.new(key, _DOMAIN, hashlib.sha256)
    mac.update(os.fsencode(os.path.realpath(folder)) + b"\0")
    mac.update(data)
    return mac.hexdigest()


def _key(*, create: bool) -> bytes | None:
    """This user's key (made first when ``create``); ``None`` when there is none to use."""
    path = key_file()
    key = _read_key(path)
    if key is not None or not create or path.exists():
        return key
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            try:
                os.write(handle, secrets.token_bytes(_KEY_BYTES))
                os.fsync(handle)
            finally:
                os.close(handle)
            with contextlib.suppress(FileExistsError):  # a key made first by another process
                os.link(temporary, path)  # never replaces a file: that key stays
        finally:
            temporary.unlink(missing_ok=True)
    except OSError as exc:
        logger.warning(
            "cannot make the key that marks runs as this user's (%s): %s. Runs written now are "
            "not signed: reading them again needs --trust-run. Set RK_AGENT_CACHE to a folder "
            "you can write.",
            path,
            exc.strerror or exc,
        )
        return None
    return _read_key(path)


def _read_key(path: Path) -> bytes | None:
    """The key in ``path``: a plain file of this user's that nobody else can read, 32 bytes
    long; ``None`` (with a warning for a file that is there but unfit) otherwise."""
    key = b""
    problem: str | None
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:  # a link in its place (ELOOP), no permission
        problem = exc.strerror or str(exc)
    else:
        with os.fdopen(handle, "rb") as file:
            key, problem = file.read(_KEY_BYTES + 1), _unfit(os.fstat(file.fileno()))
        if problem is None and len(key) != _KEY_BYTES:
            problem = f"{len(key)} bytes, not {_KEY_BYTES}"
    if problem is None:
        return key
    logger.warning(
        "%s, the key that marks runs as this user's, is unfit (%s): no run is trusted or signed "
        "by it. Delete it: rk-agent makes a new one (runs signed by the old one then need "
        "--trust-run).",
        path,
        problem,
    )
    return None


def _unfit(status: os.stat_result) -> str | None:
    """Why a key file of this status may not be used (``None``: it may)."""
    if not stat.S_ISREG(status.st_mode):
        return "not a plain file"
    if hasattr(os, "getuid") and status.st_uid != os.getuid():
        return "owned by another user"
    if status.st_mode & 0o077:
        return f"others may read it (mode {stat.S_IMODE(status.st_mode):o})"
    return None
