"""The MCP fork server (docs/architecture.md, "The MCP fork server").

Why: most of an MCP server's start is the ``mcp`` SDK's import (pydantic models for every
protocol version, over a second on a busy two-core machine), which no server can shorten
while it imports the SDK itself. As Mercurial's ``chg`` does for its command server, one
resident process per user and installed code imports the SDK and the MCP front once and
waits on a Unix socket. ``rmtui --headless mcp`` connects, hands over its three standard
streams, working directory, environment, arguments, umask, nice value and resource limits
(:func:`process_settings`), and the server forks a child that
runs exactly the command the caller would have run (the CLI's ``main``, which
``rmtui.mcp_forkserver_main`` hands the server: this module never imports the CLI), on the
caller's streams.
The caller waits, forwards the signals it receives, and exits with the child's status.

Nothing is trusted on either side. The socket's directory must be the user's own, mode 0700,
not a symlink; the server answers only a peer of its own uid (``SO_PEERCRED``), and refuses a
request that is not exactly three descriptors and a JSON body of the shape
:func:`check_request` names. The client takes the fork only when the child says ``pid N``
first; anything else (no server, another code stamp, an unsafe directory, a refusal, a path
too long for a socket) leaves the call to the full path in its own process, before anything
reached the caller's streams. ``RMTUI_MCP_FORKSERVER=0`` turns the fork server off.

A full-path MCP server launches the fork server for the next start (after
:data:`LAUNCH_DELAY` seconds, so the launch never competes with its own first answer); the
fork server exits after :data:`IDLE_SECONDS` without a connection, and a new code stamp
(an upgrade, an edit) means a new socket, so old code never serves a new install.
"""

from __future__ import annotations

import os
import socket
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    #: What a child runs: the CLI's ``main`` (handed over by ``rmtui.mcp_forkserver_main``).
    Entry = Callable[[list[str]], int]

PROTOCOL = b"RMTUI-MCP/1"
MAX_BODY = 1 << 20  # argv, cwd and environment: far below this
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux
IDLE_SECONDS = 1800.0
LAUNCH_DELAY = 5.0
#: What the fork server imports once, so no child pays for it: what a start imports before its
#: first answer (the SDK's logging set-up imports rich), all import-only. Not numpy: its BLAS
#: starts threads of its own, and a fork copies only the calling thread.
PRELOAD = ("rmtui.cli", "rmtui.commands.assistant", "rmtui.mcp_retriever", "rmtui.mcp_server",
           "mcp.server.mcpserver", "mcp.server.mcpserver.exceptions", "mcp.shared.message", "anyio",
           "anyio._backends._asyncio", "rich.console", "rich.logging", "rmtui.engine.writes.supervisor",
           "rmtui.engine.evidence.queue", "rmtui.engine.retrieval.modelhost.embed_client")

#: True in a forked child: its ``cli.main`` must take the full path, never the fork server again.
IN_CHILD = False


class Refused(Exception):
    """A request the fork server does not serve; the message names the rule."""


def enabled() -> bool:
    return os.environ.get("RMTUI_MCP_FORKSERVER", "1") != "0" and hasattr(socket, "AF_UNIX") and not IN_CHILD


def server_dir() -> str:
    """Per user and installed code (rmtui's modules and the SDK's), beside the warm services:
    a new install gets a new fork server, and the old one exits when idle."""
    from importlib.util import find_spec

    from rmtui.engine.lean import sha256
    from rmtui.engine.retrieval.modelhost.service_lookup import code_stamp, services_top

    stamp = [sys.executable, code_stamp()]
    for name in ("mcp", "mcp_types", "pydantic", "pydantic_core", "anyio"):
        spec = find_spec(name)
        origin = spec.origin if spec is not None else None
        if origin:
            st = os.stat(origin)
            stamp.append(f"{origin}\0{st.st_size}\0{st.st_mtime_ns}")
    return os.path.join(services_top(), "mcp-forkserver-" + sha256("\0".join(stamp).encode()).hexdigest()[:16])


def safe_dir(path: str) -> bool:
    """The directory exists and meets the one rule of runtime folders (the user's own, mode
    0700, not a symlink: ``service_lookup.FOLDER_RULE``): only then is its socket ours."""
    from rmtui.engine.retrieval.modelhost.service_lookup import folder_fault

    return os.path.lexists(path) and folder_fault(path) is None


# -- the client: ``rmtui --headless mcp`` ------------------------------------------------------

