"""rk_agent.trainers: environments, rewards and trajectories in; TRL GRPO and SFT runs out.

Modules:
    tasks: an environment's tasks as a TRL dataset (`env_dataset`).
    rollout: the multi-turn GRPO ``rollout_func`` (`EpisodeRollout`), on the token-exact
        episodes of `rk_agent.policies.episode_tokens`.
    rewards: TRL reward functions, one per component, with episode statistics.
    grpo: `grpo_trainer`, a TRL ``GRPOTrainer`` wired to an environment.
    trl_env / trl_tool_env: the same with TRL's own tool loop (``environment_factory``).
    grpo_builder: the one place both build their ``GRPOTrainer`` (`build_grpo_trainer`).
    hooked_trainer / scored_batch: that ``GRPOTrainer``, which hands each generation batch to
        its hooks before scoring it (trajectory log, watch, dynamic sampling).
    group_sampling / task_draws / trl_batches: dynamic sampling (groups without reward
        spread replaced by fresh tasks) and task retirement, in both loops.
    sft_data / sft: SFT (rejection sampling) from trajectories, assistant-only loss.
    config / trl_args / wandb_setup / run: ``rk-agent train``'s config, TRL options with
        device defaults, wandb (offline without a key), and the run itself.
    callbacks / memory / previous_run / watch: the run's record (``run.json``, in
        `rk_agent.runs.run_record`) with its memory figures, what the next start says
        about a run that did not end cleanly, and the watch's alarms.

Heavy dependencies (torch, transformers, trl, datasets, wandb) load only when used.
"""
