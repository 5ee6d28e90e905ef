"""The MCP fork server: a server that ran a while leaves one behind; the next ``rmtui mcp``
is its child, answers exactly as the full path does, and ends with its caller; whatever the
fork server cannot vouch for is refused with the rule named, and the call takes the full path.

Real processes throughout: the official MCP client over stdio, a real Unix socket with the
caller's descriptors passed over it, real signals.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from rmtui import mcp_forkserver
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.retrieval.modelhost import service_lookup
from rmtui.engine.retrieval.modelhost.embed_client import stop_local_service

FORKED = "mcp: forked from the fork server"
INIT = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n')


@pytest.fixture
def forkserver(monkeypatch):
    """The fork server on, in a short directory of its own (a socket path holds ~100 bytes)."""
    services = tempfile.mkdtemp(prefix="rmfs", dir="/tmp")
    monkeypatch.setenv("RMTUI_SERVICE_DIR", services)
    monkeypatch.setenv("RMTUI_MCP_FORKSERVER", "1")
    monkeypatch.setenv("RMTUI_CLIENT_TRACE", "1")
    yield Path(services)
    mcp_forkserver.stop()
    for state_dir in Path(services).iterdir():  # the warm services the servers launched
        if not state_dir.name.startswith("mcp-forkserver-"):
            stop_local_service(state_dir)
    shutil.rmtree(services, ignore_errors=True)


def socket_path() -> Path:
    return Path(mcp_forkserver.server_dir(), "sock")


def wait_until(condition, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def launched() -> Path:
    mcp_forkserver.launch()
    wait_until(socket_path().exists, what="the fork server's socket")
    return Path(mcp_forkserver.server_dir())


def gone(pid: int) -> bool:
    return not mcp_forkserver._running(pid)


@asynccontextmanager
async def session(root, errlog: Path):
    env = {k: v for k, v in os.environ.items() if k.startswith(("HOME", "GIT_", "PATH", "RMTUI", "HF_"))}
    params = StdioServerParameters(command=sys.executable, env=env,
                                   args=["-m", "rmtui", "--headless", "mcp", "--root", str(root.path)])
    with errlog.open("w") as err:
        async with Client(stdio_client(params, errlog=err), read_timeout_seconds=120) as client:
            yield client


def text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def exercise(client, session_id: str) -> dict:
    """What an agent sees of a server: its tools, a status, a retrieve and a submission."""
    tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    status = json.loads(text(await client.call_tool("rmtui_status", {})))
    found = text(await client.call_tool("rightmemory_retrieve", {"session_id": session_id,
                                                                 "need": "how are tests run"}))
    saved = await client.call_tool("rightmemory_submit_update", {"session_id": session_id,
                                                                 "evidence": f"evidence from {session_id}\n"})
    refused = await client.call_tool("rightmemory_submit_update", {"session_id": "a/b", "evidence": "x"})
    return {"tools": tools, "nodes": status["items"]["nodes"], "valid": status["valid"], "retrieved": found,
            "saved": (saved.is_error, saved.content), "refused": (refused.is_error, text(refused))}


async def test_a_server_leaves_a_fork_server_and_the_next_start_is_its_child_and_answers_the_same(
        memory_root, forkserver, tmp_path, monkeypatch, cli):
    assert cli("--headless", "retrieve-index", "--root", str(memory_root.path)).code == 0  # both see one index
    monkeypatch.setenv("RMTUI_MCP_FORKSERVER_DELAY", "0.2")
    async with session(memory_root, tmp_path / "full.txt") as client:
        full = await exercise(client, "s-full")
        await asyncio.to_thread(wait_until, socket_path().exists, 60, "the fork server the server launched")
    assert FORKED not in (tmp_path / "full.txt").read_text()
    fork_dir = Path(mcp_forkserver.server_dir())
    assert oct(fork_dir.stat().st_mode & 0o777) == "0o700" and oct(socket_path().stat().st_mode & 0o777) == "0o600"

    async with session(memory_root, tmp_path / "forked.txt") as client:
        forked = await exercise(client, "s-forked")
    assert FORKED in (tmp_path / "forked.txt").read_text()
    assert forked == full and "`pytest-quiet` the project runs its tests with pytest -q" in forked["retrieved"]
    assert full["refused"][0] and "path separators" in full["refused"][1]
    with EvidenceQueue(memory_root) as q:  # the child wrote to the caller's root, as the full path does
        assert sorted((i.session, i.text) for i in q.list()) == [("s-forked", "evidence from s-forked\n"),
                                                                  ("s-full", "evidence from s-full\n")]


def start_caller(root) -> tuple[subprocess.Popen, int]:
    """A new ``rmtui mcp`` answering ``initialize``; its process and the child serving it."""
    proc = subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "mcp", "--root", str(root.path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    trace = proc.stderr.readline().decode()
    assert FORKED in trace, trace
    child = int(trace.rsplit("child ", 1)[1].rstrip(")\n"))
    proc.stdin.write(INIT)
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["result"]["serverInfo"]["name"] == "rmtui"
    return proc, child


def test_a_child_ends_with_its_caller_however_the_caller_ends(memory_root, forkserver):
    launched()
    proc, child = start_caller(memory_root)  # the agent closes the server's stdin: both end, status 0
    proc.stdin.close()
    assert proc.wait(30) == 0
    wait_until(lambda: gone(child), 10, "the child to end")

    proc, child = start_caller(memory_root)  # the agent stops it: the signal reaches the child
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 128 + signal.SIGTERM
    wait_until(lambda: gone(child), 10, "the child to end after SIGTERM")

    proc, child = start_caller(memory_root)  # the caller is killed outright: its child notices and ends
    proc.kill()
    proc.wait(30)
    wait_until(lambda: gone(child), 10, "the child to end after its caller was killed")


def raw_request(header: bytes, body: bytes = b"", fds=(0, 1, 2)) -> bytes:
    """Send a request by hand; what the fork server answers before it closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(socket_path()))
        got = b""
        try:  # the server may close as soon as it has read enough to refuse
            socket.send_fds(s, [header], list(fds))
            s.sendall(body)
            s.shutdown(socket.SHUT_WR)  # all there is: a short body is not waited for
            while chunk := s.recv(4096):
                got += chunk
        except (BrokenPipeError, ConnectionResetError):
            pass
        return got


