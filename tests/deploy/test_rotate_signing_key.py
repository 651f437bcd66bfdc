"""The key-rotation command: a new key signs, the old one is still published."""
from controlplane import rotate_signing_key


def test_rotation_activates_a_new_key_and_keeps_the_old_one_published(app, ctx, monkeypatch, capsys):
    before = ctx.keys.signing_key()[0]
    monkeypatch.setattr("controlplane.services.Store", lambda uri: ctx.store)
    assert rotate_signing_key.main({"IAMGATE_SECRET_KEY": ctx.config.secret_key}) == 0
    new = capsys.readouterr().out.strip()
    assert new and new != before
    ctx.keys._reload()
    assert ctx.keys.signing_key()[0] == new
    assert {before, new} <= {k["kid"] for k in ctx.keys.jwks()["keys"]}


def test_rotation_refuses_without_a_secret_key(capsys):
    assert rotate_signing_key.main({}) == 2
    assert "IAMGATE_SECRET_KEY" in capsys.readouterr().err
