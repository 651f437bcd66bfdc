"""Readable text on a brand colour (WCAG 2.2, success criterion 1.4.3, level AA: text
needs a contrast ratio of at least 4.5:1 against its background).

Pure functions over hex colours, no I/O.  The hosted pages paint their buttons in the
application's brand colour, which can be anything from white to black, so the button
text is chosen here rather than fixed: whichever of black and white contrasts more
with the colour.  One of the two always reaches 4.5:1 (the worst colour, relative
luminance ~0.18, still gives ~4.58:1).
"""
from __future__ import annotations

BLACK = "#000000"
WHITE = "#ffffff"
AA_NORMAL_TEXT = 4.5


def rgb(color: str, *, over: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> tuple[float, float, float]:
    """``#rgb``, ``#rgba``, ``#rrggbb`` or ``#rrggbbaa`` as sRGB channels in 0..1; a
    translucent colour is composited over ``over`` (the white card the buttons sit on)."""
    digits = color.lstrip("#")
    if len(digits) in (3, 4):
        digits = "".join(d * 2 for d in digits)
    if len(digits) not in (6, 8):
        raise ValueError(f"not a hex colour: {color!r}")
    channels = [int(digits[i:i + 2], 16) / 255 for i in range(0, len(digits), 2)]
    alpha = channels[3] if len(channels) == 4 else 1.0
    return tuple(alpha * c + (1 - alpha) * b for c, b in zip(channels[:3], over, strict=True))


def relative_luminance(color: str) -> float:
    """WCAG 2.2 "relative luminance": each sRGB channel linearised
    (``c/12.92`` at or below 0.04045, else ``((c+0.055)/1.055)**2.4``), then weighted
    0.2126 R + 0.7152 G + 0.0722 B."""
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb(color))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(first: str, second: str) -> float:
    """WCAG 2.2 "contrast ratio": (L1 + 0.05) / (L2 + 0.05), L1 the lighter."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def text_color_on(background: str) -> str:
    """Black or white, whichever contrasts more with ``background`` (ties go to white)."""
    return BLACK if contrast_ratio(BLACK, background) > contrast_ratio(WHITE, background) else WHITE


def readable_on_white(color: str, fallback: str = "#1d1d1f") -> str:
    """``color`` when it is readable as text on white (4.5:1), else ``fallback``: the
    outlined secondary button writes the brand colour on the white card."""
    return color if contrast_ratio(color, WHITE) >= AA_NORMAL_TEXT else fallback
