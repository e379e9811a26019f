"""A stateless per-rollout tool, offered to the tasks that ask for it."""

import verifiers.v1 as vf


class Calculator(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "calc"

    @vf.tool
    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        return a + b


if __name__ == "__main__":
    Calculator.run()
