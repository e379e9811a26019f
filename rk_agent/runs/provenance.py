"""What the model saw: a run's provenance, recorded once per run and per episode where it differs.

A rollout run writes ``provenance.json`` (`RunProvenance`) into its folder before the first
episode: the model (the policy's name and kind, the model id asked for, the server's URL, a
fingerprint of local weights, a SHA-256 of the chat template), the tool-call format, every tool
schema offered (the environment's own and those of MCP servers, with where each outside tool
comes from), the sampling settings, the environment (its name, class, version, arguments, task
file, rewards, turn limit, MCP servers), the seed, and the versions of rk-agent, TRL,
transformers and torch. Two fields are known only once the model answers: the model name the
server answers with (``served_model``) and, for a policy that tries native tool calling until
the server refuses it, the tool-call format; the first episode that knows them fills them in.

An episode records an `EpisodeProvenance` (``Trajectory.provenance``) only where it saw
something else than the run's record: other tool schemas, another tool-call format (a server
that refused native tools mid-run), another served model (a load balancer in front of two
deployments). An environment whose tools differ per task or change between turns
(``ChatEnv.tool_scope``) records in each episode the tools of its first turn and each change
after it (`ToolChange`: from that turn on, these tools), also outside a rollout run (a training
run's episodes), so that every reader renders each turn with the tools it offered
(`EpisodeProvenance.tools_at`); the run's record then says ``tool_scope`` and holds the tools
the environment offers before any episode. Files written before this load as they were: no
changes, the same tools on every turn. The engine records every episode's in full
(`episode_provenance`) and the run directory trims it against the run's
(`RunProvenance.absorb`) as it appends the episode.

Nothing secret goes in: URLs and arguments are redacted (`rk_agent.secrets`), and of an MCP
server's ``env`` and ``headers`` only the names are kept.

The weights' fingerprint (`weights_fingerprint`) is cheap, not a full hash: SHA-256 over each
weight file's name, size, first and last MiB (``*.safetensors``, ``*.bin``), and the whole
``config.json``. Two checkpoints that differ only in the middle of a file would share it; a full
hash of a 16 GB model takes a minute where this takes milliseconds.

Main names: `RunProvenance`, `ModelRecord`, `EnvRecord`, `EpisodeProvenance`, `ToolChange`,
`run_provenance`,
`episode_provenance`, `turn_tool_call_format`, `weights_fingerprint`, `template_sha256`,
`package_versions`, `PROVENANCE_FILE`.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Iterable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from rk_agent.secrets import redact, redact_argv
from rk_agent.tool_calls import get_tool_call_format

if TYPE_CHECKING:
    from rk_agent.envs.env_setup import EnvFactory
    from rk_agent.envs.tool_source import ToolServers
    from rk_agent.policies.policy import Policy, PolicyOutput
    from rk_agent.runs.config import RolloutConfig

__all__ = [
    "NATIVE",
    "PROVENANCE_FILE",
    "VERSIONED_PACKAGES",
    "EnvRecord",
    "EpisodeProvenance",
    "ModelRecord",
    "ResumeRecord",
    "RunProvenance",
    "ToolChange",
    "episode_provenance",
    "package_versions",
    "policy_tool_call_format",
    "run_provenance",
    "template_sha256",
    "turn_tool_call_format",
    "weights_fingerprint",
]

PROVENANCE_FILE = "provenance.json"
"""A run's `RunProvenance`."""

VERSIONED_PACKAGES = ("rk-agent", "trl", "transformers", "torch", "mcp")
"""The packages whose versions a run records (read from their metadata: nothing is imported)."""

NATIVE = "native"
"""The tool-call format of tools sent as the API's ``tools`` (or to the chat template's)."""

_MIB = 1 << 20
_WEIGHT_PATTERNS = ("*.safetensors", "*.bin")


class ModelRecord(BaseModel):
    """Which model answered.

    Attributes:
        name: the policy's name (what each trajectory's ``model`` says).
        policy: the policy's class (``OpenAIPolicy``, ``HFPolicy``, ``VLLMPolicy``, ...).
        model: the model id asked for, or the local folder loaded.
        base_url: the server's URL (served models), secrets redacted.
        served_model: the ``model`` the server answered with (its first answer).
        weights_sha256: `weights_fingerprint` of a local model's folder.
        chat_template_sha256: `template_sha256` of the tokenizer's chat template, where the
            policy renders prompts itself (local models, `VLLMPolicy`).
    """

    model_config = ConfigDict(extra="allow")

    name: str
    policy: str
    model: str | None = None
    base_url: str | None = None
    served_model: str | None = None
    weights_sha256: str | None = None
    chat_template_sha256: str | None = None


