"""``python -m controlplane keys rotate``: new tokens are signed with the new key, and
the old public key stays in the JWKS until every token it signed has expired."""
import jwt

from controlplane import __main__ as cli


def test_rotate_command(ctx, client, clock, monkeypatch, capsys, issue_tokens, user_token, rp_client):
    before = issue_tokens(user_token, rp_client)
    old_kid = jwt.get_unverified_header(before["id_token"])["kid"]
    monkeypatch.setenv("IAMGATE_MONGODB_URI", "mongodb://db.example:27017/iamgate")
    monkeypatch.setenv("IAMGATE_SECRET_KEY", ctx.config.secret_key)
    monkeypatch.setattr("controlplane.store.Store", lambda uri: ctx.store)
    monkeypatch.setattr("shared.timeutil.utcnow", clock)

    assert cli.main(["keys", "rotate"]) == 0
    new_kid = capsys.readouterr().out.split("active signing key: ")[1].split()[0]
    assert new_kid != old_kid

    ctx.keys._reload()  # what every replica does within a minute
    after = issue_tokens(user_token, rp_client)
    assert jwt.get_unverified_header(after["id_token"])["kid"] == new_kid
    kids = {k["kid"] for k in client.simulate_get("/.well-known/jwks.json").json["keys"]}
    assert kids == {old_kid, new_kid}
    assert client.simulate_get("/oidc/userinfo", headers={"Authorization": f"Bearer {before['access_token']}"}) \
        .status_code == 200
    clock.advance(3600 + 61)
    ctx.keys._reload()
    assert {k["kid"] for k in client.simulate_get("/.well-known/jwks.json").json["keys"]} == {new_kid}


def test_rotate_refuses_the_embedded_store(monkeypatch, capsys):
    monkeypatch.setenv("IAMGATE_MONGODB_URI", "memory://")
    assert cli.main(["keys", "rotate"]) == 2
    assert "memory://" in capsys.readouterr().err
