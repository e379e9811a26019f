"""The part every self-hosting target shares: the reward's files as a directory, and commands.

`render_context` packages the reward exactly as a Fireworks evaluator is packaged
(`rk_agent.fireworks.packaging.package_reward`: the reward's file or package, the files you
include, secret-looking files left out), but without the vendored copy of rk-agent: a
self-hosted server installs a pinned ``rk-agent`` instead. Its ``main.py`` loads the reward, so
every target serves ``main.py::REWARD``. `BuildContext.write` puts the files in a folder.

A target then runs some commands (``docker build``, ``gcloud run deploy``, ``sam deploy``). A
`Command` is an argv list (never a shell string) with the secrets it carries;
`run_commands` prints them with the secrets shown as ``***`` and, unless it is a dry run, runs
them with the tool found on ``PATH``.

Main names: `BuildContext`, `render_context`, `Command`, `run_commands`, `SelfHostDeployment`,
`rk_agent_requirement`, `SERVED_REWARD`.

Example:
    >>> context = render_context("rk_agent.rewards.builtin.length:length_reward")
    >>> context.requirements[0], "main.py" in context.files
    ('rk-agent==0.1.0', True)
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rk_agent import __version__
from rk_agent.errors import ConfigError, EndpointError
from rk_agent.rewards.registry import RewardLike
from rk_agent.secrets import REDACTED, redact, secret_values

__all__ = [
    "SERVED_REWARD",
    "BuildContext",
    "Command",
    "SelfHostDeployment",
    "reject_unknown",
    "render_context",
    "rk_agent_requirement",
    "run_commands",
]

SERVED_REWARD = "main.py::REWARD"
"""What every generated server serves: the reward that the context's ``main.py`` loads."""

_BASE = "pydantic>=2.7"  # the vendored copy's only need; a pinned rk-agent brings its own


def rk_agent_requirement(extra: str = "") -> str:
    """The pinned requirement for this rk-agent, e.g. ``rk-agent==0.1.0`` (``[lambda]`` extra)."""
    return f"rk-agent{f'[{extra}]' if extra else ''}=={__version__}"


@dataclass(frozen=True)
class BuildContext:
    """A reward's files, ready to become a container image or a function package.

    Attributes:
        reward_name: the reward's name.
        files: ``{relative path: text}``: ``main.py``, ``requirements.txt``, the reward's files
            and whatever the target added (a ``Dockerfile``, ``start.sh``, ...).
        requirements: the lines of ``requirements.txt`` (a pinned rk-agent first).
        left_out: files of included folders that look like secrets and were not packed.
    """

    reward_name: str
    files: dict[str, str] = field(repr=False)
    requirements: tuple[str, ...]
    left_out: tuple[str, ...] = ()

    def with_files(self, extra: dict[str, str]) -> BuildContext:
        """A copy with a target's ``extra`` files added.

        Raises:
            ConfigError: one of the reward's files has the name of one of them.
        """
        taken = sorted(set(extra) & set(self.files))
        if taken:
            raise ConfigError(
                f"expected the reward's files to leave {', '.join(taken)} to the build "
                f"context, but reward {self.reward_name!r} brings a file of that name. Rename "
                "it (or move it into a folder)."
            )
        return BuildContext(
            self.reward_name, {**self.files, **extra}, self.requirements, self.left_out
        )

    def write(self, directory: str | Path) -> Path:
        """Write every file under ``directory`` (created if needed); return its path.

        Raises:
            ConfigError: ``directory`` exists and holds files this context does not write
                (a folder of yours is never mixed with a build context).
        """
        root = Path(directory)
        if root.exists():
            foreign = sorted(
                p.relative_to(root).as_posix()
                for p in root.rglob("*")
                if p.is_file()
                and p.relative_to(root).as_posix() not in self.files
                and "__pycache__" not in p.parts
            )
            if foreign:
                raise ConfigError(
                    f"expected --output {root} to be empty or an earlier build context of this "
                    f"reward, but it holds other files ({', '.join(foreign[:3])}"
                    f"{', ...' if len(foreign) > 3 else ''}). Pick a new folder."
                )
        for name, text in sorted(self.files.items()):
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            if name.endswith(".sh"):
                path.chmod(0o755)
        return root