class EnvRecord(BaseModel):
    """Which environment was played, and how it was set up.

    Attributes:
        name: its registered name (each trajectory's ``env``).
        env_class: ``module:QualifiedName`` of its class.
        version: the class's ``version`` attribute, when it has one (otherwise the rk-agent
            version in `RunProvenance.versions` stands for the built-in environments').
        kwargs: its constructor arguments from the config, secrets redacted.
        tasks: the task file, if any.
        rewards: episode rewards replacing the environment's.
        max_turns: the turn limit of each episode.
        mcp_servers: the MCP servers whose tools it offered: transport, command and arguments
            or URL (redacted), and only the names of ``env`` variables and ``headers``.
        tool_scope: ``"task"`` or ``"turn"`` when its tools differ per task or change between
            turns (each episode then records its own); ``None``: the same in every episode.
    """

    model_config = ConfigDict(extra="allow")

    name: str
    env_class: str
    version: str | None = None
    kwargs: dict[str, Any] = Field(default_factory=dict)
    tasks: str | None = None
    rewards: list[str] = Field(default_factory=list)
    max_turns: int | None = None
    mcp_servers: dict[str, dict[str, Any]] | None = None
    tool_scope: str | None = None


class ToolChange(BaseModel):
    """The tools an episode offered from one of its turns on, where they changed.

    Attributes:
        turn: the index of the first turn offered them.
        tools: the tool schemas offered from that turn on.
    """

    turn: int
    tools: list[dict[str, Any]] = Field(default_factory=list)


