"""rk_agent.testing: the test doubles rk-agent ships, for your tests and ours.

Test your environments, rewards and deployment code without a model or an account, over real
HTTP where a client is involved. Nothing else in rk-agent imports this package: it is for
tests, benchmarks and trying things out (``python -m rk_agent.testing.stub_server``,
``python -m rk_agent.testing.fake_fireworks``).

Main names:
    ScriptedPolicy: a policy that replies from a list (`rk_agent.testing.scripted_policy`).
    StubServer, Fault, StubRequest, call_first_tool_then_answer: an OpenAI-compatible
        chat-completions (and vLLM token-id completions) server on loopback, with scripted
        replies, latency and injected failures (`rk_agent.testing.stub_server`).
    FakeFireworks, FakeRequest: a fake Fireworks control-plane API on loopback
        (`rk_agent.testing.fake_fireworks`).

Example:
    >>> from rk_agent.testing import StubServer
    >>> with StubServer(["4"]) as server:
    ...     server.base_url.startswith("http://127.0.0.1:")
    True
"""

from rk_agent._lazy import attach_stub

# The public names are listed once, in __init__.pyi (also read by type checkers).
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
