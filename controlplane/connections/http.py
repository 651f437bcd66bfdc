"""Every HTTP call iamgate makes to a connection's identity provider (discovery, JWKS,
token, userinfo, a provider's user API) goes through ``ProviderHttp``.

The calls are made on the request's behalf to a URL an application administrator chose,
so they get the webhooks' defences (docs/security.md): the URL's name is resolved and
each address checked by ``webhooks.targets.TargetPolicy`` at every call (https only, no
loopback, private, link-local... address, no ``localhost`` name; the development switch
IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS lifts both), the connection goes to the checked
address under the URL's name (Host, TLS SNI and certificate), redirects are never
followed (nor their bodies read), proxies from the environment are ignored, a call has
IAMGATE_CONNECTION_HTTP_TIMEOUT seconds in all, and at most ``READ_CAP`` bytes of an
answer are read.

Every failure is a ``ProviderError`` whose ``reason`` a person can read and act on.
"""
from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote_plus, urlsplit

import requests
import urllib3

from controlplane.webhooks.delivery import _Deadline, _PinnedAdapter
from controlplane.webhooks.errors import WebhookTargetForbidden
from controlplane.webhooks.targets import Pinned, TargetPolicy, system_resolver
from shared import tracing
from shared.errors import ValidationFailed

READ_CAP = 512 * 1024  # bytes; discovery documents and JWKS are a few kilobytes
USER_AGENT = "iamgate-connections/1"


