"""The base of every HTTP resource of the control plane.

A resource is a Falcon resource class per route with ``on_get``/``on_post``... methods.
It is given the services it uses in ``__init__`` (by its area's ``routes`` module), reads
and validates the request, calls a service, and shapes the response; it never touches a
collection.  Class attributes describe it:

- ``access``: who may call each method (``controlplane.auth``: PUBLIC, OWNER,
  ``permission("roles:read")``...); a method without one needs any credential of the
  application, so routes are closed by default.  An area whose every route has the same
  gate says it once, in its base resource's ``every_method``, and a class that declares
  ``access`` itself keeps it;
- ``docs``: the OpenAPI operation of each method (``controlplane.openapi.op``), whose
  ``errors`` are the domain error classes the method can raise.  Its summary and
  description are the docstring of the function that serves the method (``on_<method>``,
  or an ``Action``'s ``act``): the first paragraph is the summary, the rest the
  description, each paragraph's lines joined by single spaces.  A class that declares
  ``docs`` gets them filled in when it is defined, and one whose operation has neither
  text nor docstring is refused there;
- ``password_work``: the methods that hash or check a password, counted against the
  per-IP budget across applications (``ratelimit.PasswordWorkLimit``);
- ``sensitive``: the methods a dashboard session may call only while its holder's last
  sign-in or re-authentication is recent (``controlplane.dashboard.sudo``): the auth
  middleware refuses the others with 403 DASHBOARD_REAUTH_REQUIRED before the responder
  runs, and the OpenAPI document lists that error on them.  A console page's writes
  declare it too; the console checks it where it gates the write, so the refusal shows
  on the page.

``body(req)`` reads the JSON body and validates it with the schema ``docs`` gives the
method, so the document and the validation cannot part.

``Action`` is a route of one method whose handler is the same few steps everywhere:
validate the body, call one service function (its subclass's ``act``), answer the
result with the status ``docs`` documents; ``ThrottledPerIp`` is one whose body is
read only once the per-IP budget has counted the request.

``ManagedCollection`` and ``ManagedItem`` are the list/create and get/update/delete
handlers of documents an application manages with a secret shown once (OIDC clients,
webhooks); their subclasses declare only their gate (``every_method``), ``docs`` (whose
body schemas validate the writes) and ``serialize``.

A ``ServiceResource[RoleService]`` is given one service, its area's, as ``self.service``
(``Routes.add_each`` builds every resource of such an area with it); ``ManagedCollection``
and ``ManagedItem`` are two.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Generic, TypeVar

from shared.errors import ValidationFailed
from shared.http import client_ip, read_json, respond, respond_list
from shared.validation import Invalid

_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
S = TypeVar("S")  # the service of a ServiceResource
_PARAGRAPHS = re.compile(r"\n\s*\n")


class Resource:
    access: dict = {}
    every_method = None  # an ``Access``: the ``access`` of each responder of the class
    docs: dict = {}
    password_work: tuple = ()
    sensitive: tuple = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.every_method is not None and "access" not in vars(cls):
            cls.access = {m: cls.every_method for m in _METHODS if hasattr(cls, "on_" + m.lower())}
        if "docs" in vars(cls):
            cls.docs = {method: cls._with_text(method, doc) for method, doc in cls.docs.items()}

    @classmethod
    def serving(cls, method: str):
        """The function that serves ``method``, whose docstring documents it."""
        return getattr(cls, "on_" + method.lower(), None)

    @classmethod
    def _with_text(cls, method: str, doc: dict) -> dict:
        if doc["summary"] is not None:
            return doc
        serving = cls.serving(method)
        text = getattr(serving, "__doc__", None)  # not inspect.getdoc: a parent's documents another route
        if not text or not text.strip():
            raise TypeError(f"{cls.__qualname__}.docs[{method!r}] has no summary: give the function that serves "
                            f"it ({getattr(serving, '__qualname__', 'none')}) a docstring")
        summary, *rest = (" ".join(paragraph.split()) for paragraph in _PARAGRAPHS.split(text) if paragraph.strip())
        return {**doc, "summary": summary, "description": "\n\n".join(rest) or None}

    def body(self, req, *, partial: bool = False) -> dict:
        """The request's JSON body validated by the schema ``docs`` names as this method's
        body: what is checked is what the OpenAPI document says."""
        return self.docs[req.method]["body"].validate(read_json(req), partial=partial)


class Action(Resource):
    """A route of one method, the one its ``docs`` documents: the body that method's schema
    names is validated (``values``; None when it names none), ``act(req, values, **path)``
    calls the service, and ``answer`` sends what ``act`` returns with the status ``docs``
    documents (204: no body), so the document and the answer cannot part either.
    ``no_store``: the answer carries a secret or a token (Cache-Control: no-store);
    ``message``: a top-level message beside the data.  A route whose answer is more than
    that (a cookie, a flow's outcome) writes its own responder, which is kept."""

    no_store = False
    message: str | None = None

    def __init_subclass__(cls, **kwargs):
        if "docs" in vars(cls):
            (method,) = cls.docs
            if "on_" + method.lower() not in vars(cls):  # a route whose answer fits no ``act`` writes its own
                setattr(cls, "on_" + method.lower(), Action._respond)
        super().__init_subclass__(**kwargs)  # after: ``every_method`` looks for the responder

    @classmethod
    def serving(cls, method: str):
        responder = super().serving(method)
        return cls.act if responder is Action._respond else responder

    def _respond(self, req, resp, **path):
        values = self.body(req) if self.docs[req.method]["body"] is not None else None
        self.answer(req, resp, self.act(req, values, **path))

    def act(self, req, values: dict | None, **path):
        raise NotImplementedError

    def answer(self, req, resp, result) -> None:
        ok = self.docs[req.method]["ok"]
        if ok == 204:
            resp.status = 204
        else:
            respond(resp, result, status=ok, message=self.message, cacheable=not self.no_store)


class ThrottledPerIp(Action):
    """A public route whose every request counts against a per-client-IP budget before
    its body is validated (``body`` counts it first): ``limiter.throttle(app, ip)`` (the
    login's or the registration's service) raises the area's rate-limit error."""

    def __init__(self, limiter, *, trusted_proxies):
        self.limiter = limiter
        self.trusted_proxies = trusted_proxies

    def body(self, req, *, partial: bool = False) -> dict:
        self.limiter.throttle(req.context.application, client_ip(req, self.trusted_proxies))
        return super().body(req, partial=partial)


class ServiceResource(Resource, Generic[S]):
    def __init__(self, service: S):
        self.service = service


class ManagedCollection(ServiceResource):
    """An application's documents that are created with a secret shown once (OIDC
    clients, webhooks): GET lists them (whole, or a page when asked: ``respond_list``),
    POST creates one and answers it with its secret (201, ``Cache-Control: no-store``).
    The service has ``list(app_id)`` and ``create(app_id, values) -> (document, secret)``;
    ``serialize(document, secret=None)`` shapes the answers."""

    serialize: Callable[..., dict]

    def on_get(self, req, resp, applicationId):
        respond_list(req, resp, self.service.list(applicationId), self.serialize)

    def on_post(self, req, resp, applicationId):
        doc, secret = self.service.create(applicationId, self.body(req))
        respond(resp, self.serialize(doc, secret), status=201, cacheable=False)


class ManagedItem(ServiceResource):
    """One of those documents, named by the path parameter after the application's: GET
    it, PUT a partial update (validated by ``update_schema``), DELETE it (204), through
    the service's ``get``, ``update`` and ``delete``, which raise the area's not-found
    error."""

    serialize: Callable[..., dict]

    def on_get(self, req, resp, applicationId, **path):
        respond(resp, self.serialize(self.service.get(applicationId, *path.values())))

    def on_put(self, req, resp, applicationId, **path):
        values = self.body(req, partial=True)
        respond(resp, self.serialize(self.service.update(applicationId, *path.values(), values)))

    def on_delete(self, req, resp, applicationId, **path):
        self.service.delete(applicationId, *path.values())
        resp.status = 204


def query_param(req, name: str, field=None, *, blank_is_absent: bool = False):
    """``?name=``: None when absent or empty (or only white space, with
    ``blank_is_absent``), else the value cleaned by ``field`` (a ``shared.validation``
    field); a bad value is 400 naming the parameter."""
    raw = req.get_param(name)
    if raw is None or raw == "" or (blank_is_absent and not raw.strip()):
        return None
    if field is None:
        return raw
    try:
        return field.clean(raw)
    except Invalid as exc:
        raise ValidationFailed({name: str(exc)}) from None
