"""The upstream of a root's branch: who it is, fetching it, pushing to it (plain Git).

Transport failures are told apart from refusals so a laptop on a train reports
``offline`` (retried later, exit 4) rather than ``error``; an upstream branch that does not
exist (an empty upstream, or a deleted branch) is told apart from both.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rmtui.engine.display import remote_text
from rmtui.engine.errors import UnavailableError, UsageError
from rmtui.engine.errors.storage import DISK_TEXT

GIT_TIMEOUT = 30.0
#: Phrases of Git's transport failures (as opposed to a refused push or a broken repository).
_OFFLINE = ("could not read from remote", "unable to access", "could not resolve host", "connection refused",
            "connection timed out", "network is unreachable", "does not appear to be a git repository",
            "unable to connect", "timed out", "no route to host", "connection reset", "early eof")


@dataclass(frozen=True)
class Upstream:
    remote: str
    branch: str

    @property
    def ref(self) -> str:
        return f"refs/remotes/{self.remote}/{self.branch}"


#: Git's word for a branch the remote does not have (never pushed, or deleted).
_MISSING = "couldn't find remote ref"


class Offline(UnavailableError):
    """The upstream cannot be reached (exit 4): a sentence naming the remote and its address."""

    kind = "offline"


@dataclass
class GitOutcome:
    ok: bool
    offline: bool
    message: str
    missing: bool = False  # the remote answered, but it has no such branch


def git(root: Path, *args: str, timeout: float = GIT_TIMEOUT, check: bool = True) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}
    try:
        proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise TimeoutError(f"git {args[0]} timed out after {timeout:g} s") from exc
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, ["git", *args], proc.stdout, proc.stderr)
    return proc.stdout


def upstream_of(root: Path) -> Upstream | None:
    """The configured upstream of the checked-out branch (``branch.<b>.remote``/``merge``)."""
    try:
        branch = git(root, "symbolic-ref", "--short", "-q", "HEAD").strip()
    except subprocess.CalledProcessError:
        raise UsageError("the root is on a detached HEAD; sync needs a branch with an upstream") from None
    remote = git(root, "config", "--get", f"branch.{branch}.remote", check=False).strip()
    merge = git(root, "config", "--get", f"branch.{branch}.merge", check=False).strip()
    if not remote or not merge.startswith("refs/heads/"):
        return None
    return Upstream(remote, merge[len("refs/heads/"):])


def url_of(root: Path, remote: str) -> str:
    """The remote's address as a person may see it: any user name or password in it left out."""
    url = git(root, "remote", "get-url", remote, check=False).strip()
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        url = f"{scheme}://{rest.split('@', 1)[1]}"
    return remote_text(url) if url else "(no address)"


def cause(text: str) -> str:
    """Git's reason in one line: its ``fatal:``/``error:`` line (the remote's own word, a hook's
    refusal or a server's error, quoted and never obeyed), else its last line. Git's advice
    lines after the reason ("Please make sure you have the correct access rights / and the
    repository exists.") are not a reason."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    reason = lines[-1] if lines else ""
    for line in reversed(lines):
        for prefix in ("fatal:", "error:"):
            if line.lower().startswith(prefix):
                reason = line[len(prefix):].strip()
    # a full or failing disk (here or the remote's) is named even when git's reason is another line
    disk = next((ln for ln in lines if any(c in ln.lower() for c in DISK_TEXT)), None)
    return remote_text(f"{disk}; {reason}" if disk and disk not in (reason, f"error: {reason}",
                                                                      f"fatal: {reason}") else reason)


def unreachable(root: Path, remote: str, got: GitOutcome) -> str:
    """The sentence an offline result says: which remote, at which address, and why."""
    return f"cannot reach {remote} ({url_of(root, remote)}): {got.message}"


def _run(root: Path, args: list[str], timeout: float) -> GitOutcome:
    try:
        git(root, *args, timeout=timeout)
    except TimeoutError as exc:
        return GitOutcome(False, True, str(exc))
    except subprocess.CalledProcessError as exc:
        text = (exc.stderr or exc.stdout or "").strip()
        offline = any(p in text.lower() for p in _OFFLINE)
        return GitOutcome(False, offline, cause(text) or f"git {args[0]} failed", missing=_MISSING in text.lower())
    return GitOutcome(True, False, "")


#: What names the cause of a failed transfer when git's last line only sums it up
#: ("failed to push some refs"): the disk on either side.


def fetch(root: Path, up: Upstream, *, timeout: float = GIT_TIMEOUT) -> GitOutcome:
    return _run(root, ["fetch", "--quiet", "--no-tags", up.remote,
                       f"+refs/heads/{up.branch}:{up.ref}"], timeout)


def push(root: Path, up: Upstream, commit: str, *, timeout: float = GIT_TIMEOUT) -> GitOutcome:
    """Push exactly ``commit`` to the upstream branch; never forced."""
    return _run(root, ["push", "--quiet", "--porcelain", up.remote, f"{commit}:refs/heads/{up.branch}"], timeout)


def rev(root: Path, name: str) -> str | None:
    out = git(root, "rev-parse", "--verify", "-q", f"{name}^{{commit}}", check=False).strip()
    return out or None


def is_ancestor(root: Path, a: str, b: str) -> bool:
    return subprocess.run(["git", "merge-base", "--is-ancestor", a, b], cwd=root, capture_output=True).returncode == 0


def counts(root: Path, head: str, tip: str | None) -> tuple[int, int]:
    """(ahead, behind) of ``head`` against ``tip``."""
    if not tip:
        return 0, 0
    out = git(root, "rev-list", "--left-right", "--count", f"{head}...{tip}", check=False).split()
    return (int(out[0]), int(out[1])) if len(out) == 2 else (0, 0)
