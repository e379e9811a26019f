"""A taskset with tools: a notebook per rollout (its tools differ per task), a shared shouter."""

from vf_toolbox.taskset import ToolboxTaskset

__all__ = ["ToolboxTaskset"]
