"""Type information for `rk_agent.tool_calls`, and its list of public names (one place)."""

from rk_agent.tool_calls.base import (
    ParsedReply as ParsedReply,
    ToolCallFormat as ToolCallFormat,
    tool_names as tool_names,
)
from rk_agent.tool_calls.hermes import HERMES as HERMES, HermesFormat as HermesFormat
from rk_agent.tool_calls.llama import (
    LLAMA3_JSON as LLAMA3_JSON,
    Llama3JsonFormat as Llama3JsonFormat,
)
from rk_agent.tool_calls.registry import (
    DEFAULT_TOOL_CALL_FORMAT as DEFAULT_TOOL_CALL_FORMAT,
    get_tool_call_format as get_tool_call_format,
    register_tool_call_format as register_tool_call_format,
    tool_call_format_names as tool_call_format_names,
)

__all__: list[str]
