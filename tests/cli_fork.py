"""The tests' CLI calls, forked from a process that has imported the CLI once.

Why: the suite starts ``python -m rmtui`` about 1,300 times, and each start spends most of its
CPU importing the same modules (GitPython, the engine, the commands) before it does anything.
As the MCP fork server does for ``rmtui --headless mcp`` (docs/architecture.md, "The MCP fork
server"), one resident process per test worker imports them once and forks a child per call.
The child is a real process of its own: it takes the call's arguments, working directory,
environment and three pipes, runs the CLI's ``main`` as ``python -m rmtui`` would (exit code,
``atexit`` handlers and non-daemon threads included), and is waited for by a monitor process,
so the caller gets the exact exit status ``subprocess.run`` would give (``-9`` for a process
killed by SIGKILL). The caller reads both pipes until they close, as ``subprocess.run`` does:
a grandchild that keeps the CLI's stdout open holds the call here too.

``RMTUI_TEST_FORK=0`` runs every call as a new ``python -m rmtui`` instead. A call whose
environment changes how Python itself starts (``PYTHON*``, locale variables) always does.

Run as ``python tests/cli_fork.py SOCKET`` it is the server; imported, the client.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys

PRELOAD = ("rmtui.cli", "rmtui.mcp_forkserver", "rmtui.commands.assistant", "rmtui.commands.core",
           "rmtui.commands.cycles", "rmtui.commands.ops", "rmtui.commands.retrieve", "rmtui.commands.sync",
           "rmtui.commands.update", "rmtui.commands.views", "git", "tomlkit", "rmtui.engine.host.status",
           "rmtui.engine.memory.roots", "rmtui.engine.memory.graph", "rmtui.engine.evidence.queue",
           "rmtui.engine.writes.supervisor")
#: Modules the server must not hold when it forks: numpy's BLAS starts threads of its own, and a
#: fork copies only the calling thread.
UNSAFE = ("numpy", "torch", "onnxruntime")
#: Variables read while Python starts, before any rmtui code: a forked child cannot honour them.
START_PREFIXES = ("PYTHON", "LC_", "LANG")


# -- the server -----------------------------------------------------------------------------

def serve(path: str) -> None:
    import importlib
    import signal
    import threading

    for name in PRELOAD:
        importlib.import_module(name)
    held = [name for name in UNSAFE if name in sys.modules]
    if held or threading.active_count() != 1:
        raise SystemExit(f"cli_fork: not serving: preloading started threads or imported {held}")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # monitors are reaped by the kernel
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.replace(path + ".tmp", path)
    listener.settimeout(2.0)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the test worker is gone
                return
            continue
        conn.settimeout(10.0)
        try:
            req, fds = _receive(conn)
        except (OSError, ValueError) as exc:
            print(f"cli_fork: refused a request: {exc}", file=sys.stderr, flush=True)
            conn.close()
            continue
        if os.fork() == 0:
            listener.close()
            _monitor(conn, req, fds)
        for fd in fds:
            os.close(fd)
        conn.close()


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    head, fds, _flags, _addr = socket.recv_fds(conn, 8, 3)
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"a request carries three descriptors, not {len(fds)}")
    while len(head) < 8:
        more = conn.recv(8 - len(head))
        if not more:
            raise ValueError("the request ends inside its length")
        head += more
    (size,) = struct.unpack("!Q", head)
    body = bytearray()
    while len(body) < size:
        more = conn.recv(min(1 << 16, size - len(body)))
        if not more:
            raise ValueError("the request ends inside its body")
        body += more
    return json.loads(body), fds


def _monitor(conn: socket.socket, req: dict, fds: list[int]) -> None:
    """Fork the command's process, tell the caller its pid, wait for it, send its status."""
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _child(req, fds)
    for fd in fds:
        os.close(fd)
    code = 1
    try:
        conn.sendall(b"pid %d\n" % pid)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        conn.sendall(b"exit %d\n" % code)
    except OSError:
        pass
    os._exit(0)


def _child(req: dict, fds: list[int]) -> None:
    """Become ``python -m rmtui ARGV`` in the caller's directory and environment. Never returns."""
    import atexit
    import threading
    import traceback

    code = 1
    try:
        from rmtui.cli import main
        from rmtui.mcp_forkserver import become_caller

        become_caller(fds, req["cwd"], req["env"],
                      [os.path.join(os.path.dirname(sys.modules["rmtui"].__file__ or ""), "__main__.py"), *req["argv"]])

        code = main(list(req["argv"])) or 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - as an uncaught exception ends a real process
        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as at a real exit
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


# -- the client -----------------------------------------------------------------------------

