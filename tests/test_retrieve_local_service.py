"""The local warm service: started on demand by `retrieve`, shared, one at a time, idle exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from rmtui.engine.memory.config import set_config_value
from tests.retrieve_kit import service_pids as _services
from tests.retrieve_kit import write_small_root


def test_retrieve_starts_one_warm_service_reuses_it_and_it_exits_when_idle(root, tmp_path):
    write_small_root(root)
    set_config_value(root.path, "embedding.idle_timeout_seconds", 6)
    set_config_value(root.path, "embedding.dense_budget_seconds", 90)
    services = tmp_path / "services"
    env = {**os.environ, "RMTUI_SERVICE_DIR": str(services)}
    argv = [sys.executable, "-m", "rmtui", "--headless", "retrieve", "--json", "--root", str(root.path),
            "--top", "1"]
    # two agents ask at once with no service running: exactly one service starts
    procs = [subprocess.Popen(argv + ["--session", f"s{i}", "who owns billing"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env, text=True) for i in range(2)]
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        data = json.loads(out)
        assert data["mode"] == "hybrid", data["warnings"]
        assert data["results"][0]["id"] == "bob-role"
    pids = _services(services)
    assert len(pids) == 1
    (state_dir,) = [d for d in services.iterdir() if d.is_dir()]
    state = json.loads((state_dir / "state.json").read_text())
    assert state["pid"] == pids[0] and state["url"].startswith("http://127.0.0.1:")
    assert (state_dir / "state.json").stat().st_mode & 0o777 == 0o600  # holds the token

    # a later call reuses the warm service, which runs the retrieval itself: the CLI
    # process then imports neither numpy nor the corpus, and the answer is the engine's own
    probe = ("import sys, runpy; sys.argv = ['rmtui'] + sys.argv[1:]\n"
             "try:\n    runpy.run_module('rmtui', run_name='__main__')\n"
             "except SystemExit as e:\n    code = e.code\n"
             "sys.stderr.write('NUMPY=%s' % ('numpy' in sys.modules))\nsys.exit(code)\n")
    p = subprocess.run([sys.executable, "-c", probe, *argv[3:], "--session", "s3", "does anyone have a dog"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["results"][0]["id"] == "carol-dog" and data["via"] == "local-service"
    assert "NUMPY=False" in p.stderr
    assert _services(services) == pids
    # errors travel back with their exit code: an empty need is bad input (2)
    bad = subprocess.run(argv + ["--session", "s3", " "], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "need must not be empty" in bad.stderr

    # idle: it exits by itself and clears its state
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _services(services):
        time.sleep(0.25)
    assert _services(services) == []
    assert not (state_dir / "state.json").exists()


def test_a_service_started_by_other_code_is_not_reused(monkeypatch, tmp_path):
    """After an upgrade or an edit of the engine, the CLI must not hand its retrieval to a warm
    service still running the old ranking: the service's folder is keyed by the code too."""
    from rmtui.engine.retrieval.modelhost import service_lookup, service_state

    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(tmp_path))
    stamp = service_state.code_stamp()
    assert len(stamp) == 64 and stamp == service_state.code_stamp()  # stable within one code
    here = service_state.service_dir(tmp_path / "model", None)
    monkeypatch.setattr(service_lookup, "_CODE_STAMP", "0" * 64)
    assert service_state.service_dir(tmp_path / "model", None) != here


def test_a_service_answer_of_the_wrong_shape_is_not_used_and_an_error_keeps_its_exit_code(root, monkeypatch,
                                                                                          tmp_path):
    """What the warm service answers is read only in the shape the engine writes; anything else
    leaves the retrieval to the caller's own process, and a reported error is raised as it was."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import pytest

    from rmtui.engine.errors import EngineError
    from rmtui.engine.retrieval.modelhost import embed_client, service_state

    answers: list[object] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server hook's name
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps(answers[0]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("RMTUI_SERVICE_DIR", str(tmp_path / "services"))
        cfg = root.config()
        state_dir = service_state.service_dir(service_state.resolve_model_path(None, None), None)
        state_dir.mkdir(parents=True, mode=0o700)  # a state folder is private (the folder rule)
        (state_dir / "state.json").write_text(json.dumps(
            {"url": f"http://127.0.0.1:{server.server_address[1]}", "token": "t", "pid": os.getpid()}))
        for wrong in ([1, 2], {"ok": "yes", "data": {}, "text": ""}, {"ok": True, "text": "memory"},
                      {"ok": True, "data": {}, "text": None}, {"ok": False, "exit_code": "2", "error": {}},
                      {"ok": False, "exit_code": 2, "error": "no"}):
            answers[:] = [wrong]
            assert embed_client.delegate_retrieve(root.path, cfg, "s1", "billing", top=None,
                                                  include_returned=False) is None, wrong
        answers[:] = [{"ok": False, "exit_code": 3, "error": {"error": "conflict", "message": "root is busy"}}]
        answer = embed_client.delegate_retrieve(root.path, cfg, "s1", "billing", top=None, include_returned=False)
        with pytest.raises(EngineError, match="root is busy") as caught:
            embed_client.delegated_result(answer)
        assert caught.value.exit_code == 3 and caught.value.kind == "conflict"
        answers[:] = [{"ok": False, "exit_code": 1, "error": {"message": "failed", "details": ["not", "a", "map"]}}]
        answer = embed_client.delegate_retrieve(root.path, cfg, "s1", "billing", top=None, include_returned=False)
        with pytest.raises(EngineError) as caught:
            embed_client.delegated_result(answer)
        assert caught.value.details == {}  # details of the wrong type are dropped, never passed on
    finally:
        server.shutdown()


def test_the_process_that_launched_a_service_can_launch_another_once_it_stops(monkeypatch, tmp_path):
    """A stopped service still exiting (its lock released, its process not yet gone) is not
    "starting": the process that launched it (the MCP server, a bench) starts a new one."""
    from rmtui.engine.retrieval.modelhost import embed_client
    from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path

    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(tmp_path / "services"))
    model = resolve_model_path(None, None)
    state_dir = embed_client.service_dir(model, None)
    seen = []
    try:
        for _ in range(2):
            assert embed_client.start_local_service(model, None, idle_timeout=60)
            deadline = time.monotonic() + 60
            while embed_client.read_state(state_dir) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            state = embed_client.read_state(state_dir)
            assert state is not None, (state_dir / "service.log").read_text()
            seen.append(state["pid"])
            assert embed_client.stop_local_service(state_dir)
    finally:
        embed_client.stop_local_service(state_dir)
    assert seen[0] != seen[1]


def test_stopping_a_service_that_ignores_sigterm_kills_it_and_removes_its_state(tmp_path):
    """A hung service (here: one that ignores SIGTERM and keeps its lock) is killed after the
    grace period, so a stop never leaves it holding its port, memory and folder."""
    import signal

    from rmtui.engine.retrieval.modelhost import embed_client

    folder = tmp_path / "service"
    folder.mkdir(mode=0o700)
    folder.chmod(0o700)
    hung = ("import fcntl, os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600); fcntl.flock(fd, fcntl.LOCK_EX); "
            "print('locked', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", hung, str(folder / "alive.lock")], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        state = folder / "state.json"
        state.write_text(json.dumps({"pid": proc.pid, "url": "http://127.0.0.1:9", "token": "t"}))
        state.chmod(0o600)
        assert embed_client.stop_local_service(folder, timeout=0.5)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        assert not state.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
