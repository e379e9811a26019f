"""W&B plans (online with a key, offline without, never a prompt), env setup, redaction, and a
real offline run through TRL whose files hold no secret."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rk_agent.errors import NotAvailableError
from rk_agent.secrets import is_secret_name, redact, secret_values
from rk_agent.trainers.config import WandbSettings
from rk_agent.trainers.wandb_setup import (
    WandbPlan,
    apply_wandb,
    find_api_key_source,
    finish_wandb,
    plan_wandb,
    restore_environ,
)

SECRET = "sk-test-secret-0123456789"


def _plan(tmp_path: Path, env: dict[str, str], **settings: Any) -> WandbPlan:
    return plan_wandb(WandbSettings(**settings), tmp_path / "run", environ=env, installed=True)


def test_no_key_logs_offline_and_says_how_to_sync(tmp_path: Path) -> None:
    plan = _plan(tmp_path, {"HOME": str(tmp_path)})
    run = tmp_path / "run"
    assert (plan.report_to, plan.mode, plan.directory) == (["wandb"], "offline", run)
    assert plan.notes == [
        f"wandb: no API key, logging offline to {run}; "
        f"upload later with `wandb sync {run}/wandb/offline-run-*`"
    ]


def test_a_key_in_the_environment_logs_online(tmp_path: Path) -> None:
    plan = _plan(tmp_path, {"WANDB_API_KEY": SECRET}, project="p")
    assert (plan.report_to, plan.mode, plan.project) == (["wandb"], "online", "p")
    assert plan.notes == ["wandb: logging to project 'p' (key from WANDB_API_KEY)."]
    assert SECRET not in repr(plan)


def test_a_netrc_entry_for_the_wandb_host_logs_online(tmp_path: Path) -> None:
    netrc = tmp_path / ".netrc"
    netrc.write_text(f"machine api.wandb.ai\n  login user\n  password {SECRET}\n")
    netrc.chmod(0o600)
    assert find_api_key_source({"HOME": str(tmp_path)}) == str(netrc)
    assert find_api_key_source({"NETRC": str(netrc)}) == str(netrc)
    assert _plan(tmp_path, {"HOME": str(tmp_path)}).mode == "online"
    # An entry for another host (a private W&B server) is not a key for api.wandb.ai.
    other = {"HOME": str(tmp_path), "WANDB_BASE_URL": "https://wandb.example.com"}
    assert find_api_key_source(other) is None
    assert _plan(tmp_path, other).mode == "offline"


def test_modes_from_settings_and_environment(tmp_path: Path) -> None:
    key = {"WANDB_API_KEY": SECRET}
    assert _plan(tmp_path, key, mode="offline").mode == "offline"
    assert _plan(tmp_path, {**key, "WANDB_MODE": "offline"}).mode == "offline"
    assert _plan(tmp_path, {**key, "WANDB_MODE": "offline"}, mode="online").mode == "online"
    for disabled in (_plan(tmp_path, key, enabled=False), _plan(tmp_path, key, mode="disabled"),
                     _plan(tmp_path, {**key, "WANDB_MODE": "disabled"})):  # fmt: skip
        assert (disabled.report_to, disabled.mode, disabled.notes) == ([], "disabled", [])
    # Online without a key would stop at a login prompt: log offline and say why.
    forced = _plan(tmp_path, {}, mode="online")
    assert forced.mode == "offline"
    assert forced.notes[0].startswith("wandb: mode online but no API key found, logging offline")


def test_not_installed(tmp_path: Path) -> None:
    plan = plan_wandb(WandbSettings(), tmp_path, environ={}, installed=False)
    assert (plan.report_to, plan.mode) == ([], "disabled")
    assert plan.notes == [
        "wandb: not installed, so not logging to W&B (`pip install wandb` turns it on)."
    ]
    with pytest.raises(NotAvailableError, match="install it with `pip install wandb`"):
        plan_wandb(WandbSettings(enabled=True), tmp_path, environ={}, installed=False)


def test_apply_sets_the_environment_and_returns_what_was_there(tmp_path: Path) -> None:
    env = {"WANDB_MODE": "online", "OTHER": "x", "WANDB_RESUME": "must"}
    plan = _plan(tmp_path, {})
    previous = apply_wandb(plan, environ=env)
    run_id = (tmp_path / "run" / "wandb" / "rk-agent-run-id").read_text().strip()
    assert re.fullmatch("[a-z0-9]{8}", run_id)
    assert env == {
        "WANDB_MODE": "offline",
        "WANDB_PROJECT": "rk-agent",
        "WANDB_SILENT": "true",
        "WANDB_DIR": str((tmp_path / "run").resolve()),
        "WANDB_RUN_ID": run_id,
        "OTHER": "x",
    }
    assert (tmp_path / "run").is_dir()
    assert previous == {
        "WANDB_MODE": "online", "WANDB_PROJECT": None, "WANDB_SILENT": None, "WANDB_DIR": None,
        "WANDB_RUN_ID": None, "WANDB_RESUME": "must",
    }  # fmt: skip
    restore_environ(previous, env)
    assert env == {"WANDB_MODE": "online", "OTHER": "x", "WANDB_RESUME": "must"}
    off: dict[str, str] = {}
    apply_wandb(_plan(tmp_path, {}, enabled=False), environ=off)
    assert off == {"WANDB_MODE": "disabled"}


def test_a_resumed_run_continues_its_wandb_run_and_a_fresh_one_starts_a_new_one(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, {})
    first: dict[str, str] = {}
    apply_wandb(plan, environ=first)
    resumed: dict[str, str] = {}
    apply_wandb(plan, resume=True, environ=resumed)
    assert resumed["WANDB_RUN_ID"] == first["WANDB_RUN_ID"]
    assert resumed["WANDB_RESUME"] == "allow" and "WANDB_RESUME" not in first
    fresh: dict[str, str] = {}
    apply_wandb(plan, environ=fresh)
    assert fresh["WANDB_RUN_ID"] != first["WANDB_RUN_ID"]


def test_secret_names() -> None:
    secret = ["api_key", "hub_token", "apiKey", "FIREWORKS_API_KEY", "HF_TOKEN", "password",
              "aws_secret", "secret_key", "token"]  # fmt: skip
    plain = ["eos_token", "pad_token", "max_tokens", "average_tokens_across_devices", "PATH",
             "keyword", "monkey", "include_num_input_tokens_seen"]  # fmt: skip
    assert [n for n in secret if not is_secret_name(n)] == []
    assert [n for n in plain if is_secret_name(n)] == []


def test_redact() -> None:
    data = {
        "env_kwargs": {"api_key": SECRET, "note": f"uses {SECRET}", "n": 3},
        "trl": {"hub_token": "hf_abc", "eos_token": "<|im_end|>", "hub_model_id": None},
        "rewards": [f"x?key={SECRET}", 1],
        "empty_key": "",
    }
    assert redact(data, [SECRET]) == {
        "env_kwargs": {"api_key": "***", "note": "uses ***", "n": 3},
        "trl": {"hub_token": "***", "eos_token": "<|im_end|>", "hub_model_id": None},
        "rewards": ["x?key=***", 1],
        "empty_key": "",
    }
    env = {"FIREWORKS_API_KEY": SECRET, "SHORT_TOKEN": "abc", "HOME": "/home/someone"}
    assert secret_values(env) == [SECRET]


def test_the_config_does_not_import_wandb_setup() -> None:
    # wandb_setup needs the config's types; the config must not need wandb_setup (no circle).
    code = (
        "import sys, rk_agent.trainers.config\n"
        "print('rk_agent.trainers.wandb_setup' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _wandb_children() -> list[str]:
    """Command lines of this process's children that belong to wandb (its service process)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid() and "wandb" in cmdline:
            found.append(cmdline)
    return found


