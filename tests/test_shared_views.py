"""Shared views (docs/formats.md, "Shared views") with real roots and real Git: a provider builds a version-2
package, publishes it to a Git share repository (a bare repository over ``file://``), a
consumer connects, pulls, and retrieves the imported items beside its own memory.
Refused packages (crafted in the share repository or served by a hostile HTTP provider)
never replace the last valid import, which stays byte for byte as it was, marked stale."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest

from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.memory.roots import MemoryRoot, init_root
from rmtui.engine.retrieval.agent_retrieve import imported_outline
from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.render import render, resolve_selection
from rmtui.engine.retrieval.retrieve import retrieve
from rmtui.engine.views import consumer, files, gitshare, package, provider
from rmtui.engine.views.package import PackageRefused, validate_package

PROVIDER_MEMORY = """\
# Memory

## Platform {#platform}

How the platform is deployed.

- `deploy-k8s` We deploy with Helm to the prod cluster → [dep:helm-ver]
- `helm-ver` Helm 3.14 is pinned → []
- `root-password` The root password is hunter2 → []

### Runbooks {F#runbooks}

## Private {#private}

- `salary` Salaries are reviewed in March → [rel:deploy-k8s]
"""
RUNBOOKS = """\
Runbooks of the platform.

- `rb-restart` Restart pods with kubectl rollout restart → [rel:deploy-k8s]

### Incident notes {M#rb-notes}
"""
NOTES = "Free-form incident notes.\nThe 2025 outage came from an expired certificate.\n"
CONSUMER_MEMORY = """\
# Memory

## Frontend {#frontend}

- `fe-build` The frontend is built with Vite → []
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def commit_files(root: MemoryRoot, contents: dict[str, str], message: str = "memory") -> None:
    for name, text in contents.items():
        (root.path / name).write_text(text, encoding="utf-8")
    git(root.path, "add", "-A")
    git(root.path, "commit", "-qm", message)


def make_provider(tmp: Path, name: str = "provider") -> MemoryRoot:
    root = init_root(tmp / name)
    commit_files(root, {"MEMORY.md": PROVIDER_MEMORY, "MEMORY_runbooks.md": RUNBOOKS, "MEMORY_rb-notes.md": NOTES})
    set_config_value(root.path, "embedding.local_service", False)
    return root


def make_consumer(tmp: Path, name: str = "consumer") -> MemoryRoot:
    root = init_root(tmp / name)
    commit_files(root, {"MEMORY.md": CONSUMER_MEMORY})
    set_config_value(root.path, "embedding.local_service", False)  # BM25 only: no model in these tests
    return root


def tree_bytes(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry under ``folder``: (file type, content) by relative path."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            out[str(p.relative_to(folder))] = (stat.S_IFMT(st.st_mode), p.read_bytes() if stat.S_ISREG(st.st_mode)
                                               else b"")
    return out


@pytest.fixture
def prov(tmp_path) -> MemoryRoot:
    root = make_provider(tmp_path)
    provider.create_file_view(root, "platform", ["platform"], exclude=["root-password"], title="Platform")
    return root


@pytest.fixture
def shares(tmp_path) -> str:
    return (tmp_path / "shares.git").as_uri()


def publish(root: MemoryRoot, repo: str, view: str = "platform") -> dict:
    res = provider.build(root, view)
    return gitshare.publish(root, res.package, repo_url=repo, view_id=view, title=res.info.title,
                            description=res.info.description, provider_id="alice")


# -- provider: build ----------------------------------------------------------------------------

