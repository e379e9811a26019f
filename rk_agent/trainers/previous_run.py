"""What ``rk-agent train`` says about the last run in its folder, if it did not end cleanly.

The run's record (``run.json``: `rk_agent.runs.run_record`) is rewritten after every
optimizer step, then once more when the run ends. A process the OS kills (the kernel's
out-of-memory killer, ``kill -9``, a lost machine) cannot write that last word, so its record
still says ``running`` with a process that no longer exists. The next start in the same folder
reads it (`previous_run_note`) and says what happened, with the memory last seen, before it
resumes from the last complete checkpoint, which a killed run leaves intact (the Trainer writes
a checkpoint's ``trainer_state.json`` last, and an incomplete one is skipped).

Main names: `previous_run_note`.
"""

from __future__ import annotations

from pathlib import Path

from rk_agent.runs.run_record import RunKind, RunRecord, RunStatus, read_run_record

__all__ = ["previous_run_note"]

_GB = 1024**3


def previous_run_note(output_dir: str | Path) -> str | None:
    """What to tell the user about the last run in ``output_dir``, if it did not end cleanly.

    Returns:
        ``None`` when there is no training run's record, or the last run finished or is still
        running (its process is alive); otherwise one paragraph: how it ended, at which step,
        the memory last seen and, for a run killed without a word, the likely cause and what to
        change.
    """
    record = read_run_record(output_dir)
    if record is None or record.kind is not RunKind.TRAINING:
        return None
    if record.status in (None, RunStatus.FINISHED):  # None: a word that is not a status
        return None
    step = f"at step {record.global_step or 0}"
    saved = f"; its last checkpoint is {record.last_checkpoint}" if record.last_checkpoint else ""
    if record.status is RunStatus.INTERRUPTED:
        return f"the previous run in {output_dir} was interrupted (Ctrl-C) {step}{saved}."
    if record.status is RunStatus.FAILED:
        return f"the previous run in {output_dir} failed {step}: {record.error}{saved}."
    if record.status is RunStatus.STOPPED:
        return f"the previous run in {output_dir} was stopped by an alarm {step}{saved}."
    if record.writer_alive():
        return None  # another process is training in this folder right now; not ours to judge
    return (
        f"the previous run in {output_dir} (pid {record.pid}, started "
        f"{record.started_at:%Y-%m-%d %H:%M} UTC) stopped {step} without finishing and without "
        f"an error: its process was killed (the kernel's out-of-memory killer, kill -9, or a "
        f"lost machine){saved}. {_memory_words(record)}"
    )


def _memory_words(record: RunRecord) -> str:
    used, total = record.rss_bytes, record.machine_memory_bytes
    peak = record.peak_rss_bytes
    if used is None or peak is None:
        return "Its memory use was not recorded."
    words = (
        f"Its resident memory was {used / _GB:.1f} GB when last recorded (peak {peak / _GB:.1f} GB"
    )
    words += f", of {total / _GB:.1f} GB on the machine)." if total else ")."
    if total and peak > 0.6 * total:
        words += (
            " That is close to all of the machine's memory: the OS most likely killed it for "
            "memory. Lower per_device_train_batch_size (raise gradient_accumulation_steps to "
            "keep the batch), max_completion_length or num_generations, or turn on "
            "--gradient_checkpointing."
        )
    return words
