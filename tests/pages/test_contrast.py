"""Button text keeps WCAG AA contrast against any brand colour (issue 26, item 17):
``applications.contrast`` picks black or white from the colour's relative luminance,
and the hosted pages use it."""
from __future__ import annotations

import re

import falcon
import pytest
from hypothesis import given
from hypothesis import strategies as st

from controlplane.applications.contrast import (
    BLACK,
    WHITE,
    contrast_ratio,
    readable_on_white,
    relative_luminance,
    text_color_on,
)


@pytest.mark.parametrize("color, luminance", [
    ("#000000", 0.0), ("#ffffff", 1.0), ("#fff", 1.0),
    ("#ff0000", 0.2126), ("#00ff00", 0.7152), ("#0000ff", 0.0722),
    ("#808080", 0.2158605),  # sRGB 128: ((0.50196+0.055)/1.055)**2.4
])
def test_relative_luminance_is_the_wcag_formula(color, luminance):
    assert relative_luminance(color) == pytest.approx(luminance, abs=1e-6)


def test_contrast_ratio_of_black_on_white_is_21():
    assert contrast_ratio(BLACK, WHITE) == pytest.approx(21.0)
    assert contrast_ratio(WHITE, BLACK) == pytest.approx(21.0)


@pytest.mark.parametrize("background, text", [
    ("#ffffff", BLACK), ("#000000", WHITE), ("#2f5bea", WHITE), ("#0b7a53", WHITE),
    ("#ffd400", BLACK),  # a yellow: white text on it would be ~1.5:1
    ("#777777", BLACK),  # white on it is 4.48:1, black 4.69:1
    ("#76767600", BLACK),  # fully transparent: the white card shows through
])
def test_text_color_on_picks_the_higher_contrast(background, text):
    assert text_color_on(background) == text


@given(st.from_regex(r"\A#[0-9a-fA-F]{6}\Z"))
def test_every_colour_gets_text_at_aa_contrast(color):
    assert contrast_ratio(text_color_on(color), color) >= 4.5


@given(st.from_regex(r"\A#[0-9a-fA-F]{6}\Z"))
def test_text_on_white_is_always_readable(color):
    assert contrast_ratio(readable_on_white(color), WHITE) >= 4.5


def _button_rule(pages, color: str) -> str:
    resp = falcon.Response()
    pages.render(resp, "oidc_login.html", app={"_id": "a1", "name": "A", "brand_color": color},
                 action="/x", csrf_token="t", request_handle="h")
    return re.search(r"\nbutton\{[^}]*\}", resp.text).group(0)


def test_a_light_brand_colour_gets_black_button_text(pages):
    rule = _button_rule(pages, "#ffd400")
    assert "background:#ffd400" in rule and "color:#000000" in rule


def test_a_dark_brand_colour_gets_white_button_text(pages):
    assert "color:#ffffff" in _button_rule(pages, "#0b3d91")


def test_the_outlined_button_never_writes_a_light_brand_colour_on_white(pages):
    resp = falcon.Response()
    pages.render(resp, "oidc_consent.html", app={"_id": "a1", "name": "A", "brand_color": "#ffd400"},
                 action="/x", csrf_token="t", request_handle="h", client_name="C", scopes=["openid"])
    rule = re.search(r"button\.secondary\{[^}]*\}", resp.text).group(0)
    assert "color:#1d1d1f" in rule
