"""The tenant's custom CSS (``branding_options.custom_css``), reduced to an allow-list.

The CSS is tokenized and parsed once by ``tinycss2`` (CSS Syntax Module Level 3, the
parser browsers follow), so the work is linear in the input: no regular expression
scans it, and nothing runs "until stable".  What is kept:

- style rules whose selectors are made of names, classes, ids, attribute selectors,
  combinators and the functional pseudo-classes in ``_SELECTOR_FUNCTIONS``;
- ``@media`` blocks holding such rules; every other at-rule (``@import``,
  ``@font-face``, ``@namespace``...) is dropped;
- declarations of a property in ``_PROPERTIES`` (or starting with a prefix in
  ``_PROPERTY_PREFIXES``) whose value is made of keywords, numbers, colours, strings,
  the functions in ``_VALUE_FUNCTIONS`` and relative ``url()`` references.

Nothing that loads remote content (external, protocol-relative, ``data:`` or script
URLs, ``@import``), runs script (``expression()``, ``behavior``, ``-moz-binding``) or
could end the ``<style>`` element (any ``<``) survives.  A stylesheet with nothing to
drop is returned exactly as written; otherwise the kept parts are serialized again.

The kept parts are serialized from the values tinycss2 decoded, escapes included
(``\\3c`` is ``<``), and it writes a ``<`` of a string, an unquoted ``url()`` or an
identifier back out as a ``<``, or as ``\\<``, which HTML still reads as one.  So no token
may carry a ``<`` at all, and a property name must be a plain name: it is written as
decoded, where a ``}`` or ``<`` would end the rule or the element.
"""
from __future__ import annotations

import tinycss2
from tinycss2 import ast

_PROPERTIES = frozenset({
    "color", "opacity", "display", "visibility", "cursor", "width", "height", "min-width", "min-height",
    "max-width", "max-height", "box-shadow", "box-sizing", "outline", "outline-color", "outline-offset",
    "outline-style", "outline-width", "line-height", "letter-spacing", "word-spacing", "white-space",
    "vertical-align", "gap", "row-gap", "column-gap", "align-items", "align-content", "align-self",
    "justify-content", "justify-items", "justify-self", "flex", "flex-direction", "flex-wrap", "flex-grow",
    "flex-shrink", "flex-basis", "order", "transition", "transition-duration", "transition-property",
    "transition-timing-function", "overflow", "overflow-x", "overflow-y", "list-style", "list-style-type",
    "float", "clear", "z-index", "position", "top", "right", "bottom", "left", "filter", "transform",
    "accent-color", "caret-color", "fill", "stroke",
})
_PROPERTY_PREFIXES = ("background", "border", "margin", "padding", "font", "text-")
_VALUE_FUNCTIONS = frozenset({
    "rgb", "rgba", "hsl", "hsla", "calc", "min", "max", "clamp", "var", "linear-gradient",
    "radial-gradient", "repeating-linear-gradient", "repeating-radial-gradient", "translate", "translatex",
    "translatey", "scale", "rotate", "blur", "brightness", "contrast", "grayscale", "drop-shadow",
    "cubic-bezier",
})
_SELECTOR_FUNCTIONS = frozenset({"not", "is", "where", "nth-child", "nth-last-child", "nth-of-type",
                                 "nth-last-of-type"})
_VALUE_LITERALS = frozenset({",", "/", "+", "-", "*", "%"})
_SELECTOR_LITERALS = frozenset({".", ",", ">", "+", "~", "*", ":", "|", "=", "^=", "$=", "*=", "~=", "|=",
                                "-"})
_MEDIA_LITERALS = frozenset({",", ":", "/"})
_PLAIN = (ast.WhitespaceToken, ast.IdentToken, ast.NumberToken, ast.PercentageToken, ast.DimensionToken)


def sanitize_css(css: str) -> str:
    """The allow-listed part of ``css`` (see the module docstring); ``css`` itself when
    nothing had to go."""
    rules = tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True)
    kept, dropped = _rules(rules)
    if not dropped and "<" not in css:
        return css
    return "\n".join(kept)