def test_build_renders_only_the_view_with_its_context(prov):
    res = provider.build(prov, "platform")
    dist = res.package / "dist"
    memory = (dist / "MEMORY.md").read_text()
    assert "`deploy-k8s` We deploy with Helm" in memory and "`helm-ver`" in memory
    assert "hunter2" not in memory and "root-password" not in memory  # excluded
    assert "salary" not in memory and "Private" not in memory  # not selected
    assert sorted(p.name for p in dist.iterdir()) == ["MEMORY.md", "MEMORY_rb-notes.md", "MEMORY_runbooks.md",
                                                     "manifest.toml"]
    assert (dist / "MEMORY_rb-notes.md").read_text() == NOTES  # exact source
    assert (dist / "manifest.toml").read_text() == (
        'version = 2\nview_id = "platform"\ndocument_kind = "rightmemory-memory"\n')
    info = validate_package(res.package, "platform")
    assert info.items == 6 and info.digest == res.info.digest
    # the recipe and view.md are tracked, committed by the supervisor
    assert git(prov.path, "ls-files", "shared_views").split() == ["shared_views/platform/.gitignore",
                                                                  "shared_views/platform/recipe.toml",
                                                                  "shared_views/platform/view.md"]
    assert (prov.path / "shared_views/platform/dist/MEMORY.md").read_text() == memory  # where the original builds
    assert "RightMemory-Operation: shared-views-" in git(prov.path, "log", "-1", "--format=%B")


def test_a_selected_node_comes_with_its_headings_and_no_foreign_ids(tmp_path):
    root = make_provider(tmp_path)
    provider.create_file_view(root, "pay", ["salary"])
    memory = (provider.build(root, "pay").package / "dist" / "MEMORY.md").read_text()
    # the heading is context (title only), the edge to the unselected node is dropped
    assert memory == "# Memory\n\n## Private\n\n- `salary` Salaries are reviewed in March → []\n"


def test_create_refuses_what_could_never_be_a_view(tmp_path):
    root = make_provider(tmp_path)
    with pytest.raises(UsageError, match="names no item"):
        provider.create_file_view(root, "v", ["nope"])
    commit_files(root, {"MEMORY.md": PROVIDER_MEMORY + "\n### Theirs {MF#theirs}\n\nAn import.\n"})
    with pytest.raises(UsageError, match="cannot carry other views"):
        provider.create_file_view(root, "v", ["theirs"])
    with pytest.raises(UsageError, match=r"must match"):
        provider.create_file_view(root, "..", ["platform"])


# -- Git share: publish, join, pull, republish -----------------------------------------------------

def test_git_share_end_to_end_with_retrieval(tmp_path, prov, shares, cli):
    pub = publish(prov, shares)
    assert pub["pushed"] and pub["join_url"] == f"{shares}#share=platform"
    listing = subprocess.run(["git", "ls-tree", "-r", "--name-only", "main"], cwd=tmp_path / "shares.git",
                             capture_output=True, text=True, check=True).stdout.split()
    assert "shares/platform/share.toml" in listing and "shares/platform/package/dist/MEMORY.md" in listing

    cons = make_consumer(tmp_path)
    out = consumer.connect_git(cons, pub["join_url"])
    assert out.pull.status == "pulled"
    memory = (cons.path / "MEMORY.md").read_text()
    assert "### Platform Files {MF#platform}" in memory and "# Shared Views" in memory
    conns = files.load_connections(cons.path)
    assert conns["platform"].kind == "git-file" and conns["platform"].view_id == "platform"
    assert (cons.path / ".runtime/shared_views/imports/platform/dist/MEMORY.md").is_file()

    res = retrieve(cons, "s1", "how do we deploy with helm")
    ids = [r["id"] for r in res.results]
    assert ids[0] == "MF#platform/deploy-k8s"
    assert "### Platform Files {MF#platform}" in res.text  # the local heading is the context
    assert "- `deploy-k8s` We deploy with Helm to the prod cluster → [dep:helm-ver]" in res.text
    own = retrieve(cons, "s2", "frontend vite build")
    assert own.results[0]["id"] == "fe-build"  # own memory beside the import

    # the provider edits its memory and republishes; the consumer's next pull picks it up
    commit_files(prov, {"MEMORY.md": PROVIDER_MEMORY.replace("Helm 3.14", "Helm 3.16")})
    assert publish(prov, shares)["changed"]
    again = consumer.pull(cons, "platform")[0]
    assert again.status == "pulled" and again.changed
    r = cli("--headless", "retrieve", "--json", "--root", str(cons.path), "--session", "s3", "which helm version")
    assert r.code == 0, r.stderr
    data = r.json()
    assert data["results"][0]["id"] == "MF#platform/helm-ver" and "Helm 3.16" in data["text"]
    listed = cli("--headless", "shared-view", "list", "--json", "--root", str(cons.path)).json()
    assert [(v["view_id"], v["status"]) for v in listed] == [("platform", "fresh")]
    assert publish(prov, shares)["changed"] is False  # nothing new: no empty commit


