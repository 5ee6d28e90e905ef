"""The thin client of a warm retrieve answers exactly what the full CLI path answers, and hands
every call it cannot vouch for to the full path (docs/architecture.md, "Retrieval")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmtui.engine.memory.config import set_config_value
from rmtui.engine.memory.roots import init_root
from rmtui.engine.retrieval.modelhost.client_settings import RECORD
from rmtui.engine.retrieval.modelhost.embed_client import stop_local_service
from rmtui.thin_client import _Fallback, _parse
from tests.retrieve_kit import write_small_root

THIN = "rmtui: trace: thin client answered"


def _cli(env: dict, *args: str, thin: bool = True) -> subprocess.CompletedProcess:
    env = {**env, "RMTUI_CLIENT_TRACE": "1", "RMTUI_THIN_CLIENT": "1" if thin else "0"}
    return subprocess.run([sys.executable, "-m", "rmtui", "--headless", *args], capture_output=True,
                          text=True, env=env, timeout=180)


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """Two copies of one root (same files, same history) and a warm service that answered a
    full-path retrieve for each, so both hold the settings record. Shared by this module's
    tests (one service start); the last tests edit root a."""
    tmp_path = tmp_path_factory.mktemp("thin")
    services = tmp_path / "services"
    env = {**os.environ, "RMTUI_SERVICE_DIR": str(services)}
    root = init_root(tmp_path / "a")
    write_small_root(root)
    set_config_value(root.path, "embedding.idle_timeout_seconds", 120)
    set_config_value(root.path, "embedding.dense_budget_seconds", 120)
    for session in ("warm-up-1", "warm-up-2"):  # the first starts the service, the second is delegated
        p = _cli(env, "retrieve", "--root", str(root.path), "--session", session, "who owns billing", thin=False)
        assert p.returncode == 0, p.stderr
    assert (root.path / RECORD).is_file()
    shutil.copytree(root.path, tmp_path / "b", symlinks=True)
    yield env, root.path, tmp_path / "b"
    for d in services.iterdir():
        stop_local_service(d)


def test_thin_and_full_paths_print_the_same_bytes(warm):
    env, a, b = warm
    steps = [("retrieve", "--session", "agent-7", "who owns billing"),
             ("--json", "retrieve", "--session", "agent-7", "--top", "2", "who", "owns", "billing"),
             ("retrieve", "--json", "--session", "agent-7", "--include-returned", "does anyone have a dog"),
             ("retrieve", "--session", "agent-7", "--no-pending", "--include-returned", "who owns billing")]
    for step in steps:
        full = _cli(env, "--root", str(a), *step, thin=False)
        thin = _cli(env, "--root", str(b), *step)
        assert full.returncode == thin.returncode == 0, (full.stderr, thin.stderr)
        assert THIN not in full.stderr and THIN in thin.stderr, thin.stderr
        assert thin.stdout == full.stdout and thin.stdout.strip()
        if "--json" in step:  # (the second asks again in the same session: nothing new to deliver)
            assert json.loads(thin.stdout)["via"] == "local-service"
        if "dog" in step[-1]:
            assert json.loads(thin.stdout)["results"][0]["id"] == "carol-dog"


#: What the thin path must not import: together ~30 ms of a call whose budget over a bare
#: interpreter is ~25 (docs/architecture.md, "The thin client").
COSTLY = ("re", "json", "pathlib", "hashlib", "socket", "enum", "argparse", "tomlkit", "typing", "numpy")


def test_the_thin_path_imports_nothing_costly(warm):
    env, _, b = warm
    for args in (("--json",), ()):
        p = subprocess.run([sys.executable, "-X", "importtime", "-m", "rmtui", "--headless", "retrieve", *args,
                            "--root", str(b), "--session", f"imports{len(args)}", "who owns billing"],
                           capture_output=True, text=True, env={**env, "RMTUI_CLIENT_TRACE": "1"}, timeout=180)
        assert p.returncode == 0 and THIN in p.stderr, p.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines()
                    if line.startswith("import time:") and "|" in line}
        assert "rmtui.thin_client" in imported
        assert sorted(imported.intersection(COSTLY)) == []
        assert "billing" in p.stdout.lower()


def test_the_service_refuses_a_render_it_does_not_know(warm):
    from rmtui.thin_client import post_local

    env, _, b = warm
    (state,) = [json.loads(f.read_text()) for f in Path(env["RMTUI_SERVICE_DIR"]).glob("*/state.json")]
    body = {"root": str(b), "session": "s-render", "need": "who owns billing", "top": None,
            "include_returned": False}
    status, answer = post_local(state["url"], state["token"], "/rmtui/retrieve", {**body, "render": "xml"})
    assert status == 422 and "render" in answer["detail"]
    status, answer = post_local(state["url"], state["token"], "/rmtui/retrieve", {**body, "render": "text"})
    assert status == 200 and answer["ok"] and "billing" in answer["stdout"].lower() and answer["stderr"] == ""


def test_a_refusal_by_the_service_is_printed_by_the_full_path(warm):
    env, a, _ = warm
    full = _cli(env, "retrieve", "--root", str(a), "--session", "s1", " ", thin=False)
    thin = _cli(env, "retrieve", "--root", str(a), "--session", "s1", " ")
    assert full.returncode == thin.returncode == 2 and "need must not be empty" in thin.stderr
    assert thin.stdout == full.stdout and "full path (the service did not answer" in thin.stderr


def test_what_the_thin_client_cannot_vouch_for_takes_the_full_path(warm):
    env, a, _ = warm
    # an unusual spelling of an option: the full parser's business
    p = _cli(env, "retrieve", "--root", str(a), "--session=s1", "who owns billing")
    assert p.returncode == 0 and THIN not in p.stderr and "bob-role" in p.stdout
    # an edited configuration: validated again by the full path, recorded, then thin again
    set_config_value(a, "retrieve.top_k", 2)
    p = _cli(env, "retrieve", "--json", "--root", str(a), "--session", "s2", "who owns billing")
    assert p.returncode == 0 and "full path (settings not recorded" in p.stderr
    p = _cli(env, "retrieve", "--json", "--root", str(a), "--session", "s3", "who owns billing")
    assert p.returncode == 0 and THIN in p.stderr and len(json.loads(p.stdout)["results"]) == 2
    # a broken configuration is never served: the full path refuses it, as it always did
    (a / "rmtui.toml").write_text("[retrieve\n")
    p = _cli(env, "retrieve", "--json", "--root", str(a), "--session", "s4", "who owns billing")
    assert p.returncode == 2 and THIN not in p.stderr and "malformed TOML" in p.stderr
    assert json.loads(p.stdout)["error"] == "bad_input"


@pytest.mark.parametrize("argv", [
    ["retrieve", "--session", "s", "q"],                          # not headless: the full path says so
    ["--headless", "retrieve", "q"],                              # no session: a usage error
    ["--headless", "retrieve", "--sess", "s", "q"],               # an abbreviation argparse accepts
    ["--headless", "retrieve", "--session", "s", "--top", "-1", "q"],
    ["--headless", "retrieve", "--session", "s", "--top", "x", "q"],
    ["--headless", "retrieve", "--session", "s", "--session", "t", "q"],
    ["--headless", "retrieve", "a", "--json", "b", "--session", "s"],  # argparse refuses the second run of words
    ["--headless", "--session", "s", "retrieve", "q"],            # --session before the command
    ["--headless", "retrieve", "--session", "s", "--profile", "p", "q"],
    ["--headless", "retrieve", "--session", "s", "-h"],
    ["--headless", "retrieve", "--session", "s", "q\udcff"],      # undecodable bytes in argv
    ["--headless", "status"],
])
def test_argv_the_thin_client_does_not_read(argv):
    with pytest.raises(_Fallback):
        _parse(argv)


def test_argv_the_thin_client_reads():
    opts = _parse(["--json", "--headless", "--root", "/r", "retrieve", "--session", "s", "--top", "3",
                   "--no-pending", "who", "owns", "billing", "--include-returned"])
    assert opts == {"json": True, "root": "/r", "session": "s", "top": 3, "include_returned": True,
                    "include_pending": False, "need": "who owns billing"}
    assert _parse(["--headless", "retrieve", "--session", "s", "x"])["need"] == "x"


def _one_answer_server(answer: bytes):
    """A real TCP server on a free local port that reads one request and sends ``answer`` as is."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(
                b"content-length")))
            while len(rest) < length:
                rest += conn.recv(4096)
            got.append(head + b"\r\n\r\n" + rest)
            conn.sendall(answer)
        srv.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}", got


