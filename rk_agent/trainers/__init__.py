"""rk_agent.trainers: environments, rewards and trajectories in; TRL GRPO and SFT runs out.

Modules:
    tasks: an environment's tasks as a TRL dataset (`env_dataset`).
    rollout: the multi-turn GRPO ``rollout_func`` (`EpisodeRollout`), on the token-exact
        episodes of `rk_agent.policies.episode_tokens`.
    rewards: TRL reward functions, one per component, with episode statistics.
    grpo: `grpo_trainer`, a TRL ``GRPOTrainer`` wired to an environment.
    sft_data / sft: SFT (rejection sampling) from trajectories, assistant-only loss.
    config / trl_args / wandb_setup / run: ``rk-agent train``'s config, TRL options with
        device defaults, wandb (offline without a key), and the run itself.

Heavy dependencies (torch, transformers, trl, datasets, wandb) load only when used.
"""
