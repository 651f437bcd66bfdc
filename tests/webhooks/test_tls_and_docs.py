"""The pinned-address sender over real TLS, and the receiver that docs/webhooks.md shows.

TLS: the sender connects to the address it checked (127.0.0.1 here) while naming the
URL's host in SNI and in certificate verification (docs/webhooks.md "Targets"); a
certificate made in the test for ``hooks.iamgate.test`` is trusted through ``verify``
(a CA bundle path), so a certificate for another name must fail.

Docs: the receiver is cut out of the markdown and run on a real delivery.
"""
from __future__ import annotations

import datetime
import http.server
import re
import ssl
import threading
import time
import uuid
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from standardwebhooks import Webhook

from controlplane.webhooks.delivery import Sender
from controlplane.webhooks.signing import new_secret
from controlplane.webhooks.targets import TargetPolicy

HOST = "hooks.iamgate.test"
ALIAS = "alias.iamgate.test"  # resolves to the same address
DOCS = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"


def _self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class _TLSReceiver:
    """HTTPS on 127.0.0.1 with the given certificate; records SNI, Host and bodies."""

    def __init__(self, cert_path: Path, key_path: Path):
        self.requests: list[dict] = []
        self.server_names: list[str | None] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests.append({"headers": dict(self.headers), "body": body})
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_path, key_path)
        context.sni_callback = lambda sock, name, ctx: self.server_names.append(name)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _resolver(host, port):
    if host in (HOST, ALIAS):
        return ["127.0.0.1"]
    raise OSError(f"no such host {host}")


@pytest.fixture
def tls_receiver(tmp_path):
    receiver = _TLSReceiver(*_self_signed(tmp_path, HOST))
    yield receiver
    receiver.close()


def test_the_pinned_sender_verifies_the_url_name_over_tls(tmp_path, tls_receiver):
    policy = TargetPolicy(allow_private=True, resolver=_resolver)
    pinned = policy.pin(f"https://{HOST}:{tls_receiver.port}/hook")
    assert pinned.address == "127.0.0.1"
    sender = Sender(5, verify=str(tmp_path / f"{HOST}.pem"))
    outcome = sender.post(pinned, b'{"event":"x"}', {"Content-Type": "application/json"})
    assert outcome.status == 204 and outcome.ok
    assert tls_receiver.server_names == [HOST]  # SNI names the host, not the address
    [request] = tls_receiver.requests
    assert request["headers"]["Host"] == f"{HOST}:{tls_receiver.port}" and request["body"] == b'{"event":"x"}'


def test_a_certificate_for_another_name_is_refused(tmp_path, tls_receiver):
    """A trusted certificate, but for another name than the URL's: refused, although the
    address is the same (the name, not the pinned address, is what is verified)."""
    pinned = TargetPolicy(allow_private=True, resolver=_resolver).pin(f"https://{ALIAS}:{tls_receiver.port}/hook")
    assert pinned.address == "127.0.0.1"
    outcome = Sender(5, verify=str(tmp_path / f"{HOST}.pem")).post(pinned, b"{}", {})
    assert outcome.status is None and outcome.error.startswith("connection failed")
    assert tls_receiver.server_names == [ALIAS] and tls_receiver.requests == []


def test_an_untrusted_certificate_is_refused(tls_receiver):
    """The default trust store (``verify=True``) does not know the test's certificate."""
    pinned = TargetPolicy(allow_private=True, resolver=_resolver).pin(f"https://{HOST}:{tls_receiver.port}/hook")
    outcome = Sender(5).post(pinned, b"{}", {})
    assert outcome.status is None and tls_receiver.requests == []


# --- the receiver of docs/webhooks.md ------------------------------------------------------


def _docs_receiver() -> dict:
    text = DOCS.read_text()
    section = text[text.index("## Receiving"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(DOCS), "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace


def test_the_receiver_in_the_docs_accepts_a_real_delivery_once(ctx, make_webhook, receiver, make_role, application,
                                                               pump):
    """It verifies with the standardwebhooks library, refuses a timestamp more than 5
    minutes off and an id it has seen, and so every replay."""
    hook = make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    assert pump() == 1
    [request] = receiver.requests
    headers, body, secret = request["headers"], request["body"], hook["secret"]

    docs = _docs_receiver()
    assert docs["receive"](secret, headers, body)["event"] == "role.created"
    assert docs["receive"](secret, headers, body) is None  # the same delivery id again: a replay or a repeat

    fresh = _docs_receiver()
    now = int(time.time())
    assert fresh["receive"](secret, headers, body + b" ") is None                       # altered body
    assert fresh["receive"](new_secret(), headers, body) is None                         # another secret
    assert fresh["receive"](secret, {**headers, "webhook-id": str(uuid.uuid4()),         # a replay under a fresh
                                     "webhook-timestamp": str(now)}, body) is None       # id and timestamp
    for off in (-301, 301):  # signed as the library signs, but more than 5 minutes off
        moment = datetime.datetime.fromtimestamp(now + off, datetime.UTC)
        signed = {**headers, "webhook-timestamp": str(now + off),
                  "webhook-signature": Webhook(secret).sign(headers["webhook-id"], moment, body.decode())}
        assert fresh["receive"](secret, signed, body) is None
    lower = {name.lower(): value for name, value in headers.items()}
    assert fresh["receive"](secret, lower, body)["event"] == "role.created"  # the genuine one still passes
