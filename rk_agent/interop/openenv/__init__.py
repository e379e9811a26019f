"""OpenEnv: its environments played as rk-agent's (import), and rk-agent's served to it (export).

rk-agent speaks OpenEnv's documented protocol itself (the WebSocket sessions of ``/ws``, and
``/schema``, ``/reset``, ``/step``, ``/state``, ``/health`` and ``POST /mcp``, as openenv 0.10.0
serves them) instead of importing the ``openenv`` package, whose fastmcp pins ``mcp<2`` where
rk-agent uses mcp 2.x: OpenEnv's servers and clients run in environments of their own, and the
two meet on the wire.

- `rk_agent.interop.openenv.wire`: the protocol's shapes as the client reads them: URLs, what an
  action schema offers (tools, a text field), observations as messages, tool lists and results;
- `rk_agent.interop.openenv.connection`: one WebSocket session over a plain socket, read and
  written by the thread that steps the environment, and the server's failures as rk-agent's
  errors; `rk_agent.interop.openenv.framing` frames its messages (RFC 6455, the client's side)
  and `rk_agent.interop.openenv.idle_watch` answers the pings of idle ones;
- `rk_agent.interop.openenv.source`: the ``openenv:URL`` source (``OpenEnvEnv``, one session
  per episode);
- `rk_agent.interop.openenv.server`: any rk-agent environment as an OpenEnv server (its ASGI
  app: sessions, ``/ws``, ``/mcp`` and the HTTP endpoints), and
  `rk_agent.interop.openenv.answers`, what it answers in OpenEnv's shapes;
- `rk_agent.interop.openenv.serve`: ``rk-agent openenv serve``: where it listens, its token and
  its Host/Origin checks.
"""
