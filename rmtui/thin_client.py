"""The thin client of a warm retrieve (docs/architecture.md, "Retrieval").

``rmtui --headless retrieve ...`` with a local warm service running spends most of its time
importing and parsing what it never uses: the argument tree, the TOML parser, the
configuration schema. This module answers such a call with what a delegated retrieve needs:
the standard library, the root lookup, the settings record the full path left
(``client_settings``) and one HTTP request to the service. Anything it does not understand
or cannot vouch for (other flags, a profile, sync, shared views, an edited configuration, no
service, any error or refusal from the service) answers None before anything is printed, and
the caller takes the full path, which then prints exactly what it always printed.

``RMTUI_THIN_CLIENT=0`` turns the thin client off; ``RMTUI_CLIENT_TRACE=1`` says on stderr
which path answered (the tests use both).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

_INT_RE = re.compile(r"[0-9]{1,9}")


class _Fallback(Exception):
    """This call is the full path's."""


def _trace(what: str) -> None:
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
        if not _INT_RE.fullmatch(opts["top"]):
            raise _Fallback("--top not plain digits")
        opts["top"] = int(opts["top"])
    for text in (opts["session"], *need):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _Fallback("text that is not UTF-8") from None
    opts["need"] = " ".join(need)
    return opts


def _root(root: str | None) -> Path:
    """The root as ``open_root`` checks it; whatever it would refuse or create is the full path's."""
    from rmtui.engine.memory.root_lookup import find_root_path

    def no_profiles(name: str) -> Path:
        raise _Fallback("a profile")

    p, _ = find_root_path(root, None, None, no_profiles)
    if not p.is_dir():
        raise _Fallback("no root folder")
    p = p.resolve()
    if not ((p / ".git").exists() and (p / "MEMORY.md").is_file() and (p / ".runtime" / ".gitignore").exists()):
        raise _Fallback("not a ready memory root")
    if (p / "shared_views.toml").is_file():
        raise _Fallback("shared views to refresh")
    return p


_LOCAL_URL_RE = re.compile(r"http://127\.0\.0\.1:([0-9]{1,5})")  # where the CLI starts the local service
_TOKEN_RE = re.compile(r"[A-Za-z0-9._~+/=-]{1,512}")
#: The most a retrieve answer may be (the full client's bound).
MAX_ANSWER_BYTES = 64 * 1024 * 1024


def post_local(url: str, token: str, route: str, payload: dict, *, timeout: float = 120.0) -> tuple[int, object]:
    """One JSON POST to the local warm service over a plain socket: (status, decoded body).

    HTTP/1.1 with ``Connection: close`` and a ``Content-Length`` answer, which is all the
    service sends; anything else (another host, TLS, a chunked or oversized answer) is the
    full path's, whose client (``http.client``) costs more to import than this whole call."""
    import json
    import socket

    m = _LOCAL_URL_RE.fullmatch(url)
    if m is None or not _TOKEN_RE.fullmatch(token):
        raise _Fallback("a service address or token the thin client does not take")
    host, port = "127.0.0.1", int(m.group(1))
    body = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode()
    head = (f"POST {route} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode("ascii")
    # a literal address straight to connect(): create_connection would resolve it through
    # getaddrinfo, which imports the IDNA codec (a few ms of a call whose budget is 25)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect((host, port))
        sock.sendall(head + body)
        raw = bytearray()
        while len(raw) <= MAX_ANSWER_BYTES + 65536:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            raw += chunk
            end = raw.find(b"\r\n\r\n")
            if end >= 0 and (length := _content_length(raw[:end])) is not None and len(raw) >= end + 4 + length:
                break
    end = raw.find(b"\r\n\r\n")
    if end < 0:
        raise _Fallback("no complete answer head")
    lines = bytes(raw[:end]).decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    length = _content_length(raw[:end])
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit() \
            or length is None or length > MAX_ANSWER_BYTES or len(raw) < end + 4 + length:
        raise _Fallback("an answer the thin client does not read")
    data = bytes(raw[end + 4:end + 4 + length])
    return int(status_line[1]), json.loads(data) if data else {}


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


def _answer(opts: dict) -> tuple[dict, str]:
    from rmtui.engine.retrieval.modelhost.client_settings import read_settings, settings_digest
    from rmtui.engine.retrieval.modelhost.service_state import RETRIEVE_ROUTE, read_state, service_dir

    root = _root(opts["root"])
    settings = read_settings(root, settings_digest(root))
    if settings is None:
        raise _Fallback("settings not recorded for these configuration files")
    model = Path(settings["model"])
    if not model.is_dir():
        raise _Fallback("the model folder is gone")
    st = read_state(service_dir(model, settings["reranker"]))
    if st is None or not st.get("token"):
        raise _Fallback("no warm service")
    body: dict = {"root": str(root), "session": opts["session"], "need": opts["need"], "top": opts["top"],
                  "include_returned": opts["include_returned"]}
    if not opts["include_pending"]:
        body["include_pending"] = False
    status, answer = post_local(st["url"], st["token"], RETRIEVE_ROUTE, body)
    if status != 200 or not isinstance(answer, dict) or answer.get("ok") is not True:
        raise _Fallback("the service did not answer with a result")
    data, text = answer["data"], answer["text"]
    if not isinstance(data, dict) or not isinstance(text, str) or not isinstance(data.get("warnings", []), list):
        raise _Fallback("a malformed answer")
    data["via"] = "local-service"
    return data, text


def thin_retrieve(argv: list[str]) -> tuple[dict, str, bool] | None:
    """(data, text, as_json) of a retrieve the warm service answered; None: take the full path.
    Warnings are already on stderr, as the full path writes them."""
    if os.environ.get("RMTUI_THIN_CLIENT") == "0" or "retrieve" not in argv:
        return None
    try:
        opts = _parse(argv)
        data, text = _answer(opts)
    except _Fallback as why:
        _trace(f"full path ({why})")
        return None
    except Exception as exc:  # noqa: BLE001  (whatever went wrong, the full path says it properly)
        _trace(f"full path ({type(exc).__name__})")
        return None
    from rmtui.engine.display import printable

    for w in data.get("warnings", []):
        sys.stderr.write(f"rmtui: warning: {printable(str(w))}\n")
    sys.stderr.flush()
    _trace("thin client answered")
    return data, text, opts["json"]