class EpisodeProvenance(BaseModel):
    """What one episode saw where it differs from its run's `RunProvenance` (``None``: the same).

    In a trajectory just played (in memory) every field is set; on disk only those that differ.

    Attributes:
        tools: the tool schemas offered.
        tool_call_format: ``"native"`` or the text format's name (``"hermes"``); the last
            turn's when they changed within the episode.
        served_model: the ``model`` the server answered with (the first turn's).
        tool_changes: the turns after the first on which the tools offered changed, in order
            (``None``: none); ``tools`` are the first turn's.
    """

    tools: list[dict[str, Any]] | None = None
    tool_call_format: str | None = None
    served_model: str | None = None
    tool_changes: list[ToolChange] | None = None

    def tools_at(self, turn: int, default: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tool schemas offered on turn ``turn``: the first turn's (``tools``, else
        ``default``, the run's), then each change up to that turn.

        Example:
            >>> seen = EpisodeProvenance(tools=[{"n": 1}], tool_changes=[ToolChange(turn=2,
            ...     tools=[{"n": 1}, {"n": 2}])])
            >>> len(seen.tools_at(1, [])), len(seen.tools_at(2, [])), len(seen.tools_at(5, []))
            (1, 2, 2)
        """
        offered = self.tools if self.tools is not None else default
        for change in self.tool_changes or ():
            if change.turn > turn:
                break
            offered = change.tools
        return offered


class ResumeRecord(BaseModel):
    """One ``--resume`` of the run: when, how many episodes were there, what changed."""

    at: datetime
    episodes_before: int
    versions: dict[str, str] = Field(default_factory=dict)
    """The versions that differed from the run's (``{}``: none)."""

    @field_serializer("at")
    def _iso(self, value: datetime) -> str:
        return value.isoformat(timespec="seconds")


class RunProvenance(BaseModel):
    """``provenance.json``: what the model of a run saw (see the module docstring).

    Attributes:
        recorded_at: when it was written (UTC).
        episodes_before: episodes the run already held when it was recorded (a run made before
            rk-agent recorded provenance and then resumed; 0 for every new run).
        model: which model answered (`ModelRecord`).
        tool_call_format: ``"native"`` (the API's ``tools``, or the chat template's) or the text
            format's name; ``None`` when no tools are offered or the policy passes them as
            objects (a scripted policy, the reference solver).
        tools: every tool schema offered, in order.
        tool_origins: where each tool that is not the environment's own comes from
            (``{"echo": "MCP server 'kb'"}``).
        env: the environment (`EnvRecord`).
        sampling: the sampling settings.
        seed: task ``i`` is played with seed ``seed + i`` (a per-request ``sampling.seed`` gets
            the sample's index added).
        versions: Python's and `VERSIONED_PACKAGES`' (those installed).
        resumed: each ``--resume``.
    """

    model_config = ConfigDict(extra="allow")

    recorded_at: datetime
    episodes_before: int = 0
    model: ModelRecord
    tool_call_format: str | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_origins: dict[str, str] = Field(default_factory=dict)
    env: EnvRecord
    sampling: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    versions: dict[str, str] = Field(default_factory=dict)
    resumed: list[ResumeRecord] = Field(default_factory=list)

    @field_serializer("recorded_at")
    def _iso(self, value: datetime) -> str:
        return value.isoformat(timespec="seconds")

    def absorb(self, seen: EpisodeProvenance) -> tuple[EpisodeProvenance | None, bool]:
        """An episode's record trimmed to what differs from the run's, and whether the run's
        record changed (its first answer told the served model or the tool-call format).

        Example:
            >>> run = RunProvenance(recorded_at=datetime.now(UTC), model=ModelRecord(
            ...     name="m", policy="OpenAIPolicy"), env=EnvRecord(name="guess", env_class="x"))
            >>> run.absorb(EpisodeProvenance(tools=[], served_model="m-v2"))
            (None, True)
            >>> run.absorb(EpisodeProvenance(tools=[], served_model="m-v3"))[0].served_model
            'm-v3'
        """
        changed = False
        if self.model.served_model is None and seen.served_model is not None:
            self.model.served_model, changed = seen.served_model, True
        if self.tool_call_format is None and seen.tool_call_format is not None:
            self.tool_call_format, changed = seen.tool_call_format, True
        differs = EpisodeProvenance(
            tools=seen.tools if seen.tools is not None and seen.tools != self.tools else None,
            tool_call_format=_unless(seen.tool_call_format, self.tool_call_format),
            served_model=_unless(seen.served_model, self.model.served_model),
            tool_changes=seen.tool_changes or None,
        )
        kept = differs if differs.model_dump(exclude_none=True) else None
        return kept, changed

    def episode_tools(self, episode: EpisodeProvenance | None) -> list[dict[str, Any]]:
        """The tool schemas an episode was offered (its own record, else the run's)."""
        if episode is not None and episode.tools is not None:
            return episode.tools
        return self.tools

    def turn_tools(self, episode: EpisodeProvenance | None, turn: int) -> list[dict[str, Any]]:
        """The tool schemas an episode was offered on turn ``turn`` (its own record, else the
        run's)."""
        return episode.tools_at(turn, self.tools) if episode is not None else self.tools

    def episode_format(self, episode: EpisodeProvenance | None) -> str | None:
        """The tool-call format an episode was played with (its own record, else the run's)."""
        if episode is not None and episode.tool_call_format is not None:
            return episode.tool_call_format
        return self.tool_call_format

    def resume_problems(self, now: RunProvenance) -> list[str]:
        """Why a resumed run would show its model something else than the run's first episodes
        saw (``[]``: nothing): other tools, another model, other weights or chat template."""
        problems = []
        tools = _tool_changes(self.tools, now.tools)
        if tools:
            problems.append(f"other tools ({tools})")
        for field, label in (
            ("name", "another model"),
            ("model", "another model id"),
            ("weights_sha256", "other weights (fingerprint)"),
            ("chat_template_sha256", "another chat template (sha256)"),
        ):
            was, is_now = getattr(self.model, field), getattr(now.model, field)
            if was != is_now:
                problems.append(f"{label}: {_short(was)} then, {_short(is_now)} now")
        fixed = now.tool_call_format
        if fixed is not None and self.tool_call_format not in (None, fixed):
            problems.append(f"another tool-call format: {self.tool_call_format} then, {fixed} now")
        return problems

    def note_resume(self, now: RunProvenance, episodes_before: int) -> str:
        """Add a `ResumeRecord` for a resume that would show ``now``; the package versions that
        changed since, in words (``""``: none)."""
        changed = {k: v for k, v in now.versions.items() if self.versions.get(k) != v}
        self.resumed.append(
            ResumeRecord(at=now.recorded_at, episodes_before=episodes_before, versions=changed)
        )
        return ", ".join(f"{k} {self.versions.get(k, '-')} -> {v}" for k, v in changed.items())

    def describe(self, differing: int = 0) -> list[str]:
        """The lines of ``rk-agent show``'s "what the model saw" block.

        Args:
            differing: how many episodes recorded something else than the run's record.
        """
        model = self.model
        where = f" at {model.base_url}" if model.base_url else ""
        names = _tool_names(self.tools)
        versions = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        sampling = ", ".join(f"{k} {v}" for k, v in self.sampling.items() if v is not None)
        lines = [
            f"model        {model.name} ({model.policy}{where})",
            f"served as    {model.served_model or '-'}",
            f"weights      {_short(model.weights_sha256)} (fingerprint); chat template "
            f"{_short(model.chat_template_sha256)} (sha256)",
            f"tool calls   {self.tool_call_format or '-'}",
            f"tools        {len(names)}{self._origins(names)}: {', '.join(names) or '-'}"
            + (
                f" (before any episode; they differ per {self.env.tool_scope}: each episode "
                "records its own)"
                if self.env.tool_scope
                else ""
            ),
            f"sampling     {sampling}; seed {self.seed} (task i: seed + i)",
            f"env          {self.env.name} ({self.env.env_class}"
            + (f", version {self.env.version}" if self.env.version else "")
            + ")",
            f"versions     {versions}",
        ]
        if self.episodes_before:
            lines.append(
                f"note         recorded on a resume: the first {self.episodes_before} episodes "
                "were played before rk-agent recorded this"
            )
        if differing:
            lines.append(
                f"note         {differing} episode(s) saw something else: see their "
                "`provenance` in trajectories.jsonl"
            )
        return lines

    def _origins(self, names: list[str]) -> str:
        """`` (echo, add from MCP server 'kb')`` (``all from ...``); ``""`` when every tool is the
        environment's own."""
        groups: dict[str, list[str]] = {}
        for name in names:
            if name in self.tool_origins:
                groups.setdefault(self.tool_origins[name], []).append(name)
        parts = [
            f"{'all' if len(group) == len(names) else ', '.join(group)} from {origin}"
            for origin, group in groups.items()
        ]
        return f" ({'; '.join(parts)})" if parts else ""


# ---------------------------------------------------------------------------- building


def run_provenance(config: RolloutConfig, envs: EnvFactory, policy: Policy) -> RunProvenance:
    """The record of a run about to start (``served_model`` and an undecided tool-call format
    are filled in by its first episode, `RunProvenance.absorb`)."""
    spec = config.env
    env_class = envs.env_class
    return RunProvenance(
        recorded_at=datetime.now(UTC),
        model=model_record(policy),
        tool_call_format=policy_tool_call_format(policy) if envs.tool_schemas else None,
        tools=envs.tool_schemas,
        tool_origins=envs.tool_origins,
        env=EnvRecord(
            name=envs.name,
            env_class=f"{env_class.__module__}:{env_class.__qualname__}",
            version=_text(getattr(env_class, "version", None)),
            kwargs=redact(spec.kwargs),
            tasks=spec.tasks,
            rewards=list(spec.rewards),
            max_turns=envs.max_turns,
            mcp_servers=_mcp_servers(envs.tool_servers) if envs.tool_servers is not None else None,
            tool_scope=envs.tool_scope.value if envs.tool_scope.value != "env" else None,
        ),
        sampling=config.sampling.model_dump(mode="json"),
        seed=spec.seed,
        versions={"python": platform.python_version(), **package_versions()},
    )


def model_record(policy: Policy) -> ModelRecord:
    """What a policy says of its model, read from its attributes (`OpenAIPolicy`'s ``model``
    and ``base_url``; a local model's folder and tokenizer)."""
    base_url = getattr(policy, "base_url", None)
    tokenizer = getattr(policy, "tokenizer", None)
    loaded = getattr(policy, "model", None)
    folder = getattr(getattr(loaded, "config", None), "name_or_path", None)
    model = loaded if isinstance(loaded, str) else folder if isinstance(folder, str) else None
    return ModelRecord(
        name=policy.name,
        policy=type(policy).__qualname__,
        model=model or None,
        base_url=redact(base_url) if isinstance(base_url, str) else None,
        weights_sha256=weights_fingerprint(folder) if isinstance(folder, str) else None,
        chat_template_sha256=template_sha256(getattr(tokenizer, "chat_template", None)),
    )


def policy_tool_call_format(policy: Policy) -> str | None:
    """The tool-call format a policy is set to: ``"native"``, a text format's name, or ``None``
    (decided by the server's first answer, or tools passed as objects)."""
    native = getattr(policy, "native_tools", None)
    if native is True:
        return NATIVE
    if native is False:
        return get_tool_call_format(getattr(policy, "tool_call_format", None)).name
    return None


def turn_tool_call_format(policy: Policy, output: PolicyOutput) -> str | None:
    """The tool-call format of one turn that was offered tools: what the policy reports on the
    turn (``output.extra["tool_call_format"]``), else what it is set to."""
    said = output.extra.get("tool_call_format")
    return said if isinstance(said, str) else policy_tool_call_format(policy)


def episode_provenance(
    tools: list[dict[str, Any]] | None,
    formats: Iterable[str | None],
    served: Iterable[Any],
    changes: list[ToolChange] | None = None,
) -> EpisodeProvenance:
    """An episode's full record: its first turn's tools and their changes, its turns' tool-call
    formats (the last one counts) and the models its answers named (the first counts)."""
    last_format = None
    for fmt in formats:
        last_format = fmt or last_format
    first_served = next((s for s in served if isinstance(s, str) and s), None)
    return EpisodeProvenance(
        tools=list(tools or []),
        tool_call_format=last_format if tools or changes else None,
        served_model=first_served,
        tool_changes=list(changes) if changes else None,
    )


def weights_fingerprint(folder: str | Path) -> str | None:
    """A cheap fingerprint of a local model's weights (see the module docstring), or ``None``
    when ``folder`` is no folder or holds no weight files.

    Example:
        >>> weights_fingerprint("no/such/folder") is None
        True
    """
    path = Path(folder)
    if not path.is_dir():
        return None
    files = sorted({f for pattern in _WEIGHT_PATTERNS for f in path.glob(pattern) if f.is_file()})
    if not files:
        return None
    digest = hashlib.sha256()
    for file in files:
        size = file.stat().st_size
        digest.update(f"{file.name}\0{size}\0".encode())
        with file.open("rb") as handle:
            digest.update(handle.read(_MIB))
            if size > _MIB:
                handle.seek(max(_MIB, size - _MIB))
                digest.update(handle.read(_MIB))
    config = path / "config.json"
    if config.is_file():
        digest.update(config.read_bytes())
    return digest.hexdigest()


def template_sha256(template: Any) -> str | None:
    """SHA-256 of a chat template (a string, or a tokenizer's named templates as a mapping);
    ``None`` for none.

    Example:
        >>> template_sha256("{{ messages }}")[:12]
        'f24189f08c85'
    """
    if isinstance(template, dict):
        template = json.dumps(template, sort_keys=True)
    if not isinstance(template, str) or not template:
        return None
    return hashlib.sha256(template.encode("utf-8")).hexdigest()


def package_versions(names: Iterable[str] = VERSIONED_PACKAGES) -> dict[str, str]:
    """The installed versions of ``names``, from their metadata (nothing is imported: reading
    torch's version costs no torch import); those not installed are left out."""
    out: dict[str, str] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


# ---------------------------------------------------------------------------- helpers


def _mcp_servers(servers: ToolServers) -> dict[str, dict[str, Any]]:
    """The MCP servers a run connected to, as their configuration (read once, when the run
    started them) names them, without their secrets: only the names of ``env`` variables and
    ``headers`` are kept, URLs and arguments redacted."""
    from rk_agent.mcp.servers import McpServers

    if not isinstance(servers, McpServers):  # no other kind is started for ``mcp``
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name, server in servers.config.servers.items():
        entry: dict[str, Any] = {"transport": server.transport}
        if server.command is not None:
            entry["command"] = redact(server.command)
            entry["args"] = redact_argv(server.args)
        if server.url is not None:
            entry["url"] = redact(server.url)
        if server.env:
            entry["env"] = sorted(server.env)
        if server.headers:
            entry["headers"] = sorted(server.headers)
        if server.tool_prefix:
            entry["tool_prefix"] = server.tool_prefix
        if server.tools is not None:
            entry["tools"] = list(server.tools)
        out[name] = entry
    return out


def _tool_changes(was: list[dict[str, Any]], now: list[dict[str, Any]]) -> str:
    """The difference of two tool lists in words (``""``: the same)."""
    before = {_name(t): t for t in was}
    after = {_name(t): t for t in now}
    parts = []
    added = [n for n in after if n not in before]
    removed = [n for n in before if n not in after]
    changed = [n for n in after if n in before and after[n] != before[n]]
    for label, names in (("added", added), ("removed", removed), ("changed", changed)):
        if names:
            parts.append(f"{label}: {', '.join(names)}")
    return "; ".join(parts)


def _tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [_name(t) for t in tools]


def _name(tool: dict[str, Any]) -> str:
    function = tool.get("function")
    return str(function.get("name") if isinstance(function, dict) else tool.get("name"))


def _unless(value: str | None, run_value: str | None) -> str | None:
    return value if value is not None and value != run_value else None


def _short(value: str | None) -> str:
    """A hash shortened to 12 hex digits; other values as they are."""
    if value is None:
        return "-"
    return value[:12] if len(value) == 64 else repr(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
