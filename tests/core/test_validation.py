import pytest

from shared.errors import ValidationFailed
from shared.validation import Bool, DateTime, Email, HexColor, Int, List, Object, Schema, String, Url, Uuid


def test_fields_clean_and_reject():
    schema = Schema({
        "email": Email(required=True),
        "url": Url(),
        "color": HexColor(),
        "id": Uuid(),
        "when": DateTime(),
        "flag": Bool(default=False),
        "n": Int(min=1, max=3),
        "tags": List(String(max_len=3), max_items=3),
        "meta": Object(max_bytes=20),
        "opt": String(nullable=True),
    })
    cleaned = schema.validate({"email": " Alice@Example.COM ", "url": "https://a.example/x", "color": "#A1b2C3",
                               "id": "0B7C1B8E-0000-4000-8000-000000000001", "when": "2030-01-01T00:00:00Z",
                               "n": 2, "tags": ["a", "a", "b"], "meta": {"k": 1}, "opt": None})
    assert cleaned["email"] == "alice@example.com"
    assert cleaned["id"] == "0b7c1b8e-0000-4000-8000-000000000001"
    assert cleaned["when"].year == 2030 and cleaned["when"].tzinfo is not None
    assert cleaned["flag"] is False and cleaned["tags"] == ["a", "b"] and cleaned["opt"] is None

    with pytest.raises(ValidationFailed) as info:
        schema.validate({"email": "nope", "url": "javascript:alert(1)", "color": "red", "id": "x", "when": "soon",
                         "flag": "yes", "n": True, "tags": ["long!"], "meta": {"k": "x" * 30}, "opt": 5})
    assert set(info.value.errors) == {"email", "url", "color", "id", "when", "flag", "n", "tags", "meta", "opt"}
    assert info.value.code == "VALIDATION_MULTIPLE_ERRORS"


def test_partial_validation_returns_only_what_was_sent():
    schema = Schema({"name": String(required=True, max_len=3), "n": Int(default=1)})
    assert schema.validate({}, partial=True) == {}
    assert schema.validate({"name": "abc"}) == {"name": "abc", "n": 1}
    with pytest.raises(ValidationFailed) as info:
        schema.validate({"name": None}, partial=True)
    assert info.value.code == "VALIDATION_INVALID_FORMAT"


def test_nested_schema_names_the_full_path():
    schema = Schema({"outer": Object(Schema({"inner": Bool()}))})
    with pytest.raises(ValidationFailed) as info:
        schema.validate({"outer": {"inner": "x"}})
    assert info.value.errors == {"outer.inner": "must be true or false"}


def test_json_schema_mirrors_the_rules():
    schema = Schema({"name": String(required=True, max_len=5), "n": Int(min=0, nullable=True)})
    out = schema.json_schema()
    assert out["required"] == ["name"]
    assert out["properties"]["name"] == {"type": "string", "maxLength": 5, "minLength": 1, "pattern": r"\S"}
    assert out["properties"]["n"] == {"type": ["integer", "null"], "minimum": 0}


def test_readyz_is_503_when_the_store_does_not_answer(client, ctx, monkeypatch):
    monkeypatch.setattr(ctx.store, "ping", lambda: False)
    response = client.simulate_get("/readyz")
    assert response.status_code == 503 and response.json["status"] == "unavailable"
