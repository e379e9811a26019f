"""A fake Fireworks API on loopback: the documented endpoints, state changes and failures.

Tests (and users trying rk-agent without an account) point a real client at it through
``FIREWORKS_API_BASE`` and get real HTTP. It implements what rk-agent uses of the control-plane
API, as documented (see the Fireworks page of the docs):

* ``GET /verifyApiKey`` (answers the account in ``x-fireworks-account-id``);
* datasets: create, get, delete, ``:upload`` (multipart), ``:getUploadEndpoint`` ->
  ``PUT`` signed URL -> ``:validateUpload``; a dataset is ``UPLOADING`` for ``dataset_polls``
  reads after its upload, then ``READY``;
* evaluators: ``evaluatorsV2`` create, get, list, delete, ``:getUploadEndpoint`` -> ``PUT`` ->
  ``:validateUpload``, ``:getBuildLogEndpoint``, ``evaluators:previewEvaluator``. After the
  upload the fake "builds" the archive (a gzip tar with ``requirements.txt`` and the entry
  point's file and function under one top directory): ``BUILDING`` for ``build_polls`` reads,
  then ``ACTIVE`` or ``BUILD_FAILED`` with a build log. `FakeFireworks.fail_build` forces a
  failure. A preview runs the code it is sent (``codeSnippets.fileContents``) in a subprocess,
  as the service would, or calls ``preview_scorer``; a preview of an evaluator object with no
  code but the ``name`` of an uploaded, ``ACTIVE`` evaluator runs that evaluator's archive at
  its ``entryPoint`` (how a deployed reward is called by name);
* RFT jobs: create (the dataset must be READY and the evaluator ACTIVE), get, list, ``:cancel``;
  each read moves a job one step along ``job_states``.

It is stricter than the service where rk-agent's contract is concerned: unknown (e.g.
snake_case) keys get a 400 naming the field, int64 fields must be JSON strings, a signed-URL
``PUT`` must carry ``Content-Type: application/octet-stream`` and a matching
``X-Goog-Content-Length-Range`` and must not carry an ``Authorization`` header. Every request
is recorded (`FakeFireworks.requests`); `FakeFireworks.fail_next` injects errors (401, 429 with
``Retry-After``, 5xx).

Main names: `FakeFireworks`, `FakeRequest`.

Example:
    >>> import httpx
    >>> with FakeFireworks(api_key="fw-test", account_id="acme") as fake:
    ...     answer = httpx.get(f"{fake.url}/verifyApiKey",
    ...                        headers={"Authorization": "Bearer fw-test"})
    >>> answer.headers["x-fireworks-account-id"]
    'acme'

From a shell (serves until Ctrl-C)::

    python -m rk_agent.testing.fake_fireworks --port 8765 --account my-account
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from typing import Any

from rk_agent.testing import _fake_fireworks_http as http, _fake_fireworks_rules as rules
from rk_agent.testing._fake_fireworks_http import FakeRequest
from rk_agent.testing._fake_fireworks_jobs import JobsMixin

__all__ = ["DEFAULT_JOB_STATES", "FakeFireworks", "FakeRequest"]

DEFAULT_JOB_STATES = (
    "JOB_STATE_CREATING",
    "JOB_STATE_PENDING",
    "JOB_STATE_RUNNING",
    "JOB_STATE_RUNNING",
    "JOB_STATE_COMPLETED",
)
"""What a job goes through, one step per read."""

PreviewScorer = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


class FakeFireworks(JobsMixin):
    """The fake API server; a context manager that serves from a background thread.

    Args:
        api_key: the only key it accepts.
        account_id: the key's account.
        host: where to listen (loopback by default).
        port: the port (0: any free one).
        dataset_polls: reads that still show ``UPLOADING`` after an upload.
        build_polls: reads that still show ``BUILDING`` after an evaluator's upload.
        job_states: the states a job goes through, one per read (the last one stays).
        preview_scorer: ``scorer(evaluator, sample) -> result`` for previews; by default the
            code sent with the preview runs.
    """

    def __init__(
        self,
        *,
        api_key: str = "fw-fake-key",
        account_id: str = "fake-account",
        host: str = "127.0.0.1",
        port: int = 0,
        dataset_polls: int = 1,
        build_polls: int = 1,
        job_states: Sequence[str] = DEFAULT_JOB_STATES,
        preview_scorer: PreviewScorer | None = None,
    ) -> None:
        self.api_key = api_key
        self.account_id = account_id
        self.host = host
        self.port = port
        self.dataset_polls = dataset_polls
        self.build_polls = build_polls
        self.job_states = tuple(job_states)
        self.preview_scorer = preview_scorer
        self.datasets: dict[str, dict[str, Any]] = {}
        self.evaluators: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.files: dict[str, bytes] = {}
        """Uploaded files by resource: ``"datasets/<id>"``, ``"evaluators/<id>"``."""
        self._requests: list[FakeRequest] = []
        self._faults: list[http.Fault] = []
        self._build_failures: list[str] = []
        self._hidden: dict[str, dict[str, Any]] = {}
        self._signed: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeFireworks:
        """Start serving in a background thread."""
        fake = self

        class Handler(http.Handler):
            pass

        Handler.fake = fake
        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeFireworks:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The API base URL, e.g. ``http://127.0.0.1:8765`` (for ``FIREWORKS_API_BASE``)."""
        return f"http://{self.host}:{self.port}"

    # ------------------------------------------------------------------ inspection

    @property
    def requests(self) -> list[FakeRequest]:
        """Every request received, in order."""
        with self._lock:
            return list(self._requests)

    def calls(self) -> list[str]:
        """``"METHOD path"`` of every request, for quick assertions (signed URLs shortened)."""
        return [f"{r.method} {'/_signed/…' if r.signed else r.path}" for r in self.requests]

    def fail_next(
        self,
        status: int,
        message: str | None = None,
        *,
        times: int = 1,
        retry_after: float | str | None = None,
        method: str | None = None,
        path: str | None = None,
        lost_reply: bool = False,
    ) -> None:
        """Answer the next ``times`` matching requests with an error.

        Args:
            status: the HTTP status (401, 429, 500, 503, ...).
            message: the API's message (default: the status phrase).
            times: how many requests fail.
            retry_after: a ``Retry-After`` header to send.
            method: only requests with this method.
            path: only requests whose path contains this.
            lost_reply: carry the request out, then answer the error (a reply lost on the way,
                so a retry finds the work already done).
        """
        text = message or HTTPStatus(status).phrase
        after = None if retry_after is None else str(retry_after)
        with self._lock:
            self._faults.append(
                http.Fault(status, text, times, after, method, path, lost=lost_reply)
            )

    def fail_build(self, logs: str) -> None:
        """Make the next evaluator build fail with this build log."""
        with self._lock:
            self._build_failures.append(logs)

    # ------------------------------------------------------------------ dispatch

    def _handle(self, request: FakeRequest) -> http.Reply:
        with self._lock:
            self._requests.append(request)
            fault = next((f for f in self._faults if f.matches(request.method, request.path)), None)
            if fault is not None:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                reply = http.error(fault.status, fault.message)
                if fault.retry_after is not None:
                    reply.headers["Retry-After"] = fault.retry_after
                if fault.lost:
                    self._serve(request)
                return reply
            return self._serve(request)

    def _serve(self, request: FakeRequest) -> http.Reply:
        try:
            if request.signed:
                return self._signed_url(request)
            self._authenticate(request)
            return self._route(request)
        except rules.FakeApiError as exc:
            return http.error(exc.status, exc.message)

    def _authenticate(self, request: FakeRequest) -> None:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            raise rules.FakeApiError(401, "unauthenticated: invalid API key")

    def _route(self, request: FakeRequest) -> http.Reply:
        method, path = request.method, request.path
        if path == "/verifyApiKey" and method == "GET":
            return http.Reply(200, {}, {"x-fireworks-account-id": self.account_id})
        match = re.fullmatch(r"/v1/accounts/([^/]+)/(.+)", path)
        if match is None:
            raise rules.FakeApiError(404, f"no such endpoint: {method} {path}")
        account, rest = match.groups()
        if account != self.account_id:
            raise rules.FakeApiError(
                403, f"permission denied: the API key cannot access account {account!r}"
            )
        for pattern, handlers in _ROUTES:
            found = re.fullmatch(pattern, rest)
            if found and method in handlers:
                return http.Reply(200, handlers[method](self, request, *found.groups()))
        raise rules.FakeApiError(404, f"no such endpoint in the fake: {method} {path}")

    # ------------------------------------------------------------------ datasets

    def _create_dataset(self, request: FakeRequest) -> dict[str, Any]:
        body = rules.json_object(request, rules.DATASET_CREATE, "CreateDatasetRequest")
        dataset_id = rules.required_str(body, "datasetId")
        dataset = body.get("dataset")
        if not isinstance(dataset, dict):
            raise rules.FakeApiError(400, "missing required field: dataset")
        rules.known_keys(dataset, rules.DATASET, "Dataset")
        rules.int64(dataset, "exampleCount")
        if dataset_id in self.datasets:
            raise rules.FakeApiError(409, f"dataset {dataset_id!r} already exists")
        record = {
            "name": self._name("datasets", dataset_id),
            **dataset,
            "state": "UPLOADING",
            "createTime": http.now(),
        }
        self.datasets[dataset_id] = record
        self._hidden[f"datasets/{dataset_id}"] = {"uploaded": False, "polls": self.dataset_polls}
        return record

    def _get_dataset(self, request: FakeRequest, dataset_id: str) -> dict[str, Any]:
        record = self._dataset(dataset_id)
        hidden = self._hidden[f"datasets/{dataset_id}"]
        if hidden["uploaded"]:
            if hidden["polls"] > 0:
                hidden["polls"] -= 1
            else:
                record["state"] = "READY"
        return record

    def _delete_dataset(self, request: FakeRequest, dataset_id: str) -> dict[str, Any]:
        self._dataset(dataset_id)
        del self.datasets[dataset_id]
        self.files.pop(f"datasets/{dataset_id}", None)
        return {}

    def _upload_dataset(self, request: FakeRequest, dataset_id: str) -> dict[str, Any]:
        self._dataset(dataset_id)
        parts = request.form
        if "file" not in parts:
            raise rules.FakeApiError(400, "multipart form field 'file' is required")
        filename, data = parts["file"]
        self._accept_dataset_file(dataset_id, data)
        return {
            "id": dataset_id, "object": "file", "bytes": len(data),
            "created_at": int(time.time()), "filename": filename, "purpose": "fine-tune",
        }  # fmt: skip

    def _accept_dataset_file(self, dataset_id: str, data: bytes) -> None:
        problem = rules.dataset_problem(data)
        if problem:
            raise rules.FakeApiError(400, f"invalid dataset file: {problem}")
        self.files[f"datasets/{dataset_id}"] = data
        self._hidden[f"datasets/{dataset_id}"]["uploaded"] = True

    def _dataset(self, dataset_id: str) -> dict[str, Any]:
        if dataset_id not in self.datasets:
            raise rules.FakeApiError(404, f"dataset {dataset_id!r} not found")
        return self.datasets[dataset_id]

    # ------------------------------------------------------------------ signed uploads

    def _upload_endpoint(self, request: FakeRequest, collection: str, rid: str) -> dict[str, Any]:
        (self._dataset if collection == "datasets" else self._evaluator)(rid)
        body = rules.json_object(
            request, {"filenameToSize", "readMask"}, "GetUploadEndpointRequest"
        )
        sizes = body.get("filenameToSize")
        if not isinstance(sizes, dict) or not sizes:
            raise rules.FakeApiError(400, "missing required field: filenameToSize")
        urls = {}
        for filename in sizes:
            size = rules.int64(sizes, filename, where="filenameToSize")
            token = secrets.token_hex(8)
            self._signed[token] = {"resource": f"{collection}/{rid}", "filename": filename,
                                   "size": size, "data": None}  # fmt: skip
            urls[filename] = (
                f"{self.url}/_signed/{token}?X-Goog-Algorithm=GOOG4-RSA-SHA256"
                f"&X-Goog-Signature={secrets.token_hex(16)}"
            )
        self._hidden[f"{collection}/{rid}"]["pending"] = list(urls)
        return {"filenameToSignedUrls": urls}

    def _signed_url(self, request: FakeRequest) -> http.Reply:
        token = request.path.removeprefix("/_signed/")
        if "authorization" in request.headers:
            return http.Reply(400, b"signed URLs must not carry an Authorization header")
        if token.startswith("logs-") and request.method == "GET":
            logs = self._hidden.get(f"evaluators/{token[5:]}", {}).get("logs")
            return (
                http.Reply(200, (logs or "").encode()) if logs else http.Reply(404, b"no such log")
            )
        upload = self._signed.get(token)
        if upload is None or request.method != "PUT":
            return http.Reply(403, b"the signature does not match (unknown or expired URL)")
        size = upload["size"]
        if request.headers.get("content-type") != "application/octet-stream":
            return http.Reply(400, b"Content-Type must be application/octet-stream")
        if request.headers.get("x-goog-content-length-range") != f"{size},{size}":
            return http.Reply(400, f"X-Goog-Content-Length-Range must be {size},{size}".encode())
        if len(request.body) != size:
            return http.Reply(400, f"expected {size} bytes, got {len(request.body)}".encode())
        upload["data"] = request.body
        return http.Reply(200, b"")

    def _validate_upload(self, request: FakeRequest, collection: str, rid: str) -> dict[str, Any]:
        (self._dataset if collection == "datasets" else self._evaluator)(rid)
        rules.json_object(request, set(), "ValidateUploadRequest")
        key = f"{collection}/{rid}"
        pending = self._hidden[key].get("pending") or []
        uploads = [u for u in self._signed.values() if u["resource"] == key and u["data"]]
        if not pending or len(uploads) < len(pending):
            raise rules.FakeApiError(400, f"failed precondition: no file was uploaded for {key}")
        data = uploads[-1]["data"]
        if collection == "datasets":
            self._accept_dataset_file(rid, data)
        else:
            self._build(rid, data)
        return {}

    # ------------------------------------------------------------------ evaluators

    def _create_evaluator(self, request: FakeRequest) -> dict[str, Any]:
        body = rules.json_object(request, {"evaluatorId", "evaluator"}, "CreateEvaluatorRequest")
        evaluator_id = rules.required_str(body, "evaluatorId")
        evaluator = body.get("evaluator")
        if not isinstance(evaluator, dict):
            raise rules.FakeApiError(400, "missing required field: evaluator")
        rules.known_keys(evaluator, rules.EVALUATOR, "Evaluator")
        if evaluator_id in self.evaluators:
            raise rules.FakeApiError(409, f"evaluator {evaluator_id!r} already exists")
        record = {
            "name": self._name("evaluators", evaluator_id),
            **evaluator,
            "state": "STATE_UNSPECIFIED",
            "createTime": http.now(),
        }
        self.evaluators[evaluator_id] = record
        self._hidden[f"evaluators/{evaluator_id}"] = {"polls": self.build_polls}
        return record

    def _get_evaluator(self, request: FakeRequest, evaluator_id: str) -> dict[str, Any]:
        record = self._evaluator(evaluator_id)
        hidden = self._hidden[f"evaluators/{evaluator_id}"]
        if record["state"] == "BUILDING":
            if hidden["polls"] > 0:
                hidden["polls"] -= 1
            elif hidden["error"]:
                record["state"] = "BUILD_FAILED"
                record["status"] = {"code": "INTERNAL", "message": hidden["error"]}
            else:
                record["state"] = "ACTIVE"
                record["status"] = {"code": "OK", "message": ""}
        return record

    def _list_evaluators(self, request: FakeRequest) -> dict[str, Any]:
        size = int(request.query.get("pageSize") or 50)
        token = int(request.query.get("pageToken") or 0)
        names = sorted(self.evaluators)
        page = [self.evaluators[n] for n in names[token : token + size]]
        more = token + size < len(names)
        return {"evaluators": page, "nextPageToken": str(token + size) if more else "",
                "totalSize": len(names)}  # fmt: skip

    def _delete_evaluator(self, request: FakeRequest, evaluator_id: str) -> dict[str, Any]:
        self._evaluator(evaluator_id)
        del self.evaluators[evaluator_id]
        self.files.pop(f"evaluators/{evaluator_id}", None)
        return {}

    def _build_log_endpoint(self, request: FakeRequest, evaluator_id: str) -> dict[str, Any]:
        self._evaluator(evaluator_id)
        if not self._hidden[f"evaluators/{evaluator_id}"].get("logs"):
            return {}
        return {"buildLogSignedUri": f"{self.url}/_signed/logs-{evaluator_id}?X-Goog-Signature=x"}

    def _build(self, evaluator_id: str, archive: bytes) -> None:
        record = self.evaluators[evaluator_id]
        self.files[f"evaluators/{evaluator_id}"] = archive
        error, logs = rules.build(archive, str(record.get("entryPoint") or ""))
        if self._build_failures:
            logs = self._build_failures.pop(0)
            error = "build failed: " + (logs.strip().splitlines() or ["(no log)"])[-1]
        record["state"] = "BUILDING"
        self._hidden[f"evaluators/{evaluator_id}"].update(
            polls=self.build_polls, error=error, logs=logs
        )

    def _evaluator(self, evaluator_id: str) -> dict[str, Any]:
        if evaluator_id not in self.evaluators:
            raise rules.FakeApiError(404, f"evaluator {evaluator_id!r} not found")
        return self.evaluators[evaluator_id]

    def _deployed_archive(self, evaluator: dict[str, Any]) -> bytes | None:
        """The uploaded archive of the evaluator an object names, when it carries no code."""
        if rules.has_inline_code(evaluator) or not evaluator.get("name"):
            return None
        name = str(evaluator["name"])
        prefix = f"accounts/{self.account_id}/evaluators/"
        if not name.startswith(prefix):
            raise rules.FakeApiError(404, f"evaluator {name!r} not found")
        record = self._evaluator(name.removeprefix(prefix))
        if record.get("state") != "ACTIVE":
            raise rules.FakeApiError(
                400, f"failed precondition: evaluator {name!r} is {record.get('state')}, not ACTIVE"
            )
        if not evaluator.get("entryPoint"):
            raise rules.FakeApiError(400, "evaluator.entryPoint is required to run uploaded code")
        return self.files[f"evaluators/{record['name'].rsplit('/', 1)[-1]}"]

    def _preview(self, request: FakeRequest) -> dict[str, Any]:
        body = rules.json_object(request, rules.PREVIEW, "PreviewEvaluatorRequest")
        evaluator = body.get("evaluator")
        samples = body.get("sampleData")
        if not isinstance(evaluator, dict):
            raise rules.FakeApiError(400, "missing required field: evaluator")
        rules.known_keys(evaluator, rules.EVALUATOR | {"name"}, "Evaluator")
        if not isinstance(samples, list) or not samples:
            raise rules.FakeApiError(400, "missing required field: sampleData")
        parsed = []
        for i, sample in enumerate(samples):
            value = json.loads(sample) if isinstance(sample, str) else None
            if not isinstance(value, dict):
                raise rules.FakeApiError(
                    400, f"sampleData[{i}] must be a JSON-encoded object (a string)"
                )
            parsed.append(value)
        chosen = parsed[: int(body.get("maxSamples", 10))]
        started = time.monotonic()
        deployed = self._deployed_archive(evaluator)
        if self.preview_scorer is not None:
            results = [self.preview_scorer(evaluator, s) for s in chosen]
        elif deployed is not None:
            results = rules.run_preview_archive(deployed, str(evaluator.get("entryPoint")), chosen)
        else:
            results = rules.run_preview_code(evaluator, chosen)
        return {
            "results": results,
            "totalSamples": len(results),
            "totalRuntimeMs": str(int((time.monotonic() - started) * 1000)),
        }


