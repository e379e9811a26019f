"""A tool server that fails as it starts (its setup raises)."""

import verifiers.v1 as vf


class Broken(vf.Toolset[vf.ToolsetConfig]):
    async def setup(self) -> None:
        raise RuntimeError("the database is not there")

    @vf.tool
    def query(self, sql: str) -> str:
        """Run a query."""
        return sql


if __name__ == "__main__":
    Broken.run()