def run_forked(argv: list[str]) -> int | None:
    """Run this MCP command in a child of the fork server and return its exit status, or
    None when the fork server cannot take it (the caller then runs it itself)."""
    if not enabled():
        return None
    try:
        directory = server_dir()
    except (OSError, ImportError, ValueError):
        return None
    path = os.path.join(directory, "sock")
    if len(path.encode()) > MAX_SOCKET_PATH or not safe_dir(directory):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    first = b""
    try:
        sock.settimeout(5.0)
        sock.connect(path)
        if _peer(sock)[1] == os.getuid():
            sys.stdout.flush()
            sys.stderr.flush()
            _send_request(sock, argv)
            sock.settimeout(10.0)  # given up on, a late child finds the connection closed and ends unseen
            first = _read_line(sock)
    except OSError:
        pass
    if not first.startswith(b"pid ") or not first[4:].isdigit():
        sock.close()
        return None  # no child took the call: nothing reached the caller's streams
    child = int(first[4:])
    from rmtui.thin_client import trace

    trace(f"mcp: forked from the fork server (child {child})")
    return _wait_for(sock, child)


def _peer(sock: socket.socket) -> tuple[int, int]:
    """The peer's (pid, uid), as the kernel says."""
    import struct

    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def _proc_stat(pid: int) -> list[bytes]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, parent pid, ...);
    empty when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


#: The resource limits a child takes over from its caller: every one of these this system has.
RLIMITS = ("RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_LOCKS",
           "RLIMIT_MEMLOCK", "RLIMIT_MSGQUEUE", "RLIMIT_NICE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_RSS",
           "RLIMIT_RTPRIO", "RLIMIT_RTTIME", "RLIMIT_SIGPENDING", "RLIMIT_STACK")


def _rlimit_names() -> list[str]:
    import resource

    return [name for name in RLIMITS if hasattr(resource, name)]


def process_settings() -> dict:
    """What a process inherits besides its streams, cwd and environment, and a forked child
    would otherwise take from the fork server instead of its caller: the file mode creation
    mask, the nice value and the resource limits (``-1``: unlimited)."""
    import resource

    mask = os.umask(0o022)
    os.umask(mask)
    return {"umask": mask, "nice": os.getpriority(os.PRIO_PROCESS, 0),
            "rlimits": {name: list(resource.getrlimit(getattr(resource, name))) for name in _rlimit_names()}}


def _send_request(sock: socket.socket, argv: list[str]) -> None:
    import json

    body = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), **process_settings()}).encode()
    header = PROTOCOL + b" %d\n" % len(body)
    socket.send_fds(sock, [header], [0, 1, 2])
    sock.sendall(body)


def _read_line(sock: socket.socket, limit: int = 64) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk or len(line) >= limit:
            return b""
        line += chunk
    return line.rstrip(b"\n")


def _wait_for(sock: socket.socket, child: int) -> int:
    """Wait for the child's ``exit N``; the signals that would end this process go to the
    child instead (it then ends, and so does this wait). End of the connection without a
    status means the child was killed."""
    import signal

    forwarded: list[int] = []

    def forward(signum, frame) -> None:
        forwarded.append(signum)
        try:
            os.kill(child, signum)
        except OSError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    sock.settimeout(None)
    try:
        while line := _read_line(sock):
            if line.startswith(b"exit "):
                return int(line[5:])
    except (OSError, ValueError):
        pass
    finally:
        sock.close()
    return 128 + forwarded[-1] if forwarded else 1


# -- the launch, from a full-path MCP server ------------------------------------------------------

def launch_later() -> None:
    """Start the fork server for the next MCP start :data:`LAUNCH_DELAY` seconds from now
    (``RMTUI_MCP_FORKSERVER_DELAY`` overrides), in a daemon thread: a server that ends before
    then launches nothing."""
    if not enabled():
        return
    import threading

    try:
        delay = float(os.environ.get("RMTUI_MCP_FORKSERVER_DELAY", LAUNCH_DELAY))
    except ValueError:
        delay = LAUNCH_DELAY
    timer = threading.Timer(delay, launch)
    timer.daemon = True
    timer.start()


def launch() -> None:
    """Start a fork server unless one answers (one per directory: it holds a lock)."""
    import subprocess

    try:
        directory = server_dir()
        if len(os.path.join(directory, "sock").encode()) > MAX_SOCKET_PATH:
            return
        from rmtui.engine.retrieval.modelhost.service_lookup import NOFOLLOW, UnsafeFolder, private_folder

        private_folder(os.path.dirname(directory))
        private_folder(directory)
        log = os.open(os.path.join(directory, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND | NOFOLLOW, 0o600)
    except (OSError, ImportError, ValueError, UnsafeFolder):
        return
    try:
        subprocess.Popen([sys.executable, "-m", "rmtui.mcp_forkserver_main", directory], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, start_new_session=True, close_fds=True)
    except OSError:
        pass
    finally:
        os.close(log)


def stop(directory: str | None = None, timeout: float = 5.0) -> bool:
    """End the fork server of ``directory`` (this install's by default); True if one ran.
    Its children serve on: each is its caller's server now."""
    import signal
    import time

    from rmtui.engine.retrieval.modelhost.service_lookup import NOFOLLOW

    directory = directory or server_dir()
    if not safe_dir(directory):
        return False
    try:
        with open(os.open(os.path.join(directory, "pid"), os.O_RDONLY | NOFOLLOW)) as fh:
            pid = int(fh.read(32).strip())
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            if b"rmtui.mcp_forkserver" not in fh.read():
                return False  # a pid file outlived its server and the number was reused
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.02)
    return True


