"""Declarative request validation.

A ``Schema`` is a mapping of field names to ``Field`` objects.  ``Schema.validate``
returns the cleaned values or raises ``ValidationFailed`` naming every bad field, and
``Schema.json_schema`` describes the same rules for OpenAPI, so the documentation
cannot drift from what is enforced.
"""
from __future__ import annotations

import json
import re
import unicodedata
from urllib.parse import urlsplit

from shared.errors import ValidationFailed
from shared.ids import is_uuid
from shared.timeutil import parse_iso

MISSING = object()
INT64 = (-(2 ** 63), 2 ** 63 - 1)  # the integers MongoDB stores (BSON int64)

# Bidirectional embeddings, overrides and isolates: they can make a name read as other
# text in a mail client ("Trojan Source", CVE-2021-42574).
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def normalize_email(value: str) -> str:
    """The stored form of an email address: checked by ``email-validator`` (syntax only,
    RFC 5321/5322 without quoted local parts or IP-literal domains, no DNS look-up at
    request time), its normalized form (domain IDNA-normalized, Unicode NFC),
    lower-cased.  Raises ``Invalid``.  ``x,victim@corp.com`` or ``"a<b>"@x`` are
    refused: a single address is one mailbox, never a recipient list."""
    # Imported here: compiling its grammar costs about 30 ms, which the decision service
    # (it validates no address) would pay at every start.
    import email_validator

    try:
        result = email_validator.validate_email(value.strip(), check_deliverability=False)
    except email_validator.EmailNotValidError as exc:
        raise Invalid(f"must be a valid email address ({exc})") from None
    return result.normalized.lower()


def one_line(text: str) -> str:
    """``text`` without control characters (C0, C1, line and paragraph separators,
    bidirectional controls): each run of them becomes one space, ends trimmed.  Names
    go into email bodies and subjects; a newline in one could forge lines."""
    out, in_run = [], False
    for char in text:
        if unicodedata.category(char) in ("Cc", "Zl", "Zp") or char in _BIDI_CONTROLS:
            if not in_run:
                out.append(" ")
            in_run = True
        else:
            out.append(char)
            in_run = False
    return "".join(out).strip()

_HEX_COLOR = re.compile(r"^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$")


class Invalid(Exception):
    """Raised by a field's ``clean``; the message says why."""


class Field:
    json_type: str | None = None

    def __init__(self, *, required=False, nullable=False, default=MISSING, description=None):
        self.required = required
        self.nullable = nullable
        self.default = default
        self.description = description

    def clean(self, value):
        return value

    def schema(self) -> dict:
        out = {"type": [self.json_type, "null"] if self.nullable else self.json_type} if self.json_type else {}
        if self.description:
            out["description"] = self.description
        if self.default is not MISSING and not callable(self.default):
            out["default"] = self.default
        return out


class String(Field):
    json_type = "string"

    def __init__(self, *, min_len=None, max_len=None, pattern=None, choices=None, strip=True, **kw):
        super().__init__(**kw)
        self.min_len, self.max_len, self.choices, self.strip = min_len, max_len, choices, strip
        self.pattern = re.compile(pattern) if pattern else None

    def clean(self, value):
        if not isinstance(value, str):
            raise Invalid("must be a string")
        if self.strip:
            value = value.strip()
        if self.required and not value:
            raise Invalid("must not be empty")
        if self.min_len is not None and len(value) < self.min_len:
            raise Invalid(f"must be at least {self.min_len} characters")
        if self.max_len is not None and len(value) > self.max_len:
            raise Invalid(f"must be at most {self.max_len} characters")
        if self.choices is not None and value not in self.choices:
            raise Invalid(f"must be one of {', '.join(self.choices)}")
        if self.pattern is not None and not self.pattern.match(value):
            raise Invalid("has an invalid format")
        return value

    def schema(self):
        out = super().schema()
        # A required string refuses "" (and, stripped, white space only): say so.
        min_len = max(self.min_len or 0, 1 if self.required else 0)
        if min_len:
            out["minLength"] = min_len
        if self.max_len is not None:
            out["maxLength"] = self.max_len
        if self.choices is not None:
            out["enum"] = list(self.choices)
        if self.pattern is not None:
            out["pattern"] = self.pattern.pattern
        elif min_len and self.strip and self.choices is None:
            out["pattern"] = r"\S"  # not only white space (JSON Schema patterns are not anchored)
        return out


