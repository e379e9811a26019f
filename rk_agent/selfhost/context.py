"""The part every self-hosting target shares: the reward's files as a directory, and commands.

`render_context` packages the reward exactly as a Fireworks evaluator is packaged
(`rk_agent.fireworks.packaging.package_reward`: the reward's file or package, the files you
include, credential-like files left out with the reason; or Reward Kit's metric folders, an
`EvaluatorPackage` from `package_metric_folders`), but without the vendored copy of rk-agent: a
self-hosted server installs rk-agent instead, as `rk_agent.selfhost.install` decides (the pin
when this version came from a package index, else a wheel of this install under ``wheels/``).
Its ``main.py`` loads the reward, so every target serves ``main.py::REWARD``. `BuildContext.write`
puts the files in a folder; `write_or_show` writes them, or for a dry run lists their names,
sizes and hashes (never their contents), and says how rk-agent is installed and what was left
out. `ignore_file` is the ``.dockerignore`` / ``.gcloudignore`` every target writes, so an image
never takes a ``.env`` that lands in the folder later.

A target then runs some commands (``docker build``, ``gcloud run deploy``, ``sam deploy``). A
`Command` is an argv list (never a shell string) with the secrets it carries;
`run_commands` prints them with the secrets shown as ``***`` and, unless it is a dry run, runs
them with the tool found on ``PATH``.

Main names: `BuildContext`, `render_context`, `write_or_show`, `ignore_file`, `Command`,
`run_commands`, `SelfHostDeployment`, `rk_agent_requirement`, `SERVED_REWARD`.

Example:
    >>> context = render_context("rk_agent.rewards.builtin.length:length_reward",
    ...                          rk_agent="rk-agent==0.1.0")
    >>> context.requirements[0], "main.py" in context.files
    ('rk-agent==0.1.0', True)
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rk_agent import __version__
from rk_agent.errors import ConfigError, EndpointError
from rk_agent.fireworks.secret_files import IGNORE_PATTERNS, LeftOut, reason_by_name
from rk_agent.rewards.registry import RewardLike, get_reward_function
from rk_agent.secrets import REDACTED, secret_values
from rk_agent.selfhost.install import OVERRIDES, rk_agent_install

if TYPE_CHECKING:
    from rk_agent.fireworks.packaging import EvaluatorPackage

__all__ = [
    "SERVED_REWARD",
    "BuildContext",
    "Command",
    "SelfHostDeployment",
    "ignore_file",
    "reject_unknown",
    "render_context",
    "reward_name",
    "rk_agent_requirement",
    "run_commands",
    "write_or_show",
]

SERVED_REWARD = "main.py::REWARD"
"""What every generated server serves: the reward that the context's ``main.py`` loads."""

_BASE = "pydantic>=2.7"  # the vendored copy's only need; rk-agent brings its own


def rk_agent_requirement(extra: str = "") -> str:
    """The pinned requirement for this rk-agent, e.g. ``rk-agent==0.1.0`` (``[lambda]`` extra)."""
    return f"rk-agent{f'[{extra}]' if extra else ''}=={__version__}"


@dataclass(frozen=True)
class BuildContext:
    """A reward's files, ready to become a container image or a function package.

    Attributes:
        reward_name: the reward's name.
        files: ``{relative path: text}``: ``main.py``, ``requirements.txt``, ``overrides.txt``,
            the reward's files and whatever the target added (a ``Dockerfile``, ...).
        requirements: the lines of ``requirements.txt`` (rk-agent first).
        left_out: files of included folders that hold credentials and were not packed.
        binaries: ``{relative path: bytes}``: a wheel of rk-agent, when the image installs one.
        install: how the image installs rk-agent, one sentence (`rk_agent.selfhost.install`).
    """

    reward_name: str
    files: dict[str, str] = field(repr=False)
    requirements: tuple[str, ...]
    left_out: tuple[LeftOut, ...] = ()
    binaries: dict[str, bytes] = field(default_factory=dict, repr=False)
    install: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        """Every file's relative path, sorted."""
        return tuple(sorted({*self.files, *self.binaries}))

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
            self.reward_name, {**self.files, **extra}, self.requirements, self.left_out,
            self.binaries, self.install,
        )  # fmt: skip

    def data(self, name: str) -> bytes:
        """The bytes of the file ``name``."""
        return self.binaries[name] if name in self.binaries else self.files[name].encode()

    def listing(self) -> list[str]:
        """One line per file: its name, size and SHA-256 prefix (never its contents)."""
        lines = []
        for name in self.names:
            data = self.data(name)
            digest = hashlib.sha256(data).hexdigest()[:16]
            lines.append(f"{name}  {len(data):,} bytes  sha256:{digest}")
        return lines

    def write(self, directory: str | Path) -> Path:
        """Write every file under ``directory`` (created if needed); return its path.

        Raises:
            ConfigError: ``directory`` exists and holds files this context does not write
                (a folder of yours is never mixed with a build context).
        """
        root = Path(directory)
        names = set(self.names)
        if root.exists():
            foreign = sorted(
                p.relative_to(root).as_posix()
                for p in root.rglob("*")
                if (p.is_file() or p.is_symlink())
                and p.relative_to(root).as_posix() not in names
                and "__pycache__" not in p.parts
            )
            if foreign:
                raise ConfigError(
                    f"expected --output {root} to be empty or an earlier build context of this "
                    f"reward, but it holds other files ({', '.join(foreign[:3])}"
                    f"{', ...' if len(foreign) > 3 else ''}). Pick a new folder."
                )
        for name in sorted(names):
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(self.data(name))
            if name.endswith(".sh"):
                path.chmod(0o755)
        return root