def _running(pid: int) -> bool:
    """Alive and not a zombie (a launcher that has not reaped it yet)."""
    fields = _proc_stat(pid)
    return bool(fields) and fields[0] != b"Z"


# -- the fork server ---------------------------------------------------------------------------

def check_request(body: bytes, fds: list[int]) -> dict:
    """The request as the fork server accepts it, or :class:`Refused` naming the rule."""
    import json

    from rmtui.command_word import command_of

    if len(fds) != 3:
        raise Refused(f"a request carries exactly three descriptors (stdin, stdout, stderr), not {len(fds)}")
    for fd in fds:
        os.fstat(fd)
    try:
        req = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise Refused("the request body is not UTF-8 JSON") from None
    if not isinstance(req, dict) or set(req) != REQUEST_KEYS:
        raise Refused("the request is an object of exactly argv, cwd, env, umask, nice and rlimits")
    argv, cwd, env = req["argv"], req["cwd"], req["env"]
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or command_of(argv) != "mcp":
        raise Refused("argv is a list of strings naming the mcp command")
    if not isinstance(cwd, str) or not os.path.isabs(cwd) or "\0" in cwd:
        raise Refused("cwd is an absolute path")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) and k and "=" not in k
                                            and "\0" not in k + v for k, v in env.items()):
        raise Refused("env maps names to strings")
    _check_settings(req["umask"], req["nice"], req["rlimits"])
    return req


REQUEST_KEYS = frozenset({"argv", "cwd", "env", "umask", "nice", "rlimits"})
_LIMIT_MAX = 1 << 63


def _check_settings(umask: object, nice: object, rlimits: object) -> None:
    """The caller's process settings (:func:`process_settings`), as the child can take them over."""
    if type(umask) is not int or not 0 <= umask <= 0o777:
        raise Refused("umask is a file mode creation mask from 0 to 0o777")
    if type(nice) is not int or not -20 <= nice <= 19:
        raise Refused("nice is a nice value from -20 to 19")
    names = _rlimit_names()
    if not isinstance(rlimits, dict) or sorted(rlimits) != sorted(names):
        raise Refused(f"rlimits names exactly this system's resource limits ({', '.join(names)})")
    for name, pair in rlimits.items():
        ok = isinstance(pair, list) and len(pair) == 2 and all(
            type(v) is int and (v == -1 or 0 <= v < _LIMIT_MAX) for v in pair)
        if not ok or (pair[1] != -1 and (pair[0] == -1 or pair[0] > pair[1])):
            raise Refused(f"rlimits gives {name} as [soft, hard], whole numbers (-1: unlimited), soft not over hard")


