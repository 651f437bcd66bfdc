"""benchmarks/soak.py's verdict: RSS growth fails only a process that holds no data (the
process the data lives in is reported with its growth per write, not judged); a 5xx, a
lost write, or a webhook delivery lost or sent twice fails."""
from __future__ import annotations

import types

from benchmarks import soak


def _soak(**errors):
    names = list(soak.MIX)
    return types.SimpleNamespace(latencies={name: [0.01] for name in names},
                                 errors={name: errors.get(name, {}) for name in names},
                                 sampled={"control plane": 1, "store": 2})


def _samples(control_end, store_end):
    """RSS in KiB at 0 s, after a 60 s warm-up and at the end, with the writes made so far."""
    return [(0.0, {"control plane": 1000, "store": 1000}, 0),
            (60.0, {"control plane": 1000, "store": 1000}, 100),
            (600.0, {"control plane": control_end, "store": store_end}, 1100)]


DELIVERIES = {"user.created": 10, "user.login": 20, "role.assigned": 6, "role.removed": 5}
VERDICT = {"users": 10, "lost_logins": 0, "revoked": 5, "revoked_still_allowed": 0,
           "deliveries_expected": DELIVERIES, "deliveries": DELIVERIES}


def test_the_process_holding_the_data_is_reported_per_write_and_not_judged():
    text, passed = soak.report(600, 20, _soak(), _samples(1050, 2000), VERDICT, 60, "store")
    assert passed
    assert "Writes after warm-up: 1000." in text
    assert "| store | 1.0 | 1.0 | 2.0 | " in text
    assert "| +100.0% | no: holds the data (1024 bytes a write) |" in text
    assert "| +5.0% | yes |" in text


def test_a_process_holding_no_data_fails_at_ten_percent():
    text, passed = soak.report(600, 20, _soak(), _samples(1100, 1000), VERDICT, 60, "store")
    assert not passed and text.endswith("Verdict: FAIL.")
    _, passed = soak.report(600, 20, _soak(), _samples(1099, 1000), VERDICT, 60, "store")
    assert passed
    # The same growth in the process that holds the data is not a leak.
    _, passed = soak.report(600, 20, _soak(), _samples(1100, 1000), VERDICT, 60, "control plane")
    assert passed


def test_a_delivery_lost_or_sent_twice_fails():
    for delivered in ({**DELIVERIES, "user.login": 19}, {**DELIVERIES, "role.removed": 6}):
        text, passed = soak.report(600, 20, _soak(), _samples(1000, 1000), {**VERDICT, "deliveries": delivered}, 60,
                                   "store")
        assert not passed
    text, _ = soak.report(600, 20, _soak(), _samples(1000, 1000), VERDICT, 60, "store")
    assert "Webhook deliveries (delivered / events logged): user.created 10 / 10, user.login 20 / 20," in text


def test_a_5xx_or_a_lost_write_fails():
    _, passed = soak.report(600, 20, _soak(login={503: 1}), _samples(1000, 1000), VERDICT, 60, "store")
    assert not passed
    _, passed = soak.report(600, 20, _soak(), _samples(1000, 1000), {**VERDICT, "lost_logins": 1}, 60, "store")
    assert not passed
