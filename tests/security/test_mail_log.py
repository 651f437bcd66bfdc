"""Hardening item 5: secrets in logs.

With no SMTP configured the mailer logged whole emails, reset links included, so anyone
who reads the log could reset any password.  Now recipient and subject only, unless the
development switch IAMGATE_LOG_EMAIL_BODIES=true is set.
"""
from __future__ import annotations

import logging

from controlplane.mail import Mailer

LINK = "https://id.example/pages/app/reset-password?token=SECRET-RESET-TOKEN"


def _logged(caplog, mailer):
    with caplog.at_level(logging.INFO, logger="iamgate.mail"):
        mailer.send("ada@example.com", "Reset your password", f"Open {LINK}\n")
        assert mailer.flush()
    return [r for r in caplog.records if r.name == "iamgate.mail"]


def _text(record):
    return record.getMessage() + " " + " ".join(str(v) for v in vars(record).values())


def test_a_reset_link_is_not_logged_by_default(caplog):
    records = _logged(caplog, Mailer(None, "iamgate <no-reply@example.com>"))
    assert records and all("SECRET-RESET-TOKEN" not in _text(r) for r in records)
    assert records[-1].to == "ada@example.com" and records[-1].subject == "Reset your password"
    assert not hasattr(records[-1], "body")


def test_the_development_switch_logs_bodies(caplog):
    records = _logged(caplog, Mailer(None, "iamgate <no-reply@example.com>", log_bodies=True))
    assert "SECRET-RESET-TOKEN" in records[-1].body


def test_the_switch_is_off_unless_set(config):
    assert config.log_email_bodies is False


def test_make_run_sets_it_and_says_so():
    from pathlib import Path
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    run = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "IAMGATE_LOG_EMAIL_BODIES=true" in run
    launcher = (Path(__file__).resolve().parents[2] / "controlplane" / "launcher.py").read_text()
    assert "IAMGATE_LOG_EMAIL_BODIES=true" in launcher
