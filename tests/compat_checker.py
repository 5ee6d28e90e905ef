"""A checker of the original RightMemory tool's tracked formats (docs/formats.md, "Graph files",
"Evidence queue", "Update records"), written
from the facts independently of the engine, so a root rmtui wrote can be held against them.

``check_root(path)`` walks the whole history of a root and returns a list of violations:
- every heading anchor in every Markdown graph file has the grammar ``{KIND#id}`` (no space);
- every ``update_records/*.json`` is named ``update-batch-<64 hex>.json``, has exactly the keys
  ``schema_version`` (1), ``operation_id`` (= its file name, = the original's batch id
  recomputed here from its candidates) and ``candidates`` (sorted, unique, full records);
- each candidate has exactly the original's fields and value rules;
- a commit adding a record is the commit of that batch (its trailer ``RightMemory-Operation``
  equals the record's batch id), and the record is added in that same commit, never later.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

ANCHOR = re.compile(r"\{(MF|MQ|F|M|S|)#([^}]*)\}")
ID = re.compile(r"^[A-Za-z0-9_.-]+$")
RECORD_NAME = re.compile(r"^update_records/(update-batch-[0-9a-f]{64})\.json$")
UID = re.compile(r"^[0-9a-f]{32}$")
CANDIDATE_KEYS = {"schema_version", "uid", "session_id", "display_id", "message", "submitted_at"}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def recompute_batch_id(candidates: list[dict]) -> str:
    sessions: dict[str, list[dict]] = {}
    for c in candidates:
        sessions.setdefault(c["session_id"], []).append(c)
    body = [{"session_id": s, "jobs": [{"id": c["display_id"], "candidate_uid": c["uid"], "message": c["message"],
                                         "submitted_at": c["submitted_at"]}
                                        for c in sorted(cs,
                                                        key=lambda c: (c["display_id"], c["submitted_at"], c["uid"]))]}
            for s, cs in sorted(sessions.items())]
    text = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return "update-batch-" + hashlib.sha256(text.encode()).hexdigest()


def check_candidate(c: object, where: str) -> list[str]:
    if not isinstance(c, dict) or set(c) != CANDIDATE_KEYS:
        return [f"{where}: candidate keys {sorted(c) if isinstance(c, dict) else c!r} != {sorted(CANDIDATE_KEYS)}"]
    out = []
    if c["schema_version"] != 1 or type(c["schema_version"]) is not int:
        out.append(f"{where}: schema_version must be 1")
    if not isinstance(c["uid"], str) or not UID.match(c["uid"]):
        out.append(f"{where}: uid {c['uid']!r} is not 32 lowercase hex")
    s = c["session_id"]
    if not isinstance(s, str) or not s or s != s.strip() or s in (".", "..") or "/" in s or "\\" in s:
        out.append(f"{where}: session_id {s!r} is not canonical")
    if type(c["display_id"]) is not int or c["display_id"] < 1:
        out.append(f"{where}: display_id must be a positive int")
    if not isinstance(c["message"], str) or not c["message"].strip():
        out.append(f"{where}: message must be non-blank")
    t = c["submitted_at"]
    try:
        ok = isinstance(t, str) and datetime.fromisoformat(t).astimezone(UTC).isoformat() == t \
            and datetime.fromisoformat(t).tzinfo is not None
    except ValueError:
        ok = False
    if not ok:
        out.append(f"{where}: submitted_at {t!r} is not canonical UTC")
    return out


def check_record(rel: str, text: str) -> list[str]:
    m = RECORD_NAME.match(rel)
    if not m:
        return [f"{rel}: update record name must be update_records/update-batch-<64 hex>.json"]
    try:
        data = json.loads(text)
    except ValueError:
        return [f"{rel}: invalid JSON"]
    if not isinstance(data, dict) or set(data) != {"schema_version", "operation_id", "candidates"}:
        return [f"{rel}: keys must be exactly schema_version, operation_id, candidates"]
    out = []
    if data["schema_version"] != 1:
        out.append(f"{rel}: schema_version must be 1")
    if data["operation_id"] != m.group(1):
        out.append(f"{rel}: operation_id {data['operation_id']} differs from the file name")
    cands = data["candidates"]
    if not isinstance(cands, list) or not cands:
        return out + [f"{rel}: candidates must be a non-empty list"]
    for i, c in enumerate(cands):
        out += check_candidate(c, f"{rel}: candidates[{i}]")
    if out:
        return out
    order = [(c["session_id"], c["display_id"], c["submitted_at"], c["uid"]) for c in cands]
    if order != sorted(order) or len({c["uid"] for c in cands}) != len(cands):
        out.append(f"{rel}: candidates must be sorted and unique")
    if recompute_batch_id(cands) != data["operation_id"]:
        out.append(f"{rel}: operation_id is not the batch id of its candidates")
    if text != json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n":
        out.append(f"{rel}: not indent-2 sorted-key JSON with a final newline")
    return out


def check_anchors(rel: str, text: str) -> list[str]:
    out, fence = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if fence or not re.match(r"^ {0,3}#{1,6}\s", line):
            continue
        for m in ANCHOR.finditer(line):
            if not ID.match(m.group(2)):
                out.append(f"{rel}:{n}: invalid heading id {m.group(0)!r}")
    return out


# -- the graph as the original's newest (CommonMark) parser reads it ------------------------
# The original finds graph blocks with a CommonMark block parse (markdown-it, tables on) of the
# whole file as read, a byte-order mark included: only an ATX heading at the top level is a
# heading (no setext heading) and only a top-level list item is a node candidate. So a heading
# or bullet inside an HTML block (a ``<div>`` runs to a blank line, a comment to ``-->``), inside
# fenced or indented code, nested in a list item, or in a paragraph it cannot interrupt (an
# ordered list must start at 1 to interrupt one) is text. ``:::body`` ... ``:::`` (same colon
# count, at the left margin of the top level) is a heading's body; unclosed or stray is an error.
# A list item under an F# heading (in its own file) or a terminal #### heading is an error, and
# so is an empty element in an edge list. An anchor or edge list inside inline code or after a
# backslash is text.

G_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
G_ANCHOR = re.compile(r"\{(F#|M#|S#|MF#|MQ#|#)([A-Za-z0-9_.-]+)\}(?:[ \t]*(?:→|->)[ \t]*\[([^\]]*)\])?$")
G_OTHER_MARKER = re.compile(r"\{([A-Za-z]*#)[^{}]*\}(?:[ \t]*(?:→|->)[ \t]*\[[^\]]*\])?$")
G_NODE = re.compile(r"^ {0,3}(?:[-+*]|[0-9]{1,9}[.)])[ \t]+`([A-Za-z0-9_.-]+)`.*[ \t](?:→|->)[ \t]*\[([^\]]*)\][ \t]*$")
G_BODY_OPEN = re.compile(r"(:{3,})body[ \t]*")
G_BODY_CLOSE = re.compile(r":{3,}[ \t]*")


def _edge_problems(where: str, raw: str) -> tuple[list[str], list[str]]:
    if not raw.strip():
        return [], []
    out, targets = [], []
    for part in raw.split(","):
        if not part.strip():
            out.append(f"{where}: empty edge element in [{raw}]")
        elif re.fullmatch(r"\s*[A-Za-z][A-Za-z0-9_-]*:\s*[A-Za-z0-9_.-]+\s*", part):
            targets.append(part.split(":", 1)[1].strip())
    return out, targets


def _hide_literals(text: str) -> str:
    """``text`` with code spans and backslash-escaped characters turned to spaces (same length)."""
    out, i = list(text), 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out[i] = out[i + 1] = " "
            i += 2
            continue
        if text[i] != "`":
            i += 1
            continue
        run = len(text[i:]) - len(text[i:].lstrip("`"))
        closing = re.compile("(?<!`)" + "`" * run + "(?!`)").search(text, i + run)
        if closing is None:
            i += run
            continue
        for k in range(i, closing.end()):
            out[k] = " "
        i = closing.end()
    return "".join(out)


def _body_block(state, start: int, end: int, silent: bool) -> bool:
    """A ``:::body`` fence at the left margin of the top level, up to the first later line of the
    same colons (whatever lies between); a lone closing line is a stray one."""
    if state.level != 0 or state.tShift[start] != 0:
        return False
    line = state.src[state.bMarks[start]:state.eMarks[start]]
    opening = G_BODY_OPEN.fullmatch(line)
    if opening is None and G_BODY_CLOSE.fullmatch(line) is None:
        return False
    if silent:
        return True
    problem, last = "stray", start
    if opening is not None:
        problem, last = "unclosed", end - 1
        for k in range(start + 1, end):
            if state.src[state.bMarks[k]:state.eMarks[k]].rstrip(" \t") == opening.group(1):
                problem, last = "", k
                break
    state.line = last + 1
    token = state.push("rm_body", "", 0)
    token.map = [start, last + 1]
    token.meta = {"problem": problem, "colons": opening.group(1) if opening else line.strip()}
    return True


def _commonmark_blocks(text: str) -> tuple[list[str], dict[int, str], list[tuple[int, str]]]:
    """(lines, {1-based line: "heading" | "item"}, [(line, body problem)]) of one file."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    md.block.ruler.before("fence", "rm_body", _body_block, {"alt": ["paragraph", "reference", "blockquote", "list"]})
    kinds: dict[int, str] = {}
    bodies: list[tuple[int, str]] = []
    for tok in md.parse(text):
        if tok.map is None:
            continue
        if tok.type == "heading_open" and tok.level == 0 and tok.markup.startswith("#"):
            kinds[tok.map[0] + 1] = "heading"
        elif tok.type == "list_item_open" and tok.level == 1:
            kinds[tok.map[0] + 1] = "item"
        elif tok.type == "rm_body" and tok.meta["problem"]:
            bodies.append((tok.map[0] + 1, f"{tok.meta['problem']} {tok.meta['colons']}body fence"))
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # the lines the token maps count
    return lines, kinds, bodies


