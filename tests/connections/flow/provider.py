"""A small OpenID provider for the connection tests: a real HTTP server on 127.0.0.1
(discovery, JWKS, authorize, token, userinfo, and a GitHub-like user API) that signs
ID Tokens with an RSA key generated per provider.

Tests steer it: ``login_as`` picks the account /authorize signs in; ``id_token_claims``
(a value None removes the claim) and ``id_token_header`` change the next ID Tokens;
``sign_with`` is "rsa", "none" (alg none), "hs256" (HMAC keyed with the public key's
PEM, the classic confusion) or "other_rsa" (a key the JWKS does not hold, under a
kid it does not know); ``rotate()`` replaces the signing key; ``jwks_fetches`` counts
JWKS downloads.  It checks the code, the PKCE verifier, the redirect_uri and the client
credentials as a provider must.  ``callback_url`` set, /authorize checks the redirect URI
as GitHub does for an OAuth App (``accepts``), and answers one it refuses as GitHub
does, on the registered callback URL with ``error=redirect_uri_mismatch``; unset, it
takes any redirect URI.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

CLIENT_ID, CLIENT_SECRET = "iamgate-client", "s3cret-of-the-client"

ACCOUNTS = {
    "verified": {"sub": "sub-verified", "email": "ada@example.com", "email_verified": True, "name": "Ada",
                 "groups": ["staff", "admins"], "department": "research"},
    "unverified": {"sub": "sub-unverified", "email": "ada@example.com", "email_verified": False, "name": "Mallory"},
    "other": {"sub": "sub-other", "email": "bob@example.com", "email_verified": True, "name": "Bob"},
}


def _key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Provider:
    def __init__(self, *, iss_parameter: bool = True):
        self.iss_parameter = iss_parameter
        self.accounts = {name: dict(claims) for name, claims in ACCOUNTS.items()}
        self.login_as = "verified"
        self.id_token_claims: dict = {}
        self.id_token_header: dict = {}
        self.sign_with = "rsa"
        self.codes: dict = {}
        self.access_tokens: dict = {}
        self.refresh_tokens: dict = {}
        self.jwks_fetches = 0
        self.token_requests: list[dict] = []
        self.refresh_fails = False
        self.expires_in = 3600
        self.emails_answer: object = None   # the /user/emails answer (GitHub's is a JSON array)
        self.answer_as: dict = {}  # path -> a JSON body answered (200) in place of the route's own
        self.callback_url: str | None = None  # the registered callback URL (GitHub's rule: ``accepts``)
        self._key, self.kid = _key(), secrets.token_hex(4)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.issuer = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self):
        self._server.shutdown()
        self._server.server_close()

    def rotate(self):
        self._key, self.kid = _key(), secrets.token_hex(4)

    def accepts(self, redirect_uri: str) -> bool:
        """GitHub's rule for an OAuth App's redirect_uri: the callback URL's scheme, host and
        port, and a path "in a subdirectory of" the callback URL's, read as leniently as it
        can be: any path that begins with it."""
        if self.callback_url is None:
            return True
        registered, asked = urlsplit(self.callback_url), urlsplit(redirect_uri)
        return (asked.scheme, asked.netloc) == (registered.scheme, registered.netloc) and \
            asked.path.startswith(registered.path)

    def jwks(self) -> dict:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self._key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def discovery(self) -> dict:
        return {"issuer": self.issuer, "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token", "userinfo_endpoint": f"{self.issuer}/userinfo",
                "jwks_uri": f"{self.issuer}/jwks", "response_types_supported": ["code"],
                "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": self.iss_parameter}

    # ------------------------------------------------------------------ tokens

    def id_token(self, account: dict, nonce: str | None) -> str:
        now = int(time.time())
        claims = {**account, "iss": self.issuer, "aud": CLIENT_ID, "iat": now, "exp": now + 300}
        if nonce is not None:
            claims["nonce"] = nonce
        for name, value in self.id_token_claims.items():
            if value is None:
                claims.pop(name, None)
            else:
                claims[name] = value
        header = {"kid": self.kid, **self.id_token_header}
        if self.sign_with == "none":
            return jwt.encode(claims, None, algorithm="none", headers=header)
        if self.sign_with == "hs256":
            pem = self._key.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)
            return _hs256(claims, header, pem)
        if self.sign_with == "other_rsa":
            return jwt.encode(claims, _key(), algorithm="RS256", headers={**header, "kid": "unknown-kid"})
        return jwt.encode(claims, self._key, algorithm="RS256", headers=header)

    def _token_answer(self, account: dict, nonce: str | None) -> dict:
        access, refresh = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
        self.access_tokens[access] = account
        self.refresh_tokens[refresh] = account
        return {"access_token": access, "token_type": "Bearer", "expires_in": self.expires_in,
                "refresh_token": refresh, "id_token": self.id_token(account, nonce), "scope": "openid email"}

    # ------------------------------------------------------------------ HTTP

    def _handler(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _json(self, status, body, headers=None):
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def _account(self):
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                return provider.access_tokens.get(token)

            def do_GET(self):
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/.well-known/openid-configuration":
                    return self._json(200, provider.discovery())
                if url.path == "/jwks":
                    provider.jwks_fetches += 1
                    return self._json(200, provider.jwks())
                if url.path == "/authorize":
                    return self._authorize(query)
                if url.path in provider.answer_as:
                    return self._json(200, provider.answer_as[url.path])
                account = self._account()
                if account is None:
                    return self._json(401, {"error": "invalid_token"})
                if url.path == "/userinfo":
                    return self._json(200, account)
                if url.path == "/user":
                    return self._json(200, {"id": account["github_id"], "login": account["name"],
                                            "name": account["name"], "email": account["email"],
                                            "avatar_url": "https://avatars.example/a.png"})
                if url.path == "/user/emails":
                    return self._json(200, provider.emails_answer if provider.emails_answer is not None else [
                        {"email": account["email"], "primary": True, "verified": account["email_verified"]}])
                return self._json(404, {"error": "not_found"})

            def _authorize(self, query):
                if query.get("client_id") != CLIENT_ID or query.get("code_challenge_method") != "S256":
                    return self._json(400, {"error": "invalid_request"})
                if not provider.accepts(query.get("redirect_uri", "")):
                    return self._redirect(provider.callback_url, {"error": "redirect_uri_mismatch",
                                                                  "state": query.get("state", "")})
                code = secrets.token_urlsafe(16)
                provider.codes[code] = {"account": provider.accounts[provider.login_as], "query": query}
                answer = {"code": code, "state": query["state"]}
                if provider.iss_parameter:
                    answer["iss"] = provider.issuer
                self._redirect(query["redirect_uri"], answer)

            def _redirect(self, url, answer):
                self.send_response(302)
                self.send_header("Location", f"{url}?{urlencode(answer)}")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                provider.token_requests.append({"form": form, "authorization": self.headers.get("Authorization")})
                if self.path != "/token":
                    return self._json(404, {"error": "not_found"})
                if self.path in provider.answer_as:
                    return self._json(200, provider.answer_as[self.path])
                if not self._client_ok(form):
                    return self._json(401, {"error": "invalid_client"})
                if form.get("grant_type") == "refresh_token":
                    account = provider.refresh_tokens.pop(form.get("refresh_token"), None)
                    if account is None or provider.refresh_fails:
                        return self._json(400, {"error": "invalid_grant"})
                    return self._json(200, provider._token_answer(account, None))
                grant = provider.codes.pop(form.get("code"), None)
                if grant is None or form.get("redirect_uri") != grant["query"]["redirect_uri"]:
                    return self._json(400, {"error": "invalid_grant"})
                verifier = form.get("code_verifier") or ""
                challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
                if challenge.decode() != grant["query"]["code_challenge"]:
                    return self._json(400, {"error": "invalid_grant", "error_description": "PKCE"})
                return self._json(200, provider._token_answer(grant["account"], grant["query"].get("nonce")))

            def _client_ok(self, form) -> bool:
                basic = self.headers.get("Authorization")
                if basic:
                    user, _, password = base64.b64decode(basic.removeprefix("Basic ")).decode().partition(":")
                    return (user, password) == (CLIENT_ID, CLIENT_SECRET)
                return (form.get("client_id"), form.get("client_secret")) == (CLIENT_ID, CLIENT_SECRET)

        return Handler


def _hs256(claims: dict, header: dict, secret: bytes) -> str:
    """An HS256 JWS keyed with ``secret`` (PyJWT refuses a PEM as an HMAC key, as it should)."""
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = f"{b64(json.dumps({**header, 'alg': 'HS256', 'typ': 'JWT'}).encode())}." \
                    f"{b64(json.dumps(claims).encode())}"
    return f"{signing_input}.{b64(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())}"
