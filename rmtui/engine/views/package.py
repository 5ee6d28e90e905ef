"""Shared view packages, version 2 (docs/formats.md, "Shared views"): the exact checks, safe
unpacking, atomic promotion.

A package is a folder holding exactly ``view.md``, ``recipe.toml``,
``rightmemory-shared-view.toml`` and a flat ``dist/`` with ``MEMORY.md``, ``manifest.toml``
and only the ``MEMORY_<id>.md`` / ``MEMORY_SKILL_<id>.md`` files its graph references. The
same checks run before a provider publishes and before a consumer promotes: a refused
package never replaces a valid import.

Unpacking never trusts the sender: an HTTP zip or a Git tree is checked entry by entry
(names, types, count, size) *before* anything is written, then the written candidate is
validated as a folder, then promoted by rename beside the old import (which is put back
if the promotion fails).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import tomllib
import uuid
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from rmtui.engine.errors import OperationFailed
from rmtui.engine.fsutil import fsync_dir, nfc_collision
from rmtui.engine.memory.graph import ID_RE, load_mf_graph

PACKAGE_VERSION = 2
RECIPE_VERSION = 1
DOCUMENT_KIND = "rightmemory-memory"
META_FILE = "rightmemory-shared-view.toml"
METADATA_FILES = ("view.md", "recipe.toml", META_FILE)
DIST = "dist"
DIST_REQUIRED = ("MEMORY.md", "manifest.toml")
META_KEYS = ("version", "view_id", "kind", "ref", "title", "description")
MANIFEST_KEYS = ("version", "view_id", "document_kind")
MAX_ENTRIES = 512
MAX_BYTES = 10 * 1024 * 1024


class PackageRefused(OperationFailed):
    """A package broke one of the v2 rules; ``rule`` names which. Nothing was promoted."""

    kind = "refused"

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"package refused ({rule}): {message}", details={"rule": rule})
        self.rule = rule


@dataclass
class PackageInfo:
    view_id: str
    title: str
    description: str
    items: int
    files: list[str]
    digest: str  # SHA-256 over names and contents: the version a consumer holds
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"view_id": self.view_id, "title": self.title, "description": self.description,
                "items": self.items, "files": self.files, "version": self.digest, "warnings": self.warnings}


# -- names -----------------------------------------------------------------------------------

def safe_name(name: str) -> str:
    """A package-relative name: relative, ``/``-separated, no ``..``/``.``/empty parts, no NUL or ``\\``."""
    if not isinstance(name, str) or not name:
        raise PackageRefused("unsafe-name", "an entry has an empty name")
    if "\\" in name or "\x00" in name:
        raise PackageRefused("unsafe-name", f"{name!r} is not a safe name")
    if name.startswith("/") or PurePosixPath(name).is_absolute() or (len(name) > 1 and name[1] == ":"):
        raise PackageRefused("absolute-path", f"{name!r} is an absolute path")
    parts = name.rstrip("/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise PackageRefused("unsafe-name", f"{name!r} leaves the package or is not a plain relative name")
    return "/".join(parts)


def dist_file_allowed(name: str) -> bool:
    if "/" in name:
        return False
    if name in DIST_REQUIRED:
        return True
    if not name.endswith(".md"):
        return False
    stem = name[:-3]
    if stem.startswith("MEMORY_SKILL_"):
        ident = stem[len("MEMORY_SKILL_"):]
    elif stem.startswith("MEMORY_"):
        ident = stem[len("MEMORY_"):]
    else:
        return False
    return bool(ID_RE.match(ident))


def _check_layout(names: list[str]) -> None:
    """The v2 shape, on names alone: metadata files, a flat dist/ of allowed files, no case collisions."""
    if len(names) > MAX_ENTRIES:
        raise PackageRefused("too-many-entries", f"{len(names)} entries; at most {MAX_ENTRIES}")
    for group in nfc_collision(names, casefold=True):
        raise PackageRefused("case-collision", f"{group[0]!r} and {group[1]!r} are one name on a "
                             "case-insensitive or normalising file system")
    for name in names:
        if name in METADATA_FILES:
            continue
        head, _, rest = name.partition("/")
        if head != DIST or not rest:
            raise PackageRefused("unexpected-entry", f"{name!r} is not part of a version-2 package")
        if "/" in rest:
            raise PackageRefused("nested-directory", f"{name!r}: dist/ must be flat")
        if not dist_file_allowed(rest):
            raise PackageRefused("unexpected-entry", f"{name!r} is not an allowed dist/ file "
                                 "(MEMORY.md, manifest.toml, MEMORY_<id>.md, MEMORY_SKILL_<id>.md)")


# -- validating a folder ------------------------------------------------------------------------

def walk_package(root: Path) -> list[tuple[str, int]]:
    """(name, size) of every file under ``root``; symlinks and folders other than dist/ are refused."""
    out: list[tuple[str, int]] = []
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode):
        raise PackageRefused("not-a-folder", f"{root} is not a regular folder")
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        est = os.lstat(entry.path)
        if stat.S_ISLNK(est.st_mode):
            raise PackageRefused("symlink", f"{entry.name!r} is a symbolic link")
        if stat.S_ISDIR(est.st_mode):
            if entry.name != DIST:
                raise PackageRefused("nested-directory", f"{entry.name!r}: only dist/ may be a folder")
            for sub in sorted(os.scandir(entry.path), key=lambda e: e.name):
                sst = os.lstat(sub.path)
                name = f"{DIST}/{sub.name}"
                if stat.S_ISLNK(sst.st_mode):
                    raise PackageRefused("symlink", f"{name!r} is a symbolic link")
                if stat.S_ISDIR(sst.st_mode):
                    raise PackageRefused("nested-directory", f"{name!r}: dist/ must be flat")
                if not stat.S_ISREG(sst.st_mode):
                    raise PackageRefused("not-regular", f"{name!r} is not a regular file")
                out.append((name, sst.st_size))
                if len(out) > MAX_ENTRIES:
                    raise PackageRefused("too-many-entries", f"more than {MAX_ENTRIES} entries")
            continue
        if not stat.S_ISREG(est.st_mode):
            raise PackageRefused("not-regular", f"{entry.name!r} is not a regular file")
        out.append((entry.name, est.st_size))
    return out


def _toml(path: Path, label: str) -> dict:
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PackageRefused("metadata", f"{label}: malformed TOML: {exc}") from None
    return data


def _require(data: dict, key: str, expected: object, label: str, rule: str = "metadata") -> None:
    value = data.get(key)
    if isinstance(value, bool) and not isinstance(expected, bool) or value != expected:
        raise PackageRefused(rule, f"{label} {key} is {value!r}, expected {expected!r}")


def validate_package(folder: Path, expected_view_id: str) -> PackageInfo:
    """Every v2 rule on an unpacked package folder; a :class:`PackageRefused` names the one broken."""
    folder = Path(folder)
    listing = walk_package(folder)
    names = [n for n, _ in listing]
    _check_layout(names)
    total = sum(size for _, size in listing)
    if total > MAX_BYTES:
        raise PackageRefused("too-large", f"{total} bytes; at most {MAX_BYTES}")
    missing = [n for n in (*METADATA_FILES, *(f"{DIST}/{d}" for d in DIST_REQUIRED)) if n not in names]
    if missing:
        raise PackageRefused("missing-file", f"missing {', '.join(missing)}")

    recipe = _toml(folder / "recipe.toml", "recipe.toml")
    _require(recipe, "version", RECIPE_VERSION, "recipe.toml", "version")
    _require(recipe, "view_id", expected_view_id, "recipe.toml", "view-id")
    _require(recipe, "kind", "file", "recipe.toml")

    meta = _toml(folder / META_FILE, META_FILE)
    unknown = sorted(set(meta) - set(META_KEYS))
    if unknown:
        raise PackageRefused("metadata", f"{META_FILE} has unsupported keys: {', '.join(unknown)}")
    _require(meta, "version", PACKAGE_VERSION, META_FILE, "version")
    _require(meta, "view_id", expected_view_id, META_FILE, "view-id")
    _require(meta, "kind", "file", META_FILE)

    manifest = _toml(folder / DIST / "manifest.toml", "dist/manifest.toml")
    if sorted(manifest) != sorted(MANIFEST_KEYS):
        raise PackageRefused("metadata", f"dist/manifest.toml must hold exactly {', '.join(MANIFEST_KEYS)}")
    _require(manifest, "version", PACKAGE_VERSION, "dist/manifest.toml", "version")
    _require(manifest, "view_id", expected_view_id, "dist/manifest.toml", "view-id")
    _require(manifest, "document_kind", DOCUMENT_KIND, "dist/manifest.toml")

    graph = load_mf_graph(folder / DIST)
    if graph.errors:
        first = graph.errors[0]
        more = f" (and {len(graph.errors) - 1} more)" if len(graph.errors) > 1 else ""
        rule = "nested-view" if first.rule == "mf-nested" else "invalid-graph"
        raise PackageRefused(rule, f"dist/{first}{more}")
    referenced = set(graph.files)
    extra = sorted(n for n in names if n.startswith(f"{DIST}/") and n[len(DIST) + 1:] not in referenced
                   and n != f"{DIST}/manifest.toml")
    if extra:
        raise PackageRefused("unreferenced-file", f"{', '.join(extra)} is not referenced by dist/MEMORY.md")

    h = hashlib.sha256()
    for name in sorted(names):
        h.update(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0")
    title = meta.get("title") if isinstance(meta.get("title"), str) else expected_view_id
    desc = meta.get("description") if isinstance(meta.get("description"), str) else ""
    items = sum(1 for i in graph.ordered if i.id is not None)
    return PackageInfo(expected_view_id, title or expected_view_id, desc or "", items, sorted(names), h.hexdigest(),
                       [str(w) for w in graph.warnings])


# -- unpacking --------------------------------------------------------------------------------

def _new_candidate(target: Path) -> None:
    if os.path.lexists(target):
        raise PackageRefused("internal", f"unpack target {target} already exists")
    target.mkdir(parents=True)
    (target / DIST).mkdir()


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def extract_zip(data: bytes, target: Path) -> None:
    """Unpack an HTTP package into the new folder ``target``, checking every entry first."""
    target = Path(target)
    if len(data) > MAX_BYTES + 1024 * 1024:
        raise PackageRefused("too-large", f"archive of {len(data)} bytes; packages hold at most {MAX_BYTES}")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise PackageRefused("bad-archive", f"not a zip archive: {exc}") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_ENTRIES:
            raise PackageRefused("too-many-entries", f"{len(infos)} archive entries; at most {MAX_ENTRIES}")
        files: list[tuple[str, zipfile.ZipInfo]] = []
        declared = 0
        for info in infos:
            name = safe_name(info.filename)
            if info.flag_bits & 0x1:
                raise PackageRefused("encrypted", f"{info.filename!r} is encrypted")
            kind = stat.S_IFMT(info.external_attr >> 16)
            if info.is_dir():
                if name != DIST or kind not in (0, stat.S_IFDIR):
                    raise PackageRefused("nested-directory", f"{info.filename!r}: only dist/ may be a folder")
                continue
            if kind == stat.S_IFLNK:
                raise PackageRefused("symlink", f"{info.filename!r} is a symbolic link")
            if kind not in (0, stat.S_IFREG):
                raise PackageRefused("not-regular", f"{info.filename!r} is not a regular file")
            declared += info.file_size
            if declared > MAX_BYTES:
                raise PackageRefused("too-large", f"more than {MAX_BYTES} bytes uncompressed")
            files.append((name, info))
        _check_layout([n for n, _ in files])
        _new_candidate(target)
        written = 0
        for name, info in files:
            try:
                with archive.open(info) as src:
                    chunk = src.read(MAX_BYTES - written + 1)  # never trust the declared size
            except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
                raise PackageRefused("bad-archive", f"{info.filename!r} cannot be read: {exc}") from None
            written += len(chunk)
            if written > MAX_BYTES:
                raise PackageRefused("too-large", f"more than {MAX_BYTES} bytes uncompressed")
            _write_new(target / name, chunk)


def write_entries(entries: list[tuple[str, str, int]], read, target: Path) -> None:
    """Unpack a package listed as (name, Git mode, size) into ``target``; ``read(name)`` gives bytes.

    Used for Git shares: modes other than a plain file (a symlink, a submodule) are refused
    before anything is written, as are names, counts and sizes breaking the limits.
    """
    if len(entries) > MAX_ENTRIES:
        raise PackageRefused("too-many-entries", f"{len(entries)} entries; at most {MAX_ENTRIES}")
    total = 0
    names = []
    for name, mode, size in entries:
        name = safe_name(name)
        if mode == "120000":
            raise PackageRefused("symlink", f"{name!r} is a symbolic link")
        if mode not in ("100644", "100755"):
            raise PackageRefused("not-regular", f"{name!r} is not a regular file (mode {mode})")
        total += size
        if total > MAX_BYTES:
            raise PackageRefused("too-large", f"more than {MAX_BYTES} bytes")
        names.append(name)
    _check_layout(names)
    _new_candidate(target)
    for name in names:
        _write_new(target / name, read(name))


def zip_package(folder: Path) -> bytes:
    """The package folder as a deterministic zip (regular files only, sorted, fixed times)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, _size in sorted(walk_package(Path(folder))):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, (Path(folder) / name).read_bytes())
    return buf.getvalue()


