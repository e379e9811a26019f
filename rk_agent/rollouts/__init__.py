"""rk_agent.rollouts: policies (models), the rollout engine, run directories and summaries."""