def graph_file_facts(rel: str, text: str) -> tuple[list[str], dict[str, str], list[tuple[str, str]]]:
    """(violations, {id: "heading"|"node"}, [(where, edge target)]) of one graph file."""
    out: list[str] = []
    ids: dict[str, str] = {}
    edges: list[tuple[str, str]] = []
    lines, kinds, bodies = _commonmark_blocks(text)
    out += [f"{rel}:{n}: {problem}" for n, problem in bodies]
    headings: list[tuple[int, str | None]] = []  # (level, kind) of the open headings
    for n, kind in sorted(kinds.items()):
        line = lines[n - 1].expandtabs(4)
        where = f"{rel}:{n}"
        h = G_HEADING.match(line) if kind == "heading" else None
        if h:
            level, rest = len(h.group(1)), re.sub(r"(?:^|[ \t]+)#+[ \t]*$", "", h.group(2) or "")
            hidden = _hide_literals(rest)
            found = G_ANCHOR.search(hidden)
            a = G_ANCHOR.match(rest, found.start()) if found else None  # its text as written
            other = G_OTHER_MARKER.search(hidden) if a is None else None
            marker = a.group(1) if a else None
            if a:
                ids[a.group(2)] = "heading"
                probs, targets = _edge_problems(where, a.group(3) or "")
                out += probs
                edges += [(where, t) for t in targets]
            elif other:
                out.append(f"{where}: {other.group(0)} is no valid anchor")
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, marker))
            continue
        if kind != "item":
            continue
        if any(k == "F#" or (lv == 4 and k) for lv, k in headings):
            out.append(f"{where}: list item under an F# or #### heading")  # (a node there still has its id)
        node = G_NODE.match(line)
        if node:
            ids[node.group(1)] = "node"
            probs, targets = _edge_problems(where, node.group(2))
            out += probs
            edges += [(where, t) for t in targets]
    return out, ids, edges


