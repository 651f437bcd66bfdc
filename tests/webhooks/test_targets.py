"""SSRF defence (spec "Webhooks": private IPs and localhost rejected; docs/webhooks.md,
"Targets": 400 WEBHOOK_TARGET_FORBIDDEN): hostile targets refused at creation, and at send time
when a name re-resolves somewhere forbidden (DNS rebinding).  Names resolve through a
fake resolver; nothing here touches real DNS."""
from __future__ import annotations

import ipaddress

import falcon.testing
import pytest

from controlplane.app import create_app
from controlplane.webhooks.errors import WebhookTargetForbidden
from controlplane.webhooks.targets import TargetPolicy, forbidden_reason, parse_ipv4
from shared.errors import ValidationFailed
from tests.conftest import make_config

FAKE_DNS = {
    "hooks.example.com": ["93.184.216.34"],
    "loopback.attacker.test": ["127.0.0.1"],
    "private.attacker.test": ["10.1.2.3"],
    "metadata.attacker.test": ["169.254.169.254"],
    "v6loop.attacker.test": ["::1"],
    "mapped.attacker.test": ["::ffff:192.168.0.1"],
    "mixed.attacker.test": ["93.184.216.34", "127.0.0.1"],
    "cgnat.attacker.test": ["100.64.0.1"],
    "sitelocal.attacker.test": ["fec0::1"],
    "nat64local.attacker.test": ["64:ff9b:1::a9fe:a9fe"],
    "translated.attacker.test": ["::ffff:0:808:808"],
}


def fake_resolver(host, port):
    try:
        return list(FAKE_DNS[host])
    except KeyError:
        raise OSError(f"no such host {host}") from None


HOSTILE = [
    # IPv4 literals, every spelling
    "https://127.0.0.1/",
    "https://127.1/",
    "https://2130706433/",            # decimal
    "https://0x7f000001/",            # hex
    "https://0177.0.0.1/",            # octal
    "https://0x7f.0.0.1/",            # hex parts
    "https://0177.1/",
    "https://127.0.0.1./",            # trailing dot
    "https://0.0.0.0/",               # unspecified
    "https://0/",
    "https://10.0.0.1/",
    "https://172.16.5.4/",
    "https://192.168.1.1:8443/",
    "https://169.254.169.254/latest/meta-data/",   # cloud metadata (link-local)
    "https://100.64.0.1/",            # CGNAT
    "https://224.0.0.1/",             # multicast
    "https://255.255.255.255/",
    "https://198.18.0.1/",            # benchmarking, not global
    "https://0xa9.0xfe.0xa9.0xfe/",   # 169.254.169.254 in hex
    # IPv6 forms
    "https://[::1]/",
    "https://[::]/",
    "https://[0:0:0:0:0:0:0:1]/",
    "https://[::ffff:127.0.0.1]/",    # IPv4-mapped
    "https://[::ffff:7f00:1]/",
    "https://[::ffff:10.0.0.1]/",
    "https://[::127.0.0.1]/",         # IPv4-compatible
    "https://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
    "https://[2002:7f00:1::]/",       # 6to4 of 127.0.0.1
    "https://[fe80::1]/",             # link-local
    "https://[fc00::1]/",             # unique local
    "https://[fd12:3456::1]/",
    "https://[ff02::1]/",             # multicast
    "https://[fec0::1]/",             # site-local fec0::/10, first and last
    "https://[feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]/",
    "https://[64:ff9b:1::a9fe:a9fe]/",  # local-use NAT64 64:ff9b:1::/48, first and last
    "https://[64:ff9b:1::]/",
    "https://[64:ff9b:1:ffff:ffff:ffff:ffff:ffff]/",
    "https://[::ffff:0:0:0]/",        # IPv4-translated ::ffff:0:0:0/96, even of a public address
    "https://[::ffff:0:808:808]/",
    "https://[::ffff:0:ffff:ffff]/",
    # localhost names
    "https://localhost/",
    "https://LOCALHOST./",
    "https://api.localhost/",
    "https://localhost.localdomain/",
    # names resolving to forbidden addresses
    "https://loopback.attacker.test/",
    "https://private.attacker.test/",
    "https://metadata.attacker.test/",
    "https://v6loop.attacker.test/",
    "https://mapped.attacker.test/",
    "https://mixed.attacker.test/",
    "https://cgnat.attacker.test/",
    "https://sitelocal.attacker.test/",
    "https://nat64local.attacker.test/",
    "https://translated.attacker.test/",
]

INVALID = [
    "http://hooks.example.com/",          # not https
    "ftp://hooks.example.com/",
    "https://user:pass@hooks.example.com/",
    "https:///nohost",
    "https://256.0.0.1/",                 # numeric but not an address
    "https://08.0.0.1/",                  # bad octal
    "https://hooks.example.com/#frag",
]


@pytest.fixture
def policy():
    return TargetPolicy(resolver=fake_resolver)


def test_the_table_is_large_enough():
    assert len(HOSTILE) >= 25


@pytest.mark.parametrize("url", HOSTILE)
def test_hostile_targets_are_forbidden_at_creation(policy, url):
    with pytest.raises(WebhookTargetForbidden):
        policy.check(url)


@pytest.mark.parametrize("url", HOSTILE)
def test_hostile_targets_are_forbidden_at_send_time(policy, url):
    with pytest.raises(WebhookTargetForbidden):
        policy.pin(url)


