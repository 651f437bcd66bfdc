"""The decision service's request lines and request ids (issue 31, item 10): one JSON line
per answered request, the control plane's line, written alike whether the hot path or
Falcon answered; sampled when busy (``shared.logs.Sampling``); and the check's request id
passed on to the control plane with every lookup it causes."""
from __future__ import annotations

import json
import logging

import falcon.testing
import pytest

from shared.logs import JsonFormatter, Sampling
from tests.decision.conftest import check_path

FIELDS = ["level", "logger", "message", "request_id", "method", "route", "status", "duration_ms", "client_ip",
          "application_id"]
ROUTE = "/api/v1/applications/{applicationId}/authz/check"


def lines(caplog) -> list[dict]:
    formatter = JsonFormatter()
    return [json.loads(formatter.format(record)) for record in caplog.records
            if record.name == "iamgate.decision" and record.getMessage() == "request"]


def send(app, path, query, headers, *, hot: bool):
    saved = app.hot_check
    if not hot:
        app.hot_check = None
    try:
        return falcon.testing.TestClient(app).simulate_get(path, query_string=query, headers=headers)
    finally:
        app.hot_check = saved


@pytest.fixture
def sidecar_overrides():
    return {"trusted_proxies": ()}


def test_a_check_and_a_probe_are_logged_alike_by_the_hot_path_and_falcon(make_sidecar, fake_cp, caplog):
    caplog.set_level(logging.INFO, logger="iamgate")
    app = make_sidecar()
    app_id = fake_cp.add_app()
    key = fake_cp.add_key(app_id)
    user = fake_cp.add_user(app_id)
    fake_cp.assign(app_id, user, fake_cp.add_role(app_id, ["docs:read"]))
    requests = [(check_path(app_id), f"user_id={user}&permission=docs:read", {"Authorization": f"Bearer {key}"}),
                (check_path(app_id), f"user_id={user}&permission=docs:read", {}),  # 401
                ("/readyz", "", {})]
    logged = {}
    for hot in (True, False):
        for path, query, headers in requests:
            caplog.clear()
            response = send(app, path, query, {**headers, "X-Request-Id": "request-0001"}, hot=hot)
            (line,) = lines(caplog)
            assert list(line)[1:] == FIELDS and line["request_id"] == "request-0001"
            assert type(line.pop("duration_ms")) is float
            line.pop("ts")
            assert line["status"] == response.status_code
            logged.setdefault(hot, []).append(line)
    assert logged[True] == logged[False]
    assert [(line["route"], line["status"], line["client_ip"], line["application_id"]) for line in logged[True]] == [
        (ROUTE, 200, "127.0.0.1", app_id), (ROUTE, 401, "127.0.0.1", app_id), ("/readyz", 200, "127.0.0.1", None)]


@pytest.mark.parametrize("sidecar_overrides", [{"decision_request_log_rate": 0, "decision_request_log_sample": 0}])
def test_logging_can_be_left_to_errors_and_slow_requests(make_sidecar, fake_cp, caplog, sidecar_overrides):
    caplog.set_level(logging.INFO, logger="iamgate")
    app = make_sidecar()
    app_id = fake_cp.add_app()
    for _ in range(5):
        assert send(app, "/healthz", "", {}, hot=True).status_code == 200
    assert lines(caplog) == []
    fake_cp.lookup_status = 503  # the key lookup fails: the check fails closed, 503
    response = send(app, check_path(app_id), "user_id=u1&permission=docs:read", {"Authorization": "Bearer sk_test_x"},
                    hot=True)
    assert response.status_code == 503
    assert [(line["status"], line["application_id"]) for line in lines(caplog)] == [(503, app_id)]


def test_sampling_keeps_the_first_requests_of_each_second_then_one_in_k_and_every_error_and_slow_one():
    now = [100.0]
    sampling = Sampling(3, 4, slow=0.1, monotonic=lambda: now[0])
    kept = [sampling.keep(200, 0.001) for _ in range(12)]
    assert kept == [True] * 3 + [False, False, False, True] * 2 + [False]  # 3, then the 4th, 8th... beyond
    assert sampling.keep(503, 0.001) and sampling.keep(500, 0.0)  # server errors: always
    assert sampling.keep(200, 0.25)  # slow: always
    assert not sampling.keep(404, 0.001)  # a client error is sampled like any answer
    now[0] = 101.2  # a new second
    assert [sampling.keep(200, 0.001) for _ in range(3)] == [True] * 3
    quiet = Sampling(0, 0, monotonic=lambda: now[0])
    assert not any(quiet.keep(200, 0.001) for _ in range(100))
    assert quiet.keep(502, 0.001)


def test_the_request_id_goes_with_every_lookup_to_the_control_plane(make_sidecar, fake_cp):
    app = make_sidecar()
    app_id = fake_cp.add_app()
    key = fake_cp.add_key(app_id)
    user = fake_cp.add_user(app_id)
    fake_cp.request_ids.clear()
    for hot, request_id in ((True, "first-request-id"), (False, "second-request-id")):
        other = fake_cp.add_user(app_id)  # not cached yet: a grants lookup
        send(app, check_path(app_id), f"user_id={other}&permission=docs:read",
             {"Authorization": f"Bearer {key}", "X-Request-Id": request_id}, hot=hot)
    lookups = [(path.rsplit("/", 1)[-1], request_id) for path, request_id in fake_cp.request_ids]
    assert lookups == [("api-keys", "first-request-id"), ("grants", "first-request-id"),
                       ("grants", "second-request-id")]
    # Without one, the id the decision service made, the one its answer carries.
    fake_cp.request_ids.clear()
    response = send(app, check_path(app_id), f"user_id={user}&permission=docs:read",
                    {"Authorization": f"Bearer {key}"}, hot=True)
    assert fake_cp.request_ids == [(f"/internal/v1/applications/{app_id}/users/{user}/grants",
                                    response.headers["X-Request-Id"])]
