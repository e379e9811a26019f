"""Multi-turn GRPO: a TRL ``rollout_func`` that plays whole episodes of a `ChatEnv`.

TRL's ``GRPOTrainer(rollout_func=...)`` calls ``rollout_func(prompts, trainer)`` with the
generation batch's prompts, each already repeated ``num_generations`` times, and trains on what
comes back. `EpisodeRollout` plays one episode per prompt, all at once, using the same episode
loop as ``rk-agent rollout``, and generates either

- with the model being trained (HF ``generate`` through `HFPolicy`'s dynamic batching, on the
  trainer's device), the default; or
- with a vLLM server (`VLLMPolicy`, token ids in and out over its OpenAI-compatible
  completions endpoint, the episodes' turns sent in parallel): automatically when TRL runs with
  ``use_vllm=True, vllm_mode="server"`` (the server at ``vllm_server_base_url``, or
  ``http://{vllm_server_host}:{vllm_server_port}``; TRL has synced the weights to it before it
  calls the rollout), or at ``server_url`` when given. ``vllm_mode="colocate"`` is refused
  (`ConfigError`): there vLLM runs inside TRL's own generation, which ``--loop trl`` uses.

Either way the prompt is rendered once with the trainer's tokenizer and every later turn is
appended as tokens (`EpisodeTokens`), so what is trained is exactly what was sampled. It
returns:

- ``prompt_ids``: the first turn's prompt; ``completion_ids``: every later token (the model's
  replies and the environment's messages, as the model saw them); ``logprobs``;
- ``env_mask``: 1 on the model's tokens, 0 on the environment's, so only the model's tokens are
  trained: the tokens it sampled in this step. An episode that started with turns copied from
  another one (a fork's, ``Turn.copied_from``) would have them in its prompt, never trained;
  the loop plays every episode from its task's start;
- ``trajectory``: the `Trajectory` of each row, which the reward functions of
  `rk_agent.trainers.rewards` read (episode reward components, per-step rewards, stop reasons).

The completion never exceeds ``max_completion_length`` (an episode that reaches it ends as
truncated and is still scored). Episodes that fail (a tool crashed the env, the model or the
server errored) are recorded; their rewards are ``None`` and TRL gives them no advantage. A
server that does not answer when a step starts is an `EndpointError` naming its URL.

Main names: `EpisodeRollout`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rk_agent.envs.base import ChatEnv
from rk_agent.errors import ConfigError
from rk_agent.loop_thread import run_sync
from rk_agent.policies.chat_template import end_of_turn_ids
from rk_agent.policies.episode_tokens import EpisodeTokens, SuffixRenderer, TokenPolicy
from rk_agent.policies.hf_policy import HFPolicy
from rk_agent.policies.policy import SamplingParams
from rk_agent.policies.vllm_policy import VLLMPolicy
from rk_agent.rollouts.episode import EpisodeSlot, play_episode
from rk_agent.runs.run_dir import append_trajectories
from rk_agent.runs.trajectory import Trajectory
from rk_agent.runs.workers import RayOptions
from rk_agent.tool_calls import DEFAULT_TOOL_CALL_FORMAT, ToolCallFormat, get_tool_call_format
from rk_agent.trainers.episode_names import EpisodeName, EpisodeNames
from rk_agent.trainers.ray_rollout import EpisodeTokenRecord, RayEpisodes, TokenEpisode
from rk_agent.trainers.tasks import TaskRow, TaskTable

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["EpisodeRollout", "vllm_server_url"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class EpisodeRollout:
    """A TRL ``rollout_func`` playing full episodes of an environment (see the module docstring).

    Args:
        env_factory: makes one environment (called once per concurrent episode; kept for reuse).
        tasks: the training tasks, to find the task behind each prompt.
        env_name: recorded with trajectories.
        max_tokens_per_turn: most new tokens per reply (default: the whole remaining budget).
        episode_timeout_s: wall-time limit per episode.
        max_batch_size: most episodes generated together (default: the whole generation batch).
        trajectory_log: append every episode's `Trajectory` (one JSON line, with the training
            step in its metadata) to this file, e.g. ``<output_dir>/trajectories.jsonl``.
            Episodes are named by their step, task and sample (``s3-0-1``:
            `rk_agent.trainers.episode_names`), so no id repeats in the run.
        max_wait_ms: how long generation waits for more episodes' turns before starting a batch
            (the episodes of a step reach each turn a few milliseconds apart; one batch per turn
            instead of several is what keeps multi-turn steps cheap).
        reuse_kv: keep each episode's KV cache from one turn to the next, so a turn prefills
            only the environment's new tokens instead of the whole episode again (the weights
            do not change during a rollout). ``False`` re-reads every turn in full.
        server_url: generate with the vLLM (or compatible) server at this URL
            (``http://host:port``, ``/v1`` optional) instead of the trainer's model. Default:
            TRL's server when ``use_vllm=True, vllm_mode="server"``, else the trainer's model.
            Without ``use_vllm`` TRL does not sync weights to it: the policy served stays fixed.
        served_model: the model id to ask the server for; default: the first it lists.
        server_options: more `VLLMPolicy` arguments (``api_key``, ``timeout_s``,
            ``max_retries``, ``tool_format``, ``extra_body``; not ``tool_call_format``, which
            is this class's own).
        workers: with a server, play each step's episodes on this many Ray actors
            (`rk_agent.trainers.ray_rollout`; needs ``rk-agent[ray]``), kept from step to step
            until `close`; each holds its own policy client on the same server. ``None``: in
            this process. Ignored when generating with the trainer's model.
        ray: where the workers run and what each reserves (`RayOptions` or its fields).
        tool_call_format: the text tool-call format the policy reads replies with, its
            feedback after a malformed call included (a name or a
            `rk_agent.tool_calls.ToolCallFormat`); TRL's loop checks replies in the same one
            (`rk_agent.trainers.trl_tool_env`).

    Raises:
        UnknownNameError: ``tool_call_format`` names no registered format.

    Example::

        rollout = EpisodeRollout(lambda: make_env("tools"), TaskTable(rows), env_name="tools")
        trainer = GRPOTrainer(model, reward_funcs=..., train_dataset=env_dataset(...),
                              rollout_func=rollout, args=GRPOConfig(...))
    """

    def __init__(
        self,
        env_factory: Callable[[], ChatEnv],
        tasks: TaskTable,
        *,
        env_name: str,
        max_tokens_per_turn: int | None = None,
        episode_timeout_s: float | None = None,
        max_batch_size: int | None = None,
        trajectory_log: str | Path | None = None,
        max_wait_ms: float = 50.0,
        reuse_kv: bool = True,
        server_url: str | None = None,
        served_model: str | None = None,
        server_options: Mapping[str, Any] | None = None,
        workers: int | None = None,
        ray: RayOptions | Mapping[str, Any] | None = None,
        tool_call_format: str | ToolCallFormat = DEFAULT_TOOL_CALL_FORMAT,
    ) -> None:
        self.env_factory = env_factory
        self.tasks = tasks
        self.env_name = env_name
        self.max_tokens_per_turn = max_tokens_per_turn
        self.episode_timeout_s = episode_timeout_s
        self.max_batch_size = max_batch_size
        self.trajectory_log = Path(trajectory_log) if trajectory_log is not None else None
        self.max_wait_ms = max_wait_ms
        self.reuse_kv = reuse_kv
        self.server_url = server_url
        self.served_model = served_model
        self.server_options = dict(server_options or {})
        self.workers = workers
        self.ray = ray
        self.tool_call_format = get_tool_call_format(tool_call_format)
        self._ray_episodes: RayEpisodes | None = None
        self._warned_unsynced = False
        self._envs: list[ChatEnv] = []
        self._names: EpisodeNames | None = None
        self.__name__ = "rk_agent_episode_rollout"

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """Play one episode per prompt with ``trainer``'s model or the vLLM server; see the
        module docstring.

        Raises:
            ConfigError: ``use_vllm`` in ``colocate`` mode (use ``--loop trl``), or a served
                model that is not the server's.
            EndpointError: the server does not answer when the step starts.
        """
        args = trainer.args
        rows = [self.tasks.for_prompt(prompt) for prompt in prompts]
        budget = int(args.max_completion_length)
        sampling = SamplingParams(
            temperature=float(args.temperature),
            top_p=float(args.top_p),
            max_tokens=self.max_tokens_per_turn or budget,
        )
        url = self.server_url or vllm_server_url(args)
        policy: TokenPolicy
        played: Sequence[tuple[Trajectory, EpisodeTokens | EpisodeTokenRecord]]
        if url is not None:
            policy = self._served_policy(url, trainer)
            played = run_sync(self._play_served(rows, policy, sampling, budget))
        else:
            with _generation_model(trainer) as model:
                policy = HFPolicy(
                    model,
                    tokenizer=trainer.processing_class,
                    max_batch_size=self.max_batch_size or len(rows),
                    max_wait_ms=self.max_wait_ms,
                    reuse_kv=self.reuse_kv,
                    tool_call_format=self.tool_call_format,
                    name=str(getattr(model.config, "name_or_path", "") or "policy"),
                )
                try:
                    played = run_sync(self.play(rows, policy, sampling, budget))
                except BaseException:  # Ctrl-C among them: generate nothing more this step
                    policy.abort()
                    raise
                finally:
                    policy.close()
        step = int(trainer.state.global_step)
        if self._names is None:
            self._names = EpisodeNames(
                self.tasks.task_ids(),
                process_index=int(getattr(args, "process_index", 0) or 0),
                processes=int(getattr(args, "world_size", 1) or 1),
            )
        names = self._names.name(step + 1, [row.task.id for row in rows])
        outputs = _outputs(played, policy, step=step, names=names)
        if self.trajectory_log is not None:
            append_trajectories(self.trajectory_log, outputs["trajectory"])
        return outputs

    async def play(
        self, rows: list[TaskRow], policy: TokenPolicy, sampling: SamplingParams, budget: int
    ) -> list[tuple[Trajectory, EpisodeTokens]]:
        """Play one episode per row concurrently; each with its own `EpisodeTokens`."""
        while len(self._envs) < len(rows):
            self._envs.append(self.env_factory())
        renderer = SuffixRenderer(policy)
        recorders = [EpisodeTokens(policy, renderer, budget) for _ in rows]
        slots = _slots(rows)
        trajectories = await asyncio.gather(
            *(
                play_episode(
                    env,
                    recorder,
                    slot,
                    sampling=sampling,
                    env_name=self.env_name,
                    timeout_s=self.episode_timeout_s,
                )
                for env, recorder, slot in zip(self._envs, recorders, slots, strict=False)
            )
        )
        return list(zip(trajectories, recorders, strict=True))

    def _served_policy(self, url: str, trainer: Any) -> VLLMPolicy:
        args = trainer.args
        if not getattr(args, "use_vllm", False) and not self._warned_unsynced:
            self._warned_unsynced = True
            logger.warning(
                "EpisodeRollout generates with the server at %s, but TRL runs with "
                "use_vllm=False, so it does not sync the trained weights to that server: the "
                "episodes are played by the policy the server loaded, not the one being trained.",
                url,
            )
        options: dict[str, Any] = {
            "extra_body": _trl_sampling(args),
            **self.server_options,
            "tool_call_format": self.tool_call_format,
        }
        return VLLMPolicy(
            url,
            trainer.processing_class,
            model=self.served_model,
            eos_ids=end_of_turn_ids(
                trainer.processing_class, getattr(trainer.model, "generation_config", None)
            ),
            **options,
        )

    async def _play_served(
        self, rows: list[TaskRow], policy: VLLMPolicy, sampling: SamplingParams, budget: int
    ) -> list[tuple[Trajectory, EpisodeTokens | EpisodeTokenRecord]]:
        unused = copy.copy(policy)  # no client yet: what the workers get, if any
        try:
            await policy.connect()
            if self.workers is None:
                return list(await self.play(rows, policy, sampling, budget))
            if self._ray_episodes is None:
                self._ray_episodes = RayEpisodes(
                    self.workers, self.ray, self.env_factory, self.env_name
                )
            episode = TokenEpisode(budget, sampling, self.env_name, self.episode_timeout_s)
            played = await self._ray_episodes.play(_slots(rows), unused, episode)
            return list(played)
        finally:
            await policy.aclose()

    def close(self) -> None:
        """Stop the Ray workers (``workers``), if any were started; safe to call twice."""
        if self._ray_episodes is not None:
            self._ray_episodes.close()
            self._ray_episodes = None


def _slots(rows: list[TaskRow]) -> list[EpisodeSlot]:
    """One episode per row: row ``i`` is episode ``i``, the sample counting its task's rows."""
    samples: dict[str, int] = {}
    slots = []
    for index, row in enumerate(rows):
        sample = samples.get(row.task.id, 0)
        samples[row.task.id] = sample + 1
        slots.append(EpisodeSlot(index, sample, row.seed, options={"task": row.task}))
    return slots


def vllm_server_url(args: Any) -> str | None:
    """The vLLM server TRL generates with (``use_vllm=True, vllm_mode="server"``), else ``None``.

    Raises:
        ConfigError: ``use_vllm=True`` with ``vllm_mode="colocate"``: vLLM then runs inside
            TRL's own generation, which the rk loop does not drive.

    Example:
        >>> from types import SimpleNamespace
        >>> vllm_server_url(SimpleNamespace(use_vllm=True, vllm_mode="server",
        ...     vllm_server_base_url=None, vllm_server_host="0.0.0.0", vllm_server_port=8000))
        'http://0.0.0.0:8000'
    """
    if not getattr(args, "use_vllm", False):
        return None
    mode = getattr(args, "vllm_mode", "colocate")
    if mode != "server":
        raise ConfigError(
            f"the rk loop (EpisodeRollout) plays episodes against a vLLM server, but "
            f"vllm_mode is {mode!r}: in colocate mode vLLM runs inside TRL's own generation. "
            "Either serve the model (`trl vllm-serve --model MODEL` on a spare GPU) and train "
            "with --vllm_mode server, or use TRL's tool loop, which generates with colocated "
            "vLLM: --loop trl."
        )
    base = getattr(args, "vllm_server_base_url", None)
    if base:
        return str(base)
    return f"http://{args.vllm_server_host}:{args.vllm_server_port}"


def _trl_sampling(args: Any) -> dict[str, Any]:
    """The sampling options TRL itself sends to vLLM (``top_k``, ``min_p``,
    ``repetition_penalty``, ``generation_kwargs``) that `SamplingParams` does not carry."""
    extra: dict[str, Any] = {}
    for name in ("top_k", "min_p", "repetition_penalty"):
        value = getattr(args, name, None)
        if value is not None:
            extra[name] = value
    generation_kwargs = getattr(args, "generation_kwargs", None)
    if isinstance(generation_kwargs, Mapping):
        extra.update(generation_kwargs)
    return extra


@contextlib.contextmanager
def _generation_model(trainer: Any) -> Iterator[PreTrainedModel]:
    """The trainer's model, unwrapped for generation (DDP, DeepSpeed ZeRO-3 and FSDP too)."""
    from trl.models.utils import unwrap_model_for_generation

    from rk_agent.trainers.trl_patches import quiet_checkpointing_renames

    with (
        quiet_checkpointing_renames(),
        unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
        ) as model,
    ):
        yield model


def _outputs(
    played: Sequence[tuple[Trajectory, EpisodeTokens | EpisodeTokenRecord]],
    policy: TokenPolicy,
    step: int,
    names: Sequence[EpisodeName],
) -> dict[str, Any]:
    prompt_ids, completion_ids, env_mask, logprobs, trajectories = [], [], [], [], []
    for (trajectory, tokens), name in zip(played, names, strict=True):
        prompt = tokens.prompt_ids
        if prompt is None:  # the episode failed before its first reply
            prompt = policy.encode(trajectory.opening_messages, None)
        completion, mask, logps = tokens.completion_ids, tokens.env_mask, tokens.logprobs
        if not completion:  # TRL needs a token per row; an untrained end-of-turn marker
            completion, mask, logps = [min(policy.eos_ids)], [0], [0.0]
        prompt_ids.append(prompt)
        completion_ids.append(list(completion))
        env_mask.append(list(mask))
        logprobs.append(list(logps))
        trajectories.append(
            trajectory.model_copy(
                update={
                    "id": name.id,
                    "task_index": name.task_index,
                    "sample": name.sample,
                    "metadata": {
                        **trajectory.metadata,
                        "budget_hit": tokens.budget_hit,
                        "train_step": step,
                    },
                }
            )
        )
    return {
        "prompt_ids": prompt_ids,
        "completion_ids": completion_ids,
        "logprobs": logprobs,
        "env_mask": env_mask,
        "trajectory": trajectories,
    }
