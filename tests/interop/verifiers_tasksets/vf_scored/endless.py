"""An infinite taskset (INFINITE = True): its tasks never run out."""

import itertools

import verifiers.v1 as vf

from vf_scored.taskset import ScoredData, ScoredTask


class EndlessTaskset(vf.Taskset[ScoredTask]):
    INFINITE = True

    def load(self):
        for i in itertools.count():
            yield ScoredTask(
                ScoredData(prompt=f"What is {i} + 0?", answer=str(i)), self.config.task
            )


__all__ = ["EndlessTaskset"]
