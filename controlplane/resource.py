"""The base of every HTTP resource of the control plane.

A resource is a Falcon resource class per route with ``on_get``/``on_post``... methods.
It is given the services it uses in ``__init__`` (by its area's ``routes`` module), reads
and validates the request, calls a service, and shapes the response; it never touches a
collection.  Two class attributes describe it:

- ``access``: who may call each method (``controlplane.auth``: PUBLIC, OWNER,
  ``permission("roles:read")``...); a method without one needs any credential of the
  application, so routes are closed by default;
- ``docs``: the OpenAPI operation of each method (``controlplane.openapi.op``), whose
  ``errors`` are the domain error classes the method can raise;
- ``password_work``: the methods that hash or check a password, counted against the
  per-IP budget across applications (``ratelimit.PasswordWorkLimit``).
"""
from __future__ import annotations

from shared.errors import ValidationFailed
from shared.validation import Invalid


class Resource:
    access: dict = {}
    docs: dict = {}
    password_work: tuple = ()


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
