"""Shared views over HTTP: the provider is a real uvicorn server on a free loopback port (in a
thread of the test process), the consumer the real client; tokens, limits, question views
answered by the provider's retrieve role (BM25 host, or a model through the fake provider),
and a hostile provider whose every refused package leaves the last import untouched."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest
from fake_provider import FakeProvider, call
from test_shared_views import (
    PROVIDER_MEMORY,
    ZIP_BAD,
    _rezip,
    commit_files,
    make_consumer,
    make_provider,
    tree_bytes,
)

from rmtui.engine.errors import UnavailableError, UsageError
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.retrieval.retrieve import retrieve
from rmtui.engine.views import consumer, files, package, provider
from rmtui.engine.views.server import ViewServer


@pytest.fixture
def served(tmp_path):
    root = make_provider(tmp_path)
    provider.create_file_view(root, "platform", ["platform"], exclude=["root-password"], title="Platform")
    provider.create_question_view(root, "ask-platform", title="Ask the platform team",
                                  instructions="Answer from the platform memory only.")
    provider.build(root, "platform")
    _, file_token = files.issue_token(root, "platform", "file", "frontend team")
    _, question_token = files.issue_token(root, "ask-platform", "question", "frontend team")
    srv = ViewServer(root, port=0)
    url = srv.start()
    yield root, url, file_token, question_token
    srv.stop()


def request(url: str, method: str, path: str, *, token: str | None = None, body: bytes | None = None,
            headers: dict | None = None) -> tuple[int, bytes]:
    p = urlsplit(url)
    conn = http.client.HTTPConnection(p.hostname, p.port, timeout=30)
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=body, headers=h)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


def test_http_end_to_end(tmp_path, served, cli):
    prov, url, token, _ = served
    cons = make_consumer(tmp_path)
    out = consumer.connect_http(cons, f"{url}/api/views/platform", token)
    assert out.pull.status == "pulled"
    conn = files.load_connections(cons.path)["platform"]
    assert conn.kind == "http-file" and conn.target["base_url"] == url and conn.target["credential_id"] == "platform"
    assert token not in (cons.path / "shared_views.toml").read_text()  # the token stays under .runtime/
    cred = cons.path / ".runtime/shared_views/credentials.toml"
    assert token in cred.read_text() and (cred.stat().st_mode & 0o777) == 0o600
    assert "{MF#platform}" in (cons.path / "MEMORY.md").read_text()
    res = retrieve(cons, "s1", "how do we deploy with helm")
    assert res.results[0]["id"] == "MF#platform/deploy-k8s"

    commit_files(prov, {"MEMORY.md": PROVIDER_MEMORY.replace("Helm 3.14", "Helm 3.16")})
    provider.build(prov, "platform")  # republished: the server serves the new build
    assert [r.status for r in consumer.pull(cons)] == ["pulled"]
    r = cli("--headless", "retrieve", "--json", "--root", str(cons.path), "--session", "s2", "which helm version")
    assert r.code == 0, r.stderr
    assert r.json()["results"][0]["id"] == "MF#platform/helm-ver" and "Helm 3.16" in r.json()["text"]


def test_cli_connect_with_token_env(tmp_path, served, cli):
    _, url, token, _ = served
    cons = make_consumer(tmp_path)
    r = cli("--headless", "shared-view", "connect", f"{url}/api/views/platform", "--token-env", "PLATFORM_TOKEN",
            "--json", "--root", str(cons.path), env={"PLATFORM_TOKEN": token})
    assert r.code == 0, r.stdout + r.stderr
    assert r.json()["pull"]["status"] == "pulled"
    listed = cli("--headless", "shared-view", "list", "--json", "--root", str(cons.path)).json()
    assert listed[0]["view_id"] == "platform" and listed[0]["status"] == "fresh" and listed[0]["items"] == 6
    bad = cli("--headless", "shared-view", "connect", f"{url}/api/views/platform", "--token-env", "NOPE",
              "--as", "other", "--json", "--root", str(cons.path), env={"NOPE": "wrong"})
    assert bad.code == 4 and "refused the token" in bad.json()["message"]
    assert "other" not in files.load_connections(cons.path)  # nothing recorded


def test_tokens_gate_every_route(served):
    _, url, file_token, question_token = served
    ok, body = request(url, "GET", "/api/views/platform/package", token=file_token)
    assert ok == 200 and body.startswith(b"PK")
    for token in (None, "", "wrong", question_token, file_token + "x"):
        status, body = request(url, "GET", "/api/views/platform/package", token=token)
        assert status == 401 and b"PK" not in body and b"deploy" not in body
    assert request(url, "GET", "/api/views/platform/package",
                   headers={"Authorization": f"Basic {file_token}"})[0] == 401
    assert request(url, "GET", "/api/views/unknown/package", token=file_token)[0] == 401  # no probing for names
    assert request(url, "GET", "/api/share/questions/ask-platform/ready", token=file_token)[0] == 401
    ask = json.dumps({"question": "how do we deploy?"}).encode()
    hdr = {"Content-Type": "application/json"}
    status, body = request(url, "POST", "/api/share/questions/ask-platform/ask", body=ask, headers=hdr)
    assert status == 401 and b"Helm" not in body
    status, body = request(url, "POST", "/api/share/questions/ask-platform/ask", token=file_token,
                           body=ask, headers=hdr)
    assert status == 401 and b"Helm" not in body


def test_request_limits(served):
    _, url, _, qt = served
    route = "/api/share/questions/ask-platform/ask"
    hdr = {"Content-Type": "application/json"}
    assert request(url, "POST", route, token=qt, body=b"x" * 20000, headers=hdr)[0] == 413
    assert request(url, "POST", route, token=qt, body=b"{not json", headers=hdr)[0] == 400
    assert request(url, "POST", route, token=qt, body=json.dumps({"question": "q" * 5000}).encode(),
                   headers=hdr)[0] == 400
    assert request(url, "POST", route, token=qt, body=json.dumps({"question": "x", "more": 1}).encode(),
                   headers=hdr)[0] == 400
    assert request(url, "POST", route, token=qt, body=b"question=x",
                   headers={"Content-Type": "application/x-www-form-urlencoded"})[0] == 415
    assert request(url, "GET", route, token=qt)[0] == 405


def test_serve_is_loopback_unless_allowed(tmp_path):
    root = make_provider(tmp_path)
    with pytest.raises(UsageError, match="not a loopback address"):
        ViewServer(root, host="0.0.0.0", port=0)


# -- question views ------------------------------------------------------------------------------------

def test_question_view_answered_by_provider_retrieval(tmp_path, served, cli):
    prov, url, _, qt = served
    cons = make_consumer(tmp_path)
    out = consumer.connect_http(cons, f"{url}/api/share/questions/ask-platform", qt)
    assert out.pull is None and "pull" not in out.to_json()
    assert "{MQ#ask-platform}" in (cons.path / "MEMORY.md").read_text()
    before = (cons.path / "MEMORY.md").read_bytes()
    answer = consumer.ask(cons, "ask-platform", "how do we deploy with helm")
    assert answer.status == "answered" and "deploy with Helm" in answer.answer
    assert answer.text.startswith("Shared question: ask-platform\nStatus: answered\nAnswer:\n")
    assert (cons.path / "MEMORY.md").read_bytes() == before  # shown, never written to memory
    r = cli("--headless", "shared-view", "ask", "ask-platform", "which", "helm", "version", "--root", str(cons.path))
    assert r.code == 0 and "Status: answered" in r.stdout and "Helm 3.14" in r.stdout
    with pytest.raises(UsageError, match="question view"):
        consumer.pull(cons, "ask-platform")
    # a question view is never asked inside retrieve: nothing of the provider comes back
    assert not [x for x in retrieve(cons, "s", "deploy with helm").results if x["id"].startswith("MF#")]


def test_question_view_answered_by_the_retrieve_model(tmp_path, served):
    prov, url, _, qt = served
    fake = FakeProvider()
    try:
        set_config_value(prov.path, "retrieve.model.model_id", "anthropic:fake-model")
        set_config_value(prov.path, "retrieve.model.api_base", fake.base("anthropic"))
        set_config_value(prov.path, "retrieve.model.kwargs", {"max_retries": 0})
        fake.push(call("grep", pattern="helm"), call("submit_answer", answer="Helm 3.14, to the prod cluster."))
        cons = make_consumer(tmp_path)
        consumer.connect_http(cons, f"{url}#question=ask-platform", qt)
        answer = consumer.ask(cons, "ask-platform", "which helm version?")
        assert answer.to_json() == {"view_id": "ask-platform", "status": "answered",
                                    "answer": "Helm 3.14, to the prod cluster.",
                                    "text": "Shared question: ask-platform\nStatus: answered\nAnswer:\n"
                                            "Helm 3.14, to the prod cluster.\n"}
        first = fake.seen[0]
        assert "Answer from the platform memory only." in first.system  # the private retriever.md
        assert "submit_answer" in first.tool_names and "edit" not in first.tool_names
    finally:
        fake.close()


def test_unreachable_provider_answers_unavailable(tmp_path, served):
    _, url, _, qt = served
    cons = make_consumer(tmp_path)
    consumer.connect_http(cons, f"{url}/api/share/questions/ask-platform", qt)
    files.save_credential(cons, "ask-platform", kind="http-question", token=qt, base_url="http://127.0.0.1:9",
                          view_id="ask-platform")
    conns = files.load_connections(cons.path)
    conns["ask-platform"].target["base_url"] = "http://127.0.0.1:9"
    (cons.path / "shared_views.toml").write_text(files.render_connections(conns))
    out = consumer.ask(cons, "ask-platform", "anything?")
    assert out.status == "unavailable" and out.text.splitlines()[1] == "Status: unavailable"
    assert out.text.splitlines()[2].startswith("Reason: ")


# -- a hostile provider -------------------------------------------------------------------------------

class StubProvider:
    """Serves whatever package bytes the test sets, to whoever asks (a hostile or broken provider)."""

    def __init__(self) -> None:
        import uvicorn
        from starlette.applications import Starlette
        from starlette.responses import Response
        from starlette.routing import Route

        self.data = b""

        async def pkg(request):
            return Response(self.data, media_type="application/zip")

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        self.sock = sock
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/api/views/{v}/package", pkg)]),
                                                    log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


def test_every_refused_package_keeps_the_last_import(tmp_path):
    prov = make_provider(tmp_path)
    provider.create_file_view(prov, "platform", ["platform"], exclude=["root-password"])
    valid = package.zip_package(provider.build(prov, "platform").package)
    stub = StubProvider()
    try:
        stub.data = valid
        cons = make_consumer(tmp_path)
        assert consumer.connect_http(cons, f"{stub.url}/api/views/platform", "any").pull.status == "pulled"
        imported = cons.path / ".runtime/shared_views/imports/platform"
        before = tree_bytes(imported)
        for case, (spec, rule) in sorted(ZIP_BAD.items()):
            stub.data = b"PK\x03\x04 not really" if spec is None else _rezip(valid, **spec)
            result = consumer.pull(cons, "platform")[0]
            assert result.status == "stale" and f"({rule})" in result.reason, (case, result)
            assert tree_bytes(imported) == before, case
            assert consumer.list_connections(cons)[0]["status"] == "stale"
        stub.data = valid
        again = consumer.pull(cons, "platform")[0]
        assert again.status == "pulled" and not again.changed
        assert consumer.list_connections(cons)[0]["status"] == "fresh"
    finally:
        stub.stop()


def test_connect_to_nothing_records_nothing(tmp_path):
    cons = make_consumer(tmp_path)
    with pytest.raises(UnavailableError, match="unreachable"):
        consumer.connect_http(cons, "http://127.0.0.1:9/api/views/platform", "t")
    assert not (cons.path / "shared_views.toml").exists()
    with pytest.raises(UsageError, match="names no view"):
        consumer.connect_http(cons, "http://127.0.0.1:9/somewhere", "t")


def _line(stream, seconds: float = 30.0) -> str:
    """One line of an unbuffered pipe, or what came of it by the deadline."""
    import select

    out = b""
    deadline = time.monotonic() + seconds
    while not out.endswith(b"\n"):
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        byte = stream.read(1) if ready else b""
        if not byte:
            break
        out += byte
    return out.decode()


def test_serve_command_in_its_own_process(tmp_path):
    import os
    import subprocess
    import sys

    root = make_provider(tmp_path)
    provider.create_file_view(root, "platform", ["platform"])
    provider.build(root, "platform")
    _, token = files.issue_token(root, "platform", "file")
    proc = subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "shared-view", "serve", "--port", "0",
                             "--root", str(root.path)], stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=dict(os.environ), bufsize=0)
    try:
        assert proc.stderr is not None
        line = _line(proc.stderr)
        assert "serving shared views at http://127.0.0.1:" in line, line
        url = line.split(" at ", 1)[1].split()[0]
        # the URL `shared-view connect` needs is printed, whole (a line that never comes fails, not hangs)
        assert _line(proc.stderr).split() == ["file", "view", "platform:", f"{url}/api/views/platform"]
        assert "shared-view connect URL --token-env NAME" in _line(proc.stderr)
        for _ in range(100):  # the socket is bound before the line is printed; uvicorn starts right after
            try:
                status, body = request(url, "GET", "/api/views/platform/package", token=token)
                break
            except OSError:
                time.sleep(0.05)
        assert status == 200 and body.startswith(b"PK")
        assert request(url, "GET", "/api/views/platform/package")[0] == 401
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0