def test_git_refresh_before_retrieve_is_bounded_and_quiet(tmp_path, prov, shares):
    publish(prov, shares)
    cons = make_consumer(tmp_path)
    consumer.connect_git(cons, f"{shares}#share=platform")
    commit_files(prov, {"MEMORY.md": PROVIDER_MEMORY.replace("prod cluster", "blue cluster")})
    publish(prov, shares)
    assert consumer.refresh_before_retrieve(cons) == []  # pulled moments ago: not due
    done = consumer.refresh_before_retrieve(cons, every=0)
    assert [d.status for d in done] == ["pulled"]
    assert "blue cluster" in retrieve(cons, "s", "which cluster do we deploy to").text
    (tmp_path / "shares.git").rename(tmp_path / "gone.git")  # the share disappears
    done = consumer.refresh_before_retrieve(cons, every=0, budget=5)
    assert [d.status for d in done] == ["stale"]
    assert "blue cluster" in retrieve(cons, "s", "which cluster do we deploy to", include_returned=True).text


def test_connect_refuses_an_id_the_graph_already_uses(tmp_path, prov, shares):
    publish(prov, shares)
    cons = make_consumer(tmp_path)
    commit_files(cons, {"MEMORY.md": CONSUMER_MEMORY + "- `platform` our platform → []\n"})
    with pytest.raises(ConflictError, match="already used in the graph"):
        consumer.connect_git(cons, f"{shares}#share=platform")
    out = consumer.connect_git(cons, f"{shares}#share=platform", as_id="their-platform")
    assert out.pull.status == "pulled"
    res = retrieve(cons, "s", "deploy with helm")
    assert res.results[0]["id"] == "MF#their-platform/deploy-k8s"


# -- refused packages (Git transport) ---------------------------------------------------------------

def _bad_commit(repo: Path, share: str, mutate) -> None:
    """Rewrite the share's package in the repository's main branch: ``mutate(folder)`` on a checkout."""
    work = repo.parent / f"work-{os.urandom(3).hex()}"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    mutate(work / "shares" / share / "package")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "tamper")
    git(work, "push", "-q", "origin", "HEAD:main")


def _symlink(pkg: Path) -> None:
    (pkg / "dist" / "MEMORY_rb-notes.md").unlink()
    os.symlink("/etc/passwd", pkg / "dist" / "MEMORY_rb-notes.md")


def _nested_dir(pkg: Path) -> None:
    (pkg / "dist" / "deeper").mkdir()
    (pkg / "dist" / "deeper" / "MEMORY_x.md").write_text("x\n")


GIT_BAD = {
    "symlink": _symlink,
    "nested-directory": _nested_dir,
    "version": lambda pkg: (pkg / "dist" / "manifest.toml").write_text(
        'version = 1\nview_id = "platform"\ndocument_kind = "rightmemory-memory"\n'),
    "unreferenced-file": lambda pkg: (pkg / "dist" / "MEMORY_extra.md").write_text("not referenced\n"),
    "nested-view": lambda pkg: (pkg / "dist" / "MEMORY.md").write_text(
        (pkg / "dist" / "MEMORY.md").read_text() + "\n### Theirs {MF#theirs}\n"),
}