def test_post_local_sends_one_json_request_and_reads_the_answer():
    from rmtui.thin_client import post_local

    body = json.dumps({"ok": True, "data": {"n": "é"}}).encode()
    url, got = _one_answer_server(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                                  + str(len(body)).encode() + b"\r\n\r\n" + body)
    status, answer = post_local(url, "tok-1", "/rmtui/retrieve", {"need": "ünïcode"})
    assert (status, answer) == (200, {"ok": True, "data": {"n": "é"}})
    head, _, sent = got[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /rmtui/retrieve HTTP/1.1\r\n") and b"Authorization: Bearer tok-1" in head
    assert json.loads(sent) == {"need": "ünïcode"}


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",  # chunked
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{}",  # no length
    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\n{}",  # the length twice
    b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999\r\n\r\n{}",  # over the bound
    b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{}",  # cut short
    b"SSH-2.0-OpenSSH\r\n\r\n",  # not HTTP
    b"",  # closed without a word
])
def test_post_local_hands_answers_it_does_not_read_to_the_full_path(answer):
    from rmtui.thin_client import post_local

    url, _ = _one_answer_server(answer)
    with pytest.raises(_Fallback):
        post_local(url, "tok-1", "/rmtui/retrieve", {"need": "x"})


@pytest.mark.parametrize("url,token", [("https://127.0.0.1:9", "t"), ("http://10.0.0.1:80", "t"),
                                       ("http://localhost:9", "t"), ("http://127.0.0.1:9/x", "t"),
                                       ("http://127.0.0.1:9", "a\r\nX: y")])
