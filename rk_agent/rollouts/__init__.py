"""rk_agent.rollouts: arrives with its own issue."""