def request(argv, cwd="/", env=None) -> tuple[bytes, bytes]:
    body = json.dumps({"argv": argv, "cwd": cwd, "env": env if env is not None else {"HOME": "/"},
                       **mcp_forkserver.process_settings()}).encode()
    return b"RMTUI-MCP/1 %d\n" % len(body), body


def test_the_fork_server_refuses_what_it_cannot_vouch_for_and_the_call_takes_the_full_path(memory_root,
                                                                                           forkserver):
    fork_dir = launched()
    with open(os.devnull, "rb") as null:
        for header, body, fds, rule in (
                (b"HELLO\n", b"", (0, 1, 2), "the header is RMTUI-MCP/1"),
                (*request(["--headless", "mcp"]), (null.fileno(),), "exactly three descriptors"),
                (*request(["--headless", "mcp"]), (0, 1, 2, null.fileno()), "exactly three descriptors"),
                (*request(["--headless", "mcp"]), (0, 1, 2, 0, 1, 2, 0), "exactly three descriptors"),
                (*request(["--headless", "status"]), (0, 1, 2), "argv is a list of strings naming the mcp command"),
                (*request(["--headless", "mcp"], cwd="relative"), (0, 1, 2), "cwd is an absolute path"),
                (*request(["--headless", "mcp"], env={"A=B": "x"}), (0, 1, 2), "env maps names to strings"),
                (b"RMTUI-MCP/1 5\n", b"[1,2", (0, 1, 2), "the body is as long as its header says"),
                (b"RMTUI-MCP/1 4\n", b"\xff\xfe[]", (0, 1, 2), "not UTF-8 JSON")):
            assert raw_request(header, body, fds) == b"", rule  # no child: nothing but the closed connection
            log = (fork_dir / "log").read_text()
            assert "refused a request: " in log and rule in log, (rule, log)

    # a fork server's directory others could enter is not trusted: the call is served in its own process
    fork_dir.chmod(0o755)
    proc = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "mcp", "--root", str(memory_root.path)],
                          input=INIT, capture_output=True, timeout=120)
    assert proc.returncode == 0 and b'"serverInfo"' in proc.stdout
    assert FORKED not in proc.stderr.decode()
    fork_dir.chmod(0o700)