def check_graph(files: dict[str, str]) -> tuple[list[str], set[str]]:
    """Violations of the rules above over ``{name: text}`` (MEMORY.md / PURSUITS.md and their F#
    files, which need no Focus or Pursuit-field handling here), and the ids the original registers;
    an edge to an id it does not register dangles."""
    out: list[str] = []
    ids: dict[str, str] = {}
    edges: list[tuple[str, str]] = []
    for rel, text in sorted(files.items()):
        v, i, e = graph_file_facts(rel, text)
        out += v
        ids.update(i)
        edges += e
    out += [f"{where}: edge to {t} dangles" for where, t in edges if t not in ids]
    return out, set(ids)


def trailer(root: Path, commit: str) -> str:
    return git(root, "log", "-1", "--format=%(trailers:key=RightMemory-Operation,valueonly)", commit).strip()


def check_root(root: Path) -> list[str]:
    root = Path(root)
    problems: list[str] = []
    for rel in git(root, "ls-files").splitlines():
        path = root / rel
        if rel.endswith(".md") and (rel.startswith(("MEMORY", "PURSUIT"))):
            problems += check_anchors(rel, path.read_text(encoding="utf-8"))
        if rel.startswith("update_records/"):
            problems += check_record(rel, path.read_text(encoding="utf-8"))
    for commit in git(root, "rev-list", "HEAD").split():
        parents = git(root, "log", "-1", "--format=%P", commit).split()
        if len(parents) != 1:
            continue
        added = git(root, "diff", "--name-only", "--diff-filter=A", parents[0], commit).split()
        records = [p for p in added if p.startswith("update_records/")]
        value = trailer(root, commit)
        if value.startswith("update-batch-"):
            want = f"update_records/{value}.json"
            if want not in added:
                problems.append(f"commit {commit[:10]}: Update batch {value} lands without its record "
                                "in the same commit")
        for rec in records:
            m = RECORD_NAME.match(rec)
            if m and m.group(1) != value:
                problems.append(f"commit {commit[:10]}: adds {rec} but its trailer is {value or 'missing'}")
    return problems


def candidates_of(root: Path, batch_id: str) -> list[dict]:
    return json.loads((Path(root) / "update_records" / f"{batch_id}.json").read_text())["candidates"]


# -- batch selection, as the original's queue claim picks candidates -------------------------

def select_candidates(candidates: list[dict], recovered_uids: set[str], *, target: int, max_wait: float,
                      now: datetime, debounce: float = 3600) -> list[str]:
    """The uids the original puts in its next batch (recoveries due and expired leases aside):
    sessions holding a failed batch's candidate are kept back whole; a session is ready
    ``debounce`` after its last submit or when it alone reaches ``target``; ready sessions are
    taken whole by (ready time, session id) until ``target``, or all of them once the first
    waited ``max_wait`` more. ``[]``: no batch now."""
    held = {c["session_id"] for c in candidates if c["uid"] in recovered_uids}
    sessions: dict[str, list[dict]] = {}
    for c in candidates:
        if c["session_id"] not in held:
            sessions.setdefault(c["session_id"], []).append(c)
    ready = []
    for sid, cs in sessions.items():
        cs = sorted(cs, key=lambda c: (c["submitted_at"], c["uid"]))
        at = max(datetime.fromisoformat(c["submitted_at"]) for c in cs).timestamp() + debounce
        if at <= now.timestamp() or len(cs) >= target:
            ready.append((at, sid, cs))
    ready.sort(key=lambda t: (t[0], t[1]))
    out: list[str] = []
    for _at, _sid, cs in ready:
        out += [c["uid"] for c in cs]
        if len(out) >= target:
            return out
    if ready and ready[0][0] + max_wait <= now.timestamp():
        return out
    return []


