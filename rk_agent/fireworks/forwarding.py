"""A thin Fireworks evaluator that forwards each sample to a self-hosted reward endpoint.

An RFT job names its reward as an evaluator (``"evaluator": "accounts/{a}/evaluators/{id}"``);
the job API has no field for a reward URL. What the platform documents for a reward you host
yourself is Reward Kit's ``--remote-url``: deploy an evaluator whose code POSTs each sample to
your URL and returns the answer. `package_forwarder` builds that evaluator, so ``rk-agent
fireworks rft --reward-endpoint URL`` (and `rk_agent.fireworks.launch.launch_rft` with
``reward_endpoint=``) trains on the reward your server computes.

The forwarding code (``forward_reward.py`` in the package, standard library only) sends the
reward server's ``POST /evaluate`` body (``messages``, ``ground_truth``, ``tools``, other
arguments under ``kwargs``; `rk_agent.rewards.remote`), retries timeouts, connection errors,
429 and 5xx twice, and turns the reply into the evaluator's result; a failure is an invalid
score with the reason, never a silent 0. The endpoint's bearer key is **not** packaged: the
code reads it from the ``RK_AGENT_SERVER_API_KEY`` environment variable (``key_env``) where the
evaluator runs, which on Fireworks means an account secret of that name (eval-protocol uploads
secrets this way; not verified here). Contract only: tested with the fake API and a real
reward server on loopback, not against the live service.

Main names: `package_forwarder`, `forwarder_id`, `check_endpoint`.

Example:
    >>> package = package_forwarder("https://rewards.example.com/evaluate", directory="fwd")
    >>> package.entry_point, "fwd/forward_reward.py" in package.archive_members()
    ('main.py::evaluate', True)
    >>> forwarder_id("https://rewards.example.com/evaluate")
    'endpoint-rewards-example-com-24d758'
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import warnings
from urllib.parse import urlsplit

from rk_agent import __version__
from rk_agent.errors import ConfigError
from rk_agent.fireworks.packaging import EvaluatorPackage, _assemble, _Source

__all__ = ["DEFAULT_KEY_ENV", "check_endpoint", "forwarder_id", "package_forwarder"]

DEFAULT_KEY_ENV = "RK_AGENT_SERVER_API_KEY"
"""Where the forwarding code finds the endpoint's bearer key (the same name `rk-agent serve`
reads)."""

_FILE = "forward_reward.py"

_TEMPLATE = '''"""Forwards each sample to a self-hosted reward endpoint (rk-agent {version}).

The endpoint's bearer key comes from the {key_env} environment variable, never this file.
"""

import json
import os
import time
import urllib.error
import urllib.request

from rk_agent import reward_function
from rk_agent.types import EvaluateResult

ENDPOINT = {endpoint!r}
KEY_ENV = {key_env!r}
TIMEOUT_S = {timeout_s!r}
ATTEMPTS = 3
_TOP_LEVEL = ("ground_truth", "tools", "original_messages")


def _plain(value):
    return value.model_dump(exclude_none=True) if hasattr(value, "model_dump") else value


def _body(messages, kwargs):
    body = {{"messages": [_plain(m) for m in messages]}}
    extra = {{}}
    for key, value in kwargs.items():
        if value is None:
            continue
        if key in _TOP_LEVEL:
            body[key] = [_plain(m) for m in value] if key == "original_messages" else value
        else:
            extra[key] = value
    if extra:
        body["kwargs"] = extra
    return body


def _post(body):
    headers = {{"Content-Type": "application/json", "Accept": "application/json"}}
    key = os.environ.get(KEY_ENV)
    if key:
        headers["Authorization"] = "Bearer " + key
    data = json.dumps(body).encode("utf-8")
    for attempt in range(ATTEMPTS):
        request = urllib.request.Request(ENDPOINT, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            retry = exc.code == 429 or exc.code >= 500
            detail = exc.read().decode("utf-8", "replace")[:300]
            problem = "HTTP %d from %s: %s" % (exc.code, ENDPOINT, detail)
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            retry, problem = True, "could not reach %s: %s" % (ENDPOINT, exc)
        if not retry or attempt == ATTEMPTS - 1:
            raise RuntimeError(problem)
        time.sleep(2**attempt)
    raise AssertionError("unreachable")


@reward_function(name="forward_reward")
def forward_reward(messages, **kwargs):
    """The score the self-hosted endpoint gives this sample."""
    return EvaluateResult.model_validate(_post(_body(messages, kwargs)))
'''


def check_endpoint(url: str) -> str:
    """Check a reward endpoint URL for an evaluator that runs on Fireworks.

    Raises:
        ConfigError: it is not an ``http(s)://host...`` URL.

    Warns:
        UserWarning: the host is loopback or private (Fireworks cannot reach it: expose it with
            ``rk-agent serve --tunnel`` or a ``rk-agent deploy --target``), or the scheme is
            plain ``http`` (the samples and the key cross the internet unencrypted).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"--reward-endpoint {url!r} is not an http(s) URL; expected e.g. "
            "'https://rewards.example.com/evaluate' (a reward server's /evaluate)."
        )
    host = parts.hostname
    try:
        address = ipaddress.ip_address(host)
        local = address.is_loopback or address.is_private or address.is_link_local
    except ValueError:
        local = host == "localhost" or host.endswith(".local")
    if local:
        warnings.warn(
            f"reward endpoint {url!r} is a local address: the evaluator runs on Fireworks and "
            "cannot reach it. Expose the server with `rk-agent serve --tunnel` or deploy it "
            "with `rk-agent deploy --target docker|gcp-cloud-run|aws-lambda`.",
            UserWarning,
            stacklevel=2,
        )
    elif parts.scheme == "http":
        warnings.warn(
            f"reward endpoint {url!r} is plain http: samples and the bearer key would cross "
            "the internet unencrypted. Serve it over https.",
            UserWarning,
            stacklevel=2,
        )
    return url


def forwarder_id(endpoint: str) -> str:
    """The default evaluator id for an endpoint: its host and a hash of the URL (same URL,
    same id, so launching again reuses the evaluator)."""
    host = re.sub(r"[^a-z0-9]+", "-", (urlsplit(endpoint).hostname or "").lower()).strip("-")
    digest = hashlib.sha256(endpoint.encode("utf-8")).hexdigest()[:6]
    return f"endpoint-{host[:40].strip('-') or 'reward'}-{digest}"


def package_forwarder(
    endpoint: str,
    *,
    directory: str = "evaluator",
    key_env: str = DEFAULT_KEY_ENV,
    timeout_s: float = 30.0,
) -> EvaluatorPackage:
    """Package an evaluator whose reward POSTs each sample to ``endpoint`` (see the module doc).

    Args:
        endpoint: the reward server's ``/evaluate`` URL.
        directory: the archive's top directory (the evaluator id is a good choice).
        key_env: the environment variable the evaluator reads the bearer key from.
        timeout_s: seconds per request to the endpoint.

    Raises:
        ConfigError: ``endpoint`` is not an http(s) URL, or ``key_env`` is not a variable name.
    """
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"reward endpoint {endpoint!r} is not an http(s) URL.")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env):
        raise ConfigError(f"key_env {key_env!r} is not an environment variable name.")
    code = _TEMPLATE.format(
        version=__version__, endpoint=endpoint, key_env=key_env, timeout_s=float(timeout_s)
    )
    source = _Source(_FILE, None, "forward_reward", {}, None)
    return _assemble("forward_reward", source, {_FILE: code}, [], directory, [])