def _rules(rules) -> tuple[list[str], bool]:
    kept, dropped = [], False
    for rule in rules:
        if isinstance(rule, ast.QualifiedRule):
            text, lost = _style_rule(rule)
        elif isinstance(rule, ast.AtRule) and rule.lower_at_keyword == "media" and rule.content is not None \
                and _tokens_ok(rule.prelude, _MEDIA_LITERALS, frozenset()):
            inner, lost = _rules(tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True))
            text = f"@media {tinycss2.serialize(rule.prelude).strip()}{{{''.join(inner)}}}" if inner else None
        else:
            text, lost = None, True
        dropped = dropped or lost or text is None
        if text:
            kept.append(text)
    return kept, dropped


def _style_rule(rule) -> tuple[str | None, bool]:
    if not _tokens_ok(rule.prelude, _SELECTOR_LITERALS, _SELECTOR_FUNCTIONS, strings=True, brackets=True):
        return None, True
    declarations, dropped = [], False
    for item in tinycss2.parse_declaration_list(rule.content, skip_comments=True, skip_whitespace=True):
        if isinstance(item, ast.Declaration) and _property_ok(item.lower_name) and item.value \
                and _tokens_ok(item.value, _VALUE_LITERALS, _VALUE_FUNCTIONS, strings=True, urls=True):
            important = " !important" if item.important else ""
            declarations.append(f"{item.lower_name}:{tinycss2.serialize(item.value).strip()}{important}")
        else:
            dropped = True
    return f"{tinycss2.serialize(rule.prelude).strip()}{{{';'.join(declarations)}}}", dropped


def _property_ok(name: str) -> bool:
    if tinycss2.serialize_identifier(name) != name:  # an escape decoded to a character a name cannot hold
        return False
    return name in _PROPERTIES or name.startswith(_PROPERTY_PREFIXES) or name.startswith("--")


def _tokens_ok(tokens, literals, functions, *, strings=False, urls=False, brackets=False, depth=0) -> bool:
    """Every token is of an allowed kind and carries no ``<``; blocks and functions are
    checked inside (depth-bounded, so deep nesting cannot recurse without end)."""
    if depth > 8:
        return False
    for token in tokens:
        if "<" in _text(token):
            return False
        if isinstance(token, _PLAIN):
            continue
        if isinstance(token, ast.HashToken):
            continue
        if isinstance(token, ast.LiteralToken):
            if token.value not in literals:
                return False
        elif isinstance(token, ast.StringToken):
            if not strings or "\\" in token.value:
                return False
        elif isinstance(token, ast.URLToken):
            if not (urls and _relative(token.value)):
                return False
        elif isinstance(token, ast.FunctionBlock):
            name = token.lower_name
            if urls and name == "url":
                args = [t for t in token.arguments if not isinstance(t, ast.WhitespaceToken)]
                if len(args) != 1 or not isinstance(args[0], ast.StringToken) or not _relative(args[0].value) \
                        or "<" in args[0].value:
                    return False
            elif name not in functions or not _tokens_ok(token.arguments, literals | {":"}, functions,
                                                         strings=strings, urls=urls, brackets=brackets,
                                                         depth=depth + 1):
                return False
        elif isinstance(token, (ast.SquareBracketsBlock, ast.ParenthesesBlock)):
            if isinstance(token, ast.SquareBracketsBlock) and not brackets:
                return False
            if not _tokens_ok(token.content, literals | {":"}, functions, strings=strings, urls=urls,
                              brackets=brackets, depth=depth + 1):
                return False
        else:  # at-keywords, {} blocks, unicode ranges, bad strings or URLs, parse errors
            return False
    return True


def _text(token) -> str:
    """The decoded text ``token`` carries, which serializing writes back: an identifier's,
    hash's, string's or URL's value, a dimension's unit, a function's name."""
    if isinstance(token, ast.DimensionToken):
        return token.unit
    if isinstance(token, ast.FunctionBlock):
        return token.name
    value = getattr(token, "value", None)
    return value if isinstance(value, str) else ""


def _relative(url: str) -> bool:
    """A path on the page's own origin: no scheme, no ``//`` host, no backslash (which
    browsers read as a slash), no characters a browser would strip."""
    url = url.strip()
    if not url or url.startswith(("//", "\\")) or "\\" in url or any(ord(c) < 0x21 for c in url):
        return False
    head = url.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return ":" not in head
