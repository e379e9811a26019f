"""What rk-agent relies on inside uvicorn, pydantic, TRL and transformers, checked against the
installed versions.

Each of these packages is bounded in ``pyproject.toml`` to the releases these checks passed on
(docs/development.md, "Dependencies whose internals we rely on"). Before raising a bound,
install the new release and run this file: a failure names the package, its version and what
changed, and the module of rk-agent that relies on it. Further checks of TRL live beside their
users: ``tests/trainers/test_trl_batches.py`` (what dynamic sampling joins) and
``tests/trainers/test_trl_patches.py`` (the patches' effects).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import textwrap
from importlib.metadata import version
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError, field_validator


def _changed(package: str, what: str, user: str) -> str:
    """The message of a broken contract: the package and version, what changed, who cares."""
    return (
        f"{package} {version(package)} changed what {user} relies on; expected: {what}. Adapt "
        f"{user} to this {package} (or keep {package} below this version in pyproject.toml), "
        "then move the bound (docs/development.md, 'Dependencies whose internals we rely on')."
    )


def _params(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def _source(function: Any) -> str:
    """The function's source on one line, runs of whitespace made single spaces."""
    return " ".join(textwrap.dedent(inspect.getsource(function)).split())


def _assigned(cls: type) -> set[str]:
    """The ``self.NAME`` attributes a class's own methods assign."""
    return set(re.findall(r"self\.(\w+)(?:\s*:[^=\n]+)?\s*=[^=]", inspect.getsource(cls)))


# --------------------------------------------------------------------------------------------
# uvicorn: rk_agent/server/_connections.py and _heads.py subclass its private httptools protocol

_SERVER = "rk_agent.server._connections (GuardedHttpToolsProtocol) and rk_agent.server._heads"


def test_uvicorn_httptools_protocol_has_the_hooks_the_guard_overrides() -> None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    expected = ["self", "config", "server_state", "app_state", "_loop"]
    assert _params(HttpToolsProtocol.__init__) == expected, _changed(
        "uvicorn", f"HttpToolsProtocol.__init__ takes {expected[1:]}", _SERVER
    )
    hooks = ["connection_made", "connection_lost", "data_received", "on_headers_complete",
             "on_body", "on_message_complete", "on_response_complete"]  # fmt: skip
    missing = [name for name in hooks if not callable(getattr(HttpToolsProtocol, name, None))]
    assert not missing, _changed(
        "uvicorn", f"HttpToolsProtocol's methods {hooks} (missing: {missing})", _SERVER
    )
    state = {"connections", "cycle", "transport", "loop", "pipeline", "headers", "scope", "parser"}
    lost = state - _assigned(HttpToolsProtocol)
    assert not lost, _changed(
        "uvicorn", f"HttpToolsProtocol to keep {sorted(state)} (missing: {sorted(lost)})", _SERVER
    )


def test_uvicorn_request_cycle_keeps_the_state_the_guard_reads() -> None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

    state = {"more_body", "response_started", "response_complete", "keep_alive",
             "chunked_encoding", "transport", "scope"}  # fmt: skip
    lost = state - _assigned(RequestResponseCycle)
    assert not lost, _changed(
        "uvicorn", f"RequestResponseCycle to keep {sorted(state)} (missing: {sorted(lost)})",
        _SERVER,
    )  # fmt: skip
    # _OneWrite replaces the cycle's transport after on_headers_complete made the cycle with the
    # connection's, and every byte of an answer goes through that attribute.
    headers = _source(HttpToolsProtocol.on_headers_complete)
    assert "self.cycle = RequestResponseCycle(" in headers, _changed(
        "uvicorn", "on_headers_complete makes the request's cycle", _SERVER
    )
    assert re.search(r"transport=self\.transport", headers), _changed(
        "uvicorn", "the cycle is given the connection's transport", _SERVER
    )
    assert "self.transport.write(" in inspect.getsource(RequestResponseCycle.send), _changed(
        "uvicorn", "the cycle writes its answer through its own transport attribute", _SERVER
    )


