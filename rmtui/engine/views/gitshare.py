"""Git share transport (docs/formats.md, "Shared views"): file views through a plain
Git repository, no server needed. Repository access is the privacy boundary.

Layout of the share repository, one folder per share::

    shares/<share-id>/share.toml     version 1, share_id, title, provider_id, transport "git",
                                     parts ["file"], [file] view_id, title, description, path, manifest
    shares/<share-id>/package/       the version-2 package (view.md, recipe.toml, ..., dist/)

Join URL: ``<repo>#share=<id>[&branch=<b>]``; no branch means the repository's default one.
Each root keeps one working clone per (repository, branch) at
``.runtime/git_shares/<16 hex of sha256(url NUL branch)>``, the original's share cache: a clone
with ``origin`` and the branch checked out and tracking ``origin/<branch>``, so the original can
``pull --ff-only`` in it and publish from it; rmtui leaves it at the remote's tip after every
fetch and publish (a bare cache of an earlier rmtui is replaced by a clone). The consumer still
reads the package from Git objects (``ls-tree`` then ``cat-file``), so a symlink or submodule in
the tree is refused for what it is, never followed; the provider builds its commit in a scratch
index and pushes it (never forced), then moves the checkout to it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

from rmtui.engine.display import remote_text
from rmtui.engine.errors import UnavailableError, UsageError
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.views import files
from rmtui.engine.views.address import ShareRef, join_url, strip_fragment
from rmtui.engine.views.deadline import Deadline
from rmtui.engine.views.package import PackageRefused, safe_name, walk_package, write_entries

GIT_TIMEOUT = 60.0
SHARE_VERSION = 1
PACKAGE_PATH = "package"
REMOTE_PREFIX = "refs/remotes/origin/"
IDENTITY = {"GIT_AUTHOR_NAME": "rmtui", "GIT_AUTHOR_EMAIL": "rmtui@localhost",
            "GIT_COMMITTER_NAME": "rmtui", "GIT_COMMITTER_EMAIL": "rmtui@localhost"}
_MISSING_REF = ("couldn't find remote ref", "could not find remote ref", "no such ref")


class GitShareError(UnavailableError):
    """The share repository could not be reached or read (exit 4)."""


def cache_path(root: MemoryRoot, repo_url: str, branch: str | None) -> Path:
    key = f"{strip_fragment(repo_url)}\0{(branch or '').strip()}"
    return root.ensure_runtime() / "git_shares" / hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def _git(cwd: Path, *args: str, deadline: Deadline | None = None, data: bytes | None = None,
         env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run git, ended by ``deadline`` (an operation's network budget; else :data:`GIT_TIMEOUT`)
    with every process it started: a remote helper that outlives git would hold the pipes open."""
    budget = deadline or Deadline.after(GIT_TIMEOUT)
    slow = f"git {args[0]}: " + budget.too_slow("the share repository")
    left = budget.left()
    if left <= 0:
        raise GitShareError(slow)
    full = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C", **(env or {})}
    with subprocess.Popen(["git", *args], cwd=cwd, env=full, start_new_session=True,
                          stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as run:
        try:
            stdout, stderr = run.communicate(data, timeout=left)
        except subprocess.TimeoutExpired:
            _kill_group(run)
            raise GitShareError(slow) from None
        except BaseException:  # this process is being stopped: git goes too
            _kill_group(run)
            raise
    proc = subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr)
    if check and proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise GitShareError(f"git {args[0]} failed: {remote_text(err.splitlines()[-1]) if err else proc.returncode}",
                            details={"stderr": remote_text(err, 4000)})
    return proc


