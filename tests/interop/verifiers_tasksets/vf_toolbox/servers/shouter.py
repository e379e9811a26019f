"""A taskset-scoped tool server: one for the whole run, its tool offered bare (no prefix)."""

import verifiers.v1 as vf


class Shouter(vf.Toolset[vf.SharedToolsetConfig]):
    TOOL_PREFIX = None

    @vf.tool
    def shout(self, text: str) -> str:
        """Say the text loudly."""
        return text.upper() + "!"


if __name__ == "__main__":
    Shouter.run()
