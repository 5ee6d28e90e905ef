"""Role tools over one worktree (docs/architecture.md, "Roles").

Every path argument is resolved inside the worktree (``resolve_inside``: no absolute
paths, no ``..``, no symlinks out) and checked against the role's read or write rules.
An edit (or delete, or rename) needs an earlier ``read`` of the same, unchanged file, so a
model never overwrites text it has not seen. Git access is through GitPython, read-only
except ``git_add``/``git_commit`` for writers.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from pathlib import Path
from typing import Any

import git

from rmtui.engine.errors import UsageError
from rmtui.engine.fsutil import atomic_write_text, resolve_inside
from rmtui.engine.memory import role_table as roles
from rmtui.engine.roles.executors.base import ToolError, ToolSpec

MAX_READ_LINES = 2000
MAX_OUTPUT_CHARS = 60000
MAX_MATCHES = 200
_REV_RE = re.compile(r"^[A-Za-z0-9_./^~@{}-]{1,200}$")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _cap(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    return (text[:MAX_OUTPUT_CHARS]
            + f"\n[output cut at {MAX_OUTPUT_CHARS} of {len(text)} characters; narrow the request]")


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_S = {"type": "string"}
_I = {"type": "integer"}
_B = {"type": "boolean"}


class RoleTools:
    """The tools granted to ``role`` over ``worktree``; ``specs()`` lists them for a model."""

    def __init__(self, worktree: Path | str, role: str) -> None:
        self.worktree = Path(worktree).resolve()
        self.role = role
        self.spec = roles.role_spec(role)
        self.reads: dict[str, str] = {}  # rel path -> sha256 of the content the model saw
        self.repo = git.Repo(self.worktree)

    # -- path handling ---------------------------------------------------------------------

    def _rel(self, path: Any) -> tuple[str, Path]:
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path must be a non-empty string")
        rel = path.strip().replace("\\", "/")
        while rel.startswith("./"):
            rel = rel[2:]
        try:
            target = resolve_inside(self.worktree, rel)
        except UsageError as exc:
            raise ToolError(exc.message) from None
        return os.path.normpath(rel), target

    def _readable(self, path: Any) -> tuple[str, Path]:
        rel, target = self._rel(path)
        if not roles.may_read(self.role, rel):
            raise ToolError(f"role {self.role} may not read {rel}")
        return rel, target

    def _writable(self, path: Any) -> tuple[str, Path]:
        rel, target = self._rel(path)
        if not roles.may_write(self.role, rel):
            raise ToolError(f"role {self.role} may not write {rel}")
        if target.is_symlink():
            raise ToolError(f"{rel} is a symbolic link")
        return rel, target

    def _require_read(self, rel: str, target: Path) -> bytes:
        if not target.is_file():
            raise ToolError(f"{rel} does not exist")
        data = target.read_bytes()
        seen = self.reads.get(rel)
        if seen is None:
            raise ToolError(f"read {rel} before changing it")
        if seen != _sha(data):
            raise ToolError(f"{rel} changed since you read it; read it again")
        return data

    def _files(self) -> list[str]:
        out = []
        for dirpath, dirnames, filenames in os.walk(self.worktree):
            rel_dir = os.path.relpath(dirpath, self.worktree)
            dirnames[:] = sorted(d for d in dirnames
                                 if not roles.is_hidden(d if rel_dir == "." else f"{rel_dir}/{d}")
                                 and not os.path.islink(os.path.join(dirpath, d)))
            for name in sorted(filenames):
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if roles.may_read(self.role, rel) and not os.path.islink(os.path.join(dirpath, name)):
                    out.append(rel)
        return out

    # -- read tools ------------------------------------------------------------------------

    def read(self, args: dict[str, Any]) -> str:
        rel, target = self._readable(args["path"])
        if not target.is_file():
            raise ToolError(f"{rel} does not exist or is not a file")
        data = target.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{rel} is not UTF-8 text") from None
        self.reads[rel] = _sha(data)
        lines = text.splitlines()
        offset = max(1, int(args.get("offset") or 1))
        limit = min(MAX_READ_LINES, max(1, int(args.get("limit") or MAX_READ_LINES)))
        chunk = lines[offset - 1: offset - 1 + limit]
        body = "\n".join(f"{offset + i:6}\t{line}" for i, line in enumerate(chunk))
        left = len(lines) - (offset - 1 + limit)
        more = "" if left <= 0 else f"\n[{left} more lines; read on with offset]"
        return _cap(f"{rel} ({len(lines)} lines)\n{body}{more}")

    def glob(self, args: dict[str, Any]) -> str:
        pattern = str(args.get("pattern") or "*")
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise ToolError("glob patterns are relative to the root and may not use ..")
        hits = [f for f in self._files() if fnmatch.fnmatch(f, pattern) or
                (pattern.startswith("**/") and fnmatch.fnmatch(f, pattern[3:]))]
        return _cap("\n".join(hits[:1000]) or "no files match")

    def grep(self, args: dict[str, Any]) -> str:
        flags = re.IGNORECASE if args.get("ignore_case") else 0
        try:
            rx = re.compile(str(args["pattern"]), flags)
        except re.error as exc:
            raise ToolError(f"bad regular expression: {exc}") from None
        pattern = str(args.get("glob") or "*")
        out: list[str] = []
        for rel in self._files():
            if not (fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(os.path.basename(rel), pattern)):
                continue
            try:
                text = (self.worktree / rel).read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if rx.search(line):
                    out.append(f"{rel}:{n}: {line}")
                    if len(out) >= MAX_MATCHES:
                        return _cap("\n".join(out) + f"\n[stopped at {MAX_MATCHES} matches; narrow the pattern]")
        return _cap("\n".join(out) or "no matches")

    def outline(self, args: dict[str, Any]) -> str:
        from rmtui.engine.memory.outline import outline_text

        return _cap(outline_text(self.worktree, self.role))

    def _git(self, *argv: str) -> str:
        try:
            return self.repo.git.execute(["git", *argv], with_extended_output=False,
                                         env={"GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"})
        except git.GitCommandError as exc:
            raise ToolError(f"git {argv[0]} failed: {(exc.stderr or str(exc)).strip()[:500]}") from None

    def _rev(self, value: Any) -> str:
        rev = str(value)
        if not _REV_RE.match(rev) or rev.startswith("-"):
            raise ToolError(f"not a revision: {rev!r}")
        return rev

    def git_status(self, args: dict[str, Any]) -> str:
        return self._git("status", "--short", "--branch", "--untracked-files=all") or "clean"

    def git_diff(self, args: dict[str, Any]) -> str:
        argv = ["diff", "--no-color", "--no-ext-diff"]
        if args.get("staged"):
            argv.append("--cached")
        if args.get("rev"):
            argv.append(self._rev(args["rev"]))
        argv.append("--")
        if args.get("path"):
            argv.append(self._readable(args["path"])[0])
        return _cap(self._git(*argv) or "no differences")

    def git_log(self, args: dict[str, Any]) -> str:
        count = min(200, max(1, int(args.get("max_count") or 30)))
        argv = ["log", f"--max-count={count}", "--date=iso-strict", "--format=commit %H%nDate: %ad%n%n%B"]
        if args.get("grep"):
            argv.append(f"--grep={args['grep']}")
        if args.get("rev"):
            argv.append(self._rev(args["rev"]))
        argv.append("--")
        if args.get("path"):
            argv.append(self._readable(args["path"])[0])
        return _cap(self._git(*argv) or "no commits")

    def git_show(self, args: dict[str, Any]) -> str:
        rev = self._rev(args["rev"])
        if args.get("path"):
            rel = self._readable(args["path"])[0]
            return _cap(self._git("show", f"{rev}:{rel}"))
        return _cap(self._git("show", "--no-color", "--stat", "--patch", rev, "--"))

    # -- write tools -----------------------------------------------------------------------

    def _write(self, rel: str, target: Path, text: str) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, text)
        self.reads[rel] = _sha(text.encode("utf-8"))

    def edit(self, args: dict[str, Any]) -> str:
        rel, target = self._writable(args["path"])
        data = self._require_read(rel, target)
        text = data.decode("utf-8")
        old, new = str(args["old_text"]), str(args["new_text"])
        if not old:
            raise ToolError("old_text must not be empty")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old_text does not occur in {rel}")
        if count > 1 and not args.get("replace_all"):
            raise ToolError(f"old_text occurs {count} times in {rel}; give more context or set replace_all")
        updated = text.replace(old, new) if args.get("replace_all") else text.replace(old, new, 1)
        self._write(rel, target, updated)
        return f"edited {rel} ({count if args.get('replace_all') else 1} replacement)"

    def create(self, args: dict[str, Any]) -> str:
        rel, target = self._writable(args["path"])
        if target.exists():
            raise ToolError(f"{rel} already exists; read and edit it instead")
        content = str(args["content"])
        self._write(rel, target, content)
        return f"created {rel} ({len(content.splitlines())} lines)"

    def delete(self, args: dict[str, Any]) -> str:
        rel, target = self._writable(args["path"])
        self._require_read(rel, target)
        target.unlink()
        self.reads.pop(rel, None)
        return f"deleted {rel}"

    def rename(self, args: dict[str, Any]) -> str:
        src, src_path = self._writable(args["source"])
        dst, dst_path = self._writable(args["destination"])
        self._require_read(src, src_path)
        if dst_path.exists():
            raise ToolError(f"{dst} already exists")
        dst_path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src_path, dst_path)
        self.reads[dst] = self.reads.pop(src)
        return f"renamed {src} to {dst}"

    def git_add(self, args: dict[str, Any]) -> str:
        paths = args.get("paths") or []
        if isinstance(paths, str):
            paths = [paths]
        if not paths:
            raise ToolError("name the paths to stage (or [\".\"] for every change)")
        if paths == ["."]:
            changed = [line[3:] for line in self._git("status", "--porcelain", "--untracked-files=all").splitlines()]
            paths = [p.split(" -> ")[-1] for p in changed]
            if not paths:
                return "nothing to stage"
        rels = []
        for p in paths:
            rel, _ = self._rel(p)
            if not roles.may_write(self.role, rel):
                raise ToolError(f"role {self.role} may not write {rel}")
            rels.append(rel)
        self._git("add", "-A", "--", *rels)
        return "staged " + ", ".join(rels)

    def git_commit(self, args: dict[str, Any]) -> str:
        message = str(args.get("message") or "").strip()
        if not message:
            raise ToolError("a commit needs a message")
        if not self._git("diff", "--cached", "--name-only"):
            raise ToolError("nothing is staged; git_add the changed paths first")
        self._git("commit", "--no-verify", "--no-gpg-sign", "-q", "-m", message)
        return f"committed {self.repo.head.commit.hexsha[:12]}: {message.splitlines()[0]}"

    def discard(self, args: dict[str, Any]) -> str:
        rel, target = self._writable(args["path"])
        tracked = bool(self._git("ls-files", "--", rel))
        if tracked:
            self._git("checkout", "HEAD", "--", rel)
            self._git("reset", "-q", "HEAD", "--", rel)
        elif target.exists():
            target.unlink()
        else:
            raise ToolError(f"{rel} has no change to discard")
        self.reads.pop(rel, None)
        return f"discarded uncommitted changes of {rel}"

    def validate_memory(self, args: dict[str, Any]) -> str:
        """The answer ``rmtui --headless validate --path <worktree>`` prints, for every role."""
        from rmtui.engine.writes.validate import report_text, validate_worktree

        report = validate_worktree(self.worktree)
        return _cap(("" if report.ok else "invalid:\n") + report_text(report))

    # -- grants ----------------------------------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        g = self.spec.grants
        out: list[ToolSpec] = []
        if roles.READ in g:
            out += [
                ToolSpec("read", "Read a UTF-8 file of the memory root, with line numbers. Required before "
                         "editing, deleting or renaming it.",
                         _obj({"path": _S, "offset": _I, "limit": _I}, ["path"]), self.read),
                ToolSpec("glob", "List files whose root-relative path matches a glob pattern (e.g. MEMORY_*.md).",
                         _obj({"pattern": _S}, ["pattern"]), self.glob),
                ToolSpec("grep", "Search file lines with a regular expression; optional glob limits the files.",
                         _obj({"pattern": _S, "glob": _S, "ignore_case": _B}, ["pattern"]), self.grep),
                ToolSpec("outline", "The memory graph outline: headings and nodes with ids, edges, file:line.",
                         _obj({}, []), self.outline),
                ToolSpec("git_status", "Uncommitted changes in this worktree.", _obj({}, []), self.git_status),
                ToolSpec("git_diff", "Diff of uncommitted (or staged) changes, or against a revision.",
                         _obj({"rev": _S, "path": _S, "staged": _B}, []), self.git_diff),
            ]
        if roles.HISTORY in g:
            out += [
                ToolSpec("git_log", "Commit history with full messages (prune ledgers included).",
                         _obj({"max_count": _I, "path": _S, "grep": _S, "rev": _S}, []), self.git_log),
                ToolSpec("git_show", "A past commit (stat and patch), or a file as it was at a revision.",
                         _obj({"rev": _S, "path": _S}, ["rev"]), self.git_show),
            ]
        if roles.WRITE in g:
            out += [
                ToolSpec("edit", "Replace old_text with new_text in a file you have read (old_text must be unique "
                         "unless replace_all).",
                         _obj({"path": _S, "old_text": _S, "new_text": _S, "replace_all": _B},
                              ["path", "old_text", "new_text"]), self.edit),
                ToolSpec("create", "Create a new file with the given content.",
                         _obj({"path": _S, "content": _S}, ["path", "content"]), self.create),
                ToolSpec("delete", "Delete a file you have read.", _obj({"path": _S}, ["path"]), self.delete),
                ToolSpec("rename", "Rename a file you have read.",
                         _obj({"source": _S, "destination": _S}, ["source", "destination"]), self.rename),
                ToolSpec("git_add", "Stage paths for the next commit ([\".\"] stages every change).",
                         _obj({"paths": {"type": "array", "items": _S}}, ["paths"]), self.git_add),
                ToolSpec("git_commit", "Commit the staged changes with a message.",
                         _obj({"message": _S}, ["message"]), self.git_commit),
            ]
        if roles.DISCARD in g:
            out.append(ToolSpec("discard", "Drop the uncommitted changes of one path (restore it from HEAD).",
                                _obj({"path": _S}, ["path"]), self.discard))
        if roles.VALIDATE in g:
            out.append(ToolSpec("validate_memory", "Validate the memory graph in this worktree; lists every error "
                                "(and warnings, which do not make it invalid).",
                                _obj({}, []), self.validate_memory))
        return out