def copy_package(src: Path, dst: Path) -> None:
    """Copy a validated package folder (regular files only) to the new folder ``dst``."""
    listing = walk_package(Path(src))
    _check_layout([n for n, _ in listing])
    _new_candidate(Path(dst))
    for name, _size in listing:
        _write_new(Path(dst) / name, (Path(src) / name).read_bytes())


# -- promotion ----------------------------------------------------------------------------------

def remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


def candidate_beside(final: Path, label: str = "incoming") -> Path:
    return final.with_name(f".{final.name}.{label}-{uuid.uuid4().hex[:12]}")


def promote(candidate: Path, final: Path) -> None:
    """Replace ``final`` by ``candidate`` (siblings) with renames; on failure the old tree is put back.

    Between the two renames ``final`` is briefly absent, never half-written: a reader sees
    the old package, nothing, or the new one.
    """
    candidate, final = Path(candidate), Path(final)
    if candidate.parent != final.parent:
        raise ValueError("a candidate is promoted beside its destination")
    backup = candidate_beside(final, "previous")
    moved = promoted = False
    try:
        if os.path.lexists(final):
            os.replace(final, backup)
            moved = True
        os.replace(candidate, final)
        promoted = True
        fsync_dir(final.parent)
    except BaseException:
        if promoted and moved and os.path.lexists(final):
            remove_tree(final)
        if moved and not os.path.lexists(final) and os.path.lexists(backup):
            os.replace(backup, final)
            fsync_dir(final.parent)
        raise
    if moved:
        remove_tree(backup)


def sweep(folder: Path, name: str) -> None:
    """Remove the candidates and backups (``.<name>.incoming-*`` and the like) a dead run of
    ``name`` left; call it holding that name's lock, so a live run's candidate is never touched."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        if entry.name.startswith(f".{name}.") and entry.name.rsplit("-", 1)[0] in (
                f".{name}.incoming", f".{name}.previous", f".{name}.build"):
            remove_tree(entry)
