"""The X-Request-Id rule of both services (docs/architecture.md, "HTTP conventions": every
response carries one): a caller's id is kept when it matches ``INCOMING_REQUEST_ID``, letters,
digits, ``.``, ``_`` and ``-``, 8 to 128 of them, so it is safe in a header and a log
line and long enough to be unique; otherwise the service makes its own.
"""
from __future__ import annotations

import re

INCOMING_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{8,128}$")