def test_uvicorn_config_takes_the_protocol_class_and_a_loop_factory() -> None:
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    from uvicorn.server import ServerState

    async def app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover - not served
        pass

    factory = functools.partial(asyncio.SelectorEventLoop)  # as rk_agent.server's tls_loop
    config = uvicorn.Config(app, http=HttpToolsProtocol, loop=factory)  # type: ignore[arg-type]
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol, _changed(
        "uvicorn", "Config(http=<a protocol class>) serves with that class", _SERVER
    )
    assert config.get_loop_factory() is factory, _changed(
        "uvicorn", "Config(loop=<a callable>) runs the server on the loop it makes",
        "rk_agent.server._connections.tls_loop",
    )  # fmt: skip
    assert isinstance(uvicorn.config.LOGGING_CONFIG, dict), _changed(
        "uvicorn", "uvicorn.config.LOGGING_CONFIG is its logging dict", "rk_agent.server.app"
    )
    loop = asyncio.new_event_loop()
    try:
        state = ServerState()
        protocol = HttpToolsProtocol(config, state, {}, _loop=loop)
        assert protocol.connections is state.connections and protocol.cycle is None, _changed(
            "uvicorn", "a new protocol shares the server's connections and has no cycle", _SERVER
        )
    finally:
        loop.close()


# --------------------------------------------------------------------------------------------
# pydantic / pydantic-core: rk_agent/trusted_json.py rewrites core schemas

_TRUSTED = "rk_agent.trusted_json"


def _widening_models() -> tuple[type[BaseModel], type[BaseModel]]:
    from rk_agent.trusted_json import widening

    class Inner(BaseModel):
        value: str

        @field_validator("value", mode="before")
        @classmethod
        @widening
        def _from_number(cls, value: Any) -> Any:
            return str(value) if isinstance(value, int) else value

    class Outer(BaseModel):
        inner: Inner

    return Inner, Outer


