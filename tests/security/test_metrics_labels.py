"""Hardening: a client choosing random HTTP methods cannot grow /metrics without bound."""
import random
import string

import pytest


def _series(text: str) -> set[str]:
    return {line.split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


@pytest.mark.filterwarnings("ignore::wsgiref.validate.WSGIWarning")
def test_random_methods_share_one_label(client):
    before = _series(client.simulate_get("/metrics").text)
    rng = random.Random(7)
    for _ in range(1000):
        method = "".join(rng.choice(string.ascii_uppercase) for _ in range(8))
        client.simulate_request(method, "/healthz")
    after = _series(client.simulate_get("/metrics").text)
    grown = after - before
    assert all('method="OTHER"' in name or 'method="GET"' in name for name in grown), sorted(grown)[:5]
    assert len(grown) < 60  # a few counters and one histogram's buckets, not thousands
