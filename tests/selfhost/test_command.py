"""``rk-agent deploy --target``: names, options that belong to another target, dry runs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rk_agent.errors import ConfigError
from rk_agent.selfhost.context import Command, render_context
from rk_agent.selfhost.docker import docker_context
from tests.selfhost.conftest import StandIns

RK_AGENT = [sys.executable, "-m", "rk_agent"]


def rk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RK_AGENT, *args], capture_output=True, text=True, timeout=120)


def test_an_unknown_target_gets_the_closest_name(rewards_file: Path) -> None:
    done = rk("deploy", f"{rewards_file}::exact", "--target", "dokcer")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: unknown deploy target 'dokcer'. Did you mean 'docker'? Known deploy targets: "
        "aws-lambda, docker, fireworks, gcp-cloud-run. Give one of them with --target."
    )


METRIC = (
    "def evaluate(messages, ground_truth=None, **kwargs):\n"
    "    return {'score': float(messages[-1]['content'] == ground_truth), 'reason': 'equal?'}\n"
)
SCORE = (
    "import json, main\n"
    "chat = [{'role': 'user', 'content': '2+2?'}, {'role': 'assistant', 'content': '5'}]\n"
    "result = main.REWARD(messages=chat, ground_truth='5')\n"
    "print(json.dumps([result.score, sorted(result.metrics)]))\n"
)
TARGET_ARGS = {
    "docker": [],
    "gcp-cloud-run": ["--api-key-secret", "reward-key"],
    "aws-lambda": ["--api-key-secret", "prod/reward-key"],
}


@pytest.mark.parametrize("target", sorted(TARGET_ARGS))
def test_metric_folders_deploy_to_every_target(
    tmp_path: Path, stand_ins: StandIns, target: str
) -> None:
    for name in ("relevance", "accuracy"):
        folder = tmp_path / "metrics" / name
        folder.mkdir(parents=True)
        (folder / "main.py").write_text(METRIC)
    stand_ins.add("gcloud"), stand_ins.add("sam")
    out = tmp_path / "ctx"
    done = subprocess.run(
        [*RK_AGENT, "deploy", "--target", target, "--id", "relevance-evaluator",
         "--metrics-folders", "relevance=./metrics/relevance", "accuracy=./metrics/accuracy",
         "--combine", "weighted_sum", "--weight", "relevance=0.25", "--weight", "accuracy=0.75",
         "-o", str(out), *TARGET_ARGS[target]],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=stand_ins.env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    packed = {p.relative_to(out).as_posix() for p in out.rglob("*.py")}
    assert {"relevance/main.py", "accuracy/main.py", "metric_folders_evaluator.py"} <= packed
    assert "method='weighted_sum'" in (out / "metric_folders_evaluator.py").read_text()
    scored = subprocess.run([sys.executable, "-c", SCORE], cwd=out, capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    score, metrics = json.loads(scored.stdout)
    assert score == 1.0 and {"relevance", "accuracy"} <= set(metrics)
    if target != "docker":  # named after --id, as on Fireworks
        assert "rk-reward-relevance-evaluator" in json.dumps(stand_ins.calls())


def test_docker_dry_run_lists_names_sizes_and_hashes_never_contents(
    rewards_file: Path, tmp_path: Path
) -> None:
    rewards_file.write_text(rewards_file.read_text() + "\nMARKER = 'a line of the file'\n")
    out = tmp_path / "ctx"
    done = rk("deploy", f"{rewards_file}::exact", "--target", "docker", "-o", str(out),
              "--dry-run", "--build")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not out.exists()
    size = len(rewards_file.read_bytes())
    digest = hashlib.sha256(rewards_file.read_bytes()).hexdigest()[:16]
    lines = done.stdout.splitlines()
    assert lines[0] == f"Would write the build context for reward 'exact' to {out}/:"
    assert f"  my_rewards.py  {size:,} bytes  sha256:{digest}" in lines
    assert "a line of the file" not in done.stdout and "FROM python" not in done.stdout
    assert lines[-2:] == [
        f"$ docker build -t rk-reward-exact {out}",
        f"Dry run: nothing was written to {out}/ and nothing was run (keys show as ***).",
    ]


@pytest.mark.parametrize(
    ("target", "ignore_files"),
    [("docker", [".dockerignore"]), ("gcp-cloud-run", [".dockerignore", ".gcloudignore"]),
     ("aws-lambda", [".dockerignore"])],
)  # fmt: skip
def test_every_target_writes_its_ignore_file_and_lists_what_it_left_out(
    rewards_file: Path, tmp_path: Path, stand_ins: StandIns, target: str, ignore_files: list[str]
) -> None:
    data = rewards_file.parent / "data"
    data.mkdir()
    (data / "lexicon.txt").write_text("alpha\n")
    (data / ".env").write_text("X=1\n")
    (data / "id_ed25519").write_text("key\n")
    (rewards_file.parent / "cert.pem").write_text("a certificate I mean to ship\n")
    stand_ins.add("gcloud"), stand_ins.add("sam")
    out = tmp_path / "ctx"
    done = subprocess.run(
        [*RK_AGENT, "deploy", f"{rewards_file}::exact", "--target", target, "-o", str(out),
         "--include", str(data), "--include", str(rewards_file.parent / "cert.pem"),
         *TARGET_ARGS[target]],
        capture_output=True, text=True, timeout=120, env=stand_ins.env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"Left out: {data / '.env'} (an .env file)\n" in done.stdout
    assert f"Left out: {data / 'id_ed25519'} (an SSH private key)\n" in done.stdout
    assert (out / "data" / "lexicon.txt").is_file() and not (out / "data" / ".env").exists()
    for name in ignore_files:
        lines = (out / name).read_text().splitlines()
        patterns = {line.removeprefix("**/") for line in lines}
        assert {".env", ".env.*", "id_ed25519*", "*.pem"} <= patterns
        assert lines[-1] == "!cert.pem"  # named on purpose: it stays in the image


CREDENTIALS = {  # issue 38: a deploy context packed each of these (the values are made up)
    ".pgpass": ("db.internal:5432:rewards:scorer:pg-pass-4f9a2c\n", "PostgreSQL passwords"),
    "my.cnf": ("[client]\nuser = scorer\npassword=my-pass-77e1\n",
               "holds a password setting, password (line 3)"),
    "cluster.yaml": ("apiVersion: v1\nkind: Config\nusers:\n- name: scorer\n  user:\n"
                     "    token: kube-token-3c9d5e7f1a2b4c6d\n",
                     "holds a key or token setting, token (line 6)"),
    "service.json": ('{"endpoint": "https://judge.internal", "api_key": "judge-key-8a7b6c5d"}',
                     "holds a key or token setting, api_key (line 1)"),
    "db.json": ('{\n  "host": "db.internal",\n  "password": "db-pass-1234"\n}\n',
                "holds a password setting, password (line 3)"),
    "wandb/settings": ("[default]\nentity = me\napi_key = 0123456789abcdef0123456789abcdef0123\n",
                       "holds a key or token setting, api_key (line 3)"),
    "huggingface/stored_tokens": ("[work]\nhf_token = hub-token-abcdef0123456789\n",
                                  "a token file"),
    "huggingface/token": ("hub-token-abcdef0123456789\n", "a token file"),
}  # fmt: skip
HARMLESS = {  # settings that only name a secret, and data that looks like one
    "config.yaml": "api_key_env: JUDGE_API_KEY\npassword_file: /run/secrets/db\ntoken: null\n",
    "tokenizer_config.json": '{"eos_token": "</s>", "image_token": "<image>"}',
    "tasks.json": '[{"secret_word": "apple", "token": "Paris"}]',
    "client.cnf": "[client]\nuser = scorer\npassword = ${DB_PASSWORD}\n",
}


def test_a_deploy_context_packs_no_password_key_or_token_file(
    rewards_file: Path, tmp_path: Path
) -> None:
    data = rewards_file.parent / "data"
    for name, text in {**{n: t for n, (t, _) in CREDENTIALS.items()}, **HARMLESS}.items():
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text(text)
    out = tmp_path / "ctx"
    done = rk("deploy", f"{rewards_file}::exact", "--target", "docker", "-o", str(out),
              "--include", str(data))  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name, (_, reason) in CREDENTIALS.items():
        assert f"Left out: {data / name} ({reason})\n" in done.stdout
        assert not (out / "data" / name).exists()
    packed = "".join(p.read_text() for p in out.rglob("*") if p.is_file() and p.suffix != ".whl")
    for text, _ in CREDENTIALS.values():
        assert text not in packed
    for name, text in HARMLESS.items():
        assert (out / "data" / name).read_text() == text


def test_a_symlink_out_of_the_project_is_one_line(rewards_file: Path, tmp_path: Path) -> None:
    data = rewards_file.parent / "data"
    data.mkdir()
    (tmp_path / ".env").write_text("X=1\n")
    (data / "notes.txt").symlink_to("../../.env")
    done = rk("deploy", f"{rewards_file}::exact", "--target", "docker", "--dry-run",
              "--include", str(data))  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"error: expected every file of {data} inside the project ({rewards_file.parent}), but "
        f"{data / 'notes.txt'} is a symlink to {tmp_path / '.env'}, outside it. Copy the file "
        "into the project, or remove the link.\n"
    )


def test_the_rewards_requirements_follow_the_pinned_rk_agent(tmp_path: Path) -> None:
    path = tmp_path / "needs.py"
    path.write_text(
        "from rk_agent import reward_function\n\n\n"
        "@reward_function(requirements=['sympy>=1.12'])\n"
        "def symbolic(response: str) -> float:\n    return 1.0\n"
    )
    context = render_context(f"{path}::symbolic", requirements=["numpy"], rk_agent="rk-agent @ ./w")
    assert context.files["requirements.txt"] == "rk-agent @ ./w\nsympy>=1.12\nnumpy\n"


def test_a_command_never_shows_its_secrets_or_the_environments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    command = Command(("tool", "--key=abcdefgh123456", "--other", "zzzzzzzz99"),
                      secrets=("abcdefgh123456",), cwd="some dir")  # fmt: skip
    assert command.shown() == "cd 'some dir' && tool --key=*** --other zzzzzzzz99"
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "zzzzzzzz99")  # a secret by its name
    assert command.shown() == "cd 'some dir' && tool --key=*** --other ***"


def test_a_reward_file_named_like_a_generated_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "start.sh").write_text("echo mine\n")
    path = tmp_path / "exact.py"
    path.write_text("def exact(response: str) -> float:\n    return 1.0\n")
    with pytest.raises(ConfigError) as caught:
        docker_context(f"{path}::exact", include=[tmp_path / "start.sh"])
    assert str(caught.value) == (
        "expected the reward's files to leave start.sh to the build context, but reward "
        "'exact' brings a file of that name. Rename it (or move it into a folder)."
    )