def _take_on(req: dict) -> None:
    """Become the caller in what a process inherits: its nice value, resource limits and umask.
    What the fork server may not grant (a higher limit or priority than its own) fails here,
    before the caller was told a child serves it, so the call takes the full path."""
    import resource

    if os.getpriority(os.PRIO_PROCESS, 0) != req["nice"]:
        os.setpriority(os.PRIO_PROCESS, 0, req["nice"])
    for name, (soft, hard) in req["rlimits"].items():
        which = getattr(resource, name)
        if resource.getrlimit(which) != (soft, hard):
            resource.setrlimit(which, (soft, hard))
    os.umask(req["umask"])


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    # room for one descriptor more than a request carries: more is refused, never cut silently
    head, fds, flags, _addr = socket.recv_fds(conn, 64, 4)
    try:
        if flags & socket.MSG_CTRUNC or len(fds) > 3:
            raise Refused("a request carries exactly three descriptors (stdin, stdout, stderr), not more")
        while b"\n" not in head:
            more = conn.recv(64)
            if not more or len(head) > 64:
                raise Refused("the request starts with one header line")
            head += more
        line, _, rest = head.partition(b"\n")
        proto, _, size = line.partition(b" ")
        if proto != PROTOCOL or not size.isdigit() or int(size) > MAX_BODY:
            raise Refused(f"the header is {PROTOCOL.decode()} and a body length up to {MAX_BODY}")
        body = bytearray(rest)
        while len(body) < int(size):
            more = conn.recv(min(1 << 16, int(size) - len(body)))
            if not more:
                raise Refused("the body is as long as its header says")
            body += more
        return check_request(bytes(body[:int(size)]), fds), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _child(conn: socket.socket, listener: socket.socket, lock_fd: int, req: dict, fds: list[int],
           entry: Entry) -> None:
    """The forked child: become the caller's process and run its command. Never returns."""
    global IN_CHILD
    import signal
    import threading
    import traceback

    code = 1
    try:
        IN_CHILD = True
        listener.close()
        os.close(lock_fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the engine's subprocesses are waited for
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            _take_on(req)
        except (OSError, ValueError) as exc:  # on the fork server's log: the caller's streams are not ours yet
            print(f"rmtui mcp fork server: a child cannot take on its caller's process settings: {exc}",
                  file=sys.stderr, flush=True)
            os._exit(1)
        become_caller(fds, req["cwd"], req["env"], ["rmtui", *req["argv"]])
        conn.settimeout(None)
        try:
            conn.sendall(b"pid %d\n" % os.getpid())
        except OSError:  # the caller gave up waiting and serves itself: never touch its streams
            os._exit(1)
        threading.Thread(target=_end_with_caller, args=(conn,), daemon=True).start()
        code = entry(list(req["argv"]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the caller gets the traceback and a status, as a crash would give
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            conn.sendall(b"exit %d\n" % code)
        except OSError:
            pass
        os._exit(code)


def become_caller(fds: list[int], cwd: str, env: dict[str, str], argv: list[str]) -> None:
    """In a forked child: take the caller's three streams, directory, environment and
    ``sys.argv`` (the tests' forked CLI calls, tests/cli_fork.py, become their callers so too)."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = argv


def _end_with_caller(conn: socket.socket) -> None:
    """The caller waits on this connection; when it is gone (killed), this child ends too."""
    import signal

    try:
        while conn.recv(1):
            pass
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGTERM)


def serve(directory: str, entry: Entry, idle_seconds: float = IDLE_SECONDS) -> int:
    """Serve forks from ``directory`` until idle; 0 also when another fork server holds it.
    Each child runs ``entry`` (the CLI's ``main``) on the caller's arguments."""
    import contextlib
    import fcntl
    import importlib
    import signal
    import threading

    from rmtui.engine.retrieval.modelhost.service_lookup import NOFOLLOW, folder_fault, refusal

    fault = folder_fault(directory) if os.path.lexists(directory) else "does not exist"
    if fault is not None:
        print(f"rmtui mcp fork server: {refusal(directory, fault)}", file=sys.stderr)
        return 2
    # the folder's files are opened in place: a symlink planted as one is refused, never followed
    lock_fd = os.open(os.path.join(directory, "lock"), os.O_RDWR | os.O_CREAT | NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # one runs already
    for name in PRELOAD:
        importlib.import_module(name)
    if threading.active_count() != 1:  # a fork copies only this thread: never fork beside others
        print("rmtui mcp fork server: an import started a thread; not serving", file=sys.stderr)
        return 1
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # the socket goes with it
    path = os.path.join(directory, "sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    temp = f"{path}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)
    listener.bind(temp)
    os.chmod(temp, 0o600)
    listener.listen(16)
    os.replace(temp, path)  # ready: connections before this found no socket and took the full path
    with open(os.open(os.path.join(directory, "pid"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | NOFOLLOW, 0o600),
              "w") as fh:
        fh.write(f"{os.getpid()}\n")
    ours = os.stat(path).st_ino
    listener.settimeout(idle_seconds)
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                return 0
            _handle(conn, listener, lock_fd, entry)
    finally:
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == ours:
                os.unlink(path)


def _handle(conn: socket.socket, listener: socket.socket, lock_fd: int, entry: Entry) -> None:
    try:
        conn.settimeout(5.0)
        pid, uid = _peer(conn)
        if uid != os.getuid():
            raise Refused("the peer runs as another user")
        if _proc_stat(pid)[1:2] == [str(os.getpid()).encode()]:
            raise Refused("a child of this fork server never asks it for another")
        req, fds = _receive(conn)
    except (Refused, OSError, ValueError) as exc:
        print(f"rmtui mcp fork server: refused a request: {exc}", file=sys.stderr, flush=True)
        conn.close()
        return
    pid = os.fork()
    if pid == 0:
        _child(conn, listener, lock_fd, req, fds, entry)
    for fd in fds:
        os.close(fd)
    conn.close()
