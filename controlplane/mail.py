"""Outgoing email over real SMTP (smtplib), sent off the request path.

IAMGATE_SMTP_URL: ``smtp://user:pass@host:port`` (``?starttls=1`` to upgrade) or
``smtps://...`` (implicit TLS).  Unset: messages are written to the log instead, which
is what the embedded ``make run`` does: recipient and subject only, since bodies hold
reset and verification links (a log reader could take over accounts), unless the
development switch IAMGATE_LOG_EMAIL_BODIES=true is set (``make run`` sets it).  A background
thread (a greenlet under gevent) drains an in-process queue; a failed send is logged and
retried a few times.
"""
from __future__ import annotations

import logging
import queue
import smtplib
import threading
import time
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger("iamgate.mail")


@dataclass(frozen=True)
class SmtpTarget:
    host: str
    port: int
    username: str | None
    password: str | None
    implicit_tls: bool
    starttls: bool

    @classmethod
    def parse(cls, url: str) -> SmtpTarget:
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        implicit = parts.scheme == "smtps"
        return cls(
            host=parts.hostname or "localhost",
            port=parts.port or (465 if implicit else 25),
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            implicit_tls=implicit,
            starttls=query.get("starttls", ["0"])[0] in ("1", "true", "yes"),
        )


class Mailer:
    RETRIES = 3

    def __init__(self, smtp_url: str | None, sender: str, *, log_bodies: bool = False):
        self.target = SmtpTarget.parse(smtp_url) if smtp_url else None
        self.sender = sender
        self.log_bodies = log_bodies
        self._queue: queue.Queue = queue.Queue()
        self._thread = None
        self._lock = threading.Lock()

    def send(self, to: str, subject: str, body: str) -> None:
        """Queue a text/plain message; returns at once."""
        message = EmailMessage()
        message["From"] = self.sender
        message["To"] = to
        # Header values must not carry line breaks; subjects hold tenant-supplied brand names.
        message["Subject"] = " ".join(subject.split())
        message["Date"] = formatdate(usegmt=True)
        message["Message-ID"] = make_msgid(domain="iamgate")
        message.set_content(body)
        self._queue.put(message)
        self._ensure_worker()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued message was handled (tests and shutdown)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._queue.unfinished_tasks

    def _ensure_worker(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="iamgate-mailer", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            message = self._queue.get()
            try:
                self._deliver(message)
            finally:
                self._queue.task_done()

    def _deliver(self, message: EmailMessage) -> None:
        if self.target is None:
            extra = {"to": message["To"], "subject": message["Subject"]}
            if self.log_bodies:
                extra["body"] = message.get_content()
            log.info("email not sent (no IAMGATE_SMTP_URL set)", extra=extra)
            return
        for attempt in range(1, self.RETRIES + 1):
            try:
                self._smtp_send(message)
                log.info("email sent", extra={"to": message["To"], "subject": message["Subject"]})
                return
            except (smtplib.SMTPException, OSError):
                log.warning("email send failed", exc_info=True, extra={"attempt": attempt, "to": message["To"]})
                time.sleep(min(2 ** attempt, 10) / 10)

    def _smtp_send(self, message: EmailMessage) -> None:
        t = self.target
        cls = smtplib.SMTP_SSL if t.implicit_tls else smtplib.SMTP
        with cls(t.host, t.port, timeout=10) as smtp:
            if t.starttls:
                smtp.starttls()
            if t.username:
                smtp.login(t.username, t.password or "")
            smtp.send_message(message)
