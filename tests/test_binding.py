"""Which names a server on a loopback address answers (`rk_agent.binding.HostRule`)."""

from __future__ import annotations

import pytest

from rk_agent.binding import HostRule


@pytest.mark.parametrize(
    "host",
    [b"127.0.0.1:8000", b"127.0.0.1", b"127.1.2.3:80", b"localhost", b"LocalHost:9",
     b"[::1]:8000", b"[::1]", b"proxy.example:443", None],
)  # fmt: skip
def test_loopback_and_allowed_names_are_answered(host: bytes | None) -> None:
    assert HostRule(["Proxy.Example"]).refusal(host, None) is None


@pytest.mark.parametrize(
    "host",
    [b"attacker.test:8000", b"attacker.test", b"10.0.0.1:8000", b"0.0.0.0:8000", b"",
     b"localhost.:8000", b"127.0.0.1:http", b"[::1]x", b"[::1", b"localhost.attacker.test",
     b"(several)"],
)  # fmt: skip
def test_other_names_get_421(host: bytes) -> None:
    refused = HostRule(["proxy.example"]).refusal(host, None)
    assert refused is not None and refused[0] == 421


@pytest.mark.parametrize(
    ("origin", "status"),
    [(b"http://127.0.0.1:8000", None), (b"http://localhost:3000", None),
     (b"https://[::1]", None), (b"https://proxy.example", None),
     (b"https://attacker.test", 403), (b"null", 403), (b"file://", 403),
     (b"chrome-extension://abc", 403), (b"http://127.0.0.1.attacker.test", 403)],
)  # fmt: skip
def test_pages_of_other_sites_get_403(origin: bytes, status: int | None) -> None:
    refused = HostRule(["proxy.example"]).refusal(b"127.0.0.1:8000", origin)
    assert (refused and refused[0]) == status


def test_a_long_value_is_shown_cut_in_the_message() -> None:
    refused = HostRule().refusal(b"a" * 5000, None)
    assert refused is not None and "'" + "a" * 100 + "...'" in refused[1]
