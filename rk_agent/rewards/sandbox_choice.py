"""The sandbox mode of a reward that runs code, fixed by whoever hosts it (a server, a preview).

Main names:
    fix_sandbox: the reward with its sandbox mode fixed and checked at start-up.
    fixed_sandbox: the mode a reward was fixed to, if any.
    describe: a mode in a few words, for a terminal.
    takes_sandbox: whether a reward runs model code (it has a ``sandbox`` parameter).

``rk-agent serve`` and ``rk-agent preview`` choose the mode once, with ``--sandbox`` (default
``bwrap``): the reward is checked against it when they start (a machine that cannot isolate
code fails there, with the cause and the fix, not on every sample), every call gets that mode,
and a sample that asks for another mode is refused rather than obeyed: a client cannot turn
isolation off on a server whose operator did not. The mode each result was judged in is in the
result (the ``sandbox`` metric of ``code_execution``).

Example:
    >>> from rk_agent.rewards.builtin.code_execution import code_execution_reward
    >>> reward = fix_sandbox(code_execution_reward, "process")
    >>> msgs = [{"role": "assistant", "content": "```python\\nprint(2)\\n```"}]
    >>> reward(messages=msgs, ground_truth=[{"input": "", "expected_output": "2"}]).score
    1.0
"""

from __future__ import annotations

import inspect
from typing import Any

from rk_agent.errors import ConfigError, RewardInputError
from rk_agent.rewards.decorator import AnyRewardFn, reward_function
from rk_agent.sandbox import SandboxMode, require_sandbox, sandbox_mode
from rk_agent.types import EvaluateResult

__all__ = ["describe", "fix_sandbox", "fixed_sandbox", "takes_sandbox"]

_FIXED = "fixed_sandbox"  # the attribute a fixed reward carries its mode in


def takes_sandbox(reward: Any) -> bool:
    """Whether ``reward`` runs model code: it has a parameter named ``sandbox`` (``**kwargs``
    alone does not count).

    Example:
        >>> from rk_agent.rewards.registry import get_reward_function as get
        >>> takes_sandbox(get("code_execution")), takes_sandbox(get("math"))
        (True, False)
    """
    if fixed_sandbox(reward) is not None:
        return True
    func = getattr(reward, "__wrapped__", reward)
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    found = parameters.get("sandbox")
    return found is not None and found.kind in (found.POSITIONAL_OR_KEYWORD, found.KEYWORD_ONLY)


def fixed_sandbox(reward: Any) -> SandboxMode | None:
    """The mode `fix_sandbox` fixed for ``reward``, or ``None``."""
    mode = getattr(reward, _FIXED, None)
    return mode if isinstance(mode, SandboxMode) else None


def describe(mode: SandboxMode) -> str:
    """One phrase for a terminal, e.g. ``"sandbox mode 'process' (NOT isolated)"``."""
    isolation = "isolated" if mode is SandboxMode.BWRAP else "NOT isolated"
    return f"sandbox mode {mode.value!r} ({isolation})"


def fix_sandbox(reward: AnyRewardFn, sandbox: SandboxMode | str | None) -> AnyRewardFn:
    """``reward`` with its sandbox mode fixed, checked now (see the module docs).

    Args:
        reward: a decorated reward.
        sandbox: ``"bwrap"``, ``"process"``, or ``None`` for the default (``bwrap``) where
            the reward runs code.

    Returns:
        ``reward`` itself when it runs no code and no mode was asked for; else a reward of the
        same name that calls it with ``sandbox=<mode>`` and refuses (`RewardInputError`) a
        sample asking for another mode.

    Raises:
        ConfigError: a mode was asked for a reward that runs no code, or the mode is unknown.
        SandboxError: the mode cannot run code here; the message names the cause and the fix.
    """
    name = reward.reward_spec.name
    already = fixed_sandbox(reward)
    if already is not None:
        if sandbox is None or sandbox_mode(sandbox) is already:
            return reward
        raise ConfigError(
            f"reward {name!r} already runs code in sandbox mode {already.value!r}; "
            f"it cannot also run in {sandbox_mode(sandbox).value!r}."
        )
    if not takes_sandbox(reward):
        if sandbox is None:
            return reward
        raise ConfigError(
            f"--sandbox applies to rewards that run model code (they take a `sandbox` "
            f"argument, like code_execution); reward {name!r} takes none. Drop --sandbox."
        )
    mode = require_sandbox(SandboxMode.BWRAP if sandbox is None else sandbox)

    def call_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
        asked = kwargs.pop("sandbox", None)
        if asked is not None and sandbox_mode(asked) is not mode:
            raise RewardInputError(
                f"this sample asks for sandbox {str(getattr(asked, 'value', asked))!r}, but "
                f"reward {name!r} runs code in mode {mode.value!r} here (chosen with "
                "--sandbox when it was started); drop the sample's 'sandbox'."
            )
        return {**kwargs, "sandbox": mode}

    decorate = reward_function(name=name, description=reward.reward_spec.description)
    if reward.reward_spec.is_async:

        async def fixed_async(**kwargs: Any) -> EvaluateResult:
            return await reward(**call_kwargs(kwargs))  # type: ignore[misc]

        out: AnyRewardFn = decorate(fixed_async)
    else:

        def fixed(**kwargs: Any) -> EvaluateResult:
            return reward(**call_kwargs(kwargs))  # type: ignore[return-value]

        out = decorate(fixed)
    setattr(out, _FIXED, mode)
    return out
