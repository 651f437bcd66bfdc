"""The decision service over real HTTP beside a real control plane (separate gunicorn
processes, as `make run` starts them): answers follow writes, read-your-writes with
``min_revision``, both services agree, and the fault rules hold when the control plane
stops and comes back without its data. The HTTP server of both, as their gunicorn
workers run it, is held to RFC 9112's framing rules against a request smuggled behind
an HTTP/1.0 Transfer-Encoding."""
from __future__ import annotations

import json
import socket
import time

import pytest
import requests

from tests.e2e.processes import Admin, Processes, wait_until


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    processes = Processes(tmp_path_factory.mktemp("decision-e2e"), decision_workers=2).start()
    yield processes
    processes.stop()


def check(base_url, admin, user_id, permission, token=None, **params):
    return requests.get(f"{base_url}/api/v1/applications/{admin.app_id}/authz/check",
                        params={"user_id": user_id, "permission": permission, **params},
                        headers={"Authorization": f"Bearer {token or admin.api_key}"}, timeout=5)


def test_revocation_reaches_the_sidecar_within_a_second_and_min_revision_at_once(services):
    admin = Admin(services.control_url)
    user, role = admin.user(), admin.role(["posts:read"])
    granted = admin.assign(user, role)
    response = check(services.decision_url, admin, user, "posts:read", min_revision=granted)
    assert response.status_code == 200, response.text
    assert response.json() == {"allowed": True, "permission": "posts:read", "cached": False}
    assert wait_until(lambda: check(services.decision_url, admin, user, "posts:read").json()["cached"], 5)

    revoked = admin.unassign(user, role)
    at_once = check(services.decision_url, admin, user, "posts:read", min_revision=revoked).json()
    assert at_once["allowed"] is False
    started = time.monotonic()
    assert wait_until(lambda: not check(services.decision_url, admin, user, "posts:read").json()["allowed"],
                      timeout=1, interval=0.005)
    assert time.monotonic() - started < 1


def test_the_sidecar_and_the_control_plane_agree(services):
    admin = Admin(services.control_url)
    reader, writer, nobody = admin.user(), admin.user(), admin.user()
    admin.assign(reader, admin.role(["posts:read", "comments:*"]))
    admin.assign(writer, admin.role(["*:write"]), scope="team-a")
    revision = admin.assign(writer, admin.role(["authz:check"]))
    token = admin.access_token(writer)
    permissions = ["posts:read", "posts:write", "comments:delete", "billing:write", "authz:check"]
    for credential in (None, token):
        for user in (reader, writer, nobody):
            for scope in (None, "team-a"):
                params = {"min_revision": revision} | ({"scope": scope} if scope else {})
                for permission in permissions:
                    ours = check(services.decision_url, admin, user, permission, credential, **params)
                    theirs = check(services.control_url, admin, user, permission, credential, **params)
                    assert ours.status_code == theirs.status_code == 200
                    assert ours.json()["allowed"] == theirs.json()["allowed"], (user, scope, permission)
                body = {"user_id": user, "permissions": permissions, "min_revision": revision}
                if scope:
                    body["scope"] = scope
                headers = {"Authorization": f"Bearer {credential or admin.api_key}"}
                ours, theirs = (requests.post(f"{url}/api/v1/applications/{admin.app_id}/authz/check-bulk",
                                              json=body, headers=headers, timeout=5)
                                for url in (services.decision_url, services.control_url))
                assert ours.status_code == theirs.status_code == 200
                assert ours.json() == theirs.json()