def reward_name(reward: RewardLike | EvaluatorPackage) -> str:
    """The name of a reward, or of the reward a package (metric folders) holds."""
    from rk_agent.fireworks.packaging import EvaluatorPackage

    if isinstance(reward, EvaluatorPackage):
        return reward.reward_name
    return get_reward_function(reward).reward_spec.name


def render_context(
    reward: RewardLike | EvaluatorPackage,
    *,
    requirements: Sequence[str] = (),
    include: Iterable[str | Path] = (),
    rk_agent: str | None = None,
    extra: str = "",
) -> BuildContext:
    """The reward's files for a self-hosted server: its source, ``main.py``, requirements.

    Args:
        reward: a decorated function, a registered name, ``file.py::fn`` or ``module:fn``; or
            an `EvaluatorPackage` already made (`package_metric_folders` for metric folders).
        requirements: pip requirements beyond the reward's own.
        include: more files or folders the reward's file imports.
        rk_agent: the requirement line that installs rk-agent (default: this version pinned
            when a package index has it, else a wheel of this install placed in the context;
            `rk_agent.selfhost.install`); e.g. a wheel's URL.
        extra: an rk-agent extra the target needs (``"lambda"``).

    Raises:
        ConfigError: as `rk_agent.fireworks.packaging.package_reward` (no source file, an
            included path that does not exist, a symlink out of the project, a named file
            holding a credential), ``include`` beside a package, no way to install rk-agent, or
            a reward whose file cannot be imported in a fresh interpreter
            (`EvaluatorPackage.check_imports`).
    """
    from rk_agent.fireworks.packaging import EvaluatorPackage, package_reward

    if isinstance(reward, EvaluatorPackage):
        if tuple(include):
            raise ConfigError(
                "--include applies to a reward file, not to --metrics-folders (each folder is "
                "packed whole). Move the file into the metric folder instead."
            )
        package = reward
    else:
        package = package_reward(reward, requirements=requirements, include=include)
    package.check_imports()  # as a Fireworks deploy does: a reward that cannot import never ships
    files = package.user_files()  # everything but the vendored rk_agent/ copy
    install = rk_agent_install(extra, given=rk_agent)
    needed = [install.requirement, *package.requirements, *requirements]
    reqs = tuple(dict.fromkeys(r.strip() for r in needed if r.strip() and r.strip() != _BASE))
    files["requirements.txt"] = "".join(f"{line}\n" for line in reqs)
    files["overrides.txt"] = "".join(f"{line}\n" for line in OVERRIDES)
    binaries = {install.wheel_name: install.wheel} if install.wheel_name else {}
    return BuildContext(package.reward_name, files, reqs, package.left_out, binaries, install.how)


def ignore_file(context: BuildContext, *, docker: bool) -> str:
    """A ``.dockerignore`` (``docker=True``) or ``.gcloudignore`` for ``context``.

    It leaves out every credential-like name (`rk_agent.fireworks.secret_files`) in any
    folder, except the files you named yourself and that were packed on purpose.
    """
    prefix = "**/" if docker else ""  # .dockerignore matches from the root; gitignore anywhere
    lines = [
        f"# Credential-like files never go into the image. Generated by rk-agent {__version__}.",
        f"{prefix}__pycache__",
        f"{prefix}*.pyc",
        *(f"{prefix}{pattern.rstrip('/')}" for pattern in IGNORE_PATTERNS),
    ]
    lines += [f"!{name}" for name in context.names if reason_by_name(name) is not None]
    return "".join(f"{line}\n" for line in lines)


def write_or_show(
    context: BuildContext,
    directory: Path,
    *,
    dry_run: bool,
    echo: Callable[[str], None],
    what: str = "the build context",
) -> None:
    """Write the context to ``directory`` (or, for a dry run, list its files); say how
    rk-agent is installed and which files were left out, and why."""
    if dry_run:
        echo(f"Would write {what} for reward {context.reward_name!r} to {directory}/:")
        for line in context.listing():
            echo(f"  {line}")
    else:
        context.write(directory)
        echo(f"Wrote {what} for reward {context.reward_name!r} to {directory}/.")
    if context.install:
        echo(context.install)
    for left in context.left_out:
        echo(f"Left out: {left}")
    if context.left_out:
        echo(
            "(Name a file with --include on its own to pack it anyway; a file holding a key is "
            "never packed.)"
        )


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
