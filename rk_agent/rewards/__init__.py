"""Reward functions: the decorator, `RewardFunction`, composition, the registry and built-ins."""
