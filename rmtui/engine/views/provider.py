"""The provider side of shared views (docs/formats.md, "Shared views"): define a view, build its version-2 package.

A file view is ``shared_views/<view>/`` in the tracked root: ``view.md`` (what it is, for
people) and ``recipe.toml`` (the approved headings, nodes and files, and ids to leave out).
``build`` renders the package from the live graph into ``.runtime/shared_views/builds/<view>/``:
``dist/MEMORY.md`` holds the selected items exactly as written, under the headings they sit
in (as bare titles, so every item reads in its context), with the backing files they need;
edges to anything left out are dropped so no provider id outside the view leaks in. The
package is validated by the same rules a consumer applies before it is promoted.

A question view is ``view.md``, ``question.toml`` and a private ``retriever.md`` (the
instructions the provider's retrieve role answers with; never sent anywhere).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.locks import file_lock
from rmtui.engine.memory.graph import Graph, Item, load_graph
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.views import files
from rmtui.engine.views.package import (
    DIST,
    DOCUMENT_KIND,
    META_FILE,
    PACKAGE_VERSION,
    RECIPE_VERSION,
    PackageInfo,
    candidate_beside,
    promote,
    remove_tree,
    sweep,
    validate_package,
)

RECIPE_KEYS = ("version", "view_id", "kind", "title", "approved", "intent", "render", "include_headings",
               "include_nodes", "include_files", "exclude_ids", "publish")
QUESTION_KEYS = ("version", "view_id", "kind", "title", "approved", "intent", "start_timeout_seconds",
                 "answer_timeout_seconds", "provider_role")
#: A question view's retrieve role reads the whole memory; the RightMemory format gives
#: ``question.toml`` no scope (its own server would answer from everything), so a scope is refused.
QUESTION_SCOPE_RULE = ("a question view cannot be scoped: its retrieve role answers from the whole memory "
                       "(question.toml has no scope); share a part of the memory as a file view "
                       "(shared-view create VIEW --include ID...)")
SCOPE_KEYS = ("include_headings", "include_nodes", "include_files", "exclude_ids")
DEFAULT_RETRIEVER = ("Answer the question from this memory only. Say plainly when the memory does not hold "
                     "the answer. Do not quote private details the question does not need.\n")
_NODE_EDGES_RE = re.compile(r"(→|->)\s*\[[^\]]*\](\s*)$")
_FILE_RE = re.compile(r"^MEMORY_(?:SKILL_)?[A-Za-z0-9_.-]+\.md$")
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_HEADING_RE = re.compile(r"^#{1,6}(?:[ \t]|$)")


@dataclass
class Recipe:
    view_id: str
    title: str
    intent: str = ""
    approved: bool = True
    render: str = "exact"
    include_headings: list[str] = field(default_factory=list)
    include_nodes: list[str] = field(default_factory=list)
    include_files: list[str] = field(default_factory=list)
    exclude_ids: list[str] = field(default_factory=list)
    publish: dict | None = None

    def text(self) -> str:
        lines = files.toml_table({"version": RECIPE_VERSION, "view_id": self.view_id, "kind": "file",
                                  "title": self.title, "approved": self.approved, "intent": self.intent,
                                  "render": self.render, "include_headings": self.include_headings,
                                  "include_nodes": self.include_nodes, "include_files": self.include_files,
                                  "exclude_ids": self.exclude_ids})
        if self.publish:
            lines += ["", "[publish]", *files.toml_table(self.publish)]
        return "\n".join(lines) + "\n"


@dataclass
class QuestionSpec:
    view_id: str
    title: str
    intent: str = ""
    approved: bool = True
    start_timeout_seconds: int = 10
    answer_timeout_seconds: int = 180
    provider_role: str = "retrieve"

    def text(self) -> str:
        return "\n".join(files.toml_table({
            "version": 1, "view_id": self.view_id, "kind": "question", "title": self.title,
            "approved": self.approved, "intent": self.intent, "start_timeout_seconds": self.start_timeout_seconds,
            "answer_timeout_seconds": self.answer_timeout_seconds, "provider_role": self.provider_role})) + "\n"


def _str_list(data: dict, key: str, label: str) -> list[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{label}: {key} must be a list of strings")
    return list(value)


def parse_recipe(text: str, view_id: str, label: str = "recipe.toml") -> Recipe:
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{label}: malformed TOML: {exc}") from None
    unknown = sorted(set(data) - set(RECIPE_KEYS))
    if unknown:
        raise UsageError(f"{label}: unsupported keys: {', '.join(unknown)}")
    if data.get("version") != RECIPE_VERSION or isinstance(data.get("version"), bool):
        raise UsageError(f"{label}: version must be {RECIPE_VERSION}")
    if data.get("view_id") != view_id:
        raise UsageError(f"{label}: view_id is {data.get('view_id')!r}, expected {view_id!r}")
    if data.get("kind") != "file":
        raise UsageError(f'{label}: kind must be "file"')
    publish = data.get("publish")
    if publish is not None and not isinstance(publish, dict):
        raise UsageError(f"{label}: [publish] must be a table")
    return Recipe(view_id, str(data.get("title") or view_id), str(data.get("intent") or ""),
                  bool(data.get("approved", False)), str(data.get("render") or "exact"),
                  _str_list(data, "include_headings", label), _str_list(data, "include_nodes", label),
                  _str_list(data, "include_files", label), _str_list(data, "exclude_ids", label), publish)


def load_recipe(root_path: Path, view_id: str) -> Recipe:
    path = files.view_dir(root_path, view_id) / "recipe.toml"
    if not path.is_file() or path.is_symlink():
        raise UsageError(f"no file view `{view_id}` (shared_views/{view_id}/recipe.toml); create it first")
    return parse_recipe(path.read_text(encoding="utf-8"), view_id, f"shared_views/{view_id}/recipe.toml")


def load_question(root_path: Path, view_id: str) -> tuple[QuestionSpec, str]:
    """The question view's spec and its private retriever instructions."""
    folder = files.view_dir(root_path, view_id)
    data = files.read_toml(folder / "question.toml", f"shared_views/{view_id}/question.toml")
    label = f"shared_views/{view_id}/question.toml"
    unknown = sorted(set(data) - set(QUESTION_KEYS))
    scoped = [k for k in unknown if k in SCOPE_KEYS]
    if scoped:
        raise UsageError(f"{label}: {', '.join(scoped)}: {QUESTION_SCOPE_RULE}")
    if unknown:
        raise UsageError(f"{label}: unsupported keys: {', '.join(unknown)}")
    if data.get("version") != 1 or data.get("view_id") != view_id or data.get("kind") != "question":
        raise UsageError(f'{label}: needs version = 1, view_id = "{view_id}", kind = "question"')
    spec = QuestionSpec(view_id, str(data.get("title") or view_id), str(data.get("intent") or ""),
                        bool(data.get("approved", False)), int(data.get("start_timeout_seconds", 10)),
                        int(data.get("answer_timeout_seconds", 180)), str(data.get("provider_role", "retrieve")))
    retriever = folder / "retriever.md"
    instructions = retriever.read_text(encoding="utf-8") if retriever.is_file() and not retriever.is_symlink() else ""
    return spec, instructions


