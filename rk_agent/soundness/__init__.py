"""Is a reward (or an environment) sound? Play the policies that cheat against it.

Modules:
    probes: the `Probe` protocol (the hook for your own probes) and the generic and math probes.
    catalogue: every built-in probe, by kind.
    code_probes, tool_probes: the probes for code and for function calling / tool envs.
    reward_check: `check_reward`, on samples with reference replies.
    env_check: `check_env` with ``adversarial=True``, episodes against the reference solver.
    flags: from scores to the flags; report: the `SoundnessReport` (pydantic).

``rk-agent check reward`` and ``rk-agent check env`` run these from the command line.
"""
