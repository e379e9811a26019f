"""`RewardFunction`: one handle on a reward, wherever it runs (in-process or behind an endpoint).

Main names:
    RewardFunction: load a reward by callable, name or path; bind keyword arguments; call it
        locally or remotely; hand it to TRL with `RewardFunction.get_trl_adapter`.
    RewardMode: ``"local"``, ``"remote"`` or ``"fireworks_hosted"``.

Example:
    >>> from rk_agent import RewardFunction
    >>> rf = RewardFunction("format", tags=["answer"])
    >>> rf(messages=[{"role": "user", "content": "2+2?"},
    ...              {"role": "assistant", "content": "<answer>4</answer>"}]).score
    1.0
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Literal

from rk_agent.errors import ConfigError, RewardInputError
from rk_agent.rewards.decorator import AnyRewardFn, check_options, reward_function
from rk_agent.rewards.deploy_targets import get_hosted_source
from rk_agent.rewards.registry import RewardLike, get_reward_function
from rk_agent.rewards.trl_adapter import to_trl_reward
from rk_agent.types import EvaluateResult, Message

__all__ = ["FIREWORKS_REWARD_URL", "RewardFunction", "RewardMode"]

RewardMode = Literal["local", "remote", "fireworks_hosted"]

FIREWORKS_REWARD_URL = "https://api.fireworks.ai/v1/models/{model_id}/reward"
"""Where a ``fireworks_hosted`` reward is called (reward-kit's convention; not yet verified
against the live service from here)."""

_MODES = ("local", "remote", "fireworks_hosted")


class RewardFunction:
    """A reward you can call, bind arguments to, run remotely, and plug into TRL.

    Args:
        func: the reward: a callable (decorated or not), a registered name, ``"pkg.module:fn"``
            or ``"file.py::fn"``. Required in ``local`` mode.
        func_path: the same as a string (reward-kit's spelling); give ``func`` or ``func_path``.
        mode: ``"local"`` calls the function in-process; ``"remote"`` POSTs to ``endpoint``,
            or, with ``name`` and no endpoint, calls the reward deployed to Fireworks under that
            evaluator id (`rk_agent.fireworks.hosted`); ``"fireworks_hosted"`` POSTs to the
            Fireworks reward endpoint of ``model_id``.
        endpoint: the URL of a reward server's ``/evaluate`` (``remote`` mode).
        name: the reward's name (defaults to the function's); TRL logs under this name. In
            ``remote`` mode without ``endpoint``: the deployed evaluator's id, checked now.
        model_id: the Fireworks evaluator/model id (``fireworks_hosted`` mode).
        api_key: bearer key for remote modes; ``remote`` falls back to
            ``RK_AGENT_SERVER_API_KEY``, ``fireworks_hosted`` to ``FIREWORKS_API_KEY``. Never
            logged or shown in errors.
        timeout: seconds per remote attempt. Remote calls retry timeouts, connection errors,
            408, 429 and 5xx up to 3 times with backoff (`rk_agent.rewards.remote`).
        client_cert: ``remote`` mode over HTTPS with mutual TLS: the client certificate to
            present, as ``(cert.pem, key.pem)`` or one PEM file holding both.
        ca_cert: the CA (PEM) that signed the server's certificate, for a private CA
            (default: the system's CAs).
        **bound_kwargs: passed to the function on every call, e.g.
            ``expected_call_schema={...}, argument_match_strictness="exact"``.

    Raises:
        ConfigError: an unknown mode, or what the mode needs is missing.
        FireworksError: ``remote`` by ``name``: no such evaluator, or it is not ``ACTIVE``.
    """

    def __init__(
        self,
        func: RewardLike | None = None,
        *,
        func_path: str | None = None,
        mode: RewardMode = "local",
        endpoint: str | None = None,
        name: str | None = None,
        model_id: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        client_cert: str | tuple[str, str] | None = None,
        ca_cert: str | None = None,
        **bound_kwargs: Any,
    ) -> None:
        if mode not in _MODES:
            raise ConfigError(f"unknown reward mode {mode!r}; expected one of {', '.join(_MODES)}.")
        if func is not None and func_path is not None:
            raise ConfigError("give either func or func_path, not both.")
        spec = func if func is not None else func_path
        self.mode: RewardMode = mode
        self.bound_kwargs = bound_kwargs
        self.timeout = timeout
        self._api_key = api_key
        self._func: AnyRewardFn | None = None
        self._hosted: Callable[[dict[str, Any]], EvaluateResult] | None = None
        self._tls = _client_tls(client_cert, ca_cert)
        if spec is not None:
            self._func = get_reward_function(spec)
            check_options(self._func, bound_kwargs)
        if mode == "local":
            if self._func is None:
                raise ConfigError(
                    "a local RewardFunction needs func=... (a callable, a registered name, "
                    "'pkg.module:fn' or 'file.py::fn') or func_path=..."
                )
            self.endpoint = None
        elif mode == "remote":
            if not endpoint and name:
                # Called by name: the source (loaded by name, so rewards do not import
                # rk_agent.fireworks) finds the deployed evaluator and scores through it.
                source = get_hosted_source("fireworks")
                self._hosted = source(name, api_key=api_key, timeout=timeout)
            elif not endpoint:
                raise ConfigError(
                    "mode='remote' needs endpoint='http://host:port/evaluate' (a reward server) "
                    "or name='my-evaluator' (a reward deployed to Fireworks)."
                )
            self.endpoint = endpoint
        else:
            if not model_id:
                raise ConfigError("mode='fireworks_hosted' needs model_id=... (the evaluator id).")
            self.endpoint = endpoint or FIREWORKS_REWARD_URL.format(model_id=model_id)
            self._api_key = api_key or os.environ.get("FIREWORKS_API_KEY")
            if not self._api_key:
                raise ConfigError(
                    "mode='fireworks_hosted' needs a Fireworks API key: set FIREWORKS_API_KEY "
                    "or pass api_key=..."
                )
        self.model_id = model_id
        self.name = name or (self._func.reward_spec.name if self._func else "remote_reward")

    def __repr__(self) -> str:
        where = self.endpoint if self.mode != "local" and self.endpoint else self.name
        return f"RewardFunction({where!r}, mode={self.mode!r})"

    @property
    def is_async(self) -> bool:
        """Whether calling the local function needs an event loop (use `acall`)."""
        return bool(self._func and self._func.reward_spec.is_async)

    def __call__(
        self,
        messages: Sequence[Message | dict[str, Any]] | None = None,
        original_messages: Sequence[Message | dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> EvaluateResult:
        """Score one sample.

        Args:
            messages: the conversation, ending with the reply to score.
            original_messages: the prompt part; defaults to ``messages[:-1]``.
            **kwargs: ``ground_truth`` and any other fields; they override bound kwargs.

        Raises:
            RewardInputError: ``messages`` is missing, or an async reward is called from
                inside a running event loop (use ``await rf.acall(...)`` there).
        """
        call_kwargs = self._call_kwargs(messages, original_messages, kwargs)
        if self.mode != "local":
            return self._post(call_kwargs)
        assert self._func is not None
        if not self.is_async:
            return self._func(**call_kwargs)  # type: ignore[return-value]
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._func(**call_kwargs))  # type: ignore[arg-type]
        raise RewardInputError(
            f"reward {self.name!r} is async and an event loop is running: use "
            "`await reward.acall(...)` instead of calling it."
        )

    async def acall(
        self,
        messages: Sequence[Message | dict[str, Any]] | None = None,
        original_messages: Sequence[Message | dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> EvaluateResult:
        """Score one sample from async code; sync rewards run in a worker thread, remote calls
        use a shared async HTTP client (no thread)."""
        import asyncio

        call_kwargs = self._call_kwargs(messages, original_messages, kwargs)
        if self._hosted is not None:
            return await asyncio.to_thread(self._hosted, call_kwargs)
        if self.mode != "local":
            from rk_agent.rewards.remote import apost_evaluate

            assert self.endpoint is not None
            return await apost_evaluate(
                self.endpoint, call_kwargs, api_key=self._api_key, timeout=self.timeout,
                tls=self._tls,
            )  # fmt: skip
        assert self._func is not None
        if self.is_async:
            return await self._func(**call_kwargs)  # type: ignore[misc]
        return await asyncio.to_thread(self._func, **call_kwargs)  # type: ignore[arg-type]

    def as_reward_fn(self) -> AnyRewardFn:
        """This reward as a decorated reward function (bound arguments and mode kept), so a
        `RewardFunction` goes wherever a reward does (`get_reward_function`, `combine`, ...)."""
        return reward_function(name=self.name)(self.__call__)

    def get_trl_adapter(self, **adapter_kwargs: Any) -> Callable[..., list[float | None]]:
        """A TRL reward function: ``(prompts, completions, **columns) -> list[float | None]``.

        See `rk_agent.rewards.trl_adapter.to_trl_reward` for the details.
        """
        return to_trl_reward(self, **adapter_kwargs)

    def _call_kwargs(
        self,
        messages: Sequence[Message | dict[str, Any]] | None,
        original_messages: Sequence[Message | dict[str, Any]] | None,
        kwargs: dict[str, Any],
    ) -> dict[str, Any]:
        if messages is None and "response" not in kwargs:
            raise RewardInputError(
                f"reward {self.name!r} needs messages=[...] (the conversation ending with the "
                "reply to score)."
            )
        call_kwargs = {**self.bound_kwargs, **kwargs}
        if messages is not None:
            call_kwargs["messages"] = list(messages)
        if original_messages is not None:
            call_kwargs["original_messages"] = list(original_messages)
        return call_kwargs

    def _post(self, call_kwargs: dict[str, Any]) -> EvaluateResult:
        if self._hosted is not None:
            return self._hosted(call_kwargs)
        from rk_agent.rewards.remote import post_evaluate

        assert self.endpoint is not None
        return post_evaluate(
            self.endpoint, call_kwargs, api_key=self._api_key, timeout=self.timeout,
            tls=self._tls,
        )  # fmt: skip


def _client_tls(cert: str | tuple[str, str] | None, ca: str | None) -> Any:
    """The `rk_agent.rewards.remote.ClientTLS` for ``client_cert``/``ca_cert`` (None if unset);
    the files are loaded now, so a wrong path fails here rather than at the first call."""
    if cert is None and ca is None:
        return None
    from rk_agent.rewards.remote import ClientTLS

    if cert is None or isinstance(cert, str | os.PathLike):
        cert_file, key_file = (os.fspath(cert) if cert else None), None
    else:
        cert_file, key_file = (os.fspath(part) for part in cert)
    tls = ClientTLS(cert=cert_file, key=key_file, ca=os.fspath(ca) if ca else None)
    tls.context()
    return tls