@pytest.mark.parametrize("url", INVALID)
def test_invalid_urls_are_validation_errors(policy, url):
    with pytest.raises(ValidationFailed):
        policy.check(url)


@pytest.mark.parametrize("url, address", [
    ("https://hooks.example.com/x?y=1", "93.184.216.34"),
    ("https://93.184.216.34/", "93.184.216.34"),
    ("https://[2606:2800:220:1:248:1893:25c8:1946]/", "2606:2800:220:1:248:1893:25c8:1946"),
    # neighbours of the local IPv6 ranges that name a public address
    ("https://[64:ff9b::808:808]/", "64:ff9b::808:808"),      # well-known NAT64 of 8.8.8.8
    ("https://[::ffff:808:808]/", "::ffff:808:808"),          # IPv4-mapped 8.8.8.8
    ("https://[2001:4860:4860::8888]/", "2001:4860:4860::8888"),
])
def test_public_targets_are_allowed_and_pinned(policy, url, address):
    assert policy.check(url).url == url
    assert policy.pin(url).address == address


def test_unresolvable_name_is_accepted_at_creation_and_fails_at_send(policy):
    policy.check("https://not-yet.example.com/")
    with pytest.raises(OSError):
        policy.pin("https://not-yet.example.com/")


@pytest.mark.parametrize("spelling, address", [
    ("2130706433", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("0177.0.0.01", "127.0.0.1"), ("10.1", "10.0.0.1"),
    ("192.168.257", "192.168.1.1"), ("1.2.3.4", "1.2.3.4"), ("0x0", "0.0.0.0"),
])
def test_ipv4_spellings(spelling, address):
    assert parse_ipv4(spelling) == ipaddress.IPv4Address(address)


def test_names_are_not_ipv4_spellings():
    assert parse_ipv4("hooks.example.com") is None and parse_ipv4("1.2.3.example") is None


def test_global_addresses_are_allowed():
    assert forbidden_reason("8.8.8.8") is None and forbidden_reason("2001:4860:4860::8888") is None
    assert forbidden_reason("::ffff:8.8.8.8") is None


def test_allow_private_accepts_http_and_loopback():
    relaxed = TargetPolicy(allow_private=True, resolver=fake_resolver)
    assert relaxed.pin("http://127.0.0.1:9000/x").address == "127.0.0.1"
    assert relaxed.pin("https://loopback.attacker.test/").address == "127.0.0.1"


# --- through the API and the worker -----------------------------------------------------


@pytest.fixture
def strict_app(clock):
    return create_app(make_config(), clock=clock, resolver=fake_resolver, start_background=False)


@pytest.mark.parametrize("url", ["https://127.0.0.1/", "https://2130706433/", "https://[::ffff:127.0.0.1]/",
                                 "https://localhost/", "https://loopback.attacker.test/",
                                 # the IPv6 ranges Python's ipaddress calls global
                                 "https://[fec0::1]/", "https://[64:ff9b:1::a9fe:a9fe]/",
                                 "https://[::ffff:0:808:808]/", "https://translated.attacker.test/"])
def test_the_api_answers_400_webhook_target_forbidden(strict_app, url):
    ctx = strict_app.services
    app = ctx.applications.create({"name": "A"}, organization_id=None, owner_account_id=None)
    _, key = ctx.api_keys.create(app, {"name": "k", "permissions": ["webhooks:manage"]})
    client = falcon.testing.TestClient(strict_app)
    resp = client.simulate_post(f"/api/v1/applications/{app['_id']}/webhooks",
                                json={"url": url, "events": ["user.created"]},
                                headers={"Authorization": f"Bearer {key}"})
    assert resp.status_code == 400 and resp.json["error"]["code"] == "WEBHOOK_TARGET_FORBIDDEN"
    assert ctx.store["webhooks"].count_documents({}) == 0
    hook, _ = ctx.webhooks.management.create(app["_id"], {"url": "https://hooks.example.com/x",
                                                          "events": ["user.created"]})
    resp = client.simulate_put(f"/api/v1/applications/{app['_id']}/webhooks/{hook['_id']}", json={"url": url},
                               headers={"Authorization": f"Bearer {key}"})
    assert resp.status_code == 400 and resp.json["error"]["code"] == "WEBHOOK_TARGET_FORBIDDEN"


def test_dns_rebinding_is_refused_at_send_time(strict_app):
    """A name that was public at creation and points at loopback when sent: nothing is
    sent, and the attempt is a failure with a retry like any other."""
    ctx = strict_app.services
    app = ctx.applications.create({"name": "A"}, organization_id=None, owner_account_id=None)
    FAKE_DNS["rebind.attacker.test"] = ["93.184.216.34"]
    try:
        ctx.webhooks.management.create(app["_id"], {"url": "https://rebind.attacker.test/hook",
                                                    "events": ["role.created"]})
        FAKE_DNS["rebind.attacker.test"] = ["127.0.0.1"]
        ctx.roles.create(app["_id"], {"name": "r", "display_name": "R", "permissions": ["a:b"]})
        ctx.webhooks.dispatcher.catch_up()
        assert ctx.webhooks.worker.run_once()
        delivery = ctx.store["webhook_deliveries"].find_one({})
        assert delivery["last_error"] == "target forbidden: loopback" and delivery["response_status"] is None
        assert delivery["status"] == "pending" and delivery["retry_count"] == 0
    finally:
        del FAKE_DNS["rebind.attacker.test"]
