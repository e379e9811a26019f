"""rk_agent.rollouts: playing episodes.

Modules:
    engine / episode / slots: `run_rollouts`, the episode loop, and the episodes in flight.
    ray_workers: the same on Ray actors.
    runner: a run's set-up (`prepare_run`) and its play, written to its folder.
    fork: a run continued from the recorded turns of another.

A run on disk (its config, folder, trajectories, record, summary) and everything that reads it
again (replay, rescore, compare, the watch and alarms) are in `rk_agent.runs`; the models the
engine plays with are in `rk_agent.policies`; its test doubles in `rk_agent.testing`.
"""
