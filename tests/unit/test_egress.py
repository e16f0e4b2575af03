"""The egress guard's judgement of addresses and URLs (pure: the resolver is given)."""

from __future__ import annotations

import ipaddress

import pytest

from tasks.services.egress import Allow, EgressRefused, refusal, resolve

NOBODY = Allow()


@pytest.mark.parametrize("address, why", [
    ("127.0.0.1", "loopback"), ("::1", "loopback"), ("::ffff:127.0.0.1", "loopback"),
    ("10.1.2.3", "private"), ("192.168.0.10", "private"), ("172.16.5.4", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("2002:7f00:1::", "loopback"), ("2002:a9fe:a9fe::", "link-local"),  # 6to4 of an IPv4
    ("fec0::1", "site-local"),
    ("fd00:ec2::254", "private"), ("100.64.0.1", "not a public"),
    ("224.0.0.1", "multicast"), ("0.0.0.0", "unspecified"), ("240.0.0.1", "reserved"),
])
def test_internal_addresses_are_refused(address: str, why: str) -> None:
    reason = refusal(ipaddress.ip_address(address), NOBODY)
    assert reason is not None and why in reason


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1::1", "1.1.1.1"])
def test_public_addresses_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address), NOBODY) is None


def test_the_operator_allows_networks_and_host_names() -> None:
    allow = Allow.parse(" 10.0.0.0/8, 127.0.0.1 ,hooks.internal., ")
    assert refusal(ipaddress.ip_address("10.9.9.9"), allow) is None
    assert refusal(ipaddress.ip_address("::ffff:127.0.0.1"), allow) is None
    assert refusal(ipaddress.ip_address("192.168.1.1"), allow) is not None
    assert allow.hosts == {"hooks.internal"}
    assert resolve("http://hooks.internal/x", allow, lambda h, p: ["192.168.1.1"]).address \
        == "192.168.1.1"
    with pytest.raises(ValueError, match="'not a host!' is neither"):
        Allow.parse("10.0.0.0/8,not a host!")


def test_one_bad_record_among_good_ones_refuses_the_name() -> None:
    with pytest.raises(EgressRefused, match=r"169\.254\.169\.254 is a link-local"):
        resolve("https://mixed.example/hook", NOBODY, lambda h, p: ["1.1.1.1", "169.254.169.254"])


def test_the_checked_address_is_the_one_called() -> None:
    dest = resolve("https://Hook.Example:8443/deploy?x=1", NOBODY, lambda h, p: ["2606:4700::1"])
    assert dest.pinned_url == "https://[2606:4700::1]:8443/deploy?x=1"
    assert (dest.host, dest.host_header) == ("hook.example", "hook.example:8443")
    plain = resolve("http://hook.example/deploy", NOBODY, lambda h, p: ["1.1.1.1"])
    assert (plain.pinned_url, plain.host_header) == ("http://1.1.1.1:80/deploy", "hook.example")


@pytest.mark.parametrize("url", ["ftp://example.com/x", "http:///nohost", "file:///etc/passwd",
                                 "http://example.com:99999/"])
def test_what_is_not_an_http_url_with_a_host_is_refused(url: str) -> None:
    with pytest.raises(EgressRefused):
        resolve(url, NOBODY, lambda h, p: ["1.1.1.1"])


def test_an_ip_literal_is_judged_without_a_lookup() -> None:
    def never(host: str, port: int) -> list[str]:
        raise AssertionError("looked up")
    with pytest.raises(EgressRefused, match="loopback"):
        resolve("http://[::1]:5432/", NOBODY, never)
