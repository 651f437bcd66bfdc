"""The services' HTTP/1.1 server (shared/httpserver.py) against h11, an independent
parser, on requests hypothesis writes (issue 24, item 12).

Each request is fed to h11 as a server and to ``Connection.serve`` over a socket pair.
Where h11 refuses the bytes, our server must refuse them too (an error status, the app
never called); where both take them, the app must see the method, target, headers and
body h11 parsed. Our server may refuse more than h11 does (llhttp is stricter: a method
it does not know, a bare LF, a version other than 1.0 and 1.1), and must refuse one
thing h11 takes: an HTTP/1.0 request with a Transfer-Encoding, whose framing RFC 9112
(6.1) calls faulty (h11 and llhttp read its body as chunked).

The requests are built from parts most likely to split two parsers: the Host header
(none, two), Content-Length and Transfer-Encoding (codings, repeats, both at once),
versions, chunk extensions and trailer fields, whitespace and control bytes in fields,
obs-fold, and bytes h11's grammar does not allow.
"""
from __future__ import annotations

import socket

import h11
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.httpserver import DECISION_SERVER, Connection, base_environ

EXAMPLES = 2000  # 6 to 7 s on a 2-core machine shared with other work

def mostly(usual, rare, odds: int = 8):
    """``usual``, and one time in ``odds`` ``rare``: most requests must be ones both
    parsers take, or the comparison of what they parsed would rarely run."""
    return st.integers(0, odds - 1).flatmap(lambda n: rare if n == 0 else usual)


TOKEN = st.text("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789!#$%&'*+-.^_`|~", min_size=1, max_size=10).map(str.encode)
VISIBLE = st.text("".join(map(chr, range(0x21, 0x7f))), min_size=1, max_size=12).map(str.encode)

METHODS = mostly(st.sampled_from([b"GET", b"POST", b"PUT", b"DELETE", b"HEAD", b"OPTIONS", b"PATCH"]),
                 st.sampled_from([b"get", b"FOO", b"G\x00T", b""]) | TOKEN)
TARGETS = mostly(
    VISIBLE.map(lambda b: b"/" + b) | st.sampled_from([b"/", b"*", b"/a?b=c&d", b"http://host:8000/x?y", b"/%41%2F"]),
    st.sampled_from([b"", b"/a b", b"/\x7f", b"/\xff", b"/\x00", b"//x"]) | st.binary(min_size=1, max_size=12))
VERSIONS = mostly(st.sampled_from([b" HTTP/1.1", b" HTTP/1.0"]),
                  st.sampled_from([b" HTTP/2.0", b" HTTP/0.9", b" HTTP/1.2", b"", b" http/1.1", b" HTTP/1.1 "]))
NAMES = mostly(
    st.sampled_from([b"Content-Type", b"X-Forwarded-For", b"Accept", b"X_Under", b"X-A", b"x-a", b"Connection",
                     b"Expect", b"Host", b"Content-Length", b"Transfer-Encoding"]) | TOKEN,
    st.sampled_from([b"X A", b"X:A", b"", b"X\x00", b"\xff"]) | st.binary(min_size=1, max_size=6))
VALUES = mostly(
    st.text("".join(map(chr, range(0x20, 0x7f))) + "\t", max_size=12).map(str.encode)
    | st.sampled_from([b"0", b"5", b"chunked", b"close", b"keep-alive", b"100-continue", b"\x80\xff"]),
    st.sampled_from([b"5, 5", b"+5", b"-1", b"Chunked", b"gzip, chunked", b"chunked, gzip", b"gzip", b"identity",
                     b"a\x00b", b"a\x7fb", b"a\rb"]) | st.binary(max_size=10))
HEADER = st.tuples(NAMES, VALUES)
SPACES = mostly(st.just(b" "), st.sampled_from([b"", b"  ", b"\t", b" \t"]), odds=3)
LINE_ENDS = mostly(st.just(b"\r\n"), st.just(b"\n"), odds=20)
EXTENSIONS = mostly(st.just(b""), st.sampled_from([b";a=b", b";a", b';a="q"', b"; a=b", b";\x00", b";a=b;c"]), odds=3)


@st.composite
def chunked_body(draw) -> bytes:
    """Chunks, maybe with extensions, the last chunk, maybe trailer fields."""
    out = b""
    for data in draw(st.lists(st.binary(min_size=1, max_size=8), max_size=3)):
        size = draw(st.sampled_from(["%x", "%X", "%03x"])) % len(data)
        out += size.encode() + draw(EXTENSIONS) + b"\r\n" + data + b"\r\n"
    out += b"0" + draw(EXTENSIONS) + b"\r\n"
    for name, value in draw(st.lists(HEADER, max_size=3)):
        out += name + b":" + draw(SPACES) + value + b"\r\n"
    return out + b"\r\n"


