"""What building a run's config would run: files imported, commands, URLs, variables."""

from __future__ import annotations

import pytest

from rk_agent.envs.env_setup import EnvSetup
from rk_agent.envs.registry import GYMNASIUM_IDS, REGISTRY as ENVS, list_envs
from rk_agent.rewards.registry import REGISTRY as REWARDS, list_reward_functions
from rk_agent.runs.config import RolloutConfig
from rk_agent.runs.run_wants import env_wants, policy_wants


@pytest.mark.parametrize("env", sorted(list_envs()))
def test_every_registered_env_and_its_gymnasium_id_want_nothing(env: str) -> None:
    assert env_wants(EnvSetup(name=env)) == []
    if env in GYMNASIUM_IDS:
        assert env_wants(EnvSetup(name=GYMNASIUM_IDS[env])) == []
        assert env_wants(EnvSetup(name=ENVS.builtins[env])) == []  # the very module:Class


@pytest.mark.parametrize("reward", sorted(list_reward_functions()))
def test_every_registered_reward_wants_nothing(reward: str) -> None:
    assert env_wants(EnvSetup(name="math", rewards=[reward])) == []
    if reward in REWARDS.builtins:
        assert env_wants(EnvSetup(rewards=[REWARDS.builtins[reward]])) == []


def test_code_named_by_file_or_module_is_wanted() -> None:
    setup = EnvSetup(
        name="evil.py::Env",
        rewards=["math", "evil.py::r", "evil_pkg.rewards:r"],
        kwargs={"episode_rewards": {"a": "format", "b": "/abs/r.py::b"}, "step_rewards": "m:s"},
    )
    assert env_wants(setup) == [
        "import evil.py (environment evil.py::Env)",
        "import evil.py (reward evil.py::r)",
        "import the module evil_pkg.rewards (reward evil_pkg.rewards:r)",
        "import /abs/r.py (reward /abs/r.py::b)",
        "import the module m (reward m:s)",
    ]


def test_an_unregistered_plain_name_imports_nothing() -> None:
    assert env_wants(EnvSetup(name="no_such_env", rewards=["no_such_reward"])) == []


def test_code_run_without_isolation_is_wanted() -> None:
    assert env_wants(EnvSetup(name="code", kwargs={"sandbox": "process"})) == [
        "run model-written code without isolation (env_kwargs sandbox: process)"
    ]
    assert env_wants(EnvSetup(name="code", kwargs={"sandbox": "bwrap"})) == []


def test_mcp_servers_are_named_with_their_command_url_and_variables() -> None:
    mcp = {
        "mcpServers": {
            "kb": {"command": "sh", "args": ["-c", "touch /tmp/x"], "env": {"T": "${KB_TOKEN}"}},
            "web": {"url": "http://127.0.0.1:9/mcp",
                    "headers": {"Authorization": "Bearer ${OPENAI_API_KEY}"}},
        }
    }  # fmt: skip
    assert env_wants(EnvSetup(mcp=mcp)) == [
        "start sh -c 'touch /tmp/x' (MCP server 'kb')",
        "expand ${KB_TOKEN} into its settings (MCP server 'kb')",
        "connect to http://127.0.0.1:9/mcp (MCP server 'web')",
        "expand ${OPENAI_API_KEY} into its settings (MCP server 'web')",
    ]


def test_mcp_servers_in_a_file_or_in_json_text() -> None:
    assert env_wants(EnvSetup(mcp="/srv/servers.json")) == [
        "start or connect to the MCP servers listed in /srv/servers.json (mcp)"
    ]
    text = '{"mcpServers": {"s": {"url": "https://example.com/mcp"}}}'
    assert env_wants(EnvSetup(mcp=text)) == ["connect to https://example.com/mcp (MCP server 's')"]


def test_a_long_command_is_shortened() -> None:
    mcp = {"mcpServers": {"kb": {"command": "python", "args": ["-c", "x" * 500]}}}
    (wanted,) = env_wants(EnvSetup(mcp=mcp))
    assert wanted.endswith("... (MCP server 'kb')") and len(wanted) < 160


def test_the_policy_of_a_resumed_run() -> None:
    assert policy_wants(RolloutConfig()) == []
    assert policy_wants(RolloutConfig(provider="solver")) == []
    assert policy_wants(RolloutConfig(model="default")) == []  # the embedded model
    served = RolloutConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="AWS_KEY")
    assert policy_wants(served) == [
        "connect to http://127.0.0.1:9/v1 (base_url)",
        "send ${AWS_KEY} as the API key (api_key_env)",
    ]
    assert policy_wants(RolloutConfig(provider="fireworks", model="m")) == [
        "call the fireworks API (provider fireworks)"
    ]
    assert policy_wants(RolloutConfig(model="/models/theirs", provider="local")) == [
        "load the model /models/theirs (model)"
    ]
    ray = RolloutConfig.model_validate({"workers": 2, "ray": {"address": "ray://h:10001"}})
    assert policy_wants(ray) == ["join the Ray cluster at ray://h:10001 (ray.address)"]
