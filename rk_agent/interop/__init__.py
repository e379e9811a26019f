"""Environments from elsewhere: one module per outside source, each behind its own extra.

Each module defines an `rk_agent.envs.sources.EnvSource` (``SOURCE``) that rk-agent's package
metadata lists in the ``rk_agent.env_sources`` entry-point group, and imports its foreign
package only when an environment of it is built, so that ``rk-agent envs list`` can say whether
it is installed without importing it.

- `rk_agent.interop.reasoning_gym`: ``reasoning-gym:NAME[,NAME...]``, the procedural
  generators of reasoning-gym (``pip install 'rk-agent[reasoning-gym]'``).
- `rk_agent.interop.openenv`: ``openenv:URL``, an OpenEnv server's environment, and
  ``rk-agent openenv serve`` (``pip install 'rk-agent[openenv]'``).
- `rk_agent.interop.bfcl`: ``bfcl:CATEGORY``, BFCL v4's multi-turn entries scored by its own
  checker (``pip install 'rk-agent[bfcl]' && pip install --no-deps bfcl-eval==2026.3.23``);
  `rk_agent.interop.bfcl_package` is its boundary with bfcl-eval.
- `rk_agent.interop.verifiers`: ``verifiers:MODULE``, verifiers v1 tasksets scored from the
  transcript (``pip install 'rk-agent[verifiers]'``), with `verifiers_trace` (the ``Trace`` and
  its score), `verifiers_toolsets` (their MCP toolsets as tools) and `verifiers_launch` (how
  those servers are started).
"""