@pytest.mark.parametrize("rule", sorted(GIT_BAD))
def test_refused_git_package_keeps_the_last_import(tmp_path, prov, shares, rule):
    publish(prov, shares)
    cons = make_consumer(tmp_path)
    consumer.connect_git(cons, f"{shares}#share=platform")
    imported = cons.path / ".runtime/shared_views/imports/platform"
    before = tree_bytes(imported)
    _bad_commit(tmp_path / "shares.git", "platform", GIT_BAD[rule])
    result = consumer.pull(cons, "platform")[0]
    assert result.status == "stale" and f"({rule})" in result.reason
    assert tree_bytes(imported) == before
    [row] = consumer.list_connections(cons)
    assert row["status"] == "stale" and rule in row["reason"]
    assert not [p for p in imported.parent.iterdir() if p.name.startswith(".")]  # no candidate left behind
    assert retrieve(cons, "s", "deploy with helm").results[0]["id"] == "MF#platform/deploy-k8s"


def test_git_share_metadata_cannot_point_outside_its_folder(tmp_path, prov, shares):
    publish(prov, shares)
    cons = make_consumer(tmp_path)
    consumer.connect_git(cons, f"{shares}#share=platform")

    def escape(pkg: Path) -> None:
        meta = pkg.parent / "share.toml"
        meta.write_text(meta.read_text().replace('path = "package"', 'path = "../other"'))

    _bad_commit(tmp_path / "shares.git", "platform", escape)
    result = consumer.pull(cons, "platform")[0]
    assert result.status == "stale" and "unsafe-name" in result.reason


def test_a_first_refused_pull_is_unavailable(tmp_path, prov, shares):
    publish(prov, shares)
    _bad_commit(tmp_path / "shares.git", "platform", GIT_BAD["version"])
    cons = make_consumer(tmp_path)
    out = consumer.connect_git(cons, f"{shares}#share=platform")
    assert out.pull.status == "unavailable"
    assert consumer.list_connections(cons)[0]["status"] == "unavailable"
    assert not (cons.path / ".runtime/shared_views/imports/platform").exists()


# -- refused packages (zip archives, as an HTTP provider sends them) -----------------------------------

@pytest.fixture
def valid_zip(prov) -> bytes:
    return package.zip_package(provider.build(prov, "platform").package)


def _rezip(data: bytes, *, drop=(), add=(), edit=None) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if info.filename in drop:
                continue
            body = src.read(info)
            if edit and info.filename in edit:
                body = edit[info.filename](body)
            out.writestr(info, body)
        for item in add:
            if isinstance(item, zipfile.ZipInfo):
                out.writestr(item, b"x")
            else:
                out.writestr(item[0], item[1])
    return buf.getvalue()


def _link_entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def _many(n: int) -> list[tuple[str, bytes]]:
    return [(f"dist/MEMORY_x{i}.md", b"x") for i in range(n)]