def test_operations_endpoints(services):
    assert requests.get(services.decision_url + "/healthz").json() == {"status": "ok"}
    assert requests.get(services.decision_url + "/readyz").json() == {"status": "ready", "stream": "connected"}
    admin = Admin(services.control_url)
    user = admin.user()
    admin.assign(user, admin.role(["posts:read"]))
    assert wait_until(lambda: check(services.decision_url, admin, user, "posts:read").json().get("cached"), 5)
    # Two workers: a scrape merges what each worker last wrote, at most a second ago
    # (docs/deployment.md, "Metrics of several workers"), and a gauge merged by minimum
    # reads 1 once every worker's stream is connected.
    names = ("iamgate_decision_cache_hits_total", "iamgate_decision_stream_connected 1.0",
             "iamgate_decision_stream_lag", "iamgate_decision_http_request_duration_seconds_bucket")
    assert wait_until(lambda: all(name in requests.get(services.decision_url + "/metrics").text
                                  for name in names), 10)
    missing = requests.get(services.decision_url + "/api/v1/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"


@pytest.mark.parametrize("service", ["control", "decision"])
def test_an_http_1_0_request_with_transfer_encoding_is_refused_and_smuggles_nothing(services, service):
    """RFC 9112, 6.1: an HTTP/1.0 message with a Transfer-Encoding has faulty framing, and
    the server must close the connection after it. An HTTP/1.0 proxy in front does not
    know chunked: it frames these bytes as one request, where llhttp reads a chunked body
    and a second request. Each service's worker used to answer both (200, then 200, the
    first with ``Connection: keep-alive``); now one 400 and the connection closes."""
    url = services.control_url if service == "control" else services.decision_url
    smuggled = (b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nGET /\r\n0\r\n\r\n"
                b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    received = b""
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10) as sock:
        sock.sendall(smuggled)
        while chunk := sock.recv(65536):  # until the server closes; a timeout fails the test
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n"), received
    assert b"\r\nConnection: close\r\n" in head + b"\r\n", head
    assert json.loads(body)["error"]["code"] == "BAD_REQUEST"  # the whole rest: one answer, no second one


def test_control_plane_outage_fails_closed_and_recovers_without_a_restart(tmp_path):
    # One worker, so readiness after the restart says this worker has seen the new, shorter
    # change log before anything is written to it (see docs/decision-service.md, limits).
    processes = Processes(tmp_path, env={"IAMGATE_DECISION_MAX_STALENESS": 2, "IAMGATE_STREAM_HEARTBEAT": 1}).start()
    try:
        admin = Admin(processes.control_url)
        user = admin.user()
        revision = admin.assign(user, admin.role(["posts:read"]))
        assert check(processes.decision_url, admin, user, "posts:read", min_revision=revision).json()["allowed"]
        for _ in range(3):
            assert check(processes.decision_url, admin, user, "posts:read").json()["allowed"] is True

        processes.stop_control_plane()
        stopped = time.monotonic()
        answers = []
        while time.monotonic() - stopped < 3.5:
            response = check(processes.decision_url, admin, user, "posts:read")
            answers.append((time.monotonic() - stopped, response.status_code, response.json()))
            time.sleep(0.02)
        # Within the bound a cached answer may stand; beyond it, only 503 DECISION_UNAVAILABLE.
        late = [(status, body) for elapsed, status, body in answers if elapsed > 2.2]
        assert late and all(status == 503 and body["error"]["code"] == "DECISION_UNAVAILABLE"
                            for status, body in late), late
        assert all(status in (200, 503) for _, status, _ in answers)
        assert wait_until(lambda: requests.get(processes.decision_url + "/readyz").status_code == 503, 5)

        # The control plane returns (memory://: without its data); the same sidecar serves again.
        processes.start_control_plane()
        assert processes.decision_ready(timeout=15), processes.logs()
        fresh = Admin(processes.control_url)
        allowed_user, plain_user = fresh.user(), fresh.user()
        revision = fresh.assign(allowed_user, fresh.role(["docs:read"]))
        for _ in range(4):
            assert check(processes.decision_url, fresh, allowed_user, "docs:read",
                         min_revision=revision).json()["allowed"] is True
            assert check(processes.decision_url, fresh, plain_user, "docs:read").json()["allowed"] is False
        gone = check(processes.decision_url, admin, user, "posts:read")
        if processes.database_uri is None:  # memory://: the old application died with the control plane
            assert gone.status_code == 404, gone.text  # and is not served from a stale cache
        else:  # a MongoDB store (tests/mongodb.py) kept it
            assert gone.status_code == 200 and gone.json()["allowed"] is True, gone.text
    finally:
        processes.stop()


def test_decision_logs_come_out_of_the_real_workers_on_stdout(tmp_path):
    """Each gunicorn worker (forked, gevent-patched) starts its own writer thread and writes
    one JSON line per logged check to stdout: a GET check's with its permission, a bulk
    check's with each permission's result (docs/decision-service.md, "Decision logs")."""
    processes = Processes(tmp_path, decision_workers=2)
    try:
        processes.start_control_plane()
        processes.start_decision_service(IAMGATE_DECISION_LOG_SAMPLE="1")
        assert processes.decision_ready(), processes.logs()
        admin = Admin(processes.control_url)
        user = admin.user()
        revision = admin.assign(user, admin.role(["posts:read"]))
        answers = [check(processes.decision_url, admin, user, "posts:read", min_revision=revision)]
        for _ in range(4):  # a connection each: whichever worker accepts it
            answers.append(requests.post(
                f"{processes.decision_url}/api/v1/applications/{admin.app_id}/authz/check-bulk",
                json={"user_id": user, "permissions": ["posts:read", "posts:write"]}, headers=admin.headers,
                timeout=5))
        assert [a.status_code for a in answers] == [200] * 5

        def decision_lines():
            lines = [json.loads(line) for path in tmp_path.glob("decision-*.log")
                     for line in path.read_text().splitlines() if '"logger": "iamgate.decisions"' in line]
            return lines if len(lines) >= 5 else None

        lines = wait_until(decision_lines, timeout=10)
        assert lines is not None, processes.logs()
        by_request = {line["request_id"]: line for line in lines}
        single = by_request[answers[0].headers["X-Request-Id"]]
        assert (single["application_id"], single["user_id"], single["permission"], single["result"],
                single["sampled"]) == (admin.app_id, user, "posts:read", "allow", True)
        for answer in answers[1:]:
            bulk = by_request[answer.headers["X-Request-Id"]]
            assert bulk["permissions"] == {"posts:read": "allow", "posts:write": "deny"}
            assert bulk["result"] == "deny" and "permission" not in bulk
    finally:
        processes.stop()