def render_context(
    reward: RewardLike,
    *,
    requirements: Sequence[str] = (),
    include: Iterable[str | Path] = (),
    rk_agent: str | None = None,
) -> BuildContext:
    """The reward's files for a self-hosted server: its source, ``main.py``, requirements.

    Args:
        reward: a decorated function, a registered name, ``file.py::fn`` or ``module:fn``.
        requirements: pip requirements beyond the reward's own.
        include: more files or folders the reward's file imports.
        rk_agent: the requirement line that installs rk-agent (default: this version, pinned,
            `rk_agent_requirement`); e.g. a wheel's path or a VCS URL.

    Raises:
        ConfigError: as `rk_agent.fireworks.packaging.package_reward` (no source file, an
            included path that does not exist).
    """
    from rk_agent.fireworks.packaging import package_reward

    package = package_reward(reward, requirements=requirements, include=include)
    files = package.user_files()  # everything but the vendored rk_agent/ copy
    pinned = rk_agent or rk_agent_requirement()
    reqs = tuple(dict.fromkeys([pinned, *(r for r in package.requirements if r != _BASE)]))
    files["requirements.txt"] = "".join(f"{line}\n" for line in reqs)
    return BuildContext(package.reward_name, files, reqs, package.left_out)


@dataclass(frozen=True)
class Command:
    """One command a target runs: an argv list and the secret values inside it.

    Attributes:
        argv: the program and its arguments (run without a shell).
        secrets: values in ``argv`` that must never be shown (replaced by ``***``).
        cwd: the working directory, when it matters.
    """

    argv: tuple[str, ...]
    secrets: tuple[str, ...] = field(default=(), repr=False)
    cwd: str | None = None

    def shown(self) -> str:
        """The command as a shell line, secrets replaced by ``***``.

        The secrets are this command's and any secret found in the environment
        (`rk_agent.secrets.secret_values`). Names are left alone: a secret's *name*
        (``--set-secrets=KEY=reward-key:latest``) is not its value.

        Example:
            >>> Command(("gcloud", "run", "deploy", "--set-env-vars=KEY=s3cret-value"),
            ...         ("s3cret-value",)).shown()
            'gcloud run deploy --set-env-vars=KEY=***'
        """
        import shlex

        line = shlex.join(self.argv)
        if self.cwd:
            line = f"cd {shlex.quote(self.cwd)} && {line}"
        for secret in sorted({*self.secrets, *secret_values()}, key=len, reverse=True):
            if secret:
                line = line.replace(secret, REDACTED)
        return line


@dataclass(frozen=True)
class SelfHostDeployment:
    """What a self-hosting target did.

    Attributes:
        target: ``"docker"``, ``"gcp-cloud-run"`` or ``"aws-lambda"``.
        directory: the folder holding the generated files.
        files: the generated files' relative paths.
        commands: the commands, as shown (secrets as ``***``), in order.
        ran: whether the commands were run (false for a dry run, or a target that only writes).
        next_steps: what to run next, as shown (e.g. ``docker run ...``).
    """

    target: str
    directory: Path
    files: tuple[str, ...]
    commands: tuple[str, ...] = ()
    ran: bool = False
    next_steps: tuple[str, ...] = ()


def run_commands(
    commands: Sequence[Command],
    *,
    dry_run: bool,
    echo: Callable[[str], None] = print,
    install_hint: str = "",
) -> None:
    """Print each command (secrets as ``***``) and, unless ``dry_run``, run it.

    Raises:
        ConfigError: a command's program is not on ``PATH`` (checked for all before any runs).
        EndpointError: a command exited with a non-zero status (its status and the command).
    """
    if not dry_run:
        for command in commands:
            if shutil.which(command.argv[0]) is None:
                raise ConfigError(
                    f"expected `{command.argv[0]}` on PATH to run `{command.shown()}`, but it is "
                    f"not installed. {install_hint}Or pass --dry-run to print the commands and "
                    "files without running them."
                )
    for command in commands:
        echo(f"$ {command.shown()}")
        if dry_run:
            continue
        program = shutil.which(command.argv[0]) or command.argv[0]
        done = subprocess.run([program, *command.argv[1:]], cwd=command.cwd, check=False)
        if done.returncode != 0:
            raise EndpointError(
                f"`{command.shown()}` exited with status {done.returncode}; its output above "
                "says why. Fix that and deploy again (the generated files are kept)."
            )


def show_files(
    context: BuildContext, directory: Path, echo: Callable[[str], None], secrets: Sequence[str] = ()
) -> None:
    """Print every generated file (for ``--dry-run``), secrets as ``***``."""
    for name in sorted(context.files):
        echo(f"--- {directory / name}")
        echo(str(redact(context.files[name], list(secrets))).rstrip("\n"))


def reject_unknown(unknown: dict[str, Any], target: str, known: Sequence[str]) -> None:
    """Refuse an option this target does not take (a misspelt ``outptu=`` must not vanish)."""
    if not unknown:
        return
    from rk_agent.errors import did_you_mean

    name = sorted(unknown)[0]
    raise ConfigError(
        f"the {target!r} deploy target takes no option {name!r}; it takes "
        f"{', '.join(known)}, requirements, include and rk_agent.{did_you_mean(name, known)}"
    )
