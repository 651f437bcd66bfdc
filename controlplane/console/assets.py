"""The console's static files (its CSS, its one small script, the vendored htmx, the
hosted pages' passkey module), served
under content-hash URLs so they can be cached for a year.

Each file is read once, when the control plane starts, and answered at
``/console/assets/<stem>.<hash><suffix>``: a new file content is a new URL, so
``Cache-Control: public, max-age=31536000, immutable`` (RFC 8246) never serves a stale
script after an upgrade, and an old URL answers 404 rather than the new content.  Text
files are also kept gzip-compressed (RFC 9110 section 8.4.1.3) and sent so when the
request's ``Accept-Encoding`` allows it, with ``Vary: Accept-Encoding`` for caches.
"""
from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from pathlib import Path

from controlplane.openapi import op

HERE = Path(__file__).parent
# The passkey ceremonies are the hosted pages' own module, served here too (same origin,
# script-src 'self'), so the console's passkey forms run the same code.
FILES = (HERE / "static" / "console.css", HERE / "static" / "console.js", HERE / "vendor" / "htmx.min.js",
         HERE.parent / "oidc" / "static" / "passkeys.js")
CONTENT_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
PREFIX = "/console/assets/"
IMMUTABLE = ["public", "max-age=31536000", "immutable"]


@dataclass(frozen=True)
class Asset:
    name: str  # the hashed file name the URL ends with
    content_type: str
    body: bytes
    gzipped: bytes

    @property
    def url(self) -> str:
        return PREFIX + self.name


def load(path: Path) -> Asset:
    body = path.read_bytes()
    digest = hashlib.sha256(body).hexdigest()[:16]
    # mtime=0: the same file compresses to the same bytes on every replica.
    return Asset(f"{path.stem}.{digest}{path.suffix}", CONTENT_TYPES[path.suffix], body,
                 gzip.compress(body, compresslevel=9, mtime=0))


class Assets:
    """The loaded files, by their source name (``console.css``) for templates and by
    their hashed name for the route."""

    def __init__(self, files=FILES):
        loaded = {path.name: load(path) for path in files}
        self.urls = {source: asset.url for source, asset in loaded.items()}
        self._by_name = {asset.name: asset for asset in loaded.values()}

    def get(self, name: str) -> Asset | None:
        return self._by_name.get(name)


def asset_doc(summary: str, not_found: type, *content_types: str) -> dict:
    """The OpenAPI operation of a route answering content-hashed files with ``send_asset``."""
    return op(summary, description="Cache-Control: public, max-age=31536000, immutable; gzip when accepted.",
              errors=[not_found], wrapped=False, store=False,
              also={200: ({"type": "string"}, "the file", *content_types)})


def send_asset(req, resp, asset: Asset) -> None:
    """``asset`` as the answer: cacheable for a year, gzip-compressed when the request
    accepts it."""
    resp.content_type = asset.content_type
    resp.cache_control = IMMUTABLE
    resp.vary = ["Accept-Encoding"]
    resp.set_header("X-Content-Type-Options", "nosniff")
    if accepts_gzip(req.get_header("Accept-Encoding")):
        resp.set_header("Content-Encoding", "gzip")
        resp.data = asset.gzipped
    else:
        resp.data = asset.body


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether ``Accept-Encoding`` lists gzip without refusing it (``gzip;q=0``)."""
    for part in (accept_encoding or "").lower().split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip() in ("gzip", "x-gzip", "*"):
            q = params.strip().removeprefix("q=").strip() if params.strip().startswith("q=") else "1"
            try:
                return float(q) > 0
            except ValueError:
                return False
    return False