def test_post_local_refuses_other_hosts_and_header_breaking_tokens(url, token):
    from rmtui.thin_client import post_local

    with pytest.raises(_Fallback):
        post_local(url, token, "/rmtui/retrieve", {})


def _wait_for(check, seconds: float = 90.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def test_roots_with_sync_on_or_a_view_take_the_thin_path_and_the_service_starts_their_upkeep(warm, tmp_path):
    """Sync and shared views no longer send a retrieval down the full path: the service it
    reaches starts the pull check (and the views' refresh) in the background."""
    env, _, b = warm
    c = tmp_path / "c"
    shutil.copytree(b, c, symlinks=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@l"]
    subprocess.run([*git, "add", "-A"], cwd=c, check=True, capture_output=True)
    subprocess.run([*git, "commit", "-qm", "small root"], cwd=c, check=True, capture_output=True)
    bare = tmp_path / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    subprocess.run(["git", "remote", "add", "origin", bare.as_uri()], cwd=c, check=True)
    subprocess.run(["git", "push", "-q", "-u", "origin", "main"], cwd=c, check=True, capture_output=True)
    set_config_value(c, "sync.enabled", True)
    state, stamp = c / ".runtime" / "sync" / "state.json", c / ".runtime" / "cache" / "retrieve-upkeep.stamp"

    def pull_checked() -> bool:
        """The upkeep checked the upstream and is finished (its lock is free)."""
        from rmtui.engine.locks import try_lock

        try:
            done = {"last_pull_check_at", "last_successful_pull_at"} <= set(json.loads(state.read_text()))
        except (OSError, ValueError):
            return False
        fd = try_lock(c / ".runtime" / "cache" / "retrieve-upkeep.lock")
        if fd is not None:
            os.close(fd)
        return done and fd is not None

    p = _cli(env, "retrieve", "--root", str(c), "--session", "s1", "who owns billing")
    assert p.returncode == 0 and "full path (settings not recorded" in p.stderr, p.stderr  # a new configuration
    assert _wait_for(pull_checked)
    state.unlink()
    stamp.unlink(missing_ok=True)
    p = _cli(env, "retrieve", "--root", str(c), "--session", "s2", "who owns billing")
    assert p.returncode == 0 and THIN in p.stderr and "bob-role" in p.stdout, p.stderr
    assert _wait_for(pull_checked)  # the service started the pull check for the thin call
    (c / "shared_views.toml").write_text("")  # a view connection file: no longer the full path's
    p = _cli(env, "retrieve", "--root", str(c), "--session", "s3", "who owns billing")
    assert p.returncode == 0 and THIN in p.stderr, p.stderr
