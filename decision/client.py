"""The decision service's only data source: the control plane's internal API.

The sidecar holds no database credentials (ARCHITECTURE.md, "Decision service
protocol"). It reads a user's grants, an application's ABAC policies and API key
digests over HTTP, authenticated with the internal service token or an application API
key, and follows the change stream, a server-sent-events response of
``hello``/``change``/``reset``/``heartbeat`` frames (their meaning: ``decision.stream``).

Connections are kept alive (one ``requests.Session`` for lookups, one per stream);
under gunicorn's gevent worker the sockets are cooperative, so a slow control plane
blocks only the greenlets waiting for it.
"""
from __future__ import annotations

import json
import logging

import requests
from requests.adapters import HTTPAdapter

from shared.abac import Policy
from shared.rbac import Grants

log = logging.getLogger("iamgate.decision.client")

CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 3.0
_POOL_SIZE = 64
_MAX_FRAME_BYTES = 1024 * 1024


class ControlPlaneError(Exception):
    """No usable answer from the control plane: unreachable, timed out, refused this
    service's credential, or sent something unreadable. Checks then fail closed."""


class ApplicationNotFound(Exception):
    """The control plane does not know the application."""


def _session() -> requests.Session:
    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=_POOL_SIZE, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.trust_env = False  # a proxy between a sidecar and its control plane is a misconfiguration
    return session


class ControlPlaneClient:
    """Calls of the internal API (the contract in ARCHITECTURE.md and the roles area)."""

    def __init__(self, base_url: str, credential: str, *, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)):
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {credential}", "Accept": "application/json"}
        self._timeout = timeout
        self._session = _session()

    # -- lookups

    def grants(self, app_id: str, user_id: str) -> tuple[int, Grants]:
        """(seq, grants) of one user; seq is the change-log head read before the data."""
        body = self._get(f"/internal/v1/applications/{app_id}/users/{user_id}/grants")
        try:
            return _seq(body), Grants.from_json(body["grants"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ControlPlaneError(f"unreadable grants response: {exc!r}") from None

    def policies(self, app_id: str) -> tuple[int, list[Policy]]:
        """(seq, active ABAC policies) of the application."""
        body = self._get(f"/internal/v1/applications/{app_id}/policies")
        try:
            return _seq(body), [Policy.from_json(item) for item in body["policies"]]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ControlPlaneError(f"unreadable policies response: {exc!r}") from None

    def api_keys(self, app_id: str) -> tuple[int, list[dict]]:
        """(seq, [{id, key_digest, permissions}]) of the application's active API keys."""
        body = self._get(f"/internal/v1/applications/{app_id}/api-keys")
        try:
            keys = [{"id": str(item["id"]), "key_digest": str(item["key_digest"]),
                     "permissions": tuple(item["permissions"])} for item in body["keys"]]
            return _seq(body), keys
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlPlaneError(f"unreadable api-keys response: {exc!r}") from None

    def whoami(self) -> dict:
        """What the control plane makes of this service's credential:
        ``{kind: internal|api_key, application_id, key_id, permissions}``."""
        body = self._get("/internal/v1/whoami")
        if body.get("kind") not in ("internal", "api_key"):
            raise ControlPlaneError("unreadable whoami response")
        return body

    def jwks(self) -> dict:
        """The control plane's public signing keys (``/.well-known/jwks.json``)."""
        body = self._get("/.well-known/jwks.json", authenticated=False)
        if not isinstance(body.get("keys"), list):
            raise ControlPlaneError("unreadable JWKS response")
        return body

    def _get(self, path: str, authenticated: bool = True) -> dict:
        try:
            response = self._session.get(self.base_url + path, timeout=self._timeout,
                                         headers=self._headers if authenticated else None)
        except requests.RequestException as exc:
            raise ControlPlaneError(f"GET {path}: {exc.__class__.__name__}") from None
        _raise_for_status(response, path)
        try:
            body = response.json()
        except ValueError:
            raise ControlPlaneError(f"GET {path}: the body is not JSON") from None
        if not isinstance(body, dict):
            raise ControlPlaneError(f"GET {path}: the body is not a JSON object")
        return body

    # -- the change stream

    def changes(self, since: int | None, *, app_id: str | None = None, read_timeout: float) -> "ChangeStream":
        """Open the change stream: every application's with the internal token
        (``app_id`` None), one application's otherwise. ``since`` None starts live."""
        path = f"/internal/v1/applications/{app_id}/changes" if app_id else "/internal/v1/changes"
        params = {} if since is None else {"since": str(since)}
        session = _session()  # a stream holds its connection for hours: keep it out of the lookup pool
        headers = {**self._headers, "Accept": "text/event-stream", "Cache-Control": "no-cache"}
        try:
            response = session.get(self.base_url + path, params=params, headers=headers, stream=True,
                                   timeout=(self._timeout[0], read_timeout))
        except requests.RequestException as exc:
            session.close()
            raise ControlPlaneError(f"GET {path}: {exc.__class__.__name__}") from None
        try:
            _raise_for_status(response, path)
            media = (response.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if media != "text/event-stream":
                raise ControlPlaneError(f"GET {path}: expected text/event-stream, got {media or 'nothing'}")
        except (ControlPlaneError, ApplicationNotFound):
            response.close()
            session.close()
            raise
        return ChangeStream(response, session)


def _seq(body: dict) -> int:
    seq = body["seq"]
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise ValueError(f"seq must be a non-negative integer, got {seq!r}")
    return seq


def _raise_for_status(response, path: str) -> None:
    status = response.status_code
    if status == 200:
        return
    code = _error_code(response)
    response.close()
    if status == 404:
        raise ApplicationNotFound(path)
    if status in (401, 403):
        # Our own credential: a revoked API key or a wrong internal token. Loud, because
        # every check fails closed until an operator fixes the configuration.
        log.error("the control plane refused this decision service's credential",
                  extra={"path": path, "status": status, "code": code})
    raise ControlPlaneError(f"GET {path}: HTTP {status} {code or ''}".strip())


def _error_code(response) -> str | None:
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


class ChangeStream:
    """Server-sent events (WHATWG HTML, "Server-sent events") read as ``(event, data)``
    pairs, ``data`` parsed as JSON. Iteration ends when the server closes the stream;
    ``close`` (from any thread) ends it early."""

    def __init__(self, response, session):
        self._response = response
        self._session = session

    def __iter__(self):
        raw = self._response.raw
        buffer = b""
        event, data = "", []
        while True:
            # read1 returns what has arrived (chunked or not) instead of waiting for a full block.
            chunk = raw.read1(65536)
            if not chunk:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > _MAX_FRAME_BYTES:
                raise ControlPlaneError("change stream: a line exceeds 1 MiB")
            for line in lines:
                line = line.rstrip(b"\r").decode("utf-8")
                if not line:
                    if data:
                        yield event or "message", _frame_data(data)
                    event, data = "", []
                    continue
                if line.startswith(":"):
                    continue  # a comment (keep-alive)
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)

    def close(self) -> None:
        self._response.close()
        self._session.close()


def _frame_data(lines: list[str]) -> dict:
    try:
        data = json.loads("\n".join(lines))
    except ValueError:
        raise ControlPlaneError("change stream: a frame's data is not JSON") from None
    if not isinstance(data, dict):
        raise ControlPlaneError("change stream: a frame's data is not a JSON object")
    return data
