"""email/verify and email/resend, and a verification email delivered through a real
SMTP server and used."""
import socket

import pytest
from aiosmtpd.controller import Controller

from shared.config import Rate
from shared.ids import digest
from tests.conftest import assert_error
from tests.plugins.users import Email, users_url
from tests.users.conftest import assert_rate_limit_headers


@pytest.fixture
def config_overrides(request):
    return getattr(request, "param", {})


def verify(post, app, token):
    return post(app, "/email/verify", {"token": token})


def verified(ctx, user):
    return ctx.store["users"].find_one({"_id": user["id"]})["email_verified"]


def test_verify_email(post, application, make_user, outbox, ctx):
    user = make_user(application)
    response = verify(post, application, outbox[-1].token)
    assert response.status_code == 200, response.text
    assert set(response.json["data"]) == {"message"}
    assert verified(ctx, user) is True
    # The login result now says so.
    login = post(application, "/login", {"email": user["email"], "password": user["password"]})
    assert login.json["data"]["user"]["email_verified"] is True


def test_a_verification_token_is_single_use(post, application, make_user, outbox):
    make_user(application)
    token = outbox[-1].token
    assert verify(post, application, token).status_code == 200
    assert_error(verify(post, application, token), 400, "AUTH_INVALID_VERIFICATION_TOKEN")


def test_unknown_verification_token_is_400(post, application):
    assert_error(verify(post, application, "made-up"), 400, "AUTH_INVALID_VERIFICATION_TOKEN")


def test_expired_verification_token_is_410(post, application, make_user, outbox, clock, ctx):
    user = make_user(application)
    clock.advance(24 * 3600 - 1)
    token = outbox[-1].token
    clock.advance(1)
    assert_error(verify(post, application, token), 410, "AUTH_VERIFICATION_TOKEN_EXPIRED")
    assert verified(ctx, user) is False


def test_verification_token_of_another_application_is_400(post, application, make_application, make_user, outbox):
    make_user(application)
    assert_error(verify(post, make_application(), outbox[-1].token), 400, "AUTH_INVALID_VERIFICATION_TOKEN")


def test_a_reset_token_is_not_a_verification_token(post, application, make_user, outbox):
    user = make_user(application)
    post(application, "/password/forgot", {"email": user["email"]})
    assert_error(verify(post, application, outbox[-1].token), 400, "AUTH_INVALID_VERIFICATION_TOKEN")


def test_verify_validation(post, application):
    assert_error(post(application, "/email/verify", {}), 400, "VALIDATION_INVALID_FORMAT")
    assert_error(post(application, "/email/verify", {"token": ""}), 400, "VALIDATION_INVALID_FORMAT")


# ---------------------------------------------------------------- resend


def test_resend_sends_a_new_link_and_both_work_once(post, application, make_user, outbox, ctx):
    user = make_user(application)
    first = outbox[-1].token
    response = post(application, "/email/resend", {"email": user["email"]})
    assert response.status_code == 200 and set(response.json["data"]) == {"message"}
    second = outbox[-1].token
    assert second != first and len(outbox) == 2
    assert verify(post, application, second).status_code == 200
    # Verifying spends every outstanding verification link.
    assert_error(verify(post, application, first), 400, "AUTH_INVALID_VERIFICATION_TOKEN")


def test_resend_answers_the_same_whether_or_not_it_sends(post, application, make_user, outbox):
    unverified, done = make_user(application), make_user(application)
    verify(post, application, outbox[-1].token)
    outbox.clear()
    answers = [post(application, "/email/resend", {"email": e}).json
               for e in (unverified["email"], done["email"], "nobody@example.com")]
    assert answers[0] == answers[1] == answers[2]
    assert [m.to for m in outbox] == [unverified["email"]]


def test_resend_is_limited_to_2_per_minute_per_email(post, application, make_user, outbox, clock):
    user = make_user(application)  # the automatic registration email does not count
    for _ in range(2):
        assert post(application, "/email/resend", {"email": user["email"]}).status_code == 200
    response = post(application, "/email/resend", {"email": user["email"]})
    assert_error(response, 429, "AUTH_VERIFICATION_RATE_LIMITED")
    assert_rate_limit_headers(response, 2)
    assert int(response.headers["Retry-After"]) <= 60
    assert len(outbox) == 3
    assert post(application, "/email/resend", {"email": "other@example.com"}).status_code == 200
    clock.advance(60)
    assert post(application, "/email/resend", {"email": user["email"]}).status_code == 200


def test_resend_limit_counts_unknown_emails_too(post, application):
    for _ in range(2):
        post(application, "/email/resend", {"email": "ghost@example.com"})
    assert_error(post(application, "/email/resend", {"email": "ghost@example.com"}), 429,
                 "AUTH_VERIFICATION_RATE_LIMITED")


def test_resend_and_forgot_limits_are_separate(post, application, make_user):
    user = make_user(application)
    for _ in range(3):
        post(application, "/password/forgot", {"email": user["email"]})
    assert post(application, "/email/resend", {"email": user["email"]}).status_code == 200


@pytest.mark.parametrize("config_overrides", [{"rate_limit_resend": Rate(1, 60)}], indirect=True)
def test_resend_limit_is_configurable(post, application):
    post(application, "/email/resend", {"email": "a@example.com"})
    assert_error(post(application, "/email/resend", {"email": "a@example.com"}), 429, "AUTH_VERIFICATION_RATE_LIMITED")


def test_resend_validation(post, application):
    assert_error(post(application, "/email/resend", {"email": 3}), 400, "VALIDATION_INVALID_FORMAT")


# ---------------------------------------------------------------- through a real SMTP server


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(envelope)
        return "250 Message accepted for delivery"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SMTP_PORT = _free_port()


@pytest.fixture
def smtp_inbox():
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=SMTP_PORT)
    controller.start()
    yield inbox
    controller.stop()


@pytest.mark.parametrize("config_overrides", [{"smtp_url": f"smtp://127.0.0.1:{SMTP_PORT}"}], indirect=True)
def test_verification_email_arrives_over_smtp_with_a_usable_token(smtp_inbox, client, application, ctx, post):
    import email

    ctx.applications.update_branding(application["_id"], {"brand_name": "Acme Notes"})
    response = client.simulate_post(users_url(application, "/register"),
                                    json={"email": "lin@example.com", "password": "Smtp-Tested-7", "name": "Lin"})
    assert response.status_code == 201
    assert ctx.mailer.flush(timeout=10)
    [envelope] = smtp_inbox.messages
    assert envelope.rcpt_tos == ["lin@example.com"]
    message = email.message_from_bytes(envelope.content)
    assert message.get_content_type() == "text/plain"
    assert message["Subject"] == "Confirm your email address for Acme Notes"
    body = message.get_payload(decode=True).decode()
    assert "Acme Notes" in body and "Lin" in body
    token = Email("lin@example.com", message["Subject"], body).token
    assert ctx.store["user_tokens"].find_one({"_id": digest(token)}) is not None
    assert verify(post, application, token).status_code == 200
    assert ctx.store["users"].find_one({"email": "lin@example.com"})["email_verified"] is True