@pytest.fixture
def wandb_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No key anywhere, wandb's own files under tmp_path, and no wandb process left after."""
    for name in (
        "WANDB_API_KEY",
        "WANDB_IDENTITY_TOKEN_FILE",
        "WANDB_BASE_URL",
        "WANDB_MODE",
        "WANDB_DIR",
        "WANDB_PROJECT",
        "WANDB_SILENT",
        "WANDB_LOG_MODEL",
        "WANDB_WATCH",
    ):
        monkeypatch.delenv(name, raising=False)  # fmt: skip
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("FIREWORKS_API_KEY", SECRET)
    try:
        yield tmp_path
    finally:
        finish_wandb()  # also when the test failed half-way
    assert _wandb_children() == []


@pytest.mark.slow
def test_a_real_offline_run_has_its_files_and_no_secret(
    wandb_sandbox: Path, tiny_model_dir: Path
) -> None:
    """TRL's SFTTrainer logs through transformers' WandbCallback into an offline run."""
    import wandb
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from rk_agent.trainers.config import TrainConfig
    from rk_agent.trainers.trl_args import build_trl_args

    out = wandb_sandbox / "run"
    config = TrainConfig(
        kind="sft", trajectories="runs/x", output_dir=str(out),
        env_kwargs={"api_key": SECRET}, wandb=WandbSettings(project="rk-test"),
    )  # fmt: skip
    plan = plan_wandb(config.wandb, out)
    assert plan.mode == "offline"
    apply_wandb(plan)
    values = {"max_steps": 2, "report_to": plan.report_to, "save_strategy": "no"}
    # transformers sends TrainingArguments.to_dict() to wandb, which hides `*_token` fields.
    values |= {"run_name": "offline-test", "hub_token": SECRET, "max_length": 32}
    args = build_trl_args(SFTConfig, values, output_dir=out)
    data = Dataset.from_dict({"text": ["The answer is 7."] * 8})
    trainer = SFTTrainer(model=str(tiny_model_dir), args=args, train_dataset=data)
    trainer.train()
    # What rk-agent adds to the run's config goes through redact first.
    wandb.config.update({"rk_agent": redact(config.model_dump(mode="json"), secret_values())})
    finish_wandb()

    (run_dir,) = (out / "wandb").glob("offline-run-*")
    assert (run_dir / "files").is_dir()
    (log,) = run_dir.glob("run-*.wandb")
    records = log.read_bytes()
    assert b"train/loss" in records and b"offline-test" in records and b"rk_agent" in records
    leaks = [
        p for p in wandb_sandbox.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()
    ]
    assert leaks == []
