"""An SMTP server (aiosmtpd) on loopback that keeps every message: where the real
processes' email goes in the end-to-end tests and benchmarks (``processes.mailbox``)."""
from __future__ import annotations

import email
import re
import threading
import time

from aiosmtpd.controller import Controller


class Mailbox:
    def __init__(self, port: int):
        self.port = port
        self._messages: list[tuple[list[str], str]] = []
        self._lock = threading.Lock()
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)
        self._controller.start()

    @property
    def smtp_url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    async def handle_DATA(self, server, session, envelope):
        body = email.message_from_bytes(envelope.content).get_payload(decode=True).decode()
        with self._lock:
            self._messages.append((list(envelope.rcpt_tos), body))
        return "250 Message accepted for delivery"

    def token(self, to: str, link: str, timeout: float = 20.0) -> str:
        """The token of the newest message to ``to`` carrying ``link?token=...`` (a link
        names its stack's public URL, so stacks sharing the mailbox never mix); waits
        for it, since the control plane sends mail off the request path."""
        pattern = re.compile(re.escape(link) + r"\?token=([A-Za-z0-9_\-]+)")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = [m.group(1) for tos, body in self._messages if to in tos
                         for m in [pattern.search(body)] if m]
            if found:
                return found[-1]
            time.sleep(0.05)
        raise AssertionError(f"no mail to {to} with {link}?token= within {timeout} s")
