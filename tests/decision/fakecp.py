"""A fake control plane: the internal API of the contract, served over real HTTP.

The decision service is tested against this (its only dependency) so every rule can be
driven exactly: an in-memory model of applications, users, roles, assignments, policies
and API keys whose every mutation appends a change event with the user ids the contract
says it names; the grants/policies/api-keys lookups (seq read before the data); the
change stream (hello with the head and the log's epoch, replay, live changes,
heartbeats, reset when ``since`` is older than what is retained); and knobs to stop,
restart (with or without its data: a wipe starts a new log with a new epoch), pause the
stream, or hold a grants response mid-flight.
"""
from __future__ import annotations

import hashlib
import json
import secrets
import socketserver
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import falcon
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.abac import Policy
from shared.rbac import Assignment, Grants

_KEY = None


def signing_key():
    global _KEY
    if _KEY is None:
        _KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return _KEY


def _jwk(public_key, kid):
    from jwt.algorithms import RSAAlgorithm

    jwk = json.loads(RSAAlgorithm.to_jwk(public_key))
    return {**jwk, "kid": kid, "use": "sig", "alg": "RS256"}


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A decision service that went away mid-stream is what these tests do, not an
        # error worth a traceback on stderr at the end of the run.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeControlPlane:
    def __init__(self, clock, *, token: str | None = None, heartbeat: float = 0.2):
        self.clock = clock
        self.token = token or secrets.token_urlsafe(16)
        self.heartbeat = heartbeat
        self.kid = "fake-kid-1"
        self.issuer = "http://issuer.test"
        self.port = None
        self._server = None
        self._thread = None
        self._cond = threading.Condition()
        self._generation = 0          # bumped on stop: open streams end
        self.stream_paused = False    # hold back change frames (heartbeats continue)
        self.stream_silent = False    # send nothing at all on open streams (a hung server)
        self.grants_gate = None       # callable(app_id, user_id) run after the data is read
        self.lookup_status = None     # answer lookups with this HTTP status instead
        self.stream_status = None     # answer stream requests with this status (Retry-After: 5) instead
        self.stream_requests = 0      # stream requests received
        self.request_ids: list = []   # (path, X-Request-Id or None) of every request
        self.requests: list[str] = []
        self.wipe()

    # -- lifecycle

    def wipe(self):
        """Lose every record and start a new change log (a new epoch). ``restart(wipe=True)``
        does this while stopped; call it directly between ``stop`` and ``start`` to make
        changes before anyone can reconnect."""
        with self._cond:
            self.epoch = str(uuid.uuid4())
            self.head = 0
            self.events: list[dict] = []
            self.oldest_retained = 1
            self.apps: dict[str, dict] = {}

    def start(self) -> FakeControlPlane:
        app = falcon.App()
        app.add_sink(self._dispatch, "/")
        self._server = make_server("127.0.0.1", self.port or 0, app, server_class=_Server, handler_class=_Quiet)
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """The control plane goes away: streams end, new connections are refused."""
        with self._cond:
            self._generation += 1
            self._cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def restart(self, *, wipe: bool) -> None:
        """Come back on the same port; ``wipe`` loses every record and the change log
        (a control plane on memory:// restarting)."""
        self.stop()
        if wipe:
            self.wipe()
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- the model (each mutation returns the seq of the event it emitted)

    def emit(self, app_id, type_, user_ids=()) -> int:
        with self._cond:
            self.head += 1
            self.events.append({"seq": self.head, "app_id": app_id, "type": type_, "user_ids": list(user_ids)})
            self._cond.notify_all()
            return self.head

    def forget_events_through(self, seq: int) -> None:
        """Retention: the log no longer replays events up to ``seq``."""
        with self._cond:
            self.events = [e for e in self.events if e["seq"] > seq]
            self.oldest_retained = seq + 1

    def add_app(self, app_id=None) -> str:
        app_id = app_id or str(uuid.uuid4())
        with self._cond:
            self.apps[app_id] = {"users": {}, "roles": {}, "assignments": [], "policies": [], "keys": {}}
        return app_id

    def add_user(self, app_id, *, status="active", attributes=None, user_id=None) -> str:
        user_id = user_id or str(uuid.uuid4())
        with self._cond:
            self.apps[app_id]["users"][user_id] = {"status": status, "attributes": dict(attributes or {})}
        self.emit(app_id, "user.created")
        return user_id

    def hand_over(self, app_id, user_id, stamp: int) -> int:
        """The account is handed over to its email's owner: its tokens must carry ``stamp``."""
        with self._cond:
            self.apps[app_id]["users"][user_id]["token_stamp"] = stamp
        return self.emit(app_id, "user.claimed", [user_id])

    def add_role(self, app_id, permissions, name=None) -> str:
        role_id = str(uuid.uuid4())
        with self._cond:
            self.apps[app_id]["roles"][role_id] = {"name": name or f"role-{role_id[:8]}",
                                                   "permissions": list(permissions)}
        self.emit(app_id, "role.created")
        return role_id

    def assign(self, app_id, user_id, role_id, *, scope=None, expires_at=None) -> int:
        with self._cond:
            self.apps[app_id]["assignments"].append(
                {"user_id": user_id, "role_id": role_id, "scope": scope, "expires_at": expires_at})
        return self.emit(app_id, "role.assigned", [user_id])

    def unassign(self, app_id, user_id, role_id, *, scope=None) -> int:
        with self._cond:
            app = self.apps[app_id]
            app["assignments"] = [a for a in app["assignments"]
                                  if not (a["user_id"] == user_id and a["role_id"] == role_id and a["scope"] == scope)]
        return self.emit(app_id, "role.removed", [user_id])

    def set_role_permissions(self, app_id, role_id, permissions) -> int:
        with self._cond:
            app = self.apps[app_id]
            app["roles"][role_id]["permissions"] = list(permissions)
            holders = sorted({a["user_id"] for a in app["assignments"] if a["role_id"] == role_id})
        return self.emit(app_id, "role.updated", holders)

    def set_status(self, app_id, user_id, status) -> int:
        with self._cond:
            self.apps[app_id]["users"][user_id]["status"] = status
        kind = {"suspended": "user.suspended", "active": "user.unsuspended", "deleted": "user.deleted"}[status]
        return self.emit(app_id, kind, [user_id])

    def set_attribute(self, app_id, user_id, key, value) -> int:
        with self._cond:
            self.apps[app_id]["users"][user_id]["attributes"][key] = value
        return self.emit(app_id, "attribute.set", [user_id])

    def set_policies(self, app_id, policies) -> int:
        with self._cond:
            self.apps[app_id]["policies"] = list(policies)
        return self.emit(app_id, "policy.updated")

    def add_key(self, app_id, permissions=("authz:check",), secret=None) -> str:
        secret = secret or "sk_test_" + secrets.token_urlsafe(24)
        with self._cond:
            self.apps[app_id]["keys"][hashlib.sha256(secret.encode()).hexdigest()] = {
                "id": str(uuid.uuid4()), "permissions": list(permissions)}
        self.emit(app_id, "api_keys.changed")
        return secret

    def revoke_key(self, app_id, secret) -> int:
        with self._cond:
            del self.apps[app_id]["keys"][hashlib.sha256(secret.encode()).hexdigest()]
        return self.emit(app_id, "api_keys.changed")

    def delete_app(self, app_id) -> int:
        with self._cond:
            del self.apps[app_id]
        return self.emit(app_id, "application.deleted")

    def grants_of(self, app_id, user_id) -> Grants:
        """What the grants lookup answers (also the reference for agreement tests)."""
        with self._cond:
            app = self.apps[app_id]
            user = app["users"].get(user_id)
            if user is None:
                return Grants.unknown(user_id, self.head)
            now = self.clock()
            assignments = [
                Assignment(a["role_id"], app["roles"][a["role_id"]]["name"],
                           tuple(app["roles"][a["role_id"]]["permissions"]), a["scope"], a["expires_at"])
                for a in app["assignments"]
                if a["user_id"] == user_id and (a["expires_at"] is None or a["expires_at"] > now)
            ]
            return Grants(user_id, user["status"], assignments, user["attributes"], self.head,
                          token_stamp=user.get("token_stamp"))

    def access_token(self, app_id, user_id, *, expires_in=900, kid=None, key=None, algorithm="RS256", **claims) -> str:
        now = int(self.clock().timestamp())
        body = {"iss": self.issuer, "sub": user_id, "aud": app_id, "iat": now, "exp": now + expires_in,
                "jti": str(uuid.uuid4()), "sid": str(uuid.uuid4()), **claims}
        return jwt.encode(body, key or signing_key(), algorithm=algorithm, headers={"kid": kid or self.kid})

    # -- HTTP

    def _dispatch(self, req, resp, **_):
        self.requests.append(req.path)
        self.request_ids.append((req.path, req.get_header("X-Request-Id")))
        parts = req.path.strip("/").split("/")
        if req.path == "/.well-known/jwks.json":
            resp.media = {"keys": [_jwk(signing_key().public_key(), self.kid)]}
            return
        if req.path == "/internal/v1/whoami":
            return self._whoami(req, resp)
        if parts[:2] == ["internal", "v1"] and parts[2:] == ["changes"]:
            if req.get_header("Authorization") != f"Bearer {self.token}":
                return self._error(resp, 401, "UNAUTHORIZED")
            return self._stream(req, resp, None)
        if parts[:3] != ["internal", "v1", "applications"] or len(parts) < 5:
            return self._error(resp, 404, "NOT_FOUND")
        app_id, rest = parts[3], parts[4:]
        with self._cond:
            app = self.apps.get(app_id)
        if app is None:
            return self._error(resp, 404, "NOT_FOUND")
        if not self._authorized(req, app):
            return self._error(resp, 401, "UNAUTHORIZED")
        if rest == ["changes"]:
            return self._stream(req, resp, app_id)
        if self.lookup_status is not None:
            return self._error(resp, self.lookup_status, "SERVICE_UNAVAILABLE")
        with self._cond:
            seq = self.head
        if rest == ["policies"]:
            with self._cond:
                policies = [p.to_json() for p in app["policies"] if p.is_active]
            resp.media = {"seq": seq, "policies": policies}
        elif rest == ["api-keys"]:
            with self._cond:
                keys = [{"id": k["id"], "key_digest": d, "permissions": k["permissions"]}
                        for d, k in app["keys"].items()]
            resp.media = {"seq": seq, "keys": keys}
        elif len(rest) == 3 and rest[0] == "users" and rest[2] == "grants":
            grants = self.grants_of(app_id, rest[1])
            if self.grants_gate is not None:
                self.grants_gate(app_id, rest[1])
            resp.media = {"seq": seq, "grants": grants.to_json()}
        else:
            self._error(resp, 404, "NOT_FOUND")

    def _whoami(self, req, resp):
        header = req.get_header("Authorization") or ""
        if header == f"Bearer {self.token}":
            resp.media = {"kind": "internal", "application_id": None, "key_id": None, "permissions": []}
            return
        digest = hashlib.sha256(header.removeprefix("Bearer ").encode()).hexdigest()
        with self._cond:
            for app_id, app in self.apps.items():
                if digest in app["keys"]:
                    key = app["keys"][digest]
                    resp.media = {"kind": "api_key", "application_id": app_id, "key_id": key["id"],
                                  "permissions": key["permissions"]}
                    return
        self._error(resp, 401, "UNAUTHORIZED")

    def _authorized(self, req, app) -> bool:
        header = req.get_header("Authorization") or ""
        if header == f"Bearer {self.token}":
            return True
        secret = header.removeprefix("Bearer ")
        with self._cond:
            return hashlib.sha256(secret.encode()).hexdigest() in app["keys"]

    @staticmethod
    def _error(resp, status, code):
        resp.status = status
        resp.media = {"error": {"code": code, "message": code, "details": {}, "request_id": "x",
                                "timestamp": "2024-01-01T00:00:00+00:00"}}

    def _stream(self, req, resp, app_filter):
        with self._cond:
            self.stream_requests += 1
        if self.stream_status is not None:  # the control plane's store is down, say
            resp.set_header("Retry-After", "5")
            return self._error(resp, self.stream_status, "SERVICE_UNAVAILABLE")
        since = req.get_param_as_int("since")
        resp.content_type = "text/event-stream"
        resp.cache_control = ["no-cache"]
        resp.stream = self._frames(since, app_filter)

    def _frames(self, since, app_filter):
        def frame(event, data, event_id=None):
            head = f"event: {event}\n" + (f"id: {event_id}\n" if event_id is not None else "")
            return (head + f"data: {json.dumps(data)}\n\n").encode()

        with self._cond:
            generation = self._generation
            head = self.head
            yield frame("hello", {"seq": head, "epoch": self.epoch})
            if since is not None and since < self.oldest_retained - 1:
                yield frame("reset", {"seq": head})
                cursor = head
            else:
                cursor = head if since is None else since
        last_sent = time.monotonic()
        while True:
            with self._cond:
                if self._generation != generation:
                    return
                held = self.stream_paused or self.stream_silent
                pending = [] if held else [e for e in self.events if e["seq"] > cursor]
                if not pending:
                    self._cond.wait(max(0.0, self.heartbeat - (time.monotonic() - last_sent)))
                    if self._generation != generation:
                        return
            for event in pending:
                cursor = event["seq"]
                if app_filter is None or event["app_id"] == app_filter:
                    yield frame("change", event, event["seq"])
                    last_sent = time.monotonic()
            if time.monotonic() - last_sent >= self.heartbeat and not self.stream_silent:
                yield frame("heartbeat", {"seq": cursor})
                last_sent = time.monotonic()


def future(clock, seconds) -> datetime:
    return clock() + timedelta(seconds=seconds)


def policy(effect, permissions, condition=None, *, name=None, active=True) -> Policy:
    return Policy(str(uuid.uuid4()), name or f"{effect}-policy", effect, tuple(permissions), condition, active)
