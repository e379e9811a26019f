"""rk_agent.trainers: arrives with its own issue."""
