"""What the fake Fireworks API checks: known camelCase fields, int64 strings, archives, rows.

Private helpers of `rk_agent.testing.fake_fireworks`: request parsing (bodies, multipart), the
contract's field lists, the "build" of an evaluator archive and running preview code.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

TERMINAL = frozenset(
    {
        "JOB_STATE_COMPLETED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED",
        "JOB_STATE_EARLY_STOPPED", "JOB_STATE_DELETED",
    }
)  # fmt: skip

DATASET_CREATE = {"datasetId", "dataset", "sourceDatasetId", "filter"}
DATASET = {
    "displayName", "exampleCount", "format", "userUploaded", "evalProtocol", "externalUrl",
    "transformed", "splitted", "sourceJobName",
}  # fmt: skip
EVALUATOR = {
    "displayName", "description", "entryPoint", "requirements", "commitHash", "criteria",
    "source", "defaultDataset", "multiMetrics", "rollupSettings",
}  # fmt: skip
PREVIEW = {"evaluator", "sampleData", "maxSamples"}
JOB = {
    "dataset", "evaluator", "displayName", "evaluationDataset", "evalAutoCarveout",
    "trainingConfig", "inferenceParameters", "chunkSize", "lossConfig", "maxConcurrentRollouts",
    "maxConcurrentEvaluations", "maxInferenceReplicaCount", "nodeCount", "mcpServer",
    "wandbConfig", "awsS3Config", "azureBlobStorageConfig",
}  # fmt: skip
TRAINING = {
    "baseModel", "warmStartFrom", "outputModel", "epochs", "learningRate", "loraRank",
    "maxContextLength", "batchSize", "batchSizeSamples", "gradientAccumulationSteps",
    "learningRateWarmupSteps", "optimizerWeightDecay", "jinjaTemplate", "region",
    "acceleratorCount",
}  # fmt: skip
INFERENCE = {
    "maxOutputTokens", "temperature", "topP", "topK", "responseCandidatesCount", "extraBody",
    "maxTokens", "n",
}  # fmt: skip
LOSS = {"method", "klBeta"}
LOSS_METHODS = {"METHOD_UNSPECIFIED", "GRPO", "DAPO", "DPO", "ORPO", "GSPO_TOKEN"}
WANDB = {"enabled", "apiKey", "project", "entity", "runId"}


class FakeApiError(Exception):
    """An error answer of the fake (status and the API's message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# ---------------------------------------------------------------------------- request bodies


def read_body(rfile: Any, headers: Any) -> bytes:
    """The request body, by Content-Length or chunked transfer encoding."""
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        out = bytearray()
        while True:
            size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                rfile.readline()
                return bytes(out)
            out += rfile.read(size)
            rfile.readline()
    length = int(headers.get("Content-Length") or 0)
    return rfile.read(length) if length else b""


def parse_multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """``{field: (filename, bytes)}`` of a ``multipart/form-data`` body."""
    if not content_type.startswith("multipart/form-data") or "boundary=" not in content_type:
        return {}
    boundary = content_type.split("boundary=", 1)[1].split(";")[0].strip().strip('"')
    out: dict[str, tuple[str | None, bytes]] = {}
    for part in body.split(b"--" + boundary.encode())[1:]:
        if part.startswith(b"--"):
            break
        head, _, data = part.lstrip(b"\r\n").partition(b"\r\n\r\n")
        disposition = next(
            (
                line.decode("utf-8", "replace")
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-disposition")
            ),
            "",
        )
        params = dict(
            item.strip().split("=", 1) for item in disposition.split(";")[1:] if "=" in item
        )
        name = params.get("name", "").strip('"')
        filename = params["filename"].strip('"') if "filename" in params else None
        out[name] = (filename, data.removesuffix(b"\r\n"))
    return out


def json_object(request: Any, allowed: set[str], where: str) -> dict[str, Any]:
    """The JSON object body, with only ``allowed`` (camelCase) keys."""
    if not (request.headers.get("content-type") or "").startswith("application/json"):
        raise FakeApiError(400, f"{where}: expected Content-Type application/json")
    body = request.json
    if not isinstance(body, dict):
        raise FakeApiError(400, f"{where}: the body must be a JSON object")
    known_keys(body, allowed, where)
    return body


def known_keys(value: dict[str, Any], allowed: set[str], where: str) -> None:
    """Reject keys the contract does not name (snake_case ones included)."""
    for key in value:
        if key not in allowed:
            raise FakeApiError(
                400, f"invalid JSON: unknown field {key!r} in {where} (fields are camelCase)"
            )


def required_str(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise FakeApiError(400, f"missing required field: {key}")
    return value


def int64(body: dict[str, Any], key: str, where: str = "") -> int:
    """An int64 field, which must be sent as a JSON string of digits."""
    value = body.get(key)
    label = f"{where}[{key!r}]" if where else key
    if value is None and not where:
        return 0
    if not isinstance(value, str) or not value.isdigit():
        raise FakeApiError(
            400, f"invalid value for int64 field {label}: {value!r} (send int64 as a JSON string)"
        )
    return int(value)


def check_job_parts(body: dict[str, Any]) -> None:
    """The nested objects of an RFT job body."""
    training = body.get("trainingConfig")
    if not isinstance(training, dict):
        raise FakeApiError(400, "missing required field: trainingConfig")
    known_keys(training, TRAINING, "trainingConfig")
    if ("baseModel" in training) == ("warmStartFrom" in training):
        raise FakeApiError(400, "trainingConfig: exactly one of baseModel and warmStartFrom")
    for key, allowed in (("inferenceParameters", INFERENCE), ("lossConfig", LOSS),
                         ("wandbConfig", WANDB)):  # fmt: skip
        part = body.get(key, {})
        if not isinstance(part, dict):
            raise FakeApiError(400, f"{key} must be an object")
        known_keys(part, allowed, key)
    method = body.get("lossConfig", {}).get("method")
    if method is not None and method not in LOSS_METHODS:
        raise FakeApiError(400, f"lossConfig.method: unknown value {method!r}")


# ---------------------------------------------------------------------------- files


def dataset_problem(data: bytes) -> str | None:
    """Why a JSONL file is not a valid RFT dataset, or ``None``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text"
    rows = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            return f"line {number}: not JSON"
        messages = row.get("messages") if isinstance(row, dict) else None
        if not isinstance(messages, list) or not messages:
            return f"line {number}: expected a non-empty 'messages' list"
        if not all(isinstance(m, dict) and "role" in m for m in messages):
            return f"line {number}: every message needs a 'role'"
        rows += 1
    return None if rows else "the file has no rows"


def build(archive: bytes, entry_point: str) -> tuple[str | None, str]:
    """Check an evaluator archive as a build would: ``(error or None, build log)``."""
    log = ["Step 1/3 : unpacking the archive"]
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            texts = {n: (tar.extractfile(m) or io.BytesIO()).read() for n, m in members.items()}
    except (tarfile.TarError, OSError, EOFError) as exc:
        return _failed(log, f"the upload is not a gzip-compressed tar archive ({exc})")
    tops = {name.split("/", 1)[0] for name in members}
    log.append(f"  {len(members)} files under {', '.join(sorted(tops)) or '(nothing)'}/")
    if len(tops) != 1:
        return _failed(log, "expected every file under one top-level directory")
    top = tops.pop()
    requirements = texts.get(f"{top}/requirements.txt")
    log.append("Step 2/3 : pip install -r requirements.txt")
    if requirements is None:
        return _failed(log, "requirements.txt not found in the project root")
    log += [f"  Collecting {line}" for line in requirements.decode().split() if line]
    log.append(f"Step 3/3 : loading entry point {entry_point}")
    file, _, function = entry_point.partition("::")
    source = texts.get(f"{top}/{file}")
    if not file or not function or source is None:
        return _failed(log, f"entry point {entry_point!r}: file {file!r} not found")
    if f"def {function}(".encode() not in source:
        return _failed(log, f"entry point {entry_point!r}: no function {function!r} in {file}")
    log.append("Build succeeded.")
    return None, "\n".join(log) + "\n"


def _failed(log: list[str], error: str) -> tuple[str, str]:
    log.append(f"ERROR: {error}")
    return f"build failed: {error}", "\n".join(log) + "\n"


_PREVIEW_RUNNER = """
import importlib, json, sys
sys.path.insert(0, ".")
entry = importlib.import_module(sys.argv[1])
func = getattr(entry, sys.argv[2])
out = []
for sample in json.load(sys.stdin):
    try:
        out.append({"ok": True, "result": func(**sample)})
    except Exception as exc:
        out.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
print(json.dumps(out))
"""


def has_inline_code(evaluator: dict[str, Any]) -> bool:
    """Whether an evaluator object carries its code (``criteria[].codeSnippets``)."""
    return any(c.get("codeSnippets") for c in evaluator.get("criteria") or [])


def run_preview_code(
    evaluator: dict[str, Any], samples: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Run the code sent with a preview (``codeSnippets.fileContents``) on the samples."""
    snippets = next(
        (c.get("codeSnippets") for c in evaluator.get("criteria") or [] if c.get("codeSnippets")),
        None,
    )
    snippets = snippets or {}
    files = snippets.get("fileContents")
    if not isinstance(files, dict) or not files:
        reason = "the fake previews only code sent in criteria[].codeSnippets.fileContents"
        return [{"success": False, "score": 0.0, "reason": reason} for _ in samples]
    entry_file = str(snippets.get("entryFile") or "main.py")
    entry_func = str(snippets.get("entryFunc") or "evaluate")
    with tempfile.TemporaryDirectory(prefix="fake-fireworks-preview-") as folder:
        root = Path(folder)
        for name, text in files.items():
            _write_inside(root, name, str(text).encode("utf-8"))
        return _run_entry(root, entry_file, entry_func, samples)


def run_preview_archive(
    archive: bytes, entry_point: str, samples: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Run an uploaded evaluator's archive (its one top directory) at ``file.py::func``."""
    entry_file, _, entry_func = entry_point.partition("::")
    with tempfile.TemporaryDirectory(prefix="fake-fireworks-deployed-") as folder:
        root = Path(folder)
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            for member in tar.getmembers():
                if member.isfile():
                    data = (tar.extractfile(member) or io.BytesIO()).read()
                    _write_inside(root, member.name, data)
        tops = [p for p in root.iterdir() if p.is_dir()]
        return _run_entry(tops[0] if len(tops) == 1 else root, entry_file, entry_func or
                          "evaluate", samples)  # fmt: skip


def _write_inside(root: Path, name: str, data: bytes) -> None:
    target = (root / name).resolve()
    if not target.is_relative_to(root.resolve()):
        raise FakeApiError(400, f"fileContents: {name!r} is outside the project")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def _run_entry(
    root: Path, entry_file: str, entry_func: str, samples: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Call ``entry_file::entry_func(**sample)`` for each sample in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _PREVIEW_RUNNER, entry_file.removesuffix(".py"), entry_func],
        input=json.dumps(samples), capture_output=True, text=True, cwd=root, timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("FIREWORKS_")},
    )  # fmt: skip
    if done.returncode != 0:
        reason = f"the evaluator failed to load: {done.stderr.strip()[-500:]}"
        return [{"success": False, "score": 0.0, "reason": reason} for _ in samples]
    results = []
    for item in json.loads(done.stdout.strip().splitlines()[-1]):
        if not item["ok"]:
            results.append({"success": False, "score": 0.0, "reason": item["error"]})
            continue
        result = item["result"]
        results.append(
            {
                "success": bool(result.get("is_score_valid", True)),
                "score": float(result.get("score", 0.0)),
                "reason": result.get("reason") or result.get("error"),
                "perMetricEvals": result.get("metrics", {}),
            }
        )
    return results
