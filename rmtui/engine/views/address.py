"""How a shared view is named and found: the id grammar of views, connections and shares, and
the join URL of a Git share, ``<repo>#share=<id>[&branch=<b>]`` (no branch: the repository's
default one). Both the registry (``files``) and the Git transport (``gitshare``) read them, so
they sit below both."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from rmtui.engine.errors import UsageError
from rmtui.engine.memory.graph import ID_RE


def check_view_id(value: object, what: str = "shared view id") -> str:
    """A view (or connection) id: the graph's id grammar, and never ``.`` or ``..`` (it names folders)."""
    if not isinstance(value, str) or not ID_RE.match(value) or value in (".", ".."):
        raise UsageError(f"{what} {value!r} must match [A-Za-z0-9_.-]+ (and not be . or ..)")
    return value


@dataclass(frozen=True)
class ShareRef:
    repo_url: str
    share_id: str
    branch: str | None = None

    @property
    def url(self) -> str:
        return join_url(self.repo_url, self.share_id, self.branch)


def strip_fragment(url: str) -> str:
    """The repository part of a join URL (its ``#...`` fragment removed)."""
    p = urlsplit(url.strip())
    return urlunsplit((p.scheme, p.netloc, p.path, p.query, ""))


def parse_join_url(url: str) -> ShareRef:
    """``<repo>#share=<id>[&branch=<b>]`` → its parts; a URL without ``share`` is refused."""
    text = url.strip()
    frag = parse_qs(urlsplit(text).fragment, keep_blank_values=False)
    share = (frag.get("share") or [""])[0]
    if not share:
        raise UsageError(f"{url!r} is not a Git share URL: it needs #share=<share-id>")
    branch: str | None = (frag.get("branch") or [""])[0] or None
    repo = strip_fragment(text)
    if not repo:
        raise UsageError(f"{url!r} names no repository")
    if branch is not None and (branch.startswith("-") or ".." in branch or not branch.strip()):
        raise UsageError(f"branch {branch!r} in {url!r} is not a branch name")
    return ShareRef(repo, check_view_id(share, "share id"), branch.strip() if branch else None)


def join_url(repo_url: str, share_id: str, branch: str | None = None) -> str:
    frag = {"share": share_id} | ({"branch": branch} if branch else {})
    return f"{strip_fragment(repo_url)}#{urlencode(frag)}"
