"""``rk-agent serve --tunnel``: a public URL for a local reward server, through a tunnel client.

An RL service in the cloud cannot reach ``127.0.0.1``. A tunnel client that is already
installed (``cloudflared``, whose quick tunnels need no account, or ``ngrok``) runs as a
subprocess pointed at the local server; its output names the public URL, which is printed.
Leaving the block (Ctrl-C, SIGTERM, the server stopping) stops the client. It runs in a session
of its own and dies with this process (`rk_agent.processes`), even one killed outright.

- cloudflared: ``cloudflared tunnel --no-autoupdate --url LOCAL``; a quick tunnel, whose
  output has a line with ``https://NAME.trycloudflare.com``;
- ngrok: ``ngrok http LOCAL --log stdout --log-format logfmt``; the URL is the ``url=`` of the
  line with ``msg="started tunnel"`` (ngrok needs its authtoken configured).

Main names: `TunnelClient`, `find_tunnel_client`, `open_tunnel`, `Tunnel`,
`NO_TUNNEL_CLIENT`.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from rk_agent.errors import ConfigError, NotAvailableError
from rk_agent.processes import spawn

__all__ = ["NO_TUNNEL_CLIENT", "Tunnel", "TunnelClient", "find_tunnel_client", "open_tunnel"]

NO_TUNNEL_CLIENT = (
    "--tunnel needs a tunnel client on PATH, but neither cloudflared nor ngrok is installed. "
    "Install one of them (cloudflared needs no account for a quick tunnel), or serve on a "
    "public address instead: --host 0.0.0.0 with an API key."
)
"""The error when no tunnel client is installed."""

_URL = {
    "cloudflared": re.compile(r"(https://[a-z0-9-]+\.trycloudflare\.com)"),
    "ngrok": re.compile(r"""url=["']?(https://[^\s"']+)|"url":\s*"(https://[^"]+)\""""),
}


@dataclass(frozen=True)
class TunnelClient:
    """An installed tunnel client.

    Attributes:
        name: ``"cloudflared"`` or ``"ngrok"``.
        path: the executable.
    """

    name: str
    path: str

    def argv(self, local_url: str) -> list[str]:
        """The command that tunnels to ``local_url``."""
        if self.name == "cloudflared":
            return [self.path, "tunnel", "--no-autoupdate", "--url", local_url]
        return [self.path, "http", local_url, "--log", "stdout", "--log-format", "logfmt"]

    def public_url(self, line: str) -> str | None:
        """The public URL if ``line`` of the client's output announces it."""
        if self.name == "ngrok" and "started tunnel" not in line:
            return None
        match = _URL[self.name].search(line)
        return next((g for g in match.groups() if g), None) if match else None


def find_tunnel_client(name: str | None = None) -> TunnelClient:
    """The tunnel client to use: ``name``, or the first of cloudflared and ngrok on ``PATH``.

    Raises:
        ConfigError: ``name`` is not a known client.
        NotAvailableError: the client (or, without ``name``, any client) is not installed
            (`NO_TUNNEL_CLIENT`).
    """
    names = ("cloudflared", "ngrok")
    if name is not None and name not in names:
        from rk_agent.errors import did_you_mean

        raise ConfigError(
            f"expected the tunnel client to be cloudflared or ngrok, got {name!r}."
            f"{did_you_mean(name, names)}"
        )
    for candidate in (name,) if name else names:
        path = shutil.which(candidate)
        if path:
            return TunnelClient(candidate, path)
    if name:
        raise NotAvailableError(
            f"--tunnel-client {name} is not on PATH. Install it, or leave --tunnel-client out "
            "to use whichever of cloudflared and ngrok is installed."
        )
    raise NotAvailableError(NO_TUNNEL_CLIENT)


@dataclass
class Tunnel:
    """A running tunnel.

    Attributes:
        client: the tunnel client.
        public_url: the URL that reaches the local server (no trailing slash).
        process: the client's process.
        output: the client's output so far (for error messages).
    """

    client: TunnelClient
    public_url: str
    process: subprocess.Popen[str]
    output: list[str]


@contextlib.contextmanager
def open_tunnel(
    local_url: str, *, client: TunnelClient | None = None, timeout_s: float = 30.0
) -> Iterator[Tunnel]:
    """Start the tunnel client towards ``local_url``; yield the `Tunnel` once its URL is known.

    The client keeps running (its output read and kept) until the block ends; then it is asked
    to stop (SIGTERM to its process group) and killed if it has not within 5 seconds.

    Raises:
        NotAvailableError: no tunnel client is installed (`find_tunnel_client`).
        ConfigError: the client exited, or printed no public URL within ``timeout_s``, with the
            end of its output.
    """
    client = client or find_tunnel_client()
    child = spawn(
        client.argv(local_url),
        text=True,
        grace_s=5.0,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    process = child.popen
    output: list[str] = []
    found = threading.Event()
    box: dict[str, str] = {}

    def read() -> None:
        for line in process.stdout or ():
            output.append(line)
            url = None if found.is_set() else client.public_url(line)
            if url:
                box["url"] = url.rstrip("/")
                found.set()
        found.set()  # the client exited: stop waiting

    reader = threading.Thread(target=read, name=f"rk-tunnel-{client.name}", daemon=True)
    reader.start()
    try:
        found.wait(timeout_s)
        if "url" not in box:
            state = (
                f"exited with status {process.poll()}"
                if process.poll() is not None
                else f"printed no public URL within {timeout_s:g} s"
            )
            tail = "".join(output[-5:]).strip() or "(no output)"
            raise ConfigError(
                f"expected {client.name} to print the tunnel's public URL, but it {state}. Its "
                f"last lines:\n{tail}\nRun `{' '.join(client.argv(local_url))}` yourself to see "
                "why (a firewall, or an ngrok authtoken that is not set)."
            )
        yield Tunnel(client, box["url"], process, output)
    finally:
        child.stop()
        reader.join(timeout=5)
        if process.stdout is not None:
            process.stdout.close()
