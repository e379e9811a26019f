"""rk_agent.envs: arrives with its own issue."""