def test_check_request_names_each_rule():
    ok = {"argv": ["--headless", "mcp"], "cwd": "/", "env": {"HOME": "/"}, **mcp_forkserver.process_settings()}
    limits = ok["rlimits"]
    with open(os.devnull) as null:
        fds = [null.fileno()] * 3
        assert mcp_forkserver.check_request(json.dumps(ok).encode(), fds) == ok
        for change, rule in (({"extra": 1}, "exactly argv, cwd, env, umask, nice and rlimits"),
                             ({"umask": 0o1777}, "umask is a file mode creation mask"),
                             ({"umask": True}, "umask is a file mode creation mask"),
                             ({"nice": 20}, "nice is a nice value"),
                             ({"rlimits": {}}, "rlimits names exactly this system's resource limits"),
                             ({"rlimits": {**limits, "RLIMIT_BOGUS": [1, 1]}}, "rlimits names exactly"),
                             ({"rlimits": {**limits, "RLIMIT_NOFILE": [9, 8]}}, "soft not over hard"),
                             ({"rlimits": {**limits, "RLIMIT_NOFILE": [-1, 8]}}, "soft not over hard"),
                             ({"rlimits": {**limits, "RLIMIT_NOFILE": [1.5, 8]}}, "whole numbers"),
                             ({"rlimits": {**limits, "RLIMIT_NOFILE": [-2, 8]}}, "whole numbers"),
                             ({"argv": "mcp"}, "argv is a list"),
                             ({"argv": ["mcp", 3]}, "argv is a list"),
                             ({"cwd": "/x\0y"}, "cwd is an absolute path"),
                             ({"env": {"": "x"}}, "env maps names"),
                             ({"env": {"A": 1}}, "env maps names"),
                             ({"env": {"A": "x\0"}}, "env maps names")):
            with pytest.raises(mcp_forkserver.Refused, match=rule):
                mcp_forkserver.check_request(json.dumps({**ok, **change}).encode(), fds)
        with pytest.raises(mcp_forkserver.Refused, match="exactly three descriptors"):
            mcp_forkserver.check_request(json.dumps(ok).encode(), fds[:2])
    with pytest.raises(OSError):  # a closed descriptor is no stream
        mcp_forkserver.check_request(json.dumps(ok).encode(), [10_000, 10_001, 10_002])


def test_other_code_means_another_fork_server(forkserver, monkeypatch):
    here = mcp_forkserver.server_dir()
    monkeypatch.setattr(service_lookup, "_CODE_STAMP", "an upgraded install")
    assert mcp_forkserver.server_dir() != here and Path(here).parent == Path(mcp_forkserver.server_dir()).parent


def test_one_fork_server_per_directory_and_it_leaves_when_idle(forkserver):
    fork_dir = launched()
    again = subprocess.run([sys.executable, "-m", "rmtui.mcp_forkserver_main", str(fork_dir), "0.5"], timeout=60)
    assert again.returncode == 0 and socket_path().exists()  # the lock holder serves on
    assert mcp_forkserver.stop(str(fork_dir)) and not socket_path().exists()

    idle = subprocess.run([sys.executable, "-m", "rmtui.mcp_forkserver_main", str(fork_dir), "0.5"], timeout=60)
    assert idle.returncode == 0 and not socket_path().exists()  # half a second without a caller: gone


def rpc(proc: subprocess.Popen, message: dict) -> dict | None:
    """One JSON-RPC message to a stdio MCP server; its answer when the message has an id."""
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline()) if "id" in message else None


