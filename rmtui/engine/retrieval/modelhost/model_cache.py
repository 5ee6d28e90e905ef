"""Where files derived from a model live (ONNX exports, small memos), and a model folder's
identity: ``<model name>@<digest>``, the key of every cache made from its output (vectors,
token states, exports). Numpy-free and torch-free: the embedders (``embeddings``) and the
ONNX export (``onnx_model``) both stand on it.

Where: ``$RMTUI_MODEL_CACHE`` when set (only there), else the first writable of
``<venv>/share/rmtui/onnx`` (made by ``scripts/install.sh``; found by every user of that
install) and ``$XDG_CACHE_HOME/rmtui/onnx`` (``~/.cache/rmtui/onnx``); lookups try both.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from rmtui.engine.errors import UnavailableError
from rmtui.engine.fsutil import atomic_write_text

CACHE_ENV = "RMTUI_MODEL_CACHE"


def cache_dirs() -> list[Path]:
    """Export folders, in lookup order (see the module docstring)."""
    if os.environ.get(CACHE_ENV):
        return [Path(os.environ[CACHE_ENV]).expanduser()]
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rmtui" / "onnx"
    dirs = [user]
    if sys.prefix != sys.base_prefix:  # a virtual environment: the install's own share folder
        dirs.insert(0, Path(sys.prefix) / "share" / "rmtui" / "onnx")
    return dirs


def memo_get(name: str, key: str, sig: list) -> str | None:
    """A remembered answer for ``key`` while its inputs still have signature ``sig``."""
    for d in cache_dirs():
        try:
            entry = json.loads((d / f"{name}.json").read_text()).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(entry, dict) and entry.get("sig") == sig and isinstance(entry.get("value"), str):
            return entry["value"]
    return None


def memo_put(name: str, key: str, sig: list, value: str) -> None:
    """Remember (best effort: a memo that cannot be written costs only the recomputation)."""
    for d in cache_dirs():
        path = d / f"{name}.json"
        try:
            d.mkdir(parents=True, exist_ok=True)
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                data = {}
            if not isinstance(data, dict):
                data = {}
            data[key] = {"sig": sig, "value": value}
            if len(data) > 64:  # old model folders: keep the newest entries
                data = dict(list(data.items())[-64:])
            atomic_write_text(path, json.dumps(data))
            return
        except OSError:
            continue


def _writable(d: Path) -> bool:
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        return True
    except OSError:
        return False


def first_writable(dirs: list[Path], what: str) -> Path:
    """The first of ``dirs`` this process can write in (made when missing); none: unavailable,
    naming the setting that points elsewhere."""
    for d in dirs:
        if _writable(d):
            return d
    raise UnavailableError(f"no writable folder for {what} among {', '.join(map(str, dirs))}; set {CACHE_ENV}")


def write_dir() -> Path:
    return first_writable(cache_dirs(), "the ONNX export")


def file_signature(path: Path) -> list[int]:
    """What changes whenever a file's bytes are rewritten or replaced: size, mtime, ctime, inode."""
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def model_identity(path: Path, adapter: str) -> str:
    """``<model name>@<digest>``: files, adapter and library version.

    Hashing the weights costs ~0.1 s, paid by every service start; so the answer is kept in a
    small memo beside the ONNX exports, keyed by the files' signatures (size, mtime, ctime,
    inode: any rewrite or replacement of a file changes them, and the files are hashed again).
    """
    path = Path(path)
    files = _identity_files(path)
    try:
        import importlib.metadata as md

        st_major = md.version("sentence-transformers").split(".")[0]
    except Exception:  # noqa: BLE001 - metadata is always there in an install  # pragma: no cover
        st_major = ""
    key = f"{path.resolve()}\0{adapter}\0{st_major}"
    try:
        sig = [[rel, *file_signature(f)] for rel, f in files]
    except OSError:
        sig = None
    if sig is not None:
        known = memo_get("identities", key, sig)
        if known is not None:
            return known
    h = hashlib.sha256(f"{adapter}\0".encode())
    h.update(st_major.encode())
    for rel, f in files:
        h.update(rel.encode() + b"\0" + str(f.stat().st_size).encode() + b"\0")
        fh = hashlib.sha256()
        with f.open("rb") as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                fh.update(block)
        h.update(fh.digest())
    identity = f"{_model_name(path)}@{h.hexdigest()[:16]}"
    if sig is not None:
        memo_put("identities", key, sig, identity)
    return identity


def _identity_files(path: Path) -> list[tuple[str, Path]]:
    out = []
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path).as_posix()
        if rel.lower().startswith("readme") or "/." in f"/{rel}":
            continue
        out.append((rel, f))
    return out


def _model_name(path: Path) -> str:
    """A readable name: the folder's, or its parent's for a generic ``model`` folder."""
    if path.name.lower() in ("model", "models", "snapshot") and path.parent.name:
        return path.parent.name.replace("gt_", "").replace("_", "-")
    return path.name
