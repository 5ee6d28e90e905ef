"""The thin client of a warm retrieve (docs/architecture.md, "Retrieval").

``rmtui --headless retrieve ...`` with a local warm service running spends most of its time
importing and parsing what it never uses: the argument tree, the TOML parser, the
configuration schema. This module answers such a call with what a delegated retrieve needs:
the standard library, the root lookup, the settings record the full path left
(``client_settings``) and one HTTP request to the service. Anything it does not understand
or cannot vouch for (other flags, a profile, an edited configuration, no service, any error
or refusal from the service; not sync or shared views, whose upkeep the service starts)
answers None before anything is printed, and the caller takes the full path, which then
prints exactly what it always printed.

Its budget is about 25 ms over a bare interpreter, so it imports neither ``re``, ``json``,
``pathlib``, ``hashlib`` nor ``socket`` (together ~30 ms): paths go through ``os.path``, JSON
and SHA-256 through :mod:`rmtui.engine.lean`, the request through ``_socket``, and the
service renders what it prints (the bytes the full path would print).

``RMTUI_THIN_CLIENT=0`` turns the thin client off; ``RMTUI_CLIENT_TRACE=1`` says on stderr
which path answered (the tests use both).
"""

from __future__ import annotations

import os
import sys


class _Fallback(Exception):
    """This call is the full path's."""


class _ServiceFailed(_Fallback):
    """The service was asked and failed (no whole answer in time, not HTTP): the full path
    does not ask it again."""


def trace(what: str) -> None:
    """Which path answered, on stderr, when ``RMTUI_CLIENT_TRACE=1`` (the MCP server's too)."""
    if os.environ.get("RMTUI_CLIENT_TRACE") == "1":
        sys.stderr.write(f"rmtui: trace: {what}\n")


def _parse(argv: list[str]) -> dict:
    """The options of exactly ``--headless retrieve`` with the flags the full parser takes in
    their plain spelling (no abbreviations, no ``--opt=value``, each at most once)."""
    opts: dict = {"json": False, "root": None, "session": None, "top": None,
                  "include_returned": False, "include_pending": True}
    seen: set[str] = set()
    need: list[str] = []
    command = headless = need_open = False
    args = iter(argv)
    for arg in args:
        if arg in seen:
            raise _Fallback("a repeated option")
        if arg == "--headless" and not command:
            headless = True
        elif arg == "retrieve" and not command:
            command = True
        elif arg == "--json":
            opts["json"] = True
        elif arg in ("--root", "--session", "--top"):
            value = next(args, None)
            if value is None or value.startswith("-") or (arg != "--root" and not command):
                raise _Fallback(f"{arg} as the full parser reads it")
            opts[arg[2:]] = value
        elif arg == "--include-returned" and command:
            opts["include_returned"] = True
        elif arg == "--no-pending" and command:
            opts["include_pending"] = False
        elif command and not arg.startswith("-") and (not need or need_open):
            need.append(arg)  # one run of words: argparse refuses words after an option that ends it
            need_open = True
            continue
        else:
            raise _Fallback(f"an argument the thin client does not read: {arg[:40]!r}")
        need_open = False
        if arg.startswith("--"):
            seen.add(arg)
    if not (headless and command and need and opts["session"] is not None):
        raise _Fallback("not a whole headless retrieve")
    if opts["top"] is not None:
        if not (0 < len(opts["top"]) < 10 and opts["top"].isascii() and opts["top"].isdigit()):
            raise _Fallback("--top not plain digits")
        opts["top"] = int(opts["top"])
    for text in (opts["session"], *need):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _Fallback("text that is not UTF-8") from None
    opts["need"] = " ".join(need)
    return opts