def view_kind(root_path: Path, view_id: str) -> str | None:
    folder = files.view_dir(root_path, view_id)
    if (folder / "recipe.toml").is_file():
        return "file"
    if (folder / "question.toml").is_file():
        return "question"
    return None


# -- create ---------------------------------------------------------------------------------------

def _view_md(title: str, text: str) -> str:
    return f"# {title}\n\n{text.strip()}\n" if text.strip() else f"# {title}\n"


def create_file_view(root: MemoryRoot, view_id: str, include: list[str], *, title: str | None = None,
                     intent: str | None = None, exclude: list[str] | None = None) -> dict:
    """Write ``shared_views/<view>/{view.md,recipe.toml}`` (approved: naming the ids is the approval)."""
    files.check_view_id(view_id)
    if not include:
        raise UsageError("name at least one heading, node or backing file to --include")
    if view_kind(root.path, view_id) == "question":
        raise ConflictError(f"`{view_id}` is already a question view")
    graph = load_graph(root.path)
    recipe = Recipe(view_id, title or view_id.replace("-", " ").replace("_", " ").strip().title() or view_id,
                    intent or f"Share {', '.join(include)}")
    for ident in dict.fromkeys(include):
        if _FILE_RE.match(ident):
            gf = graph.files.get(ident)
            if gf is None or gf.claimed_by is None or gf.domain != "memory":
                raise UsageError(f"`{ident}` is not a backing file of the Memory graph")
            recipe.include_files.append(ident)
            continue
        item = graph.items.get(ident)
        if item is None:
            raise UsageError(f"`{ident}` names no item of this root's graph")
        _check_selectable(item)
        (recipe.include_headings if item.kind == "heading" else recipe.include_nodes).append(ident)
    for ident in exclude or []:
        if ident not in graph.items:
            raise UsageError(f"--exclude `{ident}` names no item of this root's graph")
        recipe.exclude_ids.append(ident)
    render_view(graph, recipe)  # refuse now what could never build
    body = recipe.intent

    def edit(wt: Path) -> list[str]:
        base = f"{files.PROVIDER_DIR}/{view_id}"
        # the original's view folder ignores its build output, dist/
        return [files.write_text(wt, f"{base}/.gitignore", VIEW_GITIGNORE),
                files.write_text(wt, f"{base}/view.md", _view_md(recipe.title, body)),
                files.write_text(wt, f"{base}/recipe.toml", recipe.text())]

    landed = files.land(root, f"shared-view: define {view_id}", edit)
    return {"view_id": view_id, "kind": "file", "recipe": recipe.__dict__, "landed": landed}