# -- shared views: registry entries, the Git share cache, share.toml, the view folder ------------

ORIGINAL_TARGET_KEYS = {"kind", "path", "view_id", "base_url", "credential_id", "question_base_url",
                        "question_credential_id", "version_id", "accepted_from_url", "git_url", "git_branch",
                        "git_share_id"}
PACKAGE_FILES = {"view.md", "recipe.toml", "rightmemory-shared-view.toml", "dist/MEMORY.md", "dist/manifest.toml"}


def check_shared_views_registry(text: str) -> list[str]:
    """``shared_views.toml`` as the original loads it: every connection has type and ref, a Git file
    target names its share by git_url and git_share_id (the original pulls by those two)."""
    import tomllib

    out = []
    for cid, entry in tomllib.loads(text).get("connections", {}).items():
        if not ID.match(cid) or not isinstance(entry.get("type"), str) or not isinstance(entry.get("ref"), str):
            out.append(f"connections.{cid}: needs an id, type and ref")
            continue
        target = entry.get("target", {})
        unknown = set(target) - ORIGINAL_TARGET_KEYS
        if unknown:
            out.append(f"connections.{cid}.target: keys the original does not know: {sorted(unknown)}")
        if target.get("kind") == "git-file":
            if entry["type"] != "file":
                out.append(f"connections.{cid}: a git-file target needs type file")
            for key in ("git_url", "git_share_id"):
                if not isinstance(target.get(key), str) or not target[key].strip():
                    out.append(f"connections.{cid}.target: git-file without {key}")
    return out


def share_cache_path(root: Path, repo_url: str, branch: str | None) -> Path:
    key = f"{repo_url.split('#', 1)[0].strip()}\0{(branch or '').strip()}"
    return Path(root) / ".runtime" / "git_shares" / hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def original_checkout(root: Path, repo_url: str, branch: str | None) -> Path:
    """What the original runs on its share cache before it reads or publishes: clone it if absent,
    else ``fetch --all --prune``; check the branch out; ``pull --ff-only``. A failure raises."""
    path = share_cache_path(root, repo_url, branch)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        git(path.parent, "clone", *(["--branch", branch] if branch else []), repo_url, str(path))
    else:
        git(path, "fetch", "--all", "--prune")
    if branch and subprocess.run(["git", "checkout", branch], cwd=path, capture_output=True).returncode != 0:
        git(path, "checkout", "-B", branch, f"origin/{branch}")
    if subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=path, capture_output=True).returncode == 0:
        git(path, "pull", "--ff-only")
    return path


def read_git_share(root: Path, join_url: str) -> tuple[dict, Path]:
    """The original's join: (share.toml, package folder) read from the working tree of its cache."""
    import tomllib
    from urllib.parse import parse_qs, urlsplit

    frag = parse_qs(urlsplit(join_url).fragment)
    repo, share = join_url.split("#", 1)[0], frag["share"][0]
    branch = (frag.get("branch") or [None])[0]
    clone = original_checkout(root, repo, branch)
    meta = tomllib.loads((clone / "shares" / share / "share.toml").read_text(encoding="utf-8"))
    package = clone / "shares" / share / meta["file"].get("path", "package")
    missing = sorted(p for p in PACKAGE_FILES if not (package / p).is_file())
    if missing:
        raise AssertionError(f"Git share package misses {missing}")
    return meta, package


def check_share_toml(text: str) -> list[str]:
    import tomllib

    meta = tomllib.loads(text)
    out = []
    if meta.get("version") != 1 or meta.get("transport") != "git" or meta.get("parts") != ["file"]:
        out.append("share.toml: version 1, transport git, parts [file]")
    part = meta.get("file", {})
    if part.get("title") != f"{meta.get('title')} Files":
        out.append(f"share.toml: [file] title {part.get('title')!r} is not the share title + ' Files'")
    if part.get("path") != "package" or part.get("manifest") != "package/dist/manifest.toml":
        out.append("share.toml: [file] path package, manifest package/dist/manifest.toml")
    return out


def check_view_folder(root: Path, view_id: str) -> list[str]:
    """A provider's view folder as the original keeps it: a tracked ``.gitignore`` of ``dist/``, the
    build in ``shared_views/<view>/dist/``, and nothing of it showing in ``git status``."""
    folder = Path(root) / "shared_views" / view_id
    out = []
    if git(root, "ls-files", f"shared_views/{view_id}/.gitignore").strip() != f"shared_views/{view_id}/.gitignore":
        out.append(f"shared_views/{view_id}/.gitignore is not tracked")
    elif (folder / ".gitignore").read_text(encoding="utf-8") != "dist/\n":
        out.append(f"shared_views/{view_id}/.gitignore is not 'dist/'")
    for name in ("MEMORY.md", "manifest.toml"):
        if not (folder / "dist" / name).is_file():
            out.append(f"shared_views/{view_id}/dist/{name} is missing")
    if git(root, "status", "--porcelain", "--", f"shared_views/{view_id}").strip():
        out.append(f"shared_views/{view_id}: the build shows in git status")
    return out


