"""Who may reach the reward server: the bind check (no public address without a key) and TLS.

Main names (re-exported by `rk_agent.server`):
    check_bind: refuse a non-loopback address without a key.
    tls_options: HTTPS and mutual TLS (client certificates) settings for uvicorn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rk_agent.binding import is_loopback
from rk_agent.errors import ConfigError
from rk_agent.rewards.remote import API_KEY_ENV

__all__ = ["check_bind", "tls_options"]


def check_bind(host: str, api_key: str | None, allow_public: bool) -> None:
    """Refuse a non-loopback address without a key, unless ``allow_public``.

    Raises:
        ConfigError: with the three ways out.
    """
    if api_key or allow_public or is_loopback(host):
        return
    raise ConfigError(
        f"refusing to serve on {host} without an API key: anyone who can reach this machine "
        f"could call the reward. Set a key with --api-key or {API_KEY_ENV} (clients send "
        "'Authorization: Bearer <key>'), bind --host 127.0.0.1, or pass --allow-public "
        "(allow_public=True) if the network is trusted."
    )


def tls_options(
    cert: str | Path | None, key: str | Path | None, client_ca: str | Path | None = None
) -> dict[str, Any]:
    """uvicorn's TLS settings: HTTPS with ``cert``/``key``; mutual TLS with ``client_ca``.

    With ``client_ca`` every client must present a certificate signed by that CA (the TLS
    handshake fails otherwise, before any request is read). No setting at all gives ``{}``.

    Raises:
        ConfigError: ``cert`` without ``key`` (or the other way round), ``client_ca`` without
            ``cert``, or a file that does not exist.

    Example:
        >>> tls_options(None, None)
        {}
    """
    import ssl

    if cert is None and key is None and client_ca is None:
        return {}
    if cert is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if key is None else ("--tls-key", "--tls-cert")
        if cert is None and key is None:
            given, missing = "--client-ca", "--tls-cert and --tls-key"
        raise ConfigError(
            f"{given} needs {missing} as well: HTTPS takes the server's certificate and its "
            "private key (PEM files), and mutual TLS adds --client-ca."
        )
    for flag, path in (("--tls-cert", cert), ("--tls-key", key), ("--client-ca", client_ca)):
        if path is not None and not Path(path).is_file():
            raise ConfigError(f"{flag} {path}: expected a PEM file, but there is no such file.")
    options: dict[str, Any] = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    if client_ca is not None:
        options.update(ssl_ca_certs=str(client_ca), ssl_cert_reqs=ssl.CERT_REQUIRED)
    return options