MEM = "dist/MEMORY.md"
ZIP_BAD = {
    "zip-slip": (dict(add=[("../evil.md", b"x")]), "unsafe-name"),
    "zip-slip-inner": (dict(add=[("dist/../../evil.md", b"x")]), "unsafe-name"),
    "absolute": (dict(add=[("/etc/evil.md", b"x")]), "absolute-path"),
    "symlink": (dict(add=[_link_entry("dist/MEMORY_link.md")]), "symlink"),
    "oversize": (dict(add=[("dist/MEMORY_big.md", b"a" * (package.MAX_BYTES + 1))]), "too-large"),
    "too-many": (dict(add=_many(package.MAX_ENTRIES)), "too-many-entries"),
    "version-1": (dict(edit={"dist/manifest.toml": lambda b: b.replace(b"version = 2", b"version = 1")}), "version"),
    "wrong-view-id": (dict(edit={"dist/manifest.toml": lambda b: b.replace(b'"platform"', b'"other"'),
                                 "recipe.toml": lambda b: b.replace(b'"platform"', b'"other"'),
                                 "rightmemory-shared-view.toml": lambda b: b.replace(b'"platform"', b'"other"')}),
                      "view-id"),
    "nested-mf": (dict(edit={MEM: lambda b: b + b"\n### Theirs {MF#theirs}\n"}), "nested-view"),
    "unreferenced": (dict(add=[("dist/MEMORY_stray.md", b"stray\n")]), "unreferenced-file"),
    "dangling-edge": (dict(edit={MEM: lambda b: b.replace(b"[dep:helm-ver]", b"[dep:nowhere]")}), "invalid-graph"),
    "case-collision": (dict(add=[("dist/memory_RB-notes.md", b"x")]), "case-collision"),
    "nested-dir": (dict(add=[("dist/sub/MEMORY_x.md", b"x")]), "nested-directory"),
    "extra-top-level": (dict(add=[("README.md", b"x")]), "unexpected-entry"),
    "not-a-zip": (None, "bad-archive"),
}


@pytest.mark.parametrize("case", sorted(ZIP_BAD))
def test_refused_archives(tmp_path, valid_zip, case):
    spec, rule = ZIP_BAD[case]
    data = b"PK\x03\x04 not really" if spec is None else _rezip(valid_zip, **spec)
    target = tmp_path / "cand"
    with pytest.raises(PackageRefused) as err:
        package.extract_zip(data, target)
        validate_package(target, "platform")
    assert err.value.rule == rule, err.value.message


def test_a_valid_archive_round_trips(tmp_path, valid_zip):
    package.extract_zip(valid_zip, tmp_path / "cand")
    assert validate_package(tmp_path / "cand", "platform").items == 6


# -- atomic promotion ------------------------------------------------------------------------------

def test_promotion_puts_the_old_import_back_when_it_fails(tmp_path, monkeypatch):
    base = tmp_path / "imports"
    (base / "v").mkdir(parents=True)
    (base / "v" / "old.txt").write_text("old")
    cand = base / ".v.incoming-x"
    cand.mkdir()
    (cand / "new.txt").write_text("new")
    real = os.replace
    calls = []

    def flaky(a, b):
        calls.append((a, b))
        if len(calls) == 2:  # the candidate's rename into place fails
            raise OSError("disk full")
        return real(a, b)

    monkeypatch.setattr(package.os, "replace", flaky)
    with pytest.raises(OSError, match="disk full"):
        package.promote(cand, base / "v")
    monkeypatch.setattr(package.os, "replace", real)
    assert (base / "v" / "old.txt").read_text() == "old" and not (base / "v" / "new.txt").exists()
    package.promote(cand, base / "v")
    assert sorted(p.name for p in base.iterdir()) == ["v"] and (base / "v" / "new.txt").read_text() == "new"


# -- selection ids (agent retrieval) -------------------------------------------------------------------