# -- .runtime/sync/state.json ----------------------------------------------------------------

SYNC_SUCCESS = {"synced", "pushed"}
SYNC_FAILURE_KEYS = {"last_failure_at", "last_failure_status", "last_failure_message", "last_failure_files"}


def check_sync_state(data: dict) -> list[str]:
    """The original's state file: last_status with last_message and last_files; the failure keys
    all four after a failure, none after a success."""
    out = []
    if "last_status" in data and not (isinstance(data.get("last_message"), str)
                                      and isinstance(data.get("last_files"), list)):
        out.append("sync state: last_status without last_message / last_files")
    for old in ("last_status_message", "last_status_files"):
        if old in data:
            out.append(f"sync state: {old} is not a key of the original (last_message / last_files)")
    failure = SYNC_FAILURE_KEYS & set(data)
    if data.get("last_status") in SYNC_SUCCESS and failure:
        out.append(f"sync state: a success keeps failure keys {sorted(failure)}")
    if failure and failure != SYNC_FAILURE_KEYS:
        out.append(f"sync state: failure keys incomplete: {sorted(failure)}")
    return out


# -- the Pursuit editor: revision, journal, lock, checkpoint ---------------------------------

PURSUIT_DIR = Path(".runtime") / "pursuit-editor"
PURSUIT_LOCK = PURSUIT_DIR / "session.lock"
ACTION_KEYS = {"id", "operation", "before", "after", "before_modes", "after_modes", "selected_id", "description",
               "id_remaps"}
PURSUIT_TRAILERS = ("RightMemory-Pursuit-Editor", "RightMemory-Operation", "RightMemory-Pursuit-Session",
                    "RightMemory-Pursuit-Action", "RightMemory-Pursuit-Target", "RightMemory-Pursuit-ID-Remaps",
                    "RightMemory-Pursuit-Signature")
_DETAIL = re.compile(r"^(?:MEMORY_[A-Za-z0-9_.-]+|PURSUIT_(?!(?i:RULES)\.md$)[A-Za-z0-9_.-]+)\.md$")


def original_root_key(root: Path) -> str:
    import os

    return hashlib.sha256(os.path.normcase(str(Path(root).expanduser().resolve())).encode("utf-8")).hexdigest()


def original_pursuit_revision(root: Path) -> str:
    """The original editor's revision of a root, read from disk as it reads it."""
    import os
    import stat

    root = Path(root).resolve()
    head = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=root, capture_output=True,
                          text=True).stdout.strip()
    branch = subprocess.run(["git", "symbolic-ref", "--quiet", "HEAD"], cwd=root, capture_output=True,
                            text=True).stdout.strip()
    digest = hashlib.sha256()
    digest.update(original_root_key(root).encode("ascii") + b"\0")
    digest.update(head.encode("ascii", errors="replace") + b"\0")
    digest.update(branch.encode("utf-8") + b"\0")
    names = {"MEMORY.md", "PURSUITS.md", "corrections.md"} | {p.name for p in root.iterdir() if _DETAIL.match(p.name)}
    for name in sorted(names):
        digest.update(name.encode("utf-8") + b"\0")
        path = root / name
        try:
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                content = b"link\0" + os.readlink(path).encode("utf-8")
            elif stat.S_ISREG(st.st_mode):
                content = b"file\0" + path.read_bytes()
            else:
                content = b"non-regular\0"
        except FileNotFoundError:
            content = b"missing\0"
        digest.update(hashlib.sha256(content).digest())
    return digest.hexdigest()


def _pursuit_key(root: Path) -> bytes:
    key = (Path(root) / PURSUIT_DIR / "signing-key").read_bytes()
    if len(key) != 32:
        raise AssertionError("the Pursuit signing key is not 32 bytes")
    return key


def _pursuit_envelope_signature(root: Path, record: dict) -> str:
    import hmac

    payload = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("utf-8")
    return hmac.new(_pursuit_key(root), payload, hashlib.sha256).hexdigest()


def load_pursuit_journal(root: Path) -> dict:
    """The journal as the original loads it: a signed envelope of a version-1 record of this root;
    every action with exactly the original's keys; files mapping names to blobs ``B`` + bytes."""
    import hmac

    envelope = json.loads((Path(root) / PURSUIT_DIR / "session.json").read_bytes())
    record = envelope["record"]
    if (record.get("version") != 1 or record.get("root_key") != original_root_key(root)
            or not hmac.compare_digest(envelope["signature"], _pursuit_envelope_signature(root, record))):
        raise AssertionError("The Pursuit recovery record is invalid")
    for action in record["actions"]:
        if set(action) != ACTION_KEYS or not UID.match(action["id"]):
            raise AssertionError(f"action keys {sorted(action)} are not the original's {sorted(ACTION_KEYS)}")
    for field in ("files", "base_files"):
        for name, digest in record[field].items():
            if not re.fullmatch(r"[0-9a-f]{64}", str(digest)) or Path(name).name != name:
                raise AssertionError(f"{field}: unsafe file reference {name!r}")
            blob = (Path(root) / PURSUIT_DIR / "blobs" / digest).read_bytes()
            if not blob.startswith(b"B") or hashlib.sha256(blob[1:]).hexdigest() != digest:
                raise AssertionError(f"{field}: blob of {name} is damaged")
    return record