_ID = r"([a-z0-9][a-z0-9-]*)"
_ROUTES: list[tuple[str, dict[str, Callable[..., dict[str, Any]]]]] = [
    ("datasets", {"POST": FakeFireworks._create_dataset}),
    (f"datasets/{_ID}", {"GET": FakeFireworks._get_dataset,
                         "DELETE": FakeFireworks._delete_dataset}),
    (f"datasets/{_ID}:upload", {"POST": FakeFireworks._upload_dataset}),
    (f"(datasets|evaluators)/{_ID}:getUploadEndpoint", {"POST": FakeFireworks._upload_endpoint}),
    (f"(datasets|evaluators)/{_ID}:validateUpload", {"POST": FakeFireworks._validate_upload}),
    ("evaluatorsV2", {"POST": FakeFireworks._create_evaluator}),
    ("evaluators:previewEvaluator", {"POST": FakeFireworks._preview}),
    ("evaluators", {"GET": FakeFireworks._list_evaluators}),
    (f"evaluators/{_ID}", {"GET": FakeFireworks._get_evaluator,
                           "DELETE": FakeFireworks._delete_evaluator}),
    (f"evaluators/{_ID}:getBuildLogEndpoint", {"GET": FakeFireworks._build_log_endpoint}),
    ("reinforcementFineTuningJobs", {"POST": JobsMixin._create_job,
                                     "GET": JobsMixin._list_jobs}),
    (f"reinforcementFineTuningJobs/{_ID}", {"GET": JobsMixin._get_job}),
    (f"reinforcementFineTuningJobs/{_ID}:cancel", {"POST": JobsMixin._cancel_job}),
]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the fake from a shell until Ctrl-C."""
    parser = argparse.ArgumentParser(description="A fake Fireworks API on loopback.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--account", default="fake-account")
    parser.add_argument("--api-key", default="fw-fake-key", help="The key it accepts.")
    parser.add_argument("--build-polls", type=int, default=2)
    args = parser.parse_args(argv)
    fake = FakeFireworks(api_key=args.api_key, account_id=args.account, host=args.host,
                         port=args.port, build_polls=args.build_polls)  # fmt: skip
    with fake:
        print(f"FIREWORKS_API_BASE={fake.url} FIREWORKS_ACCOUNT_ID={fake.account_id}", flush=True)
        print("Serving; the API key is the one given with --api-key. Ctrl-C stops.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
