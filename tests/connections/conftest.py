"""Fixtures of the connections area: a real OpenID provider stand-in on 127.0.0.1 (a
tiny ``http.server`` serving a discovery document and a JWKS, whose answers a test can
change), an app that may call it, and connections built as model objects.

Provider URLs are http on loopback, so the app runs with
IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS on (``config_overrides``) unless a test says
otherwise; the SSRF tests turn it off.

The real upstream providers (panva's oidc-provider: ``upstreams``, ``local_idp``) and the
fixtures of the hosted-page tests are in tests/connections/upstream.py."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from controlplane.connections.model import ClaimMapping, Connection, Endpoints
from shared.ids import new_id
from tests.conftest import bearer
from tests.connections.upstream import add_connection, hosted_app, local_idp, upstreams  # noqa: F401  (fixtures)
from tests.oidc.conftest import oidc_client  # noqa: F401  (fixture)

RSA_KEY = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "k1", "e": "AQAB",
           "n": ("r1lh0mEPequSjMWpGOKqwcbIZ12To5uzrSzit0CBf0-u55BNJl3ERePiOXHx50nxwt3Sf9JAbryYi3vln0XGYDKe15"
                 "L5jaYtCA7-2pOUsH2IFKtJPZUJMe8voN6fKTf1xfsoLXbvycHTX34j8gzuWh5mntdxKRW5ZzASHTkDjs7CZvCWJf_9"
                 "3BVqT9MnZeN4tMiLzbrpX_cIWV_w5vBZDVuQRqCs3GynubpJhRAuKE7JrsoQOAgbp4DZ5avO2Q7GUu8iXvS-AN6HIFQZMhiBhmM4tcqzuOHxgpCEeP850IHcuwW1bvNigW6_wpqONQNUcKlJEwrIv7HnuyAN-jLxgQ")}
EC_KEY = {"kty": "EC", "use": "sig", "alg": "ES256", "kid": "e1", "crv": "P-256",
          "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}


class Provider:
    """An OpenID provider's discovery document and JWKS over HTTP on 127.0.0.1.

    ``discovery`` and ``jwks`` are the documents answered (a test may edit them);
    ``status``, ``headers`` and ``delay`` shape every answer; ``requests`` records the
    paths asked for.  A POST (a token request) answers ``token_answer`` and is recorded
    in ``posts`` with its Authorization header and form body."""

    def __init__(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.discovery = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/auth",
            "token_endpoint": f"{self.issuer}/token",
            "userinfo_endpoint": f"{self.issuer}/me",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
        }
        self.jwks = {"keys": [RSA_KEY]}
        self.status, self.headers, self.delay = 200, {}, 0.0
        self.cut = False  # send half the body, then close: an answer that breaks off
        self.requests: list[str] = []
        self.token_answer: dict = {"access_token": "at", "token_type": "Bearer"}
        self.posts: list[dict] = []
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _handler(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                provider.requests.append(self.path)
                documents = {"/.well-known/openid-configuration": provider.discovery, "/jwks": provider.jwks}
                self._answer(documents.get(self.path))

            def do_POST(self):
                form = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                provider.posts.append({"path": self.path, "authorization": self.headers.get("Authorization"),
                                       "form": form})
                self._answer(provider.token_answer)

            def _answer(self, document):
                if provider.delay:
                    time.sleep(provider.delay)
                body = json.dumps(document).encode() if document is not None else b"not found"
                self.send_response(provider.status if document is not None else 404)
                for name, value in provider.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if provider.cut:
                    body, self.close_connection = body[:len(body) // 2], True
                try:
                    self.wfile.write(body)
                except ConnectionError:
                    pass  # the caller gave up (a timeout test)

            def log_message(self, *args):
                pass

        return Handler

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def config_overrides():
    # Generous: the machine may be loaded; the timeout tests shorten their app's deadline.
    return {"webhook_allow_private_targets": True, "connection_http_timeout": 10}


@pytest.fixture
def connections_url(application):
    return f"/api/v1/applications/{application['_id']}/connections"


@pytest.fixture
def manager(application, make_api_key):
    """Headers of an API key holding only connections:manage."""
    return bearer(make_api_key(application, permissions=["connections:manage"]))


@pytest.fixture
def create(client, connections_url, manager, provider):
    """``create(**fields)`` -> the response of POST V1/connections for an oidc connection
    to ``provider`` (fields override; with a preset, the issuer is the preset's)."""

    def post(**fields):
        body = {"name": "acme", "client_id": "client-1", "client_secret": "s3cret-value",
                **({} if "preset" in fields else {"issuer": provider.issuer}), **fields}
        return client.simulate_post(connections_url, json=body, headers=manager)

    return post


@pytest.fixture
def make_connection(clock):
    """``make_connection(app_id, **fields)`` -> an unsaved oidc ``Connection``."""

    def make(app_id: str, **fields) -> Connection:
        issuer = fields.pop("issuer", "https://idp.example.com")
        now = clock().replace(microsecond=clock().microsecond // 1000 * 1000)  # what MongoDB keeps
        connection = Connection(
            id=new_id(), application_id=app_id, type="oidc", preset=None, name="acme", display_name="Acme",
            issuer=issuer, client_id="client-1", client_secret_enc=None, scopes=("openid", "email"),
            claim_mapping=ClaimMapping(), role_mapping=(), linking="none", trusted=False, jit=True,
            auto_update=False, store_tokens=False, email_domains=(), is_active=True,
            endpoints=Endpoints(issuer=issuer, authorization_endpoint=f"{issuer}/authorize",
                                token_endpoint=f"{issuer}/token", userinfo_endpoint=None,
                                jwks_uri=f"{issuer}/jwks", iss_parameter_supported=False, fetched_at=now),
            created_at=now, updated_at=now,
        )
        return replace(connection, **fields)

    return make
