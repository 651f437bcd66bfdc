"""The X-Request-Id rule of both services (docs/architecture.md, "HTTP conventions": every
response carries one): a caller's id is kept when it matches ``INCOMING_REQUEST_ID``, letters,
digits, ``.``, ``_`` and ``-``, 8 to 128 of them, so it is safe in a header and a log
line and long enough to be unique; otherwise the service makes its own (``new_request_id``).
"""
from __future__ import annotations

import os
import re

INCOMING_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{8,128}$")


def resolve_request_id(incoming: str | None) -> str:
    """The caller's ``X-Request-Id`` when well formed, else a new one."""
    return incoming if incoming and INCOMING_REQUEST_ID.fullmatch(incoming) else new_request_id()


# Request ids made ahead: one ``os.urandom`` call (a getrandom system call) gives the next
# ``_IDS_PER_READ``. ``list.pop`` hands each to one caller only, threads included; a forked
# child drops the parent's (it would repeat them).
_IDS_PER_READ = 256
_ids_ahead: list[str] = []
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ids_ahead.clear)


def new_request_id() -> str:
    """``uuid.uuid4().hex`` (the version and variant bits set the same way, RFC 9562 5.4),
    for a tenth of its cost: one is made for nearly every request."""
    while True:
        try:
            return _ids_ahead.pop()
        except IndexError:
            block = bytearray(os.urandom(16 * _IDS_PER_READ))
            block[6::16] = bytes(byte & 0x0F | 0x40 for byte in block[6::16])  # version 4
            block[8::16] = bytes(byte & 0x3F | 0x80 for byte in block[8::16])  # variant 10xx
            text = block.hex()
            _ids_ahead.extend(text[i:i + 32] for i in range(0, len(text), 32))