def _root(root: str | None) -> str:
    """The root as ``open_root`` checks it; whatever it would refuse or create is the full path's."""
    from rmtui.engine.memory.root_lookup import find_root_path

    def no_profiles(name: str) -> str:
        raise _Fallback("a profile")

    p, _ = find_root_path(root, None, None, no_profiles)
    if not os.path.isdir(p):
        raise _Fallback("no root folder")
    p = os.path.realpath(p)
    join = os.path.join
    if not (os.path.exists(join(p, ".git")) and os.path.isfile(join(p, "MEMORY.md"))
            and os.path.exists(join(p, ".runtime", ".gitignore"))):
        raise _Fallback("not a ready memory root")
    return p


_LOCAL_URL = "http://127.0.0.1:"  # where the CLI starts the local service, then the port
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~+/=-")
#: The most a retrieve answer may be (the full client's bound).
MAX_ANSWER_BYTES = 64 * 1024 * 1024


def post_local(url: str, token: str, route: str, payload: dict, *, timeout: float | None = None) -> tuple[int, object]:
    """One JSON POST to the local warm service over a plain socket: (status, decoded body).

    HTTP/1.1 with ``Connection: close`` and a ``Content-Length`` answer, which is all the
    service sends; anything else (another host, TLS, a chunked or oversized answer) is the
    full path's, whose client (``http.client``) costs more to import than this whole call.
    ``timeout`` (``service_lookup.answer_seconds()`` by default) bounds the whole exchange,
    not each read: a service that trickles its answer fails with :class:`_ServiceFailed`."""
    import _socket  # the C module under ``socket``, which costs ~4 ms more (enum, selectors)
    import time

    from rmtui.engine.lean import loads

    port = url[len(_LOCAL_URL):]
    if not (url.startswith(_LOCAL_URL) and 0 < len(port) <= 5 and port.isascii() and port.isdigit()
            and 0 < len(token) <= 512 and _TOKEN_CHARS.issuperset(token)):
        raise _Fallback("a service address or token the thin client does not take")
    host = "127.0.0.1"
    body = _json_object(payload).encode()
    head = (f"POST {route} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode("ascii")
    # a literal address straight to connect(): create_connection would resolve it through
    # getaddrinfo, which imports the IDNA codec (a few ms of a call whose budget is 25)
    if timeout is None:
        from rmtui.engine.retrieval.modelhost.service_lookup import answer_seconds

        timeout = answer_seconds()
    deadline = time.monotonic() + timeout
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    raw = bytearray()
    try:
        sock.settimeout(timeout)
        sock.connect((host, int(port)))
        sock.sendall(head + body)
        while len(raw) <= MAX_ANSWER_BYTES + 65536:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _ServiceFailed(f"no whole answer within {timeout:g} s")
            sock.settimeout(left)
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            raw += chunk
            end = raw.find(b"\r\n\r\n")
            if end >= 0 and (length := _content_length(raw[:end])) is not None and len(raw) >= end + 4 + length:
                break
    except OSError as exc:  # refused, reset, or the deadline passed inside a read
        raise _ServiceFailed(f"no whole answer within {timeout:g} s" if isinstance(exc, TimeoutError)
                             else f"the connection failed ({type(exc).__name__})") from None
    finally:
        sock.close()
    end = raw.find(b"\r\n\r\n")
    if end < 0:
        raise _ServiceFailed("no complete answer head")
    lines = bytes(raw[:end]).decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    length = _content_length(raw[:end])
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit() \
            or length is None or length > MAX_ANSWER_BYTES or len(raw) < end + 4 + length:
        raise _ServiceFailed("an answer the thin client does not read")
    data = bytes(raw[end + 4:end + 4 + length])
    return int(status_line[1]), loads(data.decode("utf-8")) if data else {}


def _json_object(payload: dict) -> str:
    """A request body of text, integers, booleans and nulls as JSON (ASCII: non-ASCII text
    escaped, as ``json.dumps`` writes it by default)."""
    from rmtui.engine.lean import quote

    def value(v) -> str:
        if v is None or isinstance(v, bool):
            return {None: "null", True: "true", False: "false"}[v]
        if isinstance(v, int):
            return str(v)
        if isinstance(v, str):
            return quote(v)
        raise _Fallback(f"a request value of type {type(v).__name__}")

    return "{" + ", ".join(f"{quote(k)}: {value(v)}" for k, v in payload.items()) + "}"


def _content_length(head: bytes | bytearray) -> int | None:
    """The Content-Length of an answer head; None when absent, repeated, chunked or malformed."""
    found = None
    for line in bytes(head).split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            value = value.strip()
            if not sep or not value.isdigit() or len(value) > 12 or found is not None:
                return None
            found = int(value)
    return found


def _answer(opts: dict) -> tuple[str, str]:
    """(stdout, stderr) of the call, as the service rendered them."""
    from rmtui.engine.retrieval.modelhost.client_settings import read_settings, settings_digest
    from rmtui.engine.retrieval.modelhost.service_lookup import RETRIEVE_ROUTE, note_failure, read_state, service_dir

    root = _root(opts["root"])
    settings = read_settings(root, settings_digest(root))
    if settings is None:
        raise _Fallback("settings not recorded for these configuration files")
    if not os.path.isdir(settings["model"]):
        raise _Fallback("the model folder is gone")
    st = read_state(service_dir(settings["model"], settings["reranker"], settings.get("precision", "float32")))
    if st is None or not st.get("token"):
        raise _Fallback("no warm service")
    body: dict = {"root": root, "session": opts["session"], "need": opts["need"], "top": opts["top"],
                  "include_returned": opts["include_returned"], "render": "json" if opts["json"] else "text"}
    if not opts["include_pending"]:
        body["include_pending"] = False
    try:
        status, answer = post_local(st["url"], st["token"], RETRIEVE_ROUTE, body)
    except _ServiceFailed as why:  # the full path retrieves without asking it again
        note_failure(st["url"], str(why))
        raise
    if status != 200 or not isinstance(answer, dict) or answer.get("ok") is not True:
        raise _Fallback("the service did not answer with a result")
    out, err = answer.get("stdout"), answer.get("stderr")
    if not isinstance(out, str) or not isinstance(err, str):
        raise _Fallback("a malformed answer")
    return _shown(out, as_json=opts["json"]), _shown(err, as_json=False)


#: Every character :func:`rmtui.engine.display.printable` escapes, and the carriage return it
#: keeps only before a line feed; lone surrogates are caught by the UTF-8 check. A gate, not a
#: second rule: text holding none of them is printed as it came, any other text goes through
#: the full path's own escaping (``tests/test_warm_service_limits.py`` keeps the two equal).
_UNSAFE = frozenset([*map(chr, range(0x00, 0x09)), "\x0b", "\x0c", "\r", *map(chr, range(0x0e, 0x20)),
                     *map(chr, range(0x7f, 0xa0)), *map(chr, range(0x202a, 0x202f)), *map(chr, range(0x2066, 0x206a))])


def _shown(text: str, *, as_json: bool) -> str:
    """The service's rendering with terminal controls escaped as the full path escapes them
    (``display.json_text`` inside JSON, then ``display.printable``): the service renders with
    those very functions, so a well-behaved answer passes unchanged, and a misbehaving one
    never drives the terminal. Only then is ``re`` imported (a cost the thin path avoids)."""
    if _UNSAFE.isdisjoint(text):
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:
            pass
    from rmtui.engine.display import json_text, printable

    return printable(json_text(text) if as_json else text)


def thin_retrieve(argv: list[str]) -> str | None:
    """What a retrieve the warm service answered prints on stdout (its warnings are on
    stderr already, as the full path writes them); None: take the full path."""
    if os.environ.get("RMTUI_THIN_CLIENT") == "0" or "retrieve" not in argv:
        return None
    try:
        out, err = _answer(_parse(argv))
    except _Fallback as why:
        trace(f"full path ({why})")
        return None
    except Exception as exc:  # noqa: BLE001  (whatever went wrong, the full path says it properly)
        trace(f"full path ({type(exc).__name__})")
        return None
    sys.stderr.write(err)
    sys.stderr.flush()
    trace("thin client answered")
    return out
