"""Add two numbers; scored by correctness (weight 0.75) and brevity (weight 0.25)."""

import verifiers.v1 as vf


class ScoredData(vf.TaskData):
    answer: str
    """The sum, the reference answer."""


class ScoredTask(vf.Task[ScoredData]):
    @vf.reward(weight=0.75)
    async def correct(self, trace: vf.Trace) -> float:
        return float(trace.last_reply.strip() == self.data.answer)

    @vf.reward(weight=0.25)
    async def brevity(self, trace: vf.Trace) -> float:
        return 1.0 if len(trace.last_reply) <= 8 else 0.5

    @vf.metric
    async def turns(self, trace: vf.Trace) -> float:
        return float(trace.num_turns)

    @vf.metric
    async def shape(self, task: ScoredData, trace: vf.Trace) -> dict[str, float]:
        reply = trace.last_reply
        return {"digits": float(reply.strip().isdigit()), "chars": float(len(reply))}


class ScoredConfig(vf.TasksetConfig):
    num_tasks: int = 6
    offset: int = 0


class ScoredTaskset(vf.Taskset[ScoredTask, ScoredConfig]):
    def load(self) -> list[ScoredTask]:
        tasks = []
        for i in range(self.config.num_tasks):
            a, b = 10 + i + self.config.offset, 3 * i + 1
            data = ScoredData(
                id=f"sum-{i}",
                system_prompt="Answer with the number only.",
                prompt=f"What is {a} + {b}?",
                answer=str(a + b),
            )
            tasks.append(ScoredTask(data, self.config.task))
        return tasks
