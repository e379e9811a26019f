"""A model's chat format, written and read: prompts from its chat template, replies from its text.

A policy that generates from token ids (a local model, `HFPolicy`; a served one, `VLLMPolicy`)
renders the conversation itself with the model's tokenizer, and reads the generated text back
into a message. This module is that shared part:

- `ChatTemplate`, a mixin giving ``render`` (the prompt text) and ``encode`` (its token ids) to a
  policy that has a ``tokenizer`` and a ``native_tools`` flag;
- `native_tools`: whether tools go through the chat template (``tools=``) or a text tool-call
  format of `rk_agent.tool_calls` (``tool_format``, tried on the template, not guessed);
- `end_of_turn_ids`: the tokens a reply stops at (the configured end-of-sequence tokens and
  ChatML's ``<|im_end|>``);
- `read_reply`: the generated text as an assistant message, tool calls parsed with the
  policy's `rk_agent.tool_calls.ToolCallFormat` (Hermes ``<tool_call>`` blocks by default);
- `native_message`: a `Message` as chat templates expect it.

Main names: `ChatTemplate`, `ToolFormat`, `native_tools`, `end_of_turn_ids`, `read_reply`,
`native_message`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, cast

from rk_agent.errors import ConfigError
from rk_agent.tool_calls import HERMES, ParsedReply, ToolCallFormat
from rk_agent.types import Message

__all__ = [
    "ChatTemplate",
    "ToolFormat",
    "end_of_turn_ids",
    "native_message",
    "native_tools",
    "read_reply",
]

ToolFormat = Literal["auto", "native", "text"]
"""How tools reach the model: the chat template's own way, the text protocol, or ``"auto"``."""

_PROBE_TOOL = "rk_agent_probe_tool"


class ChatTemplate:
    """Prompt rendering for a policy with a ``tokenizer`` and a ``native_tools`` flag (a mixin).

    Attributes:
        tokenizer: the model's tokenizer (its chat template renders the prompt).
        native_tools: ``True``: tools go to the template (``tools=``); ``False``: the text
            tool-call format describes them in the system prompt.
        tool_call_format: the text tool-call format used when ``native_tools`` is ``False``
            (default: Hermes ``<tool_call>`` blocks; set it to another
            `rk_agent.tool_calls.get_tool_call_format` to change it).
    """

    tokenizer: Any
    native_tools: bool
    tool_call_format: ToolCallFormat = HERMES

    def render(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        *,
        add_generation_prompt: bool = True,
    ) -> str:
        """The prompt text the model sees (chat template applied, generation prompt added)."""
        if self.native_tools:
            native = [native_message(m) for m in messages]
            return _apply_template(self.tokenizer, native, tools or None, add_generation_prompt)
        text_messages = self.tool_call_format.render_messages(messages, tools)
        return _apply_template(self.tokenizer, text_messages, None, add_generation_prompt)

    def encode(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> list[int]:
        """The prompt's token ids (`render`, tokenized without extra special tokens)."""
        text = self.render(messages, tools)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def native_tools(tokenizer: Any, tool_format: str) -> bool:
    """Whether tools go through the chat template: ``"native"``, ``"text"``, or ``"auto"``
    (native when the template renders tools, tool calls and tool results; tried).

    Raises:
        ConfigError: ``tool_format`` is none of the three.
    """
    if tool_format not in ("auto", "native", "text"):
        raise ConfigError(f"tool_format must be 'auto', 'native' or 'text', got {tool_format!r}.")
    return _supports_tools(tokenizer) if tool_format == "auto" else tool_format == "native"


def end_of_turn_ids(tokenizer: Any, generation_config: Any = None) -> set[int]:
    """The tokens that end a reply: ``generation_config.eos_token_id`` (one or several), the
    tokenizer's end-of-sequence token, and ChatML's ``<|im_end|>`` when the vocabulary has it.

    Raises:
        ConfigError: there is none.
    """
    ids: set[int] = set()
    configured = getattr(generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(int(i) for i in configured)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")  # ChatML's end of turn
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
        ids.add(im_end)
    if not ids:
        raise ConfigError(
            "the model has no end-of-sequence token (generation_config.eos_token_id)."
        )
    return ids


def read_reply(
    text: str,
    tools: list[dict[str, Any]] | None,
    finish_reason: str | None,
    tool_call_format: ToolCallFormat = HERMES,
) -> tuple[ParsedReply, str | None]:
    """The generated text as an assistant message, and the finish reason to report.

    When ``tools`` are offered, the calls written in ``tool_call_format`` (default: Hermes
    ``<tool_call>`` blocks) become ``tool_calls`` (a malformed one leaves the raw text and sets
    ``parse_error``) and a reply that stopped on its own with tool calls finishes with
    ``"tool_calls"``; without tools the text is the reply, whatever it looks like.

    Example:
        >>> reply, finish = read_reply("Paris.", None, "stop")
        >>> reply.message.content, finish
        ('Paris.', 'stop')
    """
    if tools:
        reply = tool_call_format.parse(text, tools)
    else:
        reply = ParsedReply(Message(role="assistant", content=text))
    if finish_reason == "stop" and reply.message.tool_calls:
        finish_reason = "tool_calls"
    return reply, finish_reason


def native_message(message: Message) -> dict[str, Any]:
    """A message as chat templates expect it: tool-call arguments as dicts, not JSON strings."""
    role = "system" if message.role == "developer" else message.role
    role = "tool" if role == "function" else role
    out: dict[str, Any] = {"role": role, "content": message.text}
    if message.tool_calls:
        calls = []
        for call in message.tool_calls:
            try:
                arguments: Any = json.loads(call.function.arguments)
            except ValueError:
                arguments = call.function.arguments
            calls.append(
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": arguments},
                }
            )
        out["tool_calls"] = calls
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    return out


def _apply_template(
    tokenizer: Any,
    conversation: Sequence[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    add_generation_prompt: bool = True,
) -> str:
    """The chat template applied as text (with the generation prompt by default)."""
    text = cast(Any, tokenizer).apply_chat_template(
        list(conversation),
        tools=tools,
        add_generation_prompt=add_generation_prompt,
        tokenize=False,
    )
    if not isinstance(text, str):
        raise ConfigError(f"the chat template returned {type(text).__name__}, not text.")
    return text


def _supports_tools(tokenizer: Any) -> bool:
    """Whether the chat template renders tools, tool calls and tool results (tried, not guessed)."""
    tool = {"type": "function", "function": {"name": _PROBE_TOOL, "parameters": {}}}
    call = {"type": "function", "function": {"name": "probe_call", "arguments": {}}}
    conversation: list[dict[str, Any]] = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", **call}]},
        {"role": "tool", "content": "probe_result", "tool_call_id": "c0"},
    ]
    try:
        text = _apply_template(tokenizer, conversation, [tool])
    except Exception:  # any template error means: no native tools
        return False
    return all(needle in text for needle in (_PROBE_TOOL, "probe_call", "probe_result"))
