"""A taskset scored from the transcript: weighted rewards, metrics, an answer per task."""

from vf_scored.taskset import ScoredTaskset

__all__ = ["ScoredTaskset"]