def _kill_group(run: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(run.pid, signal.SIGKILL)
    run.communicate()


def _out(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout.decode("utf-8", "surrogateescape").strip()


def _clone(root: MemoryRoot, repo_url: str, branch: str | None, deadline: Deadline) -> Path:
    """The share cache of (repository, branch): a working clone, made as the original makes it."""
    path = cache_path(root, repo_url, branch)
    if (path / ".git").is_dir():
        return path
    if path.exists() or path.is_symlink():  # an earlier rmtui's bare cache, or a clone cut short: ours
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    tmp = path.with_name(f".{path.name}.clone-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    url = strip_fragment(repo_url)
    try:
        proc = _git(path.parent, "clone", "--quiet", *(["--branch", branch] if branch else []), "--", url, str(tmp),
                    deadline=deadline, check=False)
        if proc.returncode != 0 and branch:  # no such branch yet: clone the default, the branch comes later
            shutil.rmtree(tmp, ignore_errors=True)
            proc = _git(path.parent, "clone", "--quiet", "--", url, str(tmp), deadline=deadline, check=False)
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()
            why = remote_text(err.splitlines()[-1]) if err else proc.returncode
            raise GitShareError(f"could not clone {url}: {why}")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def _branch_of(clone: Path, branch: str | None) -> str:
    """The branch named, else the remote's default (``origin/HEAD``), else the clone's own, else main."""
    if branch:
        return branch
    for ref in ("refs/remotes/origin/HEAD", "HEAD"):
        proc = _git(clone, "symbolic-ref", "--short", "-q", ref, check=False)
        name = _out(proc)
        if proc.returncode == 0 and name:
            return name.removeprefix("origin/")
    return "main"


def _settle(clone: Path, branch: str, tip: str | None) -> None:
    """Check ``branch`` out at the remote's tip, tracking ``origin/<branch>`` (what ``pull --ff-only``
    needs); with no tip yet (an empty repository), the branch is left unborn."""
    if tip is None:
        if _git(clone, "rev-parse", "--verify", "-q", "HEAD", check=False).returncode != 0:
            _git(clone, "symbolic-ref", "HEAD", f"refs/heads/{branch}")
        return
    _git(clone, "checkout", "-q", "-f", "-B", branch, tip)
    _git(clone, "branch", "-q", f"--set-upstream-to=origin/{branch}", branch)


def _resolve(root: MemoryRoot, ref: ShareRef, deadline: Deadline) -> tuple[Path, str, str | None]:
    """Clone or fetch (``fetch --prune origin``), check the branch out at the remote's tip: (clone,
    branch, tip), tip None when the repository has no such branch."""
    clone = _clone(root, ref.repo_url, ref.branch, deadline)
    proc = _git(clone, "fetch", "--quiet", "--prune", "origin", deadline=deadline, check=False)
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise GitShareError(f"could not fetch {ref.repo_url}: "
                            f"{remote_text(err.splitlines()[-1]) if err else proc.returncode}")
    branch = _branch_of(clone, ref.branch)
    got = _git(clone, "rev-parse", "--verify", "-q", f"{REMOTE_PREFIX}{branch}^{{commit}}", check=False)
    tip = _out(got) if got.returncode == 0 else None
    _settle(clone, branch, tip)
    return clone, branch, tip


def _locked(root: MemoryRoot, ref_url: str, branch: str | None, deadline: Deadline):
    """The share cache's lock, waited for within the operation's budget."""
    path = cache_path(root, ref_url, branch)
    return file_lock(path.with_name(path.name + ".lock"), timeout=max(0.0, deadline.left()))


# -- consumer ----------------------------------------------------------------------------------

def _share_meta(cache: Path, tip: str, share_id: str) -> dict:
    proc = _git(cache, "cat-file", "blob", f"{tip}:shares/{share_id}/share.toml", check=False)
    if proc.returncode != 0:
        raise PackageRefused("missing-share", f"the repository has no shares/{share_id}/share.toml")
    try:
        meta = tomllib.loads(proc.stdout.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PackageRefused("share-metadata", f"share.toml: {exc}") from None
    if meta.get("version") != SHARE_VERSION or meta.get("share_id") != share_id or meta.get("transport") != "git":
        raise PackageRefused("share-metadata", f'share.toml needs version = 1, share_id = "{share_id}", '
                             'transport = "git"')
    if meta.get("parts") != ["file"]:
        raise PackageRefused("share-metadata", 'share.toml parts must be ["file"] (Git shares carry file views only)')
    part = meta.get("file")
    if not isinstance(part, dict):
        raise PackageRefused("share-metadata", "share.toml has no [file] table")
    try:
        files.check_view_id(part.get("view_id"), "share.toml [file] view_id")
    except UsageError as exc:
        raise PackageRefused("share-metadata", exc.message) from None
    path = part.get("path", PACKAGE_PATH)
    if not isinstance(path, str):
        raise PackageRefused("share-metadata", "share.toml [file] path must be a string")
    safe_name(path)  # never outside shares/<id>/
    return meta


def describe(root: MemoryRoot, ref: ShareRef, *, timeout: float = GIT_TIMEOUT) -> dict:
    """What a join URL offers: the share's metadata (``share.toml``) at the branch's tip."""
    deadline = Deadline.after(timeout)
    with _locked(root, ref.repo_url, ref.branch, deadline):
        cache, _branch, tip = _resolve(root, ref, deadline)
    if tip is None:
        raise PackageRefused("missing-share", f"{ref.repo_url} has no branch {_branch!r}")
    return _share_meta(cache, tip, ref.share_id)


def fetch_package(root: MemoryRoot, ref: ShareRef, target: Path, *, timeout: float = GIT_TIMEOUT,
                  deadline: Deadline | None = None) -> dict:
    """Unpack the share's package at the branch's tip into the new folder ``target`` (checked entry
    by entry before writing; :func:`rmtui.engine.views.package.validate_package` comes after).
    Clone and fetch end by ``deadline`` (else ``timeout`` seconds from now), all steps together."""
    deadline = Deadline.after(timeout).sooner(deadline)
    with _locked(root, ref.repo_url, ref.branch, deadline):
        cache, branch, tip = _resolve(root, ref, deadline)
    if tip is None:
        raise PackageRefused("missing-share", f"{ref.repo_url} has no branch {branch!r}")
    meta = _share_meta(cache, tip, ref.share_id)
    base = f"shares/{ref.share_id}/{safe_name(meta['file'].get('path', PACKAGE_PATH))}"
    proc = _git(cache, "ls-tree", "-r", "-l", "-z", f"{tip}:{base}", check=False)
    if proc.returncode != 0:
        raise PackageRefused("missing-share", f"the repository has no {base}/")
    entries: list[tuple[str, str, int]] = []
    blobs: dict[str, str] = {}
    for raw in proc.stdout.split(b"\0"):
        if not raw:
            continue
        head, _, name_b = raw.partition(b"\t")
        mode, _kind, sha, size = head.decode().split()
        name = name_b.decode("utf-8", "surrogateescape")
        entries.append((name, mode, int(size) if size.isdigit() else 0))
        blobs[name] = sha

    def read(name: str) -> bytes:
        return _git(cache, "cat-file", "blob", blobs[name]).stdout

    write_entries(entries, read, target)
    return {"commit": tip, "branch": branch, "share": meta}


# -- provider ------------------------------------------------------------------------------------

def _local_repo_path(repo_url: str) -> Path | None:
    p = urlsplit(repo_url)
    if p.scheme == "file":
        return Path(p.path)
    if not p.scheme and not p.netloc and ":" not in repo_url.split("/", 1)[0]:
        return Path(repo_url).expanduser()
    return None


def share_toml(share_id: str, view_id: str, title: str, description: str, provider_id: str) -> str:
    lines = files.toml_table({"version": SHARE_VERSION, "share_id": share_id, "title": title,
                              "provider_id": provider_id, "transport": "git", "parts": ["file"]})
    # the original titles the file part "<share title> Files"
    lines += ["", "[file]", *files.toml_table({"view_id": view_id, "title": f"{title} Files",
                                               "description": description,
                                               "path": PACKAGE_PATH,
                                               "manifest": f"{PACKAGE_PATH}/dist/manifest.toml"})]
    return "\n".join(lines) + "\n"


def publish(root: MemoryRoot, package: Path, *, repo_url: str, view_id: str, title: str, description: str,
            share_id: str | None = None, branch: str | None = None, provider_id: str = "rmtui",
            push: bool = True, timeout: float = GIT_TIMEOUT) -> dict:
    """Commit ``package`` (a validated package folder) as ``shares/<share>/`` on the branch and push it.

    A local repository path that does not exist yet is created (bare); an empty repository
    gets the branch on this first publish. A push refused because someone published
    meanwhile is retried once on the new tip; a push is never forced.
    """
    share_id = files.check_view_id(share_id or view_id, "share id")
    local = _local_repo_path(repo_url)
    if local is not None and not local.exists():
        local.parent.mkdir(parents=True, exist_ok=True)
        _git(local.parent, "init", "-q", "--bare", "-b", branch or "main", str(local))
    listing = walk_package(Path(package))
    ref = ShareRef(repo_url, share_id, branch)
    deadline = Deadline.after(timeout)
    with _locked(root, repo_url, branch, deadline):
        for attempt in (0, 1):
            clone, chosen, tip = _resolve(root, ref, deadline)
            commit, changed = _commit(clone, tip, share_id, view_id, title, description, provider_id, package,
                                      [n for n, _ in listing])
            result = {"share_id": share_id, "branch": chosen, "commit": commit, "pushed": False, "changed": changed,
                      "join_url": join_url(repo_url, share_id, branch)}
            if not changed or not push:
                return result
            proc = _git(clone, "push", "--quiet", "--porcelain", "origin", f"{commit}:refs/heads/{chosen}",
                        deadline=deadline, check=False)
            if proc.returncode == 0:
                _git(clone, "update-ref", f"{REMOTE_PREFIX}{chosen}", commit)
                _settle(clone, chosen, commit)
                return result | {"pushed": True}
            err = (proc.stderr + proc.stdout).decode("utf-8", "replace").strip()
            if attempt or not any(w in err for w in ("rejected", "non-fast-forward", "fetch first")):
                raise GitShareError(f"could not push the share to {repo_url} ({chosen}): "
                                    f"{remote_text(err.splitlines()[-1]) if err else proc.returncode}; nothing "
                                    "was changed upstream; publish again to retry")
    raise GitShareError("unreachable")  # pragma: no cover


def _commit(cache: Path, tip: str | None, share_id: str, view_id: str, title: str, description: str,
            provider_id: str, package: Path, names: list[str]) -> tuple[str, bool]:
    index = cache / ".git" / f"rmtui-publish-{os.getpid()}.index"
    env = {**IDENTITY, "GIT_INDEX_FILE": str(index)}
    prefix = f"shares/{share_id}"
    try:
        if tip:
            _git(cache, "read-tree", tip, env=env)
        else:
            _git(cache, "read-tree", "--empty", env=env)
        _git(cache, "rm", "--cached", "-r", "-q", "--ignore-unmatch", "--", prefix, env=env)
        blobs = [("share.toml", share_toml(share_id, view_id, title, description, provider_id).encode())]
        blobs += [(f"{PACKAGE_PATH}/{n}", (Path(package) / n).read_bytes()) for n in names]
        info = b""
        for rel, data in blobs:
            sha = _out(_git(cache, "hash-object", "-w", "--stdin", data=data))
            info += f"100644 {sha}\t{prefix}/{rel}".encode() + b"\0"
        _git(cache, "update-index", "-z", "--index-info", data=info, env=env)
        tree = _out(_git(cache, "write-tree", env=env))
        if tip and tree == _out(_git(cache, "rev-parse", f"{tip}^{{tree}}")):
            return tip, False
        parents = ["-p", tip] if tip else []
        commit = _out(_git(cache, "commit-tree", tree, *parents, "-m", f"Publish RightMemory share {share_id}",
                           env=env))
        return commit, True
    finally:
        index.unlink(missing_ok=True)
        Path(str(index) + ".lock").unlink(missing_ok=True)