def host_session(root, settle, check=None, env=None) -> tuple[dict, int | None]:
    """An ``rmtui mcp`` started as a host starts it (``settle`` in the new process), a
    submission and a guidance capture through it: the modes of the files it made, and the
    pid of the fork server's child that served it (``check``-ed; None: the full path served it)."""
    before = {p for p in root.path.rglob("*") if ".git" not in p.parts}
    proc = subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "mcp", "--root", str(root.path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=settle, env=env)
    child = None
    try:
        if check is not None:
            trace = proc.stderr.readline().decode()
            assert FORKED in trace, trace
            child = int(trace.rsplit("child ", 1)[1].rstrip(")\n"))
            check(child)
        assert rpc(proc, {"id": 1, "method": "initialize", "params": json.loads(INIT)["params"]})["result"]
        rpc(proc, {"method": "notifications/initialized"})
        for n, (tool, session_id) in enumerate((("rightmemory_submit_update", "s-umask"),
                                                 ("rightmemory_capture_guidance", "s-umask"))):
            done = rpc(proc, {"id": 2 + n, "method": "tools/call", "params": {
                "name": tool, "arguments": {"session_id": session_id, "evidence": "always run ruff first\n"}}})
            assert not done["result"].get("isError"), done
    finally:
        proc.stdin.close()
        assert proc.wait(30) == 0
    return {str(p.relative_to(root.path)): oct(p.stat().st_mode & 0o777) for p in root.path.rglob("*")
            if p.is_file() and ".git" not in p.parts and p not in before}, child


def test_a_child_runs_with_its_callers_umask_limits_and_nice_value(memory_root, forkserver, tmp_path):
    import resource

    from rmtui.engine.memory.roots import MemoryRoot

    launched()
    other = MemoryRoot(shutil.copytree(memory_root.path, tmp_path / "other", symlinks=True))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    nice = min(os.getpriority(os.PRIO_PROCESS, 0) + 5, 19)

    def as_the_host_sets_it() -> None:  # what an agent's host may set for the servers it starts
        os.umask(0o077)
        resource.setrlimit(resource.RLIMIT_NOFILE, (333, hard))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.setpriority(os.PRIO_PROCESS, 0, nice)

    def in_the_child(child: int) -> None:
        status = Path(f"/proc/{child}/status").read_text()
        assert "\nUmask:\t0077\n" in status, status
        limits = Path(f"/proc/{child}/limits").read_text().splitlines()
        assert any(line.startswith("Max open files") and line.split()[3:5] == ["333", str(hard)]
                   for line in limits), limits
        assert any(line.startswith("Max core file size") and line.split()[4:6] == ["0", "0"] for line in limits)
        assert int(mcp_forkserver._proc_stat(child)[16]) == nice

    forked, child = host_session(memory_root, as_the_host_sets_it, in_the_child)
    assert child is not None
    for name in (".runtime/state.sqlite3", ".runtime/memory.lock", "AGENT_GUIDANCE_INBOX.md"):
        assert forked.get(name) == "0o600", forked
    # every file the child made has the mode the full path gives it under the same umask
    full, _ = host_session(other, as_the_host_sets_it, None, env={**os.environ, "RMTUI_MCP_FORKSERVER": "0"})
    assert full == forked


def test_a_child_that_cannot_take_on_its_callers_limits_leaves_the_call_to_the_full_path(forkserver):
    """A caller's limit the kernel will not grant the child (above its hard limit, or above
    ``fs.nr_open`` even for root) fails in the child before the caller's streams are touched:
    no ``pid`` line, so the caller takes the full path."""
    fork_dir = launched()
    body = json.loads(request(["--headless", "mcp"])[1])
    body["rlimits"]["RLIMIT_NOFILE"] = [1 << 40, 1 << 40]
    raw = json.dumps(body).encode()
    assert raw_request(b"RMTUI-MCP/1 %d\n" % len(raw), raw) == b""
    wait_until(lambda: "cannot take on its caller's process settings" in (fork_dir / "log").read_text(), 10,
               "the child's refusal in the log")
