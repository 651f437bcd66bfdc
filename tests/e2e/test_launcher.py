"""`make run` as a user sees it: both processes answer, and Ctrl-C stops both."""
import requests

from tests.e2e.conftest import wait_until


def test_both_processes_serve_and_stop_on_interrupt(stack):
    assert requests.get(stack.control_url + "/healthz").json() == {"status": "ok"}
    assert requests.get(stack.decision_url + "/healthz").status_code == 200
    ready = requests.get(stack.control_url + "/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    # The launcher prints once it has seen both answer, which may be just after we did.
    assert wait_until(lambda: "iamgate decision service:" in stack.logs(), timeout=10)
    assert "iamgate control plane:" in stack.logs()
    assert "set IAMGATE_PUBLIC_URL=http://localhost:" in stack.logs()  # the stack's public URL is 127.0.0.1
    stack.stop()
    assert stack.process.returncode == 0

    def down():
        try:
            requests.get(stack.control_url + "/healthz", timeout=0.5)
        except requests.ConnectionError:
            return True
        return False

    assert wait_until(down, timeout=10)


def test_bad_configuration_stops_start_up_with_the_variable_named(tmp_path):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "controlplane.launcher"], capture_output=True, text=True,
                            env={"IAMGATE_PORT": "not-a-port", "PATH": "/usr/bin:/bin"}, timeout=60)
    assert result.returncode == 2
    assert "IAMGATE_PORT" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_ip_address_as_passkey_rp_id_stops_start_up_in_one_line():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "controlplane.launcher"], capture_output=True, text=True,
                            env={"IAMGATE_WEBAUTHN_RP_ID": "127.0.0.1", "PATH": "/usr/bin:/bin"}, timeout=60)
    assert result.returncode == 2
    assert "IAMGATE_WEBAUTHN_RP_ID" in result.stderr and "localhost" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_test_stack_chooses_again_when_a_port_was_taken_meanwhile(tmp_path, monkeypatch):
    """The harness picks free ports and the launcher binds them a moment later: another
    process (or this one's SMTP mailbox) can take one in between. A stack that finds its
    port in use is started again on other ports, not reported as a failure."""
    import socket

    from tests.e2e import conftest

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    ports = iter([port])  # the first stack's control-plane port: in use
    real = conftest.free_port
    monkeypatch.setattr(conftest, "free_port", lambda: next(ports, None) or real())
    try:
        stack = conftest.start_stack(tmp_path)
    finally:
        taken.close()
    try:
        assert stack.control_url != f"http://127.0.0.1:{port}"
        assert requests.get(stack.control_url + "/healthz").json() == {"status": "ok"}
    finally:
        stack.stop()