class ForkServer:
    """One server per test worker, started on the first call."""

    def __init__(self) -> None:
        import tempfile

        self.dir = tempfile.mkdtemp(prefix="rmtui-cli-fork-")
        self.path = os.path.join(self.dir, "sock")
        self.proc = None
        self.last_pid: int | None = None  # the last call's process (a test checks a timeout kills it)

    def start(self) -> bool:
        import subprocess
        import time

        with open(os.path.join(self.dir, "log"), "ab") as log:
            self.proc = subprocess.Popen([sys.executable, __file__, self.path], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, cwd=os.path.dirname(os.path.dirname(__file__)))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.exists(self.path):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.01)
        return False

    def stop(self) -> None:
        import shutil

        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, argv: list[str], data: bytes | None, cwd: str, env: dict[str, str],
            timeout: float) -> tuple[int, bytes, bytes] | None:
        """The call's (status, stdout, stderr), or None when the server could not take it."""
        import signal
        import subprocess
        import tempfile
        import time

        deadline = time.monotonic() + timeout
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        r_out, w_out = os.pipe()
        r_err, w_err = os.pipe()
        with tempfile.TemporaryFile() as stdin:
            if data:
                stdin.write(data)
                stdin.flush()
                stdin.seek(0)
            try:
                sock.settimeout(10.0)
                sock.connect(self.path)
                body = json.dumps({"argv": argv, "cwd": cwd, "env": env}).encode()
                socket.send_fds(sock, [struct.pack("!Q", len(body))], [stdin.fileno(), w_out, w_err])
                sock.sendall(body)
            except OSError:
                for fd in (r_out, w_out, r_err, w_err):
                    os.close(fd)
                sock.close()
                return None
        os.close(w_out)
        os.close(w_err)
        reader = _Reader(sock, r_out, r_err)
        try:
            done = reader.wait(deadline)
            self.last_pid = reader.pid
            if not done:
                if reader.pid:
                    try:
                        os.kill(reader.pid, signal.SIGKILL)
                    except OSError:
                        pass
                raise subprocess.TimeoutExpired([sys.executable, "-m", "rmtui", *argv], timeout)
        finally:
            reader.close()
        if reader.status is None:
            raise RuntimeError(f"cli_fork: the monitor of {argv} ended without a status (see {self.dir}/log)")
        return reader.status, bytes(reader.out), bytes(reader.err)


class _Reader:
    """Reads the two pipes to their end and the monitor's ``pid``/``exit`` lines."""

    def __init__(self, sock: socket.socket, r_out: int, r_err: int) -> None:
        self.sock, self.fds = sock, {r_out: bytearray(), r_err: bytearray()}
        self.r_out, self.r_err = r_out, r_err
        self.ctl = bytearray()
        self.pid: int | None = None
        self.status: int | None = None

    @property
    def out(self) -> bytearray:
        return self.fds[self.r_out]

    @property
    def err(self) -> bytearray:
        return self.fds[self.r_err]

    def wait(self, deadline: float) -> bool:
        import selectors
        import time

        sel = selectors.DefaultSelector()
        for fd in self.fds:
            sel.register(fd, selectors.EVENT_READ)
        sel.register(self.sock, selectors.EVENT_READ)
        open_ends = len(self.fds) + 1
        while open_ends:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in sel.select(left):
                if key.fileobj is self.sock:
                    chunk = self.sock.recv(4096)
                    self._control(chunk)
                else:
                    chunk = os.read(key.fd, 1 << 16)
                    self.fds[key.fd] += chunk
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_ends -= 1
        return True

    def _control(self, chunk: bytes) -> None:
        self.ctl += chunk
        for line in bytes(self.ctl).split(b"\n")[:-1]:
            if line.startswith(b"pid "):
                self.pid = int(line[4:])
            elif line.startswith(b"exit "):
                self.status = int(line[5:])

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.sock.close()


_SERVER: ForkServer | None = None
_BROKEN = False


def run(argv: list[str], data: bytes | None, cwd: str | None, env: dict[str, str],
        timeout: float) -> tuple[int, bytes, bytes] | None:
    """Run the CLI forked from this worker's server; None: run it as a new process instead."""
    global _SERVER, _BROKEN
    if _BROKEN or os.environ.get("RMTUI_TEST_FORK", "1") == "0" or any(
            env.get(k) != os.environ.get(k) for k in set(env) | set(os.environ) if k.startswith(START_PREFIXES)):
        return None
    if _SERVER is None:
        import atexit

        server = ForkServer()
        if not server.start():
            server.stop()
            _BROKEN = True
            return None
        _SERVER = server
        atexit.register(server.stop)
    return _SERVER.run(argv, data, cwd or os.getcwd(), env, timeout)


if __name__ == "__main__":
    sys.path[0] = os.getcwd()  # the repository, where ``python -m rmtui`` in the tests' directory looks first
    serve(sys.argv[1])
