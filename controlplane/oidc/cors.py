"""CORS for browser apps (the Fetch standard's CORS protocol) at the OIDC endpoints a
single-page app calls: discovery and the key set (public documents: any origin, ``*``),
and token, userinfo, revocation and introspection (an origin some active client lists
in its ``allowed_origins`` only; none of an application being deleted).

A resource opts in with a class attribute ``cors``: ``ANY_ORIGIN`` or
``REGISTERED_ORIGINS``.  ``CorsMiddleware`` answers the preflight (``OPTIONS`` with
``Access-Control-Request-Method``; Falcon's default OPTIONS responder gives the status
and ``Allow``) and adds ``Access-Control-Allow-Origin`` to every answer of such a
resource, errors included, so the app can read an OAuth error.  A request from an origin
no client registered gets no CORS header: the browser keeps the answer from the page.
No credentials mode (cookies): these endpoints take tokens and client ids, never the
browser session.
"""
from __future__ import annotations

ANY_ORIGIN = "any"
REGISTERED_ORIGINS = "registered"
ALLOWED_HEADERS = "Authorization, Content-Type"
EXPOSED_HEADERS = "WWW-Authenticate"  # a 401 from userinfo says why
PREFLIGHT_MAX_AGE = "600"
# What the OpenAPI document says of a resource's policy, after its own description.
DESCRIPTIONS = {
    ANY_ORIGIN: "CORS: any origin (Access-Control-Allow-Origin: *).",
    REGISTERED_ORIGINS: "CORS: preflights are answered, and Access-Control-Allow-Origin is sent to an origin an "
                        "active client lists in allowed_origins (none of an application being deleted).",
}


class CorsMiddleware:
    def __init__(self, clients):
        self._clients = clients

    def process_response(self, req, resp, resource, _req_succeeded):
        policy = getattr(resource, "cors", None)
        origin = req.get_header("Origin")
        if policy is None or not origin:
            return
        if policy == ANY_ORIGIN:
            resp.set_header("Access-Control-Allow-Origin", "*")
        elif self._clients.origin_registered(origin):
            resp.set_header("Access-Control-Allow-Origin", origin)
            resp.append_header("Vary", "Origin")
        else:
            resp.append_header("Vary", "Origin")
            return
        if req.method == "OPTIONS" and req.get_header("Access-Control-Request-Method"):
            methods = [m for m in ("GET", "POST") if hasattr(resource, "on_" + m.lower())]
            resp.set_header("Access-Control-Allow-Methods", ", ".join(methods))
            resp.set_header("Access-Control-Allow-Headers", ALLOWED_HEADERS)
            resp.set_header("Access-Control-Max-Age", PREFLIGHT_MAX_AGE)
        else:
            resp.set_header("Access-Control-Expose-Headers", EXPOSED_HEADERS)