def pursuit_blob(root: Path, digest: str) -> bytes:
    return (Path(root) / PURSUIT_DIR / "blobs" / digest).read_bytes()[1:]


def write_pursuit_journal(root: Path, record: dict) -> None:
    """Save a record as the original does (compact, sorted, ASCII JSON in a signed envelope)."""
    import os

    directory = Path(root) / PURSUIT_DIR
    directory.mkdir(parents=True, exist_ok=True)
    key = directory / "signing-key"
    if not key.exists():
        key.write_bytes(os.urandom(32))
        key.chmod(0o600)
    envelope = {"record": record, "signature": _pursuit_envelope_signature(root, record)}
    (directory / "session.json").write_bytes(
        json.dumps(envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("utf-8"))


def store_pursuit_blob(root: Path, content: bytes) -> str:
    digest = hashlib.sha256(content).hexdigest()
    path = Path(root) / PURSUIT_DIR / "blobs" / digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"B" + content)
    return digest


def check_pursuit_checkpoint(root: Path, commit: str) -> list[str]:
    """A checkpoint commit as the original authenticates one: its last paragraph the trailers in
    order, a 32-hex operation id, and the HMAC over the values, root key, parent and tree."""
    import hmac

    body = git(root, "log", "-1", "--format=%B", commit).rstrip("\n")
    parent = git(root, "log", "-1", "--format=%P", commit).strip()
    tree = git(root, "log", "-1", "--format=%T", commit).strip()
    lines = body.rsplit("\n\n", 1)[-1].splitlines()
    names = [line.partition(": ")[0] for line in lines]
    if names != list(PURSUIT_TRAILERS):
        return [f"checkpoint {commit[:10]}: trailers {names} are not the original's"]
    keys = ("editor", "operation", "session", "action", "target", "id_remaps", "signature")
    values = dict(zip(keys, (line.partition(": ")[2] for line in lines), strict=True))
    out = []
    if not UID.match(values["operation"]):
        out.append(f"checkpoint {commit[:10]}: RightMemory-Operation {values['operation']!r} is not 32 hex")
    if values["editor"] != "1" or not re.fullmatch(r"[0-9a-f]{64}", values["session"]):
        out.append(f"checkpoint {commit[:10]}: editor 1 and a 64-hex session")
    payload = {**{k: v for k, v in values.items() if k != "signature"}, "root": original_root_key(root),
               "parent": parent, "tree": tree}
    encoded = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")
    if not hmac.compare_digest(values["signature"], hmac.new(_pursuit_key(root), encoded, hashlib.sha256).hexdigest()):
        out.append(f"checkpoint {commit[:10]}: the signature does not authenticate")
    return out


# -- the original's pending evidence with sync off -----------------------------------------------