def _check_selectable(item: Item) -> None:
    if item.domain != "memory":
        raise UsageError(f"`{item.id}` is Pursuit; a file view shares Memory only")
    if item.heading_kind in ("MF#", "MQ#"):
        raise UsageError(f"`{item.id}` is itself a shared view connection; a view cannot carry other views")


def create_question_view(root: MemoryRoot, view_id: str, *, title: str | None = None, intent: str | None = None,
                         instructions: str | None = None, include: list[str] | None = None,
                         exclude: list[str] | None = None) -> dict:
    """Write ``shared_views/<view>/{view.md,question.toml,retriever.md}``; a scope (``include``,
    ``exclude``) is refused, never dropped: the view would answer from everything."""
    if include or exclude:
        raise UsageError(f"--include/--exclude: {QUESTION_SCOPE_RULE}")
    files.check_view_id(view_id)
    if view_kind(root.path, view_id) == "file":
        raise ConflictError(f"`{view_id}` is already a file view")
    spec = QuestionSpec(view_id, title or view_id, intent or "Questions answered from this memory")

    def edit(wt: Path) -> list[str]:
        base = f"{files.PROVIDER_DIR}/{view_id}"
        return [files.write_text(wt, f"{base}/view.md", _view_md(spec.title, spec.intent)),
                files.write_text(wt, f"{base}/question.toml", spec.text()),
                files.write_text(wt, f"{base}/retriever.md", instructions or DEFAULT_RETRIEVER)]

    landed = files.land(root, f"shared-view: define question view {view_id}", edit)
    return {"view_id": view_id, "kind": "question", "landed": landed}


# -- render -----------------------------------------------------------------------------------------

@dataclass
class Rendered:
    files: dict[str, str]  # dist file name -> text
    items: list[str]  # ids in the package
    warnings: list[str] = field(default_factory=list)


def _walk(item: Item):
    stack = [item]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(reversed(cur.children))


def render_view(graph: Graph, recipe: Recipe) -> Rendered:
    """The dist/ files of ``recipe`` over ``graph``: selected items verbatim, their ancestors as context."""
    full: dict[int, Item] = {}
    warnings: list[str] = []

    def lookup(ident: str, want: str) -> Item:
        item = graph.items.get(ident)
        if item is None:
            raise UsageError(f"view `{recipe.view_id}` names `{ident}`, which no longer exists in this root")
        _check_selectable(item)
        if want != item.kind:
            raise UsageError(f"view `{recipe.view_id}` lists `{ident}` as a {want}, but it is a {item.kind}")
        return item

    for ident in recipe.include_headings:
        full.update((id(i), i) for i in _walk(lookup(ident, "heading")))
    for ident in recipe.include_nodes:
        node = lookup(ident, "node")
        full[id(node)] = node
    for name in recipe.include_files:
        gf = graph.files.get(name)
        if gf is None or gf.claimed_by is None:
            raise UsageError(f"view `{recipe.view_id}` names backing file {name}, which is not in the graph")
        _check_selectable(gf.claimed_by)
        full.update((id(i), i) for i in _walk(gf.claimed_by))
    for ident in recipe.exclude_ids:
        item = graph.items.get(ident)
        if item is not None:
            for i in _walk(item):
                full.pop(id(i), None)
    for key, item in list(full.items()):
        if item.heading_kind in ("MF#", "MQ#") or item.domain != "memory":
            full.pop(key, None)
            if item.heading_kind in ("MF#", "MQ#"):
                warnings.append(f"left out `{item.id}`: a view cannot carry other shared views")
    if not full:
        raise UsageError(f"view `{recipe.view_id}` selects nothing")
    context: dict[int, Item] = {}
    for item in full.values():
        for a in item.ancestors():
            if id(a) not in full:
                context[id(a)] = a
    kept = {i.id for i in full.values() if i.id} | {
        a.id for a in context.values() if a.heading_kind == "F#" and a.id}

    out: dict[str, str] = {}
    graph_files = ["MEMORY.md"] + [h.backing_file for h in (*full.values(), *context.values())
                                   if h.heading_kind == "F#" and h.backing_file]
    for name in dict.fromkeys(graph_files):
        if name in graph.files:
            out[name] = _render_file(graph, name, full, context, kept)
    for h in full.values():
        if h.heading_kind in ("M#", "S#") and h.backing_file and h.backing_file in graph.files:
            out[h.backing_file] = "\n".join(graph.files[h.backing_file].lines)
    return Rendered(out, sorted(kept), warnings)


