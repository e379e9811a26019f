"""The built-in rewards, apart from the reward API they are written with.

One module per reward family: `math` (answer correctness), `function_calling` (tool calls
against the expected ones), `format` (tags and layout), `json_schema`, `length` (and cosine
length), `repetition`, `code_execution` (tests run in `rk_agent.sandbox`), `llm_judge` and
`relevance`. Each is registered by name (`rk_agent.rewards.registry`: ``"math"``,
``"function_call"``, ...) and loaded only when asked for. Reward Kit's import paths
(``rk_agent.rewards.math``, ``from rk_agent.rewards import math``) lead here too.
"""
