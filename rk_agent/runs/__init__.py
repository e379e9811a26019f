"""rk_agent.runs: a run on disk, and everything that reads it.

A run folder (``runs/<name>/``) is what a rollout or a training run leaves: its config, its
trajectories, its record and summary. This package owns that folder and every reader of it;
`rk_agent.rollouts` plays the episodes that fill it, and the trainers, the viewer, the
soundness checks and the command line read it from here.

Modules:
    config / workers: a rollout run's options (`RolloutConfig`), Ray workers' included.
    run_dir / run_lock / run_record: the folder on disk (`RunDir`), its lock, and the record
        every run folder keeps, training runs' too (`RunRecord`, ``run.json``).
    run_trust / run_wants: whether a run folder is one rk-agent wrote on this machine (its
        config signed with a per-user key), and what its config would import, start or reach
        (refused for a run from elsewhere unless ``--trust-run``).
    trajectory / provenance: what an episode recorded (`Trajectory`) and what the model saw
        (`RunProvenance`, ``provenance.json``).
    summary / stats / watch / alarms / watch_log / token_drift / segment_tokens: what a run's
        episodes add up to, the signals and alarms a batch raises, a training run's watch
        log, and whether the tokens trained on are the tokens the model produced.
    group_sampling: what a training run's dynamic sampling and task retirement did, per step
        and in all (`StepSampling`, `SamplingRecord`).
    replay / rescore / rescorer / rescore_workers / compare: runs played again turn by turn,
        scored again (on worker processes from 8 MiB), and compared.
"""
