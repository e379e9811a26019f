"""Tool-call text formats: how a model without native tool calling writes calls, and how they
are read back.

The policies (`OpenAIPolicy` in its text protocol, `HFPolicy`, `VLLMPolicy`), the TRL tool
environment and the function-calling rewards all read calls through one `ToolCallFormat`, so a
reward and the rollout engine always agree on whether a call parsed. This package sits below
rewards and rollouts: it imports only `rk_agent.types` and `rk_agent.errors`.

Formats (`get_tool_call_format` by name):
    ``"hermes"`` (default, `HermesFormat`): ``<tool_call>{"name": ..., "arguments": {...}}
    </tool_call>`` blocks, as Hermes 2 Pro and Qwen2.5/Qwen3 templates write them.
    ``"llama3_json"`` (`Llama3JsonFormat`): the reply is ``{"name": ..., "parameters": {...}}``,
    optionally after ``<|python_tag|>``, as Llama 3.1/3.2/3.3 Instruct templates write it.

Main names:
    ToolCallFormat: the protocol (render tools, render messages, parse, render one call,
        feedback after a malformed call).
    ParsedReply: what ``parse`` returns.
    get_tool_call_format, register_tool_call_format, tool_call_format_names,
        DEFAULT_TOOL_CALL_FORMAT: the registry.
    HERMES, LLAMA3_JSON: the built-in formats.

Example:
    >>> from rk_agent.tool_calls import get_tool_call_format
    >>> llama = get_tool_call_format("llama3_json")
    >>> reply = llama.parse('<|python_tag|>{"name": "add", "parameters": {"a": 1}}')
    >>> print(get_tool_call_format("hermes").render_call(reply.message.tool_calls[0]))
    <tool_call>
    {"name": "add", "arguments": {"a": 1}}
    </tool_call>
"""

from rk_agent._lazy import attach_stub

# The public names are listed once, in __init__.pyi (also read by type checkers).
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