class ProviderError(Exception):
    """A call to a provider failed; ``reason`` says why, in words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ProviderHttp:
    def __init__(self, config, *, resolver=system_resolver, verify=True):
        self.timeout = config.connection_http_timeout
        self.policy = TargetPolicy(allow_private=config.webhook_allow_private_targets, resolver=resolver)
        self._verify = verify  # a CA bundle path in tests with their own certificate

    def get_json(self, url: str, *, headers=None) -> dict | list:
        """GET ``url`` and answer its JSON object, or array (GitHub's ``/user/emails``)."""
        return self._call("GET", url, headers=headers)

    def get_object(self, url: str, *, headers=None) -> dict:
        """GET ``url`` and answer its JSON object (a discovery document, a JWK Set, a
        UserInfo answer, a user API's user)."""
        return _object(url, self._call("GET", url, headers=headers))

    def post_form(self, url: str, data, *, auth=None, headers=None) -> dict:
        """POST ``data`` form-encoded and answer its JSON object (a token response is one,
        RFC 6749 5.1; anything else is a ProviderError, never a crash of the caller's
        ``.get``).  ``auth`` is ``(client_id, client_secret)``, sent as HTTP Basic with
        each part form-encoded first, as RFC 6749 section 2.3.1 requires
        (client_secret_basic)."""
        headers = dict(headers or {})
        if auth is not None:
            user, password = (quote_plus(part) for part in auth)
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return _object(url, self._call("POST", url, headers=headers, data=data))

    def check_url(self, url: str) -> None:
        """The rules every call applies, checked now (a URL an administrator configures):
        400 VALIDATION_INVALID_FORMAT for a malformed or non-https URL, 400
        WEBHOOK_TARGET_FORBIDDEN for a forbidden address."""
        self.policy.check(url)

    def vet(self, url: str) -> None:
        """``check_url``, failing with a ``ProviderError`` (a URL a provider gave)."""
        try:
            self.policy.check(url)
        except (ValidationFailed, WebhookTargetForbidden) as exc:
            raise ProviderError(refusal(url, exc)) from None

    def pin(self, url: str) -> Pinned:
        """The checked address a call to ``url`` connects to, resolved now."""
        try:
            return self.policy.pin(url)
        except (ValidationFailed, WebhookTargetForbidden) as exc:
            raise ProviderError(refusal(url, exc)) from None
        except OSError:
            raise ProviderError(f"the name {urlsplit(url).hostname or url} does not resolve") from None

    def _call(self, method: str, url: str, *, headers=None, data=None) -> dict | list:
        """One call: a CLIENT span while tracing, named by the provider's host and port
        only (a URL's query may carry a code or token)."""
        pinned = self.pin(url)
        target = pinned.target
        with tracing.client_call(method, {"server.address": target.host, "server.port": target.port,
                                          "url.scheme": target.scheme}) as call:
            try:
                response, body = self._send(method, url, pinned, headers=headers, data=data)
            except ProviderError:
                call.answered(None, "provider_error")
                raise
            call.answered(response.status_code)
        return _json_answer(url, response, body)

    def _send(self, method: str, url: str, pinned: Pinned, *, headers, data):
        target = pinned.target
        address = f"[{pinned.address}]" if ":" in pinned.address else pinned.address
        default_port = 443 if target.scheme == "https" else 80
        host = target.host if ":" not in target.host else f"[{target.host}]"
        host_header = host if target.port == default_port else f"{host}:{target.port}"
        # Through the adapter itself, as the webhooks' sender does: a ``requests.Session``
        # reads a 3xx's whole body, decompressed, to prepare a redirect it does not follow,
        # and keeps cookies; nothing here reads the environment (no proxy).
        adapter = _PinnedAdapter(target.host, max_retries=0)
        sent = {"Accept": "application/json", "Accept-Encoding": "identity", "User-Agent": USER_AGENT,
                **tracing.propagate(headers or {}), "Host": host_header}
        try:
            with _Deadline(self.timeout) as deadline:
                try:
                    request = requests.Request(method, f"{target.scheme}://{address}:{target.port}{target.path}",
                                               headers=sent, data=data).prepare()
                    response = adapter.send(request, stream=True, timeout=(self.timeout, self.timeout),
                                            verify=self._verify)
                except requests.Timeout:
                    raise ProviderError(self._too_slow(url)) from None
                except requests.exceptions.SSLError as exc:
                    raise ProviderError(f"TLS with {target.host} failed for {url}: {_tls_reason(exc)}") from None
                except (requests.RequestException, OSError) as exc:
                    if deadline.expired:
                        raise ProviderError(self._too_slow(url)) from None
                    raise ProviderError(f"cannot connect to {url} ({type(exc).__name__})") from None
                try:
                    body = response.raw.read(READ_CAP + 1, decode_content=True)
                except (urllib3.exceptions.HTTPError, OSError) as exc:
                    if deadline.expired:
                        raise ProviderError(self._too_slow(url)) from None
                    raise ProviderError(f"the answer of {url} broke off ({type(exc).__name__})") from None
                finally:
                    response.close()  # the rest of an answer over the cap is never read
                if deadline.expired:
                    raise ProviderError(self._too_slow(url))
        finally:
            adapter.close()
        return response, body

    def _too_slow(self, url: str) -> str:
        return f"{url} did not answer within {self.timeout} seconds"


def _object(url: str, document: dict | list) -> dict:
    if not isinstance(document, dict):
        raise ProviderError(f"{url} did not answer a JSON object")
    return document


def _json_answer(url: str, response, body: bytes) -> dict | list:
    status = response.status_code
    if 300 <= status < 400:
        where = response.headers.get("Location", "elsewhere")
        raise ProviderError(f"{url} answered a redirect ({status}) to {where}; redirects are not followed, "
                            "configure the final URL")
    if len(body) > READ_CAP:
        raise ProviderError(f"{url} answered more than {READ_CAP} bytes")
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        document = None
    if status >= 400:
        oauth = ""
        if isinstance(document, dict) and isinstance(document.get("error"), str):
            oauth = f": {document['error']}"  # RFC 6749 section 5.2
            if isinstance(document.get("error_description"), str):
                oauth += f" ({document['error_description'][:200]})"
        raise ProviderError(f"{url} answered HTTP {status}{oauth}")
    if not isinstance(document, dict | list):
        raise ProviderError(f"{url} did not answer a JSON object or array")
    return document


def refusal(url: str, exc: ValidationFailed | WebhookTargetForbidden) -> str:
    """Why the target rules refuse ``url``, in words."""
    if isinstance(exc, ValidationFailed):
        return f"{url} is not an allowed URL: it {next(iter(exc.errors.values()))}"
    return (f"{url} is refused: {exc.details['host']} is not a public address ({exc.details['reason']}); "
            "private targets are allowed only with IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS, for development")


_SSL_REASON = re.compile(r"\[SSL[^\]]*\][^'\")]*|certificate verify failed[^'\")]*")


def _tls_reason(exc: Exception) -> str:
    """OpenSSL's words (``[SSL: WRONG_VERSION_NUMBER] wrong version number``), without
    the layers of urllib3 and requests around them."""
    found = _SSL_REASON.search(str(exc))
    return found.group(0).strip() if found else type(exc).__name__