def test_qualified_selection_ids(tmp_path, prov, shares):
    publish(prov, shares)
    cons = make_consumer(tmp_path)
    consumer.connect_git(cons, f"{shares}#share=platform")
    corpus = load_corpus(cons.path)
    outline = imported_outline(corpus)  # what agent retrieval is told (its tools cannot read .runtime)
    assert ("- `MF#platform/deploy-k8s` [Shared Views / Platform Files / Memory / Platform] "
            "We deploy with Helm") in outline
    sel = {"ids": ["MF#platform/deploy-k8s"], "sources": [{"source_id": "MF#platform/M#rb-notes",
                                                            "ranges": [{"start": 2, "end": 2}]}],
           "recent_candidates": []}
    text = render(corpus, resolve_selection(corpus, sel), max_chars=10000).text
    assert "### Platform Files {MF#platform}" in text and "`deploy-k8s` We deploy with Helm" in text
    assert "expired certificate" in text
    whole = resolve_selection(corpus, {"ids": ["MF#platform"], "sources": [], "recent_candidates": []})
    assert {u.id for u in whole} >= {"MF#platform/deploy-k8s", "MF#platform/rb-restart"}
    for bad, message in [("MF#../x", "not imported"), ("MF#nope/a", "not imported"),
                         ("MF#platform/M#../../etc", "not a shared view id"), ("MF#platform/nothing", "unknown ids"),
                         ("MF#", "not a shared view id")]:
        with pytest.raises(UsageError, match=message):
            resolve_selection(corpus, {"ids": [bad], "sources": [], "recent_candidates": []})
    for bad, message in [("MF#nope/M#rb-notes", "not imported"), ("MF#platform/MF#x", "no other views"),
                         ("MF#../M#x", "not imported"), ("MF#platform/M#../../etc", "source_id must be")]:
        with pytest.raises(UsageError, match=message):
            resolve_selection(corpus, {"ids": [], "sources": [{"source_id": bad, "ranges": [{"start": 1, "end": 1}]}],
                                       "recent_candidates": []})


def test_cli_refuses_crafted_view_names(tmp_path, cli):
    cons = make_consumer(tmp_path)
    for bad in ("..", "../x", "a/b"):
        r = cli("--headless", "shared-view", "pull", bad, "--json", "--root", str(cons.path))
        assert r.code == 2 and r.json()["error"] == "bad_input", r.stdout
    r = cli("--headless", "shared-view", "connect", "file:///nowhere.git#share=..", "--json", "--root", str(cons.path))
    assert r.code == 2 and "share id" in r.json()["message"]


def test_provider_and_consumer_commands(tmp_path, cli, shares):
    prov = make_provider(tmp_path)
    p = ["--json", "--root", str(prov.path)]
    r = cli("--headless", "shared-view", "create", "platform", "--include", "platform", "--exclude", "root-password",
            "--title", "Platform", *p)
    assert r.code == 0, r.stdout + r.stderr
    assert r.json()["recipe"]["include_headings"] == ["platform"]
    r = cli("--headless", "shared-view", "publish", "platform", "--git", shares, "--provider", "alice", *p)
    assert r.code == 0, r.stdout + r.stderr
    assert r.json()["git"]["pushed"] and r.json()["build"]["items"] == 6
    provided = cli("--headless", "shared-view", "list", "--provided", *p).json()
    assert provided[0]["view_id"] == "platform" and provided[0]["built"] and provided[0]["kind"] == "file"

    cons = make_consumer(tmp_path)
    c = ["--json", "--root", str(cons.path)]
    r = cli("--headless", "shared-view", "connect", f"{shares}#share=platform", *c)
    assert r.code == 0, r.stdout + r.stderr
    assert r.json()["connection"]["maintainer"] == "alice" and r.json()["pull"]["status"] == "pulled"
    r = cli("--headless", "shared-view", "pull", *c)
    assert r.code == 0 and r.json()[0]["status"] == "pulled" and not r.json()[0]["changed"]
    text = cli("--headless", "shared-view", "list", "--root", str(cons.path))
    assert text.stdout.startswith("platform  file  fresh  6 item(s)")


def test_validation_resolves_view_headings_against_the_registry(tmp_path, prov, shares):
    from rmtui.engine.memory.validation import validate_root

    publish(prov, shares)
    cons = make_consumer(tmp_path)
    commit_files(cons, {"MEMORY.md": CONSUMER_MEMORY + "\n### Loose {MF#loose}\n\nNot connected.\n"})
    report = validate_root(cons.path)
    assert report.ok and [(w.rule, w.line) for w in report.warnings] == [("shared-view-unconnected", 7)]
    consumer.connect_git(cons, f"{shares}#share=platform")
    assert [w.rule for w in validate_root(cons.path).warnings] == ["shared-view-unconnected"]  # platform resolves
