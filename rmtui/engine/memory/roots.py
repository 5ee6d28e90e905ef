"""Memory roots: resolution, profiles and ``init`` (docs/architecture.md, "The memory root").

Resolution, first match wins: ``--root``, ``--profile`` (``profiles.toml`` in the default
root), then upward from the working directory the nearest folder that holds a
``.rightmemory-profile`` file or is a memory root's work tree (as ``git`` finds its
repository; in one folder the profile file wins), then ``RIGHTMEMORY_ROOT``, then
``~/.rightmemory``.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import tomlkit
from tomlkit.exceptions import TOMLKitError

from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.fsutil import atomic_write_text
from rmtui.engine.memory.config import (
    CONFIG_FILE,
    LOCAL_FILE,
    Config,
    ensure_local_ignored,
    load_config,
    migrate_config,
)
from rmtui.engine.memory.config_schema import DEFAULT_TEXT, LOCAL_DEFAULT_TEXT
from rmtui.engine.memory.root_lookup import PROFILE_FILE, default_root, find_root_path, is_work_tree  # noqa: F401  (re-exported)

PROFILES_TOML = "profiles.toml"
RUNTIME_DIR = ".runtime"
PROFILE_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

GITIGNORE = """\
# Allow-list: only memory files are tracked; everything else (.runtime/ included) is ignored.
# The same list as RightMemory's: rightmemory.toml and rmtui.toml are per-machine settings,
# never tracked or synced.
*
!.gitignore
!MEMORY.md
!MEMORY_*.md
!PURSUITS.md
!PURSUIT_*.md
!AGENT_GUIDANCE_INBOX.md
PURSUIT_RULES.md
!corrections.md
!shared_views.toml
!shares.toml
!shared_views/
!shared_views/*/
!shared_views/*/view.md
!shared_views/*/retriever.md
!shared_views/*/recipe.toml
!shared_views/*/question.toml
!shared_views/*/.gitignore
!insight_logs/
!insight_logs/*.md
!update_queue/
!update_queue/candidates/
!update_queue/candidates/*.json
!update_queue/recovery/
!update_queue/recovery/*.json
!update_queue/lease.json
!update_records/
!update_records/*.json
"""

MEMORY_TEMPLATE = """\
# Memory

"""

PURSUITS_TEMPLATE = """\
# Pursuits

## Focus

"""


@dataclass
class MemoryRoot:
    """An opened memory root: its work tree, runtime folder and configuration."""

    path: Path

    @property
    def runtime(self) -> Path:
        return self.path / RUNTIME_DIR

    @property
    def lock_path(self) -> Path:
        return self.runtime / "memory.lock"

    def config(self) -> Config:
        return load_config(self.path)

    def ensure_runtime(self) -> Path:
        rt = self.runtime
        if not rt.is_dir():
            rt.mkdir(parents=True, exist_ok=True)
        gi = rt / ".gitignore"
        if not gi.exists():
            atomic_write_text(gi, "*\n")
        return rt


def open_root(path: Path | str) -> MemoryRoot:
    """Open an existing root; a folder that is not a Git work tree with a MEMORY.md is refused
    before anything is created in it."""
    p = Path(path).expanduser()
    if not p.exists():
        raise UsageError(f"memory root {p} does not exist (create one with `rmtui --headless init {p}`)")
    if not p.is_dir():
        raise UsageError(f"memory root {p} is not a directory")
    p = p.resolve()
    if not (p / ".git").exists():
        force = " --force" if any(p.iterdir()) else ""  # init refuses a non-empty folder without it
        raise UsageError(f"memory root {p} is not a Git repository: make it one with "
                         f"`rmtui --headless init{force} {shlex.quote(str(p))}`, "
                         "or give the --root of an existing root")
    if not (p / "MEMORY.md").is_file():  # a plain repository: touch nothing in it (no .runtime/)
        raise UsageError(f"{p} is not a memory root: it has no MEMORY.md "
                         f"(create a root with `rmtui --headless init <folder>`)")
    from rmtui.engine.gitutil import head_commit

    if head_commit(p) is None:  # every writer, status and the cycles start from the head commit
        raise UsageError(f"memory root {p} has no commit yet: run `rmtui --headless init --force "
                         f"{shlex.quote(str(p))}` to make its first commit (a clone adopts its upstream's memory)")
    root = MemoryRoot(p)
    root.ensure_runtime()
    return root


# -- profiles ---------------------------------------------------------------

def _profiles_path() -> Path:
    return Path(default_root()) / PROFILES_TOML


def _load_profiles_doc() -> tomlkit.TOMLDocument:
    path = _profiles_path()
    if not path.exists():
        return tomlkit.document()
    try:
        doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    except (TOMLKitError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: malformed TOML: {exc}") from exc
    profiles = doc.get("profiles", {})
    if not isinstance(profiles, dict):
        raise UsageError(f"{path}: 'profiles' must be a table")
    for name, body in profiles.items():
        if not isinstance(body, dict) or not isinstance(body.get("root"), str):
            raise UsageError(f"{path}: 'profiles.{name}.root' must be a string")
        unknown = set(body) - {"root", "description"}
        if unknown:
            raise UsageError(f"{path}: unknown key 'profiles.{name}.{sorted(unknown)[0]}'")
    return doc


def list_profiles() -> dict[str, dict]:
    doc = _load_profiles_doc()
    return {name: dict(body) for name, body in doc.get("profiles", {}).unwrap().items()} if "profiles" in doc else {}


def get_profile(name: str) -> dict:
    profiles = list_profiles()
    if name not in profiles:
        raise UsageError(f"unknown profile {name!r}" + (f" (known: {', '.join(sorted(profiles))})" if profiles else ""))
    return {"name": name, **profiles[name]}


def create_profile(name: str, root: Path | str, *, description: str | None = None) -> dict:
    if not PROFILE_NAME_RE.match(name):
        raise UsageError(f"profile name {name!r} must match [A-Za-z0-9_.-]{{1,64}}")
    doc = _load_profiles_doc()
    profiles = doc.setdefault("profiles", tomlkit.table(is_super_table=True))
    if name in profiles:
        raise ConflictError(f"profile {name!r} already exists")
    entry = tomlkit.table()
    entry["root"] = str(Path(root).expanduser().resolve())
    if description:
        entry["description"] = description
    profiles[name] = entry
    atomic_write_text(_profiles_path(), tomlkit.dumps(doc))
    return get_profile(name)


def remove_profile(name: str) -> dict:
    doc = _load_profiles_doc()
    profiles = doc.get("profiles")
    if profiles is None or name not in profiles:
        raise UsageError(f"unknown profile {name!r}")
    removed = {"name": name, **profiles[name].unwrap()}
    del profiles[name]
    atomic_write_text(_profiles_path(), tomlkit.dumps(doc))
    return removed


def resolve_root_path(root: str | None = None, profile: str | None = None,
                      cwd: Path | None = None) -> tuple[Path, str]:
    """Return the root path and how it was found (for ``status``)."""
    path, how = find_root_path(root, profile, cwd, lambda name: get_profile(name)["root"])
    return Path(path), how


def resolve_root(root: str | None = None, profile: str | None = None, cwd: Path | None = None) -> MemoryRoot:
    path, _ = resolve_root_path(root, profile, cwd)
    return open_root(path)


# -- init -------------------------------------------------------------------

_ALLOWED_EXISTING = {PROFILES_TOML, ".git"}


def _git(p: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(p), *args], capture_output=True, text=True, check=False)


def _adopt_memory_branch(p: Path) -> str | None:
    """Check out the one remote-tracking branch that holds a memory root, when the local
    branch has no commit yet: a clone of an upstream whose ``HEAD`` names a branch nobody
    pushed checks nothing out, and a new root commit there would never share history with
    the upstream (every pull would fail). Several such branches: refuse, naming the command
    that picks one. Answers the branch adopted, or None (no remote root: a new root)."""
    refs = _git(p, "for-each-ref", "--format=%(refname:short)%00%(symref)", "refs/remotes").stdout.splitlines()
    branches = [name for name, _, symref in (line.partition("\0") for line in refs) if name and not symref]
    roots = [b for b in branches if _git(p, "cat-file", "-e", f"{b}:MEMORY.md").returncode == 0]
    if not roots:
        return None
    if len(roots) > 1:
        picks = "; ".join(f"`git -C {shlex.quote(str(p))} checkout --track {shlex.quote(b)}`" for b in roots)
        raise UsageError(f"{p} has no commit and its upstream holds several memory branches: check one out "
                         f"({picks}), then run `rmtui --headless init --force {shlex.quote(str(p))}` again")
    branch = roots[0]
    done = _git(p, "checkout", "--quiet", "--track", branch)
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["git checkout failed"])[0]
        raise ConflictError(f"cannot check out the upstream's memory branch {branch} in {p} ({first}); move the "
                            f"files in the way aside, run `git -C {shlex.quote(str(p))} checkout --track "
                            f"{shlex.quote(branch)}`, then `rmtui --headless init --force {shlex.quote(str(p))}`")
    return branch


def init_root(path: Path | str, *, force: bool = False, report: list[str] | None = None) -> MemoryRoot:
    """Create a root: Git repository, graph roots, allow-list, config, initial commit.

    A root adopted with ``force`` keeps its files; an rmtui-only key in its rightmemory.toml
    moves to rmtui.toml (in the work tree only), and ``report`` receives what moved. A
    repository with no commit yet first adopts its upstream's memory branch, if it has one.
    """
    import git  # GitPython; imported here to keep engine import light

    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise UsageError(f"{p} exists and is not a directory")
    if p.exists():
        existing = {c.name for c in p.iterdir()} - _ALLOWED_EXISTING
        if (p / ".git").exists() and (p / "MEMORY.md").exists() and not force:
            raise ConflictError(f"{p} is already a memory root")
        if existing and not force:
            raise UsageError(f"{p} is not empty ({len(existing)} entries); use --force to initialise it anyway")
    p.mkdir(parents=True, exist_ok=True)
    p = p.resolve()
    repo = git.Repo(p) if (p / ".git").exists() else git.Repo.init(p, initial_branch="main")
    if not repo.head.is_valid():  # nothing committed here yet: a clone may bring a root along
        adopted = _adopt_memory_branch(p)
        if adopted and report is not None:
            report.append(f"adopted the upstream's memory branch {adopted} (the local branch tracks it)")
    files = {
        ".gitignore": GITIGNORE,
        "MEMORY.md": MEMORY_TEMPLATE,
        "PURSUITS.md": PURSUITS_TEMPLATE,
        CONFIG_FILE: DEFAULT_TEXT,
    }
    # an existing rightmemory.toml keeps its settings: rmtui.toml is then made by the migration
    local = {} if (p / CONFIG_FILE).exists() else {LOCAL_FILE: LOCAL_DEFAULT_TEXT}
    for name, text in {**files, **local}.items():
        target = p / name
        if target.is_symlink():
            raise UsageError(f"{target} is a symbolic link; refusing to write through it")
        if target.exists():
            continue  # --force adopts a folder; it never overwrites what is already there
        atomic_write_text(target, text)
    ensure_local_ignored(p)  # rmtui.toml: beside the tracked files, never one of them
    root = MemoryRoot(p)
    root.ensure_runtime()
    # A fallback identity only where Git has none at all (the user's global one wins).
    reader = repo.config_reader()
    missing = [k for k in ("name", "email") if not reader.has_option("user", k)]
    if missing:
        with repo.config_writer() as cw:
            for key in missing:
                cw.set_value("user", key, "rmtui" if key == "name" else "rmtui@localhost")
    repo.index.add([n for n in files if n != CONFIG_FILE])  # the settings are per machine, as in RightMemory
    if repo.is_dirty(index=True, working_tree=False) or not repo.head.is_valid():
        repo.index.commit("init: rightmemory root")
    moved = migrate_config(p)
    if report is not None:
        report.extend(moved.lines())
        if moved and CONFIG_FILE in repo.git.ls_files("--", CONFIG_FILE).splitlines():
            report.append(f"{CONFIG_FILE} was changed in the work tree only (not committed)")
    return root
