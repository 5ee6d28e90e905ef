"""Where the local warm service of a model is and how to reach it, with ``os.path`` and
:mod:`rmtui.engine.lean` only: the thin retrieve client asks this on every call
(docs/architecture.md, "The thin client"), and ``service_state`` answers the full path with
the same functions. Paths are strings here.
"""

from __future__ import annotations

import os

from rmtui.engine.lean import loads, sha256

RETRIEVE_ROUTE = "/rmtui/retrieve"
#: rmtui's own route: vectors and int8 token states from one forward pass (the second stage's
#: MaxSim feature); a foreign RightMemory service answers 404 and the feature is left out.
TOKENS_ROUTE = "/rmtui/tokens"


#: The one rule for every folder the program shares across processes (the services' folder,
#: each warm service's state folder, the MCP fork server's): whoever can write there can plant
#: a state file that sends a need (and the root's path) to their service, or a symlink that
#: makes this process write where it points.
FOLDER_RULE = ("a runtime folder shared across processes must be this user's own, mode 0700 "
               "(nothing for group or others) and not a symlink")


class UnsafeFolder(Exception):
    """A runtime folder that does not meet :data:`FOLDER_RULE`; the message names it and the rule."""


def _stat_fault(st: os.stat_result) -> str | None:
    import stat

    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & 0o077:
        return f"has mode {st.st_mode & 0o777:04o} (group or others may use it)"
    return None


def folder_fault(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` may not hold state shared across processes (see :data:`FOLDER_RULE`);
    None when it may. A missing folder has no fault (it is made private when created)."""
    try:
        return _stat_fault(os.lstat(path))
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be examined ({exc.strerror})"


def refusal(path: str | os.PathLike[str], fault: str) -> str:
    return f"runtime folder {os.fspath(path)} {fault}: {FOLDER_RULE}"


def private_folder(path: str | os.PathLike[str]) -> str:
    """``path``, made (mode 0700) when missing, else checked against :data:`FOLDER_RULE`:
    :class:`UnsafeFolder` when it fails. A folder of this user's that others could only read
    (one an older version made with the default umask) is made 0700: nobody else could have
    written into it."""
    path = os.fspath(path)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(os.path.abspath(path), 0o700, exist_ok=True)
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise UnsafeFolder(refusal(path, f"cannot be examined ({exc.strerror})")) from None
    fault = _stat_fault(st)
    if fault is not None and fault.startswith("has mode") and not st.st_mode & 0o022:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:  # through the descriptor just opened without following a link: the folder checked
            if _stat_fault(os.fstat(fd)) == fault:
                os.fchmod(fd, 0o700)
            fault = _stat_fault(os.fstat(fd))
        finally:
            os.close(fd)
    if fault is not None:
        raise UnsafeFolder(refusal(path, fault))
    return path


def services_top() -> str:
    """The user's folder of resident processes (warm services, the MCP fork server), one
    state folder each: ``$RMTUI_SERVICE_DIR`` (tests and benches; used or refused, never
    replaced), else under ``$XDG_RUNTIME_DIR`` when that is this user's own private folder
    (``su`` may keep another user's), else under ``~/.cache``. Whichever it is, it and every
    state folder in it must meet :data:`FOLDER_RULE` when used."""
    base = os.environ.get("RMTUI_SERVICE_DIR")
    if base:
        return base
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg) and os.path.isdir(xdg) and folder_fault(xdg) is None:
        top = os.path.join(xdg, "rmtui", "embedding-services")
        if folder_fault(top) is None:
            return top
    return os.path.join(os.path.expanduser("~"), ".cache", "rmtui", "embedding-services")


def service_dir(model_path: str, reranker_path: str | None, precision: str = "float32") -> str:
    """Per user and model: one warm service shared by every root that uses the same model (and
    precision: an int8 root never asks a float32 service, nor the other way round)."""
    form = "" if precision == "float32" else f"\0{precision}"
    key = sha256(f"{model_path}\0{reranker_path or ''}\0{code_stamp()}{form}".encode()).hexdigest()[:16]
    return os.path.join(services_top(), key)


_CODE_STAMP: str | None = None


def code_stamp() -> str:
    """The engine's code as installed (each module's path, size and mtime): a warm service
    started by other code (an upgrade, an edit) is not this code's service, so a CLI never
    hands its retrieval to a service that would rank by rules it no longer has; the old
    service exits when idle. Stat-only, well under a millisecond."""
    global _CODE_STAMP
    if _CODE_STAMP is None:
        digest = sha256()
        engine = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
        folders = [("", engine)]  # (relative prefix, folder)
        while folders:  # every thin retrieve pays this walk: scandir's entries, no path arithmetic
            rel, folder = folders.pop()
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
            for e in entries:
                if e.name.endswith(".py") and e.is_file():
                    st = e.stat()
                    digest.update(f"{rel}{e.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
            folders.extend((f"{rel}{e.name}/", e.path) for e in reversed(entries)
                           if e.name != "__pycache__" and e.is_dir(follow_symlinks=False))
        _CODE_STAMP = digest.hexdigest()
    return _CODE_STAMP


#: How long a client waits for the warm service's whole answer (connect, send and every byte
#: of it), unless ``RMTUI_SERVICE_ANSWER_SECONDS`` says otherwise (tests, benches).
ANSWER_SECONDS = 120.0


def answer_seconds() -> float:
    try:
        seconds = float(os.environ.get("RMTUI_SERVICE_ANSWER_SECONDS", ANSWER_SECONDS))
    except ValueError:
        return ANSWER_SECONDS
    return seconds if 0 < seconds < 86400 else ANSWER_SECONDS


#: Warm services that failed in this process (by url): no answer within the deadline, an
#: answer that is not HTTP, a connection cut. One call asks a failing service once, whichever
#: path asked it (the thin client, the full path's delegation, its model client); a long-lived
#: process (the MCP server) tries it again after :data:`FAILURE_SECONDS`.
_FAILED: dict[str, tuple[str, float]] = {}
FAILURE_SECONDS = 300.0


def note_failure(url: str, why: str) -> None:
    import time

    _FAILED[url] = (why, time.monotonic())


def failure(url: str) -> str | None:
    """Why the service at ``url`` failed in this process lately, or None."""
    import time

    noted = _FAILED.get(url)
    if noted is None or time.monotonic() - noted[1] > FAILURE_SECONDS:
        return None
    return noted[0]


#: How a file in a runtime folder is opened: never through a symlink planted in its place.
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def read_state(state_dir: str | os.PathLike[str]) -> dict | None:
    """The running service's ``state.json`` (its url and token), or None: also when the folder
    fails :data:`FOLDER_RULE` or the file is not this user's own regular file. The folder is
    opened once, checked through that descriptor and the file opened in it, so a folder
    swapped after the check is never the one read."""
    import stat

    try:
        folder = os.open(state_dir, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW)
    except OSError:
        return None
    try:
        if _stat_fault(os.fstat(folder)) is not None:
            return None
        fd = os.open("state.json", os.O_RDONLY | NOFOLLOW, dir_fd=folder)
        with open(fd, encoding="utf-8") as f:
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode) or fst.st_uid != os.getuid():
                return None
            st = loads(f.read())
    except (OSError, ValueError):
        return None
    finally:
        os.close(folder)
    return st if isinstance(st, dict) and isinstance(st.get("url"), str) else None