def _render_file(graph: Graph, name: str, full: dict[int, Item], context: dict[int, Item], kept: set) -> str:
    gf = graph.files[name]
    lines = gf.lines
    owner: list[Item | None] = [None] * (len(lines) + 2)
    for item in graph.ordered:
        if item.file == name:
            for n in range(item.line, min(item.end_line, len(lines)) + 1):
                owner[n] = item  # children come after their parents, so the innermost wins
    out: list[str] = []
    for n in range(1, len(lines) + 1):
        own = owner[n]
        found = own or gf.claimed_by
        if found is None:
            continue
        item = found
        if id(item) in full:
            out.append(_rewrite(item, lines[n - 1], kept) if own is item and n == item.line else lines[n - 1])
        elif id(item) in context and own is item and n == item.line:
            anchor = f" {{F#{item.id}}}" if item.heading_kind == "F#" else ""
            out.append(f"{'#' * item.level} {item.title or 'Untitled'}{anchor}")
    tidy: list[str] = []
    fence: str | None = None
    last_heading = False
    for line in out:
        m = _FENCE_RE.match(line)
        if fence is not None:  # fenced text is copied as it is
            tidy.append(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        heading = bool(_HEADING_RE.match(line))
        if line.strip() and tidy and tidy[-1].strip() and (heading or last_heading):
            tidy.append("")  # headings stand apart, as the parser and people expect
        if not line.strip() and (not tidy or not tidy[-1].strip()):
            continue
        tidy.append(line)
        last_heading = heading
        if m:
            fence = m.group(1)
    while tidy and not tidy[-1].strip():
        tidy.pop()
    return "\n".join(tidy) + "\n" if tidy else ""


def _rewrite(item: Item, line: str, kept: set) -> str:
    """The item's first line with edges to items outside the view dropped (verbatim when none are)."""
    edges = [e for e in item.edges if e.target in kept]
    if len(edges) == len(item.edges):
        return line
    listed = ", ".join(f"{e.type}:{e.target}" for e in edges)
    if item.kind == "node":
        return _NODE_EDGES_RE.sub(lambda m: f"{m.group(1)} [{listed}]{m.group(2)}", line, count=1)
    return (f"{'#' * item.level} {item.title} {{{item.heading_kind}{item.id}}}"
            + (f" → [{listed}]" if edges else ""))


# -- build ----------------------------------------------------------------------------------------

@dataclass
class BuildResult:
    view_id: str
    package: Path
    info: PackageInfo
    warnings: list[str]

    def to_json(self) -> dict:
        return {"view_id": self.view_id, "package": str(self.package), **self.info.to_json(),
                "warnings": self.warnings + self.info.warnings}


def manifest_text(view_id: str) -> str:
    return "\n".join(files.toml_table({"version": PACKAGE_VERSION, "view_id": view_id,
                                       "document_kind": DOCUMENT_KIND})) + "\n"


def meta_text(recipe: Recipe) -> str:
    return "\n".join(files.toml_table({"version": PACKAGE_VERSION, "view_id": recipe.view_id, "kind": "file",
                                       "ref": f"rightmemory://mf/{recipe.view_id}", "title": recipe.title,
                                       "description": recipe.intent})) + "\n"


VIEW_GITIGNORE = "dist/\n"


def _mirror_dist(root: MemoryRoot, view_id: str, dist: Path) -> None:
    """Put the validated ``dist/`` where the original renders it, ``shared_views/<view>/dist/``
    (ignored by the folder's ``.gitignore`` and the root's allow-list), replaced whole."""
    folder = files.view_dir(root.path, view_id)
    if folder.is_symlink() or not folder.is_dir():
        return
    target = folder / DIST
    tmp = folder / f".dist.tmp-{os.getpid()}"
    remove_tree(tmp)
    shutil.copytree(dist, tmp)
    remove_tree(target)
    os.replace(tmp, target)


def build(root: MemoryRoot, view_id: str) -> BuildResult:
    """Render, validate and promote the package of ``view_id`` into ``.runtime/shared_views/builds/``;
    its ``dist/`` also goes to ``shared_views/<view>/dist/``, where the original builds it."""
    files.check_view_id(view_id)
    recipe = load_recipe(root.path, view_id)
    if not recipe.approved:
        raise UsageError(f"view `{view_id}` is not approved (recipe.toml approved = false)")
    folder = files.view_dir(root.path, view_id)
    view_md = (folder / "view.md").read_bytes() if (folder / "view.md").is_file() else _view_md(
        recipe.title, recipe.intent).encode()
    recipe_raw = (folder / "recipe.toml").read_bytes()
    with file_lock(root.lock_path, shared=True):  # one consistent snapshot of the graph
        graph = load_graph(root.path)
    rendered = render_view(graph, recipe)
    out = files.builds_dir(root)
    out.mkdir(parents=True, exist_ok=True)
    final = out / view_id
    with file_lock(files.lock_path(root, f"build-{view_id}")):
        sweep(out, view_id)
        cand = candidate_beside(final, "build")
        try:
            (cand / DIST).mkdir(parents=True)
            (cand / "view.md").write_bytes(view_md)
            (cand / "recipe.toml").write_bytes(recipe_raw)
            (cand / META_FILE).write_text(meta_text(recipe), encoding="utf-8")
            (cand / DIST / "manifest.toml").write_text(manifest_text(view_id), encoding="utf-8")
            for name, text in rendered.files.items():
                (cand / DIST / name).write_text(text, encoding="utf-8")
            info = validate_package(cand, view_id)
            promote(cand, final)
        except BaseException:
            remove_tree(cand)
            raise
        _mirror_dist(root, view_id, final / DIST)
    return BuildResult(view_id, final, info, rendered.warnings)


def built_package(root: MemoryRoot, view_id: str) -> Path:
    path = files.builds_dir(root) / files.check_view_id(view_id)
    if not path.is_dir():
        raise UsageError(f"view `{view_id}` has not been built (run `shared-view build {view_id}`)")
    return path


def list_views(root: MemoryRoot) -> list[dict]:
    """The views this root defines, with what was last built."""
    base = root.path / files.PROVIDER_DIR
    out: list[dict] = []
    if not base.is_dir():
        return out
    for folder in sorted(base.iterdir()):
        try:
            vid = files.check_view_id(folder.name)
        except UsageError:
            continue
        kind = view_kind(root.path, vid)
        if kind is None:
            continue
        entry: dict = {"view_id": vid, "kind": kind}
        if kind == "file":
            try:
                recipe = load_recipe(root.path, vid)
                include = recipe.include_headings + recipe.include_nodes + recipe.include_files
                entry.update(title=recipe.title, approved=recipe.approved, include=include,
                             scope={"whole_memory": False, "include": include, "exclude": recipe.exclude_ids})
            except UsageError as exc:
                entry["error"] = exc.message
            built = files.builds_dir(root) / vid
            if built.is_dir():
                try:
                    info = validate_package(built, vid)
                    entry.update(built=True, version=info.digest, items=info.items)
                except Exception as exc:  # noqa: BLE001 - a damaged build is reported, not fatal to the listing
                    entry.update(built=False, build_error=str(exc))
            else:
                entry["built"] = False
        else:
            try:
                spec, _ = load_question(root.path, vid)
                entry.update(title=spec.title, approved=spec.approved,
                             scope={"whole_memory": True, "include": [], "exclude": []})
            except UsageError as exc:
                entry["error"] = exc.message
        entry["tokens"] = sum(1 for t in files.token_hashes(root).values() if t.get("view_id") == vid)
        out.append(entry)
    return out
