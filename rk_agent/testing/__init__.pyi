"""Type information for `rk_agent.testing`, and its list of public names (one place)."""

from rk_agent.testing.fake_fireworks import (
    FakeFireworks as FakeFireworks,
    FakeRequest as FakeRequest,
)
from rk_agent.testing.scripted_policy import (
    ScriptedPolicy as ScriptedPolicy,
)
from rk_agent.testing.stub_server import (
    Fault as Fault,
    StubRequest as StubRequest,
    StubServer as StubServer,
    call_first_tool_then_answer as call_first_tool_then_answer,
)

__all__: list[str]
