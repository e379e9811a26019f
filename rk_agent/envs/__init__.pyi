"""Type information for `rk_agent.envs`, and its list of public names (one place)."""

from rk_agent.envs.base import (
    ChatEnv as ChatEnv,
    EpisodeState as EpisodeState,
)
from rk_agent.envs.check import (
    PlayedEpisode as PlayedEpisode,
    check_env as check_env,
    play_with_solver as play_with_solver,
)
from rk_agent.envs.code_env import (
    CodeEnv as CodeEnv,
)
from rk_agent.envs.env_setup import (
    EnvSetup as EnvSetup,
)
from rk_agent.envs.guess_env import (
    GuessEnv as GuessEnv,
)
from rk_agent.envs.imported import (
    BaseSession as BaseSession,
    ImportedEnv as ImportedEnv,
    Session as Session,
)
from rk_agent.envs.math_env import (
    MathEnv as MathEnv,
)
from rk_agent.envs.offered_tools import (
    ToolScope as ToolScope,
)
from rk_agent.envs.registry import (
    GYMNASIUM_IDS as GYMNASIUM_IDS,
    get_env_class as get_env_class,
    get_solver as get_solver,
    list_envs as list_envs,
    make_env as make_env,
    register_env as register_env,
    register_gymnasium_envs as register_gymnasium_envs,
    unregister_env as unregister_env,
)
from rk_agent.envs.sources import (
    EnvSource as EnvSource,
    list_sources as list_sources,
)
from rk_agent.envs.spaces import (
    ConversationSpace as ConversationSpace,
    MessageSpace as MessageSpace,
)
from rk_agent.envs.task import (
    Task as Task,
    load_tasks as load_tasks,
)
from rk_agent.envs.tool import (
    Tool as Tool,
    ToolResult as ToolResult,
    tool as tool,
)
from rk_agent.envs.tools_env import (
    ToolsEnv as ToolsEnv,
)
from rk_agent.envs.turn import (
    ToolCallRecord as ToolCallRecord,
    TurnResult as TurnResult,
)