def write_original_async_state(root: Path, session: str, jobs: list[dict]) -> Path:
    """``.runtime/async/update/<session>.json`` as the original's worker leaves a waiting session."""
    path = Path(root) / ".runtime" / "async" / "update" / f"{session}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"status": "running", "session_id": session, "role": "update", "phase": "waiting",
             "started_at": None, "finished_at": None, "pid": None, "result": None, "error": None,
             "next_flush_at": "2026-01-01T00:00:00+00:00", "current_batch": [], "pending": jobs,
             "next_id": len(jobs) + 1}
    path.write_text(json.dumps(state, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path


# -- the shared-view hub: its routes' answers and its hub root --------------------------------------

#: The fields each hub route answers with, as the original hub names them (a set: exactly these).
HUB_ANSWERS = {
    "publish": {"view_id", "provider_id", "version_id", "current_version_id", "package_hash", "title"},
    "invitation": {"invitation_id", "token_id", "view_id", "invitation_url", "expires_at"},
    "landing": {"view_id", "title", "description", "api"},
    "accept": {"connection_id", "token_id", "connection_token", "view_id", "consumer_label"},
    "interaction": {"status", "interaction_id", "view_id", "connection_id"},
    "inbox": {"provider_id", "interactions"},
    "share_invitation": {"invitation_id", "token_id", "share_id", "invitation_url", "expires_at"},
    "share_landing": {"share_id", "title", "provider_id", "parts", "api"},
    "share_accept": {"share_id", "title", "provider_id", "consumer_label", "parts"},
}
#: The fields of each part of an accepted share (a question part adds ``question_token``).
HUB_SHARE_ACCEPT_PART = {"type", "view_id", "connection_id", "token_id", "connection_token"}
HUB_INBOX_ITEM = {"interaction_id", "provider_id", "view_id", "connection_id", "actor_id", "payload", "created_at"}
#: The tables and columns of the original hub's ``hub.db`` (its migrations 1 and 2).
HUB_TABLES = {
    "providers": ("id", "label", "created_at", "updated_at"),
    "views": ("id", "provider_id", "title", "ref", "description", "current_version_id", "created_at", "updated_at"),
    "view_versions": ("id", "view_id", "package_hash", "storage_path", "manifest_json", "created_at",
                      "created_by_token_id"),
    "invitations": ("id", "view_id", "token_id", "label", "expires_at", "revoked_at", "created_at", "accepted_count"),
    "connections": ("id", "invitation_id", "view_id", "token_id", "consumer_label", "created_at", "revoked_at"),
    "tokens": ("id", "nonce", "token_hash", "action", "provider_id", "view_id", "label", "created_at", "revoked_at"),
    "interactions": ("id", "view_id", "connection_id", "actor_id", "payload_json", "created_at"),
    "audit_events": ("id", "kind", "actor_id", "provider_id", "view_id", "details_json", "created_at"),
    "share_invitations": ("id", "share_id", "provider_id", "token_id", "title", "label", "expires_at", "revoked_at",
                          "created_at", "accepted_count", "payload_json"),
    "schema_migrations": ("version", "applied_at"),
}
HUB_MANIFEST_KEYS = {"view_id", "title", "ref", "description", "maintainer", "files", "size_bytes", "package_hash",
                     "version_id", "invitation_metadata"}
_HUB_ID = re.compile(r"^(tok|inv|sinv|con|int|ver|aud)_[A-Za-z0-9_-]{22}$")


def check_hub_answer(route: str, data: dict) -> list[str]:
    """A hub route's JSON answer against the original's field names and value rules."""
    out = []
    want = HUB_ANSWERS[route]
    if set(data) != want:
        out.append(f"{route}: fields {sorted(data)} are not the original's {sorted(want)}")
    for key in ("version_id", "invitation_id", "token_id", "connection_id", "interaction_id"):
        if key in data and not _HUB_ID.match(str(data[key])):
            out.append(f"{route}: {key} {data[key]!r} is not <prefix>_<22 url-safe characters>")
    if route == "publish" and not re.fullmatch(r"[0-9a-f]{64}", str(data.get("package_hash"))):
        out.append("publish: package_hash is not a SHA-256")
    if route == "invitation" and "/i/" not in str(data.get("invitation_url")):
        out.append("invitation: invitation_url has no /i/<token>")
    if route == "share_invitation" and "/i/share/" not in str(data.get("invitation_url")):
        out.append("share_invitation: invitation_url has no /i/share/<token>")
    if route == "share_accept":
        for part in data.get("parts", []):
            if set(part) - {"question_token"} != HUB_SHARE_ACCEPT_PART:
                out.append(f"share_accept: part fields {sorted(part)} are not the original's")
            if not _HUB_ID.match(str(part.get("connection_id"))) or not _HUB_ID.match(str(part.get("token_id"))):
                out.append("share_accept: a part's ids are not <prefix>_<22 url-safe characters>")
    if route in ("landing", "share_landing") and set(data.get("api") or {}) != {"view", "accept"}:
        out.append("landing: api must name view and accept")
    if route == "interaction" and data.get("status") != "recorded":
        out.append("interaction: status must be recorded")
    if route == "inbox":
        for item in data.get("interactions", []):
            if set(item) != HUB_INBOX_ITEM:
                out.append(f"inbox: item fields {sorted(item)} are not the original's")
    return out


def check_hub_db(path: Path) -> list[str]:
    """``hub.db`` as the original opens it: its tables and columns, migrations 1 and 2 recorded, tokens
    kept as ``sha256(nonce:token)`` hex, and each version's manifest with the original's keys."""
    import sqlite3

    out = []
    with sqlite3.connect(path) as db:
        for table, columns in HUB_TABLES.items():
            got = tuple(r[1] for r in db.execute(f"PRAGMA table_info({table})"))
            if got != columns:
                out.append(f"hub.db {table}: columns {got} are not the original's {columns}")
        if {r[0] for r in db.execute("SELECT version FROM schema_migrations")} != {1, 2}:
            out.append("hub.db: migrations 1 and 2 are not both recorded")
        for (digest,) in db.execute("SELECT token_hash FROM tokens"):
            if not re.fullmatch(r"[0-9a-f]{64}", digest):
                out.append("hub.db tokens: a token_hash is not a SHA-256 hex digest")
        for (manifest,) in db.execute("SELECT manifest_json FROM view_versions"):
            keys = set(json.loads(manifest))
            if keys != HUB_MANIFEST_KEYS:
                out.append(f"hub.db view_versions: manifest keys {sorted(keys)} are not the original's")
    return out


# -- rightmemory.toml: how the original checks booleans, integers and the agent CLI provider -------

#: Integers the original checks with ``isinstance(value, int)`` alone, so ``true`` passes as 1.
ORIGINAL_INTS_TAKING_TRUE = {("review", "idle_seconds"), ("review", "since_days")}
ORIGINAL_INTS = {("review", "batch_size"), ("sync", "stale_pull_after_hours"), ("pruner", "generation_commits"),
                 ("pruner", "revival_grace_checkpoints"), ("update.async", "target_batch_candidates"),
                 ("update.async", "max_wait_seconds"), ("retrieve", "max_output_chars")}
ORIGINAL_BOOLS = {("sync", "enabled"), ("debug", "trace")}


def original_config_verdict(text: str) -> str | None:
    """What the original says of these file-wide keys of a ``rightmemory.toml``: None when it loads
    them, else the key it refuses. Booleans must be TOML booleans; integers refuse booleans except
    where the original forgot to. (Executor tables, the ``provider`` included, refuse only the
    roles that run on them: :func:`original_role_verdict`.)"""
    import tomllib

    data = tomllib.loads(text)

    def table(dotted: str) -> dict:
        node: object = data
        for part in dotted.split("."):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return node if isinstance(node, dict) else {}

    for section, key in ORIGINAL_BOOLS:
        if key in table(section) and not isinstance(table(section)[key], bool):
            return f"{section}.{key}"
    for section, key in ORIGINAL_INTS | ORIGINAL_INTS_TAKING_TRUE:
        if key not in table(section):
            continue
        value = table(section)[key]
        takes_bool = (section, key) in ORIGINAL_INTS_TAKING_TRUE
        if (isinstance(value, bool) and not takes_bool) or not isinstance(value, int) or value < 1:
            return f"{section}.{key}"
    # a provider is checked only for the role that runs on it: original_role_verdict
    return None


#: The original's fallback order for a role without an executor table (retrieve never falls back).
ORIGINAL_FALLBACK = ("update", "dreamer", "insight", "reviewer", "pruner", "sync-reconciler", "historian",
                     "shared-view-builder")


def original_role_verdict(text: str, role: str) -> str:
    """What the original's loader says when it loads ``role`` from a ``rightmemory.toml`` whose
    file-wide keys it accepts: ``"ok"`` (an executor), ``"none"`` (no table and no global
    provider: nothing configured) or ``"refused: <table>"``, the executor table it refuses.
    It checks only the table the role runs on: its own, else (not retrieve) the first of
    ``ORIGINAL_FALLBACK`` that names ``model`` or ``agent_cli``, broken or not."""
    import tomllib

    data = tomllib.loads(text)

    def section(name: str) -> dict:
        value = data.get(name, {})
        return value if isinstance(value, dict) else {}

    def names_executor(sec: dict) -> bool:
        return "model" in sec or "agent_cli" in sec

    source = role
    if role != "retrieve" and not names_executor(section(role)):
        source = next((c for c in ORIGINAL_FALLBACK if c != role and names_executor(section(c))), role)
    sec = section(source)

    def nonempty(value: object) -> bool:
        return isinstance(value, str) and bool(value.strip())

    if "model" in sec and "agent_cli" in sec:
        return f"refused: [{source}]"
    if "model" in sec:
        model = sec["model"]
        if (not isinstance(model, dict) or set(model) - {"model_id", "api_base", "api_key", "kwargs"}
                or not nonempty(model.get("model_id"))
                or any(k in model and not nonempty(model[k]) for k in ("api_base", "api_key"))
                or not isinstance(model.get("kwargs", {}), dict)
                or {"model_id", "api_base", "api_key"} & set(model.get("kwargs", {}))):
            return f"refused: [{source}.model]"
        return "ok"
    glob = data.get("agent_cli", {})
    cli = sec.get("agent_cli", {})
    if not isinstance(glob, dict) or set(glob) - {"provider"}:
        return "refused: [agent_cli]"
    if not isinstance(cli, dict) or set(cli) - {"provider", "model"}:
        return f"refused: [{source}.agent_cli]"
    provider = cli.get("provider", glob.get("provider"))
    if provider is None and "agent_cli" not in sec:
        return "none"
    if not nonempty(provider) or provider.strip() not in ("codex", "claude"):
        return f"refused: [{source}.agent_cli]" if "provider" in cli else "refused: [agent_cli]"
    if "model" in cli and not nonempty(cli["model"]):
        return f"refused: [{source}.agent_cli]"
    return "ok"


def original_hub_call(base_url: str, method: str, path: str, *, token: str | None = None,
                      json_body: dict | None = None, data: bytes | None = None,
                      content_type: str | None = None) -> tuple[int, object]:
    """One request as the original's hub client makes it (urllib; JSON bodies, a bearer token)."""
    import urllib.error
    import urllib.request

    headers = {}
    if json_body is not None:
        data, content_type = json.dumps(json_body).encode("utf-8"), "application/json"
    if content_type:
        headers["Content-Type"] = content_type
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(f"{base_url.rstrip('/')}{path}", data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, raw, kind = resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, raw, kind = exc.code, exc.read(), exc.headers.get("Content-Type", "")
    return status, (json.loads(raw) if "json" in kind else raw)


def original_package_zip(package_root: Path) -> bytes:
    """A package folder zipped as the original's client zips it before publishing: every regular
    file under the folder, by its relative name, no folder entries."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(Path(package_root).rglob("*")):
            if path.is_file() and not path.is_symlink():
                zf.write(path, path.relative_to(package_root).as_posix())
    return buf.getvalue()


#: What the original's consumer requires of a downloaded package before it imports it.
ORIGINAL_IMPORT_NAMES = {"view.md", "recipe.toml", "rightmemory-shared-view.toml", "dist/MEMORY.md",
                         "dist/manifest.toml"}
