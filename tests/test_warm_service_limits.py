"""What a CLI takes from the local warm service: a whole answer within a total deadline (a
service that trickles its answer is given up on, and not asked again by the same call), and
output whose terminal controls are escaped as the full path escapes them.

Real loopback servers stand in for a misbehaving service; the service folder, its state file
and its held ``alive.lock`` are real too, as a running service leaves them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rmtui.engine.display import json_text, printable
from rmtui.engine.locks import try_lock
from rmtui.engine.retrieval.modelhost import service_lookup
from rmtui.engine.retrieval.modelhost.client_settings import record_settings, settings_digest
from rmtui.engine.retrieval.modelhost.service_http import JsonHttpClient, ServiceError
from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path
from rmtui.thin_client import _UNSAFE, _ServiceFailed, post_local
from tests.loopback import JsonAnswers


class Trickle:
    """A loopback server that reads each request, then sends the start of an answer one byte at
    a time, never finishing: every read gets a byte well within any per-read timeout."""

    def __init__(self, pause: float = 0.1) -> None:
        self.connections = 0
        self.pause = pause
        self.stop = threading.Event()
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.srv.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                for byte in iter(lambda: b"H", None):
                    if self.stop.wait(self.pause):
                        return
                    conn.sendall(byte)
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.srv.close()


Answers = JsonAnswers  # a misbehaving service: every request gets one body


def finishes(call, within: float):
    """Run ``call`` in a thread; its outcome (value or exception), or fail if it is still
    running after ``within`` seconds (a wait with no total deadline)."""
    out: list = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(within)
    assert not t.is_alive(), f"still waiting after {within} s"
    return out[0]


def test_post_local_gives_up_on_a_trickling_service_at_its_deadline():
    srv = Trickle()
    try:
        t0 = time.monotonic()
        got = finishes(lambda: post_local(srv.url, "tok", "/rmtui/retrieve", {"need": "x"}, timeout=1.0), 10)
        assert isinstance(got, _ServiceFailed) and "no whole answer within 1 s" in str(got)
        assert 0.9 < time.monotonic() - t0 < 5 and srv.connections == 1
    finally:
        srv.close()


def test_the_service_client_gives_up_on_a_trickle_at_its_deadline_and_asks_once():
    srv = Trickle()
    try:
        client = JsonHttpClient(srv.url, "tok", timeout=1.0)
        got = finishes(lambda: client.request("POST", "/embed", {"texts": ["x"]}), 10)
        assert isinstance(got, ServiceError) and f"embedding service at {srv.url} did not answer within 1 s" in str(got)
        assert got.exit_code == 4 and srv.connections == 1  # no second request to a service that timed out
    finally:
        srv.close()


@pytest.fixture
def warm_service(memory_root, tmp_path, monkeypatch):
    """This user's private service folder for the default model, its ``alive.lock`` held (a
    service runs), and the root recorded for the thin client; ``point(url)`` writes the state
    file that names the service."""
    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(tmp_path / "services"))
    model = resolve_model_path(None, None)
    state_dir = Path(service_lookup.service_dir(str(model), None))
    service_lookup.private_folder(state_dir.parent)
    service_lookup.private_folder(state_dir)
    alive = try_lock(state_dir / "alive.lock")
    assert alive is not None
    record_settings(memory_root.path, settings_digest(memory_root.path), model, None)

    def point(url: str) -> None:
        (state_dir / "state.json").write_text(json.dumps({"url": url, "token": "tok-1", "pid": os.getpid()}))

    yield point
    os.close(alive)


def retrieve(root, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmtui", "--headless", "retrieve", *extra, "--root",
                           str(root.path), "--session", "s-warm", "how are tests run"], capture_output=True,
                          text=True, env={**os.environ, "RMTUI_CLIENT_TRACE": "1", **(env or {})}, timeout=90)


def test_a_trickling_warm_service_is_asked_once_and_retrieve_answers_at_its_deadline(memory_root, warm_service):
    srv = Trickle()
    try:
        warm_service(srv.url)
        t0 = time.monotonic()
        p = retrieve(memory_root, env={"RMTUI_SERVICE_ANSWER_SECONDS": "2"})
        took = time.monotonic() - t0
        assert p.returncode == 0, p.stderr
        assert "full path (no whole answer within 2 s)" in p.stderr  # the thin client gave up on it
        assert "failed this call already" in p.stderr and "ranking with BM25 only" in p.stderr, p.stderr
        assert "pytest-quiet" in p.stdout and srv.connections == 1  # not asked again by the full path
        assert took < 30
    finally:
        srv.close()


CONTROLS = "\x1b[2J\x1b]0;owned\x07memory \u202eevil\x9b31m\rover\n"


def test_the_thin_client_escapes_a_services_terminal_controls_as_the_full_path_does(memory_root, warm_service):
    text = Answers({"ok": True, "stdout": CONTROLS + "done\n", "stderr": "rmtui: warning: \x1b[31mred\n"})
    try:
        warm_service(text.url)
        p = retrieve(memory_root)
        assert p.returncode == 0 and "thin client answered" in p.stderr, p.stderr
        assert p.stdout == printable(CONTROLS + "done\n")
        assert not {"\x1b", "\u202e", "\x9b"} & set(p.stdout + p.stderr)
        assert "rmtui: warning: \\x1b[31mred\n" in p.stderr
    finally:
        text.close()
    rendered = '{"results": [], "text": "' + CONTROLS.rstrip("\n") + '"}\n'
    as_json = Answers({"ok": True, "stdout": rendered, "stderr": ""})
    try:
        warm_service(as_json.url)
        p = retrieve(memory_root, "--json")
        assert p.returncode == 0 and "thin client answered" in p.stderr, p.stderr
        assert p.stdout == printable(json_text(rendered)) and "\x1b" not in p.stdout and "\u202e" not in p.stdout
    finally:
        as_json.close()


def test_the_thin_clients_gate_lets_through_nothing_printable_would_escape():
    for n in [*range(0x0, 0x3100), 0xFEFF, 0x10FFFF]:
        c = chr(n)
        if printable(c) != c or printable(c + "x") != c + "x":
            assert c in _UNSAFE, hex(n)
    for n in (0xD800, 0xDFFF):  # lone surrogates: caught by the UTF-8 check
        assert printable(chr(n)) != chr(n)
        with pytest.raises(UnicodeEncodeError):
            chr(n).encode("utf-8")
