"""A peer that answers a few bytes at a time never holds a shared-view command past its budget.

Each read gets a byte well within any per-read timeout, so only a total deadline ends the wait:
``pull --timeout``, ``accept --timeout``, retrieve's view refresh (CLI, and the function the MCP
server calls) and the Git transport end within their budget plus a margin for process start, say
the peer was too slow (exit 4), and keep the last valid import (marked stale)."""

from __future__ import annotations

import json
import socketserver
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from test_shared_views import make_consumer, make_provider, tree_bytes

from rmtui.engine.views import consumer, files, provider
from rmtui.engine.views.package import zip_package

#: seconds a CLI process may take beyond its budget to start, load the root and write its answer
MARGIN = 8.0
#: one byte every STEP seconds: each read is quick, the whole answer takes minutes
STEP = 0.1


class TricklePeer:
    """A real loopback HTTP peer answering from ``routes`` (path -> status, content type, body): in
    full, or, while ``slow`` is set (all paths, or a set of them), one byte every :data:`STEP`
    seconds from the status line on."""

    def __init__(self, routes: dict[str, tuple[int, str, bytes]]) -> None:
        self.routes = routes
        self.slow: bool | set[str] = False  # True, or the paths that trickle
        self.stop = threading.Event()
        self.requests: list[str] = []
        peer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(65537).decode("latin-1")
                length = 0
                while True:
                    header = self.rfile.readline(65537)
                    if header in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = header.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                if length:
                    self.rfile.read(length)
                path = line.split()[1].split("?")[0] if len(line.split()) > 1 else "/"
                peer.requests.append(path)
                status, ctype, body = peer.routes.get(path, (404, "application/json", b'{"detail": "no route"}'))
                data = (f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                        "Connection: close\r\n\r\n").encode() + body
                try:
                    if not (peer.slow is True or (isinstance(peer.slow, set) and path in peer.slow)):
                        self.wfile.write(data)
                        return
                    for i in range(len(data)):
                        if peer.stop.wait(STEP):
                            return
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                except OSError:  # the client gave up: what a slow peer sees
                    return

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def package_zip(tmp_path) -> bytes:
    root = make_provider(tmp_path)
    provider.create_file_view(root, "platform", ["platform"], exclude=["root-password"], title="Platform")
    return zip_package(provider.build(root, "platform").package)


@pytest.fixture
def peer(package_zip) -> Iterator[TricklePeer]:
    invitation = json.dumps({"view_id": "platform", "kind": "file", "title": "Platform",
                             "ref": "rightmemory://mf/platform"}).encode()
    accepted = json.dumps({"connection_id": "c1", "connection_token": "conn-token-1", "view_id": "platform"}).encode()
    p = TricklePeer({"/api/views/platform/package": (200, "application/zip", package_zip),
                     "/api/invitations/inv1/view": (200, "application/json", invitation),
                     "/api/invitations/inv1/accept": (201, "application/json", accepted)})
    yield p
    p.close()


def _connected(tmp_path, cli, peer: TricklePeer):
    """A consumer connected to the peer while it is quick, with its first import."""
    cons = make_consumer(tmp_path)
    r = cli("--headless", "shared-view", "connect", f"{peer.url}/api/views/platform", "--token-env", "TOK",
            "--root", str(cons.path), "--json", env={"TOK": "secret-token"})
    assert r.code == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["pull"]["status"] == "pulled"
    return cons


def _imports(cons) -> dict:
    return tree_bytes(files.imports_dir(cons) / "platform")


def test_pull_from_a_trickling_provider_ends_within_its_timeout(tmp_path, cli, peer):
    cons = _connected(tmp_path, cli, peer)
    before = _imports(cons)
    peer.slow = True
    started = time.monotonic()
    r = cli("--headless", "shared-view", "pull", "--timeout", "3", "--json", "--root", str(cons.path), timeout=60)
    took = time.monotonic() - started
    assert r.code == 4, r.stdout + r.stderr
    got = json.loads(r.stdout)[0]
    assert got["status"] == "stale" and "too slow" in got["reason"] and "3 s" in got["reason"]
    assert took < 3 + MARGIN, took
    assert _imports(cons) == before  # the last valid import stays as it was
    listed = json.loads(cli("--headless", "shared-view", "list", "--json", "--root", str(cons.path)).stdout)
    assert listed[0]["status"] == "stale" and "too slow" in listed[0]["reason"]