@st.composite
def requests(draw) -> bytes:
    end = draw(LINE_ENDS)
    head = draw(METHODS) + b" " + draw(TARGETS) + draw(VERSIONS) + end
    headers = draw(st.lists(HEADER, max_size=5))
    hosts = draw(mostly(st.just(1), st.sampled_from([0, 2])))
    headers[:0] = [(b"Host", b"example.org")] * hosts
    body = b""
    framing = draw(st.sampled_from(["none", "length", "length", "chunked", "chunked", "both"]))
    if framing in ("length", "both"):
        body = draw(st.binary(max_size=8))
        headers.append((b"Content-Length", str(len(body)).encode()))
    if framing in ("chunked", "both"):
        headers.append((b"Transfer-Encoding", b"chunked"))
        body = draw(chunked_body())
    for name, value in draw(st.permutations(headers)):
        head += name + b":" + draw(SPACES) + value + end
        if draw(st.integers(0, 30)) == 0:
            head += b" folded" + end  # obs-fold (RFC 9112, 5.2)
    return head + end + body


# ---------------------------------------------------------------- the two parsers


def h11_parse(data: bytes):
    """``("refused", None)``, ``("incomplete", None)`` or ``("accepted", (method, target,
    headers, body, version))`` for the first request in ``data``."""
    connection = h11.Connection(h11.SERVER)
    connection.receive_data(data)
    request, body = None, b""
    try:
        while True:
            event = connection.next_event()
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return "accepted", (request.method, request.target, list(request.headers), body,
                                    request.http_version)
            elif event is h11.NEED_DATA:
                return "incomplete", None
    except h11.RemoteProtocolError:
        return "refused", None


class Recording:
    def __init__(self):
        self.environs: list[dict] = []

    def __call__(self, environ, start_response):
        environ["body"] = environ["wsgi.input"].read()
        self.environs.append(environ)
        start_response("200 OK", [("Content-Length", "0")])
        return [b""]


def server_parse(data: bytes):
    """``(first status line or None, the environ the app saw first or None)``."""
    app = Recording()
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(data)
        theirs.shutdown(socket.SHUT_WR)
        Connection(ours, ("127.0.0.1", 1), app, base_environ("127.0.0.1", 80, DECISION_SERVER), timeout=2,
                   header_timeout=2).serve()
        answer = b""
        while chunk := theirs.recv(65536):
            answer += chunk
    status = answer.split(b"\r\n", 1)[0] if answer else None
    return status, (app.environs[0] if app.environs else None)


def _as_environ(headers) -> dict:
    """h11's header list as WSGI names them, as our server builds the environ (repeats
    joined with a comma, names with ``_`` dropped)."""
    out = {}
    for name, value in headers:
        if b"_" in name:
            continue
        key = name.decode("latin-1").upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            key = "HTTP_" + key
        value = value.decode("latin-1")
        out[key] = f"{out[key]},{value}" if key in out else value
    return out


def _headers_of(environ: dict) -> dict:
    return {key: value for key, value in environ.items()
            if key.startswith("HTTP_") or key in ("CONTENT_TYPE", "CONTENT_LENGTH")}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_the_server_refuses_what_h11_refuses_and_agrees_on_what_both_accept(data):
    """What h11 refuses is refused; where both take a request, the app sees what h11
    parsed; an HTTP/1.0 request with a Transfer-Encoding, which h11 takes, is 400."""
    verdict, parsed = h11_parse(data)
    status, environ = server_parse(data)
    if verdict == "refused":
        assert environ is None, (data, environ)
        assert status is not None and status[9:10] in (b"4", b"5"), (data, status)
    elif verdict == "accepted" and parsed[4] == b"1.0" and any(
            name == b"transfer-encoding" for name, _ in parsed[2]):  # h11 lower-cases the names
        assert environ is None, (data, environ)  # RFC 9112, 6.1: faulty framing, where h11 reads it as chunked
        assert status is not None and status.startswith(b"HTTP/1.1 400 "), (data, status)
    elif verdict == "accepted" and environ is not None:
        method, target, headers, body, _ = parsed
        assert environ["REQUEST_METHOD"].encode() == method
        assert environ["RAW_URI"].encode("latin-1") == target
        assert environ["body"] == body
        expected = _as_environ(headers)
        seen = _headers_of(environ)
        if "HTTP_TRANSFER_ENCODING" in expected:  # h11 lower-cases the coding; a chunked body gets its length
            expected["HTTP_TRANSFER_ENCODING"] = expected["HTTP_TRANSFER_ENCODING"].lower()
            seen["HTTP_TRANSFER_ENCODING"] = seen["HTTP_TRANSFER_ENCODING"].lower()
            seen.pop("CONTENT_LENGTH", None)
        assert seen == expected, data
