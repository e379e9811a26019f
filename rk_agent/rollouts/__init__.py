"""rk_agent.rollouts: the rollout engine, run directories, trajectories and summaries.

Modules:
    engine / episode / slots / workers / ray_workers: `run_rollouts`, the episode loop, and
        the episodes in flight, in this process or on Ray actors.
    config / runner / run_dir / run_lock / run_record / provenance: a run's options, its
        set-up (`prepare_run`), its folder on disk (`RunDir`), and the record every run folder
        keeps, training runs' too (`RunRecord`, ``run.json``).
    trajectory / summary / stats / watch / alarms / token_drift: what an episode recorded, and
        what a run's episodes add up to.
    replay / fork / rescore / compare: runs played again, continued, scored again, compared;
        rescorer / rescore_workers: one episode scored again, and rescoring on worker
        processes.

The models the engine plays with are in `rk_agent.policies`; its test doubles in
`rk_agent.testing`.
"""