class Email(String):
    """An email address, stored normalized (``normalize_email``)."""

    def __init__(self, **kw):
        super().__init__(max_len=254, **kw)

    def clean(self, value):
        return normalize_email(super().clean(value))


class DisplayName(String):
    """A person's or a product's name: control characters removed (``one_line``), so it
    can go into a mail body or subject as one line of text."""

    def clean(self, value):
        if isinstance(value, str):
            value = one_line(value)
        return super().clean(value)

    def schema(self):
        return {**super().schema(), "format": "email"}


class Url(String):
    def __init__(self, *, schemes=("http", "https"), max_len=2048, **kw):
        super().__init__(max_len=max_len, **kw)
        self.schemes = schemes

    def clean(self, value):
        value = super().clean(value)
        try:
            parts = urlsplit(value)
        except ValueError:  # a bracketed host that is no IP address
            raise Invalid(f"must be a valid {' or '.join(self.schemes)} URL") from None
        if parts.scheme not in self.schemes or not parts.hostname:
            raise Invalid(f"must be a valid {' or '.join(self.schemes)} URL")
        if any(c.isspace() for c in value):
            raise Invalid("must not contain white space")
        return value

    def schema(self):
        schemes = "|".join(re.escape(s) for s in self.schemes)
        return {**super().schema(), "format": "uri", "pattern": rf"^(?:{schemes})://[^\s/?#]+[^\s]*$"}


class HexColor(String):
    def __init__(self, **kw):
        super().__init__(max_len=9, **kw)

    def clean(self, value):
        value = super().clean(value)
        if not _HEX_COLOR.match(value):
            raise Invalid("must be a hex color such as #1a2b3c")
        return value

    def schema(self):
        return {**super().schema(), "pattern": _HEX_COLOR.pattern}


class Uuid(String):
    def clean(self, value):
        value = super().clean(value)
        if not is_uuid(value):
            raise Invalid("must be a UUID")
        return value.lower()

    def schema(self):
        return {**super().schema(), "format": "uuid"}


class DateTime(String):
    def clean(self, value):
        value = super().clean(value)
        try:
            return parse_iso(value)
        except ValueError:
            raise Invalid("must be an ISO 8601 timestamp") from None

    def schema(self):
        return {**super().schema(), "format": "date-time"}


class Bool(Field):
    json_type = "boolean"

    def clean(self, value):
        if not isinstance(value, bool):
            raise Invalid("must be true or false")
        return value