def _nodes(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        return [node, *(n for value in node.values() for n in _nodes(value))]
    if isinstance(node, list):
        return [n for value in node for n in _nodes(value)]
    return []


def test_pydantic_core_schemas_have_the_shape_trusted_json_rewrites() -> None:
    from rk_agent.trusted_json import is_widening

    inner, outer = _widening_models()
    assert inner.__pydantic_complete__ and outer.__pydantic_complete__, _changed(
        "pydantic", "a model class built without forward references is __pydantic_complete__",
        _TRUSTED,
    )  # fmt: skip
    befores = [n for n in _nodes(outer.__pydantic_core_schema__)
               if n.get("type") == "function-before"]  # fmt: skip
    assert befores, _changed(
        "pydantic", "a mode='before' validator is a 'function-before' core schema node", _TRUSTED
    )
    node = befores[0]
    assert is_widening(node.get("function", {}).get("function")) and "schema" in node, _changed(
        "pydantic", "a 'function-before' node holds the validator at ['function']['function'] "
        "and the schema it wraps at ['schema']", _TRUSTED,
    )  # fmt: skip
    classes = {n.get("cls") for n in _nodes(outer.__pydantic_core_schema__)
               if n.get("type") == "model"}  # fmt: skip
    assert inner in classes, _changed(
        "pydantic", "a nested model is a 'model' core schema node naming its class at ['cls']",
        _TRUSTED,
    )  # fmt: skip


def test_pydantic_core_compiles_a_rewritten_schema_with_the_nested_models_rewritten() -> None:
    from rk_agent.trusted_json import trusted_validator

    inner, outer = _widening_models()
    assert outer.model_validate({"inner": {"value": 3}}).inner.value == "3"
    try:
        trusted_validator(outer).validate_python({"inner": {"value": 3}})
    except ValidationError:
        pass  # the nested model's widening validator was left out, as it should be
    else:
        pytest.fail(_changed(
            "pydantic-core", "a validator compiled from a schema while its nested model classes "
            "are marked incomplete (__pydantic_complete__ = False) compiles them from the schema "
            "given, not from their own validators", _TRUSTED,
        ))  # fmt: skip
    assert inner.__pydantic_complete__ and outer.__pydantic_complete__
    found = trusted_validator(outer).validate_json(b'{"inner": {"value": "x"}}')
    assert isinstance(found, outer) and found.inner.value == "x"


def test_pydantic_models_keep_the_attributes_rk_agent_reads() -> None:
    _, outer = _widening_models()
    built = outer.model_validate({"inner": {"value": "x"}})
    for name in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_serializer__"):
        assert hasattr(built, name), _changed(
            "pydantic", f"a model instance has {name}",
            "rk_agent.server._endpoints and rk_agent.runs.run_dir",
        )  # fmt: skip
    assert built.__pydantic_serializer__.to_json(built, exclude_none=True) == (
        b'{"inner":{"value":"x"}}'
    )


# --------------------------------------------------------------------------------------------
# TRL: rk_agent/trainers (the GRPOTrainer subclass, trl_patches, the reward functions' kwargs)

_HOOKED = "rk_agent.trainers.hooked_trainer.HookedGRPOTrainer"


def test_trl_scores_a_batch_in_one_call_that_the_batch_hooks_precede() -> None:
    from trl import GRPOTrainer

    expected = ["self", "inputs", "prompts", "completions", "completion_ids_list"]
    assert _params(GRPOTrainer._calculate_rewards) == expected, _changed(
        "trl", f"GRPOTrainer._calculate_rewards takes {expected[1:]}", _HOOKED
    )
    scoring = _source(GRPOTrainer._generate_and_score_completions)
    merged = scoring.find("inp[key] = values[i]")
    scored = scoring.find(
        "self._calculate_rewards(inputs, prompts, completions, completion_ids_list)"
    )
    assert 0 <= merged < scored, _changed(
        "trl", "_generate_and_score_completions merges the rollout_func's columns into the rows "
        "(rk-agent's 'trajectory'), then scores them with one _calculate_rewards call", _HOOKED,
    )  # fmt: skip


def test_trl_hands_reward_functions_what_rk_agent_reads() -> None:
    from trl import GRPOTrainer

    rewards = _source(GRPOTrainer._calculate_rewards)
    relied_on = {
        "environments": 'reward_kwargs["environments"] = self.environments',
        "trainer_state": 'reward_kwargs["trainer_state"] = self.state',
        "log_metric": 'reward_kwargs["log_metric"] = self._log_metric',
        "log_extra": 'reward_kwargs["log_extra"] = self._log_completion_extra',
        "keyword columns": "prompts=prompts, completions=completions, "
        "completion_ids=completion_ids_list, **reward_kwargs",
    }
    missing = [what for what, code in relied_on.items() if code not in rewards]
    assert not missing, _changed(
        "trl",
        f"_calculate_rewards to give reward functions {sorted(relied_on)} (missing: {missing})",
        "rk_agent.trainers.rewards and rk_agent.trainers.trl_env",
    )  # fmt: skip
    init = inspect.getsource(GRPOTrainer.__init__)
    batch = _source(GRPOTrainer._generate_and_score_completions)
    assert "self.environments = None" in init and "self.environments = []" in batch, _changed(
        "trl", "GRPOTrainer.environments is None, or the environment instance of each row of "
        "the batch being generated", _HOOKED,
    )  # fmt: skip
    params = set(_params(GRPOTrainer.__init__))
    wanted = {"model", "reward_funcs", "args", "train_dataset", "processing_class",
              "callbacks", "rollout_func", "environment_factory"}  # fmt: skip
    assert wanted <= params, _changed(
        "trl", f"GRPOTrainer to take {sorted(wanted)} (missing: {sorted(wanted - params)})",
        "rk_agent.trainers.grpo_builder",
    )  # fmt: skip
    assert "self._tokenizer =" in init, _changed("trl", "GRPOTrainer keeps _tokenizer", _HOOKED)


def test_trl_keeps_what_the_patches_replace() -> None:
    from trl.models.utils import unwrap_model_for_generation
    from trl.trainer import grpo_trainer, utils

    patches = "rk_agent.trainers.trl_patches"
    assert callable(getattr(utils, "_use_triton", None)), _changed(
        "trl", "trl.trainer.utils has _use_triton(device)", patches
    )
    assert "_use_triton(hidden_states.device)" in _source(utils.add_fused_lm_head), _changed(
        "trl", "add_fused_lm_head asks the module's _use_triton whether to score completions "
        "only", patches,
    )  # fmt: skip
    assert callable(getattr(grpo_trainer, "print_prompt_completions_sample", None)), _changed(
        "trl", "GRPOTrainer prints completions through the module's "
        "print_prompt_completions_sample", patches,
    )  # fmt: skip
    wanted = ["model", "accelerator", "gather_deepspeed3_params"]
    assert _params(unwrap_model_for_generation)[:3] == wanted, _changed(
        "trl", f"unwrap_model_for_generation takes {wanted}", "rk_agent.trainers.rollout"
    )


def test_transformers_trainer_warns_of_missing_keys_where_the_resume_patch_wraps_it() -> None:
    from transformers import Trainer

    patch = "rk_agent.trainers.trl_patches (quiet_tied_weights_on_resume)"
    assert _params(Trainer._issue_warnings_after_load) == ["self", "load_result"], _changed(
        "transformers", "Trainer._issue_warnings_after_load(load_result) warns of a resumed "
        "checkpoint's missing keys", patch,
    )  # fmt: skip
    assert "load_result.missing_keys" in _source(Trainer._issue_warnings_after_load), _changed(
        "transformers", "_issue_warnings_after_load reads load_result.missing_keys", patch
    )


# --------------------------------------------------------------------------------------------
# transformers: rk_agent/policies/_kv_buffers.py and _kv_reuse.py subclass its cache classes

_KV = "rk_agent.policies._kv_buffers (ReservedCache) and rk_agent.policies._kv_reuse"


def test_transformers_cache_classes_take_what_reserved_cache_overrides() -> None:
    from transformers import DynamicCache
    from transformers.cache_utils import Cache, DynamicLayer

    assert _params(DynamicLayer.lazy_initialization) == ["self", "key_states", "value_states"], (
        _changed("transformers", "DynamicLayer.lazy_initialization(key_states, value_states)", _KV)
    )
    assert _params(DynamicLayer.update)[:3] == ["self", "key_states", "value_states"], _changed(
        "transformers", "DynamicLayer.update(key_states, value_states, ...)", _KV
    )
    assert "layers" in _params(Cache.__init__), _changed(
        "transformers", "Cache(layers=[...]) is a cache of those layers", _KV
    )
    assert "ddp_cache_data" in _params(DynamicCache.__init__), _changed(
        "transformers", "DynamicCache(ddp_cache_data=[(keys, values), ...]) is built from "
        "each layer's states", _KV,
    )  # fmt: skip
    layer = DynamicLayer()
    assert layer.is_initialized is False, _changed(
        "transformers", "a new DynamicLayer is not is_initialized", _KV
    )


def test_transformers_sees_a_reserved_cache_as_the_dynamic_cache_it_stands_for() -> None:
    import torch
    from transformers import DynamicCache

    from rk_agent.policies._kv_buffers import ReservedCache

    torch.manual_seed(0)
    steps = [(torch.randn(2, 3, n, 4), torch.randn(2, 3, n, 4)) for n in (5, 1, 1)]
    reserved, dynamic = ReservedCache(layers=2, capacity=7), DynamicCache()
    for keys, values in steps:
        for layer in range(2):
            got = reserved.update(keys, values, layer)
            want = dynamic.update(keys, values, layer)
            assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True)), _changed(
                "transformers", "Cache.update(keys, values, layer) calls the layer's update and "
                "returns the states to attend to", _KV,
            )  # fmt: skip
    assert reserved.get_seq_length() == dynamic.get_seq_length() == 7, _changed(
        "transformers", "Cache.get_seq_length() counts a layer's keys", _KV
    )
    first = reserved.layers[0]
    rebuilt = DynamicCache(ddp_cache_data=[(first.keys, first.values)])
    assert torch.equal(rebuilt.layers[0].keys, dynamic.layers[0].keys), _changed(
        "transformers", "DynamicCache(ddp_cache_data=...) keeps the states given as "
        ".layers[i].keys and .values", "rk_agent.policies._kv_reuse",
    )  # fmt: skip
