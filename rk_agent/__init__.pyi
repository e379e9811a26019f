"""Type information for `rk_agent`, and its list of public names (one place).

Each ``from module import Name as Name`` line below is a public name of ``rk_agent``: the
package's ``__init__.py`` reads this file (`rk_agent._lazy.attach_stub`) and imports each name
from its module on first use. Add a public name here, and pin it in ``tests/test_exports.py``.

``ScriptedPolicy`` and ``StubServer`` come from `rk_agent.testing`, the test doubles: this file
is the one place that may name that package (``tests/test_import_graph.py``), and nothing loads
it until one of the two is used.
"""

from rk_agent.envs.base import (
    ChatEnv as ChatEnv,
    EpisodeState as EpisodeState,
)
from rk_agent.envs.env_setup import (
    EnvSetup as EnvSetup,
)
from rk_agent.envs.registry import (
    get_env_class as get_env_class,
    list_envs as list_envs,
    make_env as make_env,
    register_env as register_env,
)
from rk_agent.envs.task import (
    Task as Task,
)
from rk_agent.envs.tool import (
    Tool as Tool,
    ToolResult as ToolResult,
    tool as tool,
)
from rk_agent.envs.turn import (
    TurnResult as TurnResult,
)
from rk_agent.errors import (
    ConfigError as ConfigError,
    ContextOverflowError as ContextOverflowError,
    DataError as DataError,
    EndpointError as EndpointError,
    EnvError as EnvError,
    EnvLoadError as EnvLoadError,
    FireworksError as FireworksError,
    LoadError as LoadError,
    NotAvailableError as NotAvailableError,
    RewardError as RewardError,
    RewardInputError as RewardInputError,
    RewardLoadError as RewardLoadError,
    RkAgentError as RkAgentError,
    RunLockedError as RunLockedError,
    SandboxError as SandboxError,
    UnknownNameError as UnknownNameError,
    UntrustedRunError as UntrustedRunError,
)
from rk_agent.policies.function_policy import (
    FunctionPolicy as FunctionPolicy,
)
from rk_agent.policies.hf_policy import (
    HFPolicy as HFPolicy,
)
from rk_agent.policies.local_model import (
    embedded_model_path as embedded_model_path,
)
from rk_agent.policies.openai_policy import (
    OpenAIPolicy as OpenAIPolicy,
)
from rk_agent.policies.policy import (
    Policy as Policy,
    PolicyOutput as PolicyOutput,
    SamplingParams as SamplingParams,
)
from rk_agent.policies.vllm_policy import (
    VLLMPolicy as VLLMPolicy,
)
from rk_agent.rewards.compose import (
    combine as combine,
)
from rk_agent.rewards.decorator import (
    is_reward_function as is_reward_function,
    reward_function as reward_function,
)
from rk_agent.rewards.function import (
    RewardFunction as RewardFunction,
)
from rk_agent.rewards.registry import (
    get_reward_function as get_reward_function,
    list_reward_functions as list_reward_functions,
    register_reward_function as register_reward_function,
)
from rk_agent.rewards.stats import (
    RewardStats as RewardStats,
    group_normalize as group_normalize,
    normalize_rewards as normalize_rewards,
    reward_stats as reward_stats,
)
from rk_agent.rollouts.engine import (
    run_rollouts as run_rollouts,
)
from rk_agent.rollouts.runner import (
    prepare_run as prepare_run,
)
from rk_agent.runs.alarms import (
    AlarmOptions as AlarmOptions,
)
from rk_agent.runs.config import (
    FailurePolicy as FailurePolicy,
    RolloutConfig as RolloutConfig,
)
from rk_agent.runs.run_dir import (
    RunDir as RunDir,
)
from rk_agent.runs.trajectory import (
    Trajectory as Trajectory,
)
from rk_agent.soundness.env_check import (
    check_env as check_env,
)
from rk_agent.soundness.probes import (
    Probe as Probe,
)
from rk_agent.soundness.report import (
    SoundnessReport as SoundnessReport,
)
from rk_agent.soundness.reward_check import (
    check_reward as check_reward,
)
from rk_agent.testing.scripted_policy import (
    ScriptedPolicy as ScriptedPolicy,
)
from rk_agent.testing.stub_server import (
    StubServer as StubServer,
)
from rk_agent.trainers.config import (
    TrainConfig as TrainConfig,
)
from rk_agent.trainers.grpo import (
    grpo_trainer as grpo_trainer,
)
from rk_agent.trainers.rollout import (
    EpisodeRollout as EpisodeRollout,
)
from rk_agent.trainers.run import (
    run_training as run_training,
)
from rk_agent.trainers.sft import (
    build_sft_trainer as build_sft_trainer,
)
from rk_agent.trainers.sft_data import (
    build_sft_data as build_sft_data,
    sft_dataset as sft_dataset,
)
from rk_agent.trainers.sft_filter import (
    SFTFilter as SFTFilter,
)
from rk_agent.trainers.tasks import (
    env_dataset as env_dataset,
)
from rk_agent.trainers.trl_env import (
    TRLEnvSpec as TRLEnvSpec,
    trl_environment as trl_environment,
    trl_grpo_trainer as trl_grpo_trainer,
)
from rk_agent.types import (
    EpisodeReturn as EpisodeReturn,
    EvaluateResult as EvaluateResult,
    FailureKind as FailureKind,
    FailureSite as FailureSite,
    FunctionCall as FunctionCall,
    Message as Message,
    MetricResult as MetricResult,
    MetricRewardOutput as MetricRewardOutput,
    RewardOutput as RewardOutput,
    RunStatus as RunStatus,
    ScoreFault as ScoreFault,
    StepOutput as StepOutput,
    StopReason as StopReason,
    ToolCall as ToolCall,
)

__version__: str