class Int(Field):
    json_type = "integer"

    def __init__(self, *, min=None, max=None, **kw):
        super().__init__(**kw)
        self.min, self.max = min, max

    def clean(self, value):
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON Schema: 2.0 is the integer 2
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid("must be an integer")
        if self.min is not None and value < self.min:
            raise Invalid(f"must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise Invalid(f"must be at most {self.max}")
        return value

    def schema(self):
        out = super().schema()
        if self.min is not None:
            out["minimum"] = self.min
        if self.max is not None:
            out["maximum"] = self.max
        return out


# json.dumps(value, separators=(",", ":")) without building an encoder per call.
_COMPACT = json.JSONEncoder(separators=(",", ":"))


class Object(Field):
    """A JSON object; either free-form (bounded by ``max_bytes``) or a nested ``Schema``."""

    json_type = "object"

    def __init__(self, schema: Schema | None = None, *, max_bytes=None, **kw):
        super().__init__(**kw)
        self.nested, self.max_bytes = schema, max_bytes

    def clean(self, value):
        if not isinstance(value, dict):
            raise Invalid("must be a JSON object")
        if self.max_bytes is not None and len(_COMPACT.encode(value)) > self.max_bytes:
            raise Invalid(f"must be at most {self.max_bytes} bytes of JSON")
        if self.nested is not None:
            return self.nested.clean(value, partial=True)
        return value

    def schema(self):
        out = super().schema()
        if self.nested is not None:
            out.update(self.nested.json_schema(partial=True))  # nested fields are cleaned partially
            if self.nullable:
                out["type"] = ["object", "null"]
        if self.max_bytes is not None:
            out["description"] = (out.get("description", "") + f" At most {self.max_bytes} bytes of JSON.").strip()
        return out


class List(Field):
    json_type = "array"

    def __init__(self, item: Field, *, min_items=None, max_items=None, unique=True, **kw):
        super().__init__(**kw)
        self.item, self.min_items, self.max_items, self.unique = item, min_items, max_items, unique

    def clean(self, value):
        if not isinstance(value, list):
            raise Invalid("must be an array")
        if self.min_items is not None and len(value) < self.min_items:
            raise Invalid(f"must have at least {self.min_items} item(s)")
        if self.max_items is not None and len(value) > self.max_items:
            raise Invalid(f"must have at most {self.max_items} items")
        out = []
        for i, v in enumerate(value):
            try:
                cleaned = self.item.clean(v)
            except Invalid as exc:
                raise Invalid(f"item {i} {exc}") from None
            if self.unique and cleaned in out:
                continue
            out.append(cleaned)
        return out

    def schema(self):
        out = {**super().schema(), "items": self.item.schema()}
        if self.min_items is not None:
            out["minItems"] = self.min_items
        if self.max_items is not None:
            out["maxItems"] = self.max_items
        return out


class Schema:
    """``partial``: an update's schema, where every field may be omitted (omitted fields
    stay unchanged) while a ``required`` field sent must still be valid and non-empty."""

    def __init__(self, fields: dict[str, Field], *, description=None, partial=False):
        self.fields = fields
        self.description = description
        self.partial = partial

    def clean(self, body, *, partial=None, prefix=""):
        """Return the cleaned values.  With ``partial`` only the fields sent are returned
        (omitted fields stay unchanged on update); otherwise defaults fill the gaps."""
        partial = self.partial if partial is None else partial
        if not isinstance(body, dict):
            raise ValidationFailed({prefix.rstrip(".") or "body": "must be a JSON object"})
        errors, out = {}, {}
        for name, field in self.fields.items():
            key = prefix + name
            value = body.get(name, MISSING)
            if value is MISSING:
                if field.required and not partial:
                    errors[key] = "is required"
                elif field.default is not MISSING and not partial:
                    out[name] = field.default() if callable(field.default) else field.default
                continue
            if value is None:
                if field.nullable:
                    out[name] = None
                else:
                    errors[key] = "is required" if field.required else "must not be null"
                continue
            try:
                if isinstance(field, Object) and field.nested is not None and isinstance(value, dict):
                    out[name] = field.nested.clean(value, partial=True, prefix=key + ".")
                else:
                    out[name] = field.clean(value)
            except Invalid as exc:
                errors[key] = str(exc)
            except ValidationFailed as exc:
                errors.update(exc.errors)
        if errors:
            raise ValidationFailed(errors)
        return out

    validate = clean

    def json_schema(self, *, partial=None) -> dict:
        partial = self.partial if partial is None else partial
        out = {
            "type": "object",
            "properties": {name: f.schema() for name, f in self.fields.items()},
        }
        required = [] if partial else [name for name, f in self.fields.items() if f.required]
        if required:
            out["required"] = required
        if self.description:
            out["description"] = self.description
        return out


# --- response shapes (OpenAPI) ------------------------------------------------------------

TIME = {"type": "string", "format": "date-time"}
NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
ID = {"type": "string", "format": "uuid"}


def list_of(item: dict) -> dict:
    """The JSON schema of a list the spec answers whole, which a caller may page
    (``shared.http.respond_list``): ``data`` always, the page fields when paged."""
    shape = page_of(item)
    return {**shape, "required": ["data"]}
def object_schema(properties: dict, description: str | None = None, *, required=None) -> dict:
    """The JSON schema of an object an answer carries: its ``properties``, each of them
    always there unless ``required`` names those that are (``()``: none is promised)."""
    out: dict = {"type": "object"}
    required = list(properties) if required is None else list(required)
    if required:
        out["required"] = required
    out["properties"] = properties
    if description:
        out["description"] = description
    return out


def page_of(item: dict) -> dict:
    """The JSON schema of the spec's list envelope of ``item``s (``shared.http.paginated``
    writes every one of its fields)."""
    return object_schema({
        "data": {"type": "array", "items": item},
        "current_page": {"type": "integer"},
        "last_page": {"type": "integer"},
        "per_page": {"type": "integer"},
        "total": {"type": "integer"},
    })