def test_retrieve_answers_from_the_last_import_within_its_refresh_budget(tmp_path, cli, peer):
    cons = _connected(tmp_path, cli, peer)
    files.update_state(cons, "platform", last_attempt=0)  # due for a refresh
    asked = peer.requests.count("/api/views/platform/package")
    peer.slow = True
    started = time.monotonic()
    r = cli("--headless", "retrieve", "--json", "--root", str(cons.path), "--session", "s1",
            "how do we deploy with helm", timeout=60)
    took = time.monotonic() - started
    assert r.code == 0, r.stderr
    assert took < consumer.REFRESH_BUDGET + MARGIN, took
    assert any(res["id"] == "MF#platform/deploy-k8s" for res in json.loads(r.stdout)["results"])
    # the refresh runs beside the retrieval (host/retrieve_upkeep.py), within its own budget
    deadline = time.monotonic() + consumer.REFRESH_BUDGET + 2 * MARGIN
    while files.load_state(cons)["platform"].get("status") != "stale" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert peer.requests.count("/api/views/platform/package") == asked + 1  # the refresh did ask the slow peer
    state = files.load_state(cons)["platform"]
    assert state["status"] == "stale" and "too slow" in state["reason"]


def test_the_refresh_the_mcp_server_makes_keeps_its_budget(tmp_path, cli, peer):
    cons = _connected(tmp_path, cli, peer)
    files.update_state(cons, "platform", last_attempt=0)
    peer.slow = True
    started = time.monotonic()
    done = consumer.refresh_before_retrieve(cons, budget=2.0)
    took = time.monotonic() - started
    assert took < 2.0 + 1.0, took
    assert [(d.view_id, d.status) for d in done] == [("platform", "stale")] and "too slow" in done[0].reason


def test_accept_from_a_trickling_hub_ends_within_its_timeout(tmp_path, cli, peer):
    cons = make_consumer(tmp_path)
    peer.slow = True
    started = time.monotonic()
    r = cli("--headless", "shared-view", "accept", f"{peer.url}/i/inv1", "--timeout", "3", "--root", str(cons.path),
            timeout=60)
    took = time.monotonic() - started
    assert r.code == 4, r.stdout + r.stderr
    assert "too slow" in r.stderr and took < 3 + MARGIN, (took, r.stderr)
    assert not (cons.path / "shared_views.toml").exists()  # nothing recorded


def test_accept_whose_package_trickles_records_the_view_unavailable(tmp_path, cli, peer):
    cons = make_consumer(tmp_path)
    peer.slow = {"/api/views/platform/package"}  # the invitation and the accept answer at once
    started = time.monotonic()
    r = cli("--headless", "shared-view", "accept", f"{peer.url}/i/inv1", "--timeout", "3", "--json",
            "--root", str(cons.path), timeout=60)
    took = time.monotonic() - started
    assert r.code == 4, r.stdout + r.stderr
    got = json.loads(r.stdout)
    assert got["connection"]["id"] == "platform"  # the connection is recorded; its first pull was too slow
    assert got["pull"]["status"] == "unavailable" and "too slow" in got["pull"]["reason"]
    assert took < 3 + MARGIN, took


def test_a_git_share_that_trickles_ends_within_the_pull_timeout(tmp_path, cli, peer):
    cons = make_consumer(tmp_path)
    conn = files.Connection("platform", "file", "rightmemory://mf/platform", "human",
                            target={"kind": "git-file", "view_id": "platform", "git_url": f"{peer.url}/shares.git",
                                    "git_share_id": "platform", "accepted_from_url": f"{peer.url}/shares.git"})
    consumer.record(cons, conn, "Platform", "A Git share that trickles.")
    peer.routes["/shares.git/info/refs"] = (200, "application/x-git-upload-pack-advertisement", b"0" * 4000)
    peer.slow = True
    started = time.monotonic()
    r = cli("--headless", "shared-view", "pull", "--timeout", "3", "--json", "--root", str(cons.path), timeout=60)
    took = time.monotonic() - started
    assert r.code == 4, r.stdout + r.stderr
    got = json.loads(r.stdout)[0]
    assert got["status"] == "unavailable" and "too slow" in got["reason"], got
    assert took < 3 + MARGIN, took
    # git's own helper processes went with it: nothing of this clone is left running
    assert not _git_children_for(peer.url)


def _git_children_for(url: str) -> list[str]:
    """The processes still running with ``url`` in their command line, once they had 5 s to go."""
    deadline = time.monotonic() + 5
    while True:
        out = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout
        left = [line for line in out.splitlines() if url in line and not line.lstrip().startswith("Z")]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)
