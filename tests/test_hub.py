"""The shared-view hub end to end on loopback: a real ``shared-view serve`` process holds the hub,
a provider publishes a version and makes an invitation, a second root accepts it and pulls the
package, sends a note, and the provider's inbox shows it — every step through the headless CLI,
asserted on disk, in Git and on stdout; then the refusals (tokens, invitations, bodies, packages).
The route and field shapes are checked by ``compat_checker`` as the original hub defines them."""

from __future__ import annotations

import io
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from compat_checker import HUB_TABLES, check_hub_answer, check_hub_db
from conftest import run_cli
from test_shared_views import make_consumer, make_provider, tree_bytes
from test_shared_views_http import request

from rmtui.engine.views import provider
from rmtui.engine.views.package import zip_package


@pytest.fixture
def hub(tmp_path):
    """A provider root with a file view, served (views and hub) by its own `shared-view serve` process."""
    prov = make_provider(tmp_path)
    provider.create_file_view(prov, "platform", ["platform"], exclude=["root-password"], title="Platform")
    proc = subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "shared-view", "serve", "--port", "0",
                             "--root", str(prov.path)], stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=dict(os.environ))
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    assert "serving shared views at http://127.0.0.1:" in line, line
    url = line.split(" at ", 1)[1].split()[0]
    for _ in range(200):
        try:
            request(url, "GET", "/health")
            break
        except OSError:
            time.sleep(0.05)
    minted = run_cli("--headless", "--json", "shared-view", "hub-token", "--provider", "alice", "--root",
                     str(prov.path))
    assert minted.code == 0, minted.stderr
    token = minted.json()["token"]
    yield prov, url, token
    proc.terminate()
    assert proc.wait(timeout=20) == 0


def post_json(url: str, path: str, payload: object, token: str | None = None) -> tuple[int, dict]:
    status, body = request(url, "POST", path, token=token, body=json.dumps(payload).encode(),
                           headers={"Content-Type": "application/json"})
    return status, json.loads(body)


def test_publish_invite_accept_note_inbox(tmp_path, hub):
    prov, url, token = hub
    env = {"HUB_TOKEN": token}
    hub_root = prov.path / ".runtime" / "hub"

    r = run_cli("--headless", "--json", "shared-view", "invite", "platform", "--hub", url, "--token-env", "HUB_TOKEN",
                "--label", "frontend", "--root", str(prov.path), env=env)
    assert r.code == 0, r.stderr
    out = r.json()
    assert check_hub_answer("publish", out["hub"]) == []
    assert check_hub_answer("invitation", out["invitation"]) == []
    invitation_url = out["invitation"]["invitation_url"]
    assert invitation_url.startswith(f"{url}/i/")
    version = out["hub"]["version_id"]
    stored = hub_root / "storage" / "views" / "platform" / "versions" / version
    built = provider.built_package(prov, "platform")
    assert tree_bytes(stored) == tree_bytes(built)  # the hub holds exactly the built package
    assert out["hub"]["package_hash"] == out["build"]["version"]
    assert check_hub_db(hub_root / "hub.db") == []

    token_part = invitation_url.rsplit("/", 1)[1]
    status, landing = request(url, "GET", f"/i/{token_part}")
    assert status == 200 and check_hub_answer("landing", json.loads(landing)) == []

    cons = make_consumer(tmp_path)
    r = run_cli("--headless", "--json", "shared-view", "accept", invitation_url, "--relationship", "owned-agent",
                "--consumer-label", "bob's laptop", "--root", str(cons.path))
    assert r.code == 0, r.stderr
    got = r.json()
    assert got["pull"]["status"] == "pulled" and got["pull"]["items"] >= 2
    imported = cons.path / ".runtime" / "shared_views" / "imports" / "platform"
    assert (imported / "dist" / "MEMORY.md").read_bytes() == (built / "dist" / "MEMORY.md").read_bytes()
    assert "hunter2" not in (imported / "dist" / "MEMORY.md").read_text()
    registry = (cons.path / "shared_views.toml").read_text()
    assert 'kind = "http-file"' in registry and f'base_url = "{url}"' in registry
    assert 'credential_id = "http-platform"' in registry
    assert token_part not in registry  # the invitation token never lands in a tracked file
    creds = (cons.path / ".runtime" / "shared_views" / "credentials.toml").read_text()
    assert "[credentials.http-platform]" in creds and 'kind = "http-connection"' in creds
    assert "{MF#platform}" in (cons.path / "MEMORY.md").read_text()
    log = subprocess.run(["git", "-C", str(cons.path), "log", "-1", "--format=%s"], capture_output=True, text=True)
    assert "connect platform" in log.stdout
    with sqlite3.connect(hub_root / "hub.db") as db:
        assert db.execute("SELECT accepted_count FROM invitations").fetchone()[0] == 1
        assert db.execute("SELECT consumer_label FROM connections").fetchone()[0] == "bob's laptop"

    r = run_cli("--headless", "--json", "shared-view", "note", "platform", "the", "Helm", "pin", "is", "stale",
                "--task-context", "upgrading the cluster", "--root", str(cons.path))
    assert r.code == 0, r.stderr
    assert r.json()["status"] == "recorded"
    kept = (cons.path / ".runtime" / "shared_views" / "notes" / "platform.jsonl").read_text().splitlines()
    assert json.loads(kept[-1])["message"] == "the Helm pin is stale"

    r = run_cli("--headless", "--json", "shared-view", "inbox", "--hub", url, "--provider", "alice",
                "--token-env", "HUB_TOKEN", "--root", str(prov.path), env=env)
    assert r.code == 0, r.stderr
    inbox = r.json()
    assert check_hub_answer("inbox", inbox) == []
    [item] = inbox["interactions"]
    assert item["view_id"] == "platform" and item["payload"]["message"] == "the Helm pin is stale"
    assert item["payload"]["task_context"] == "upgrading the cluster" and item["payload"]["actor"] == "user"

    # a second publish becomes the current version; the consumer's next pull takes it
    (prov.path / "MEMORY.md").write_text((prov.path / "MEMORY.md").read_text().replace("Helm 3.14", "Helm 3.15"))
    r = run_cli("--headless", "--json", "shared-view", "publish", "platform", "--hub", url, "--token-env",
                "HUB_TOKEN", "--root", str(prov.path), env=env)
    assert r.code == 0, r.stderr
    assert r.json()["hub"]["version_id"] != version
    r = run_cli("--headless", "--json", "shared-view", "pull", "platform", "--root", str(cons.path))
    assert r.code == 0 and r.json()[0]["changed"] is True
    assert "Helm 3.15" in (imported / "dist" / "MEMORY.md").read_text()


def test_refusals(tmp_path, hub):
    prov, url, token = hub
    archive = zip_package(provider.build(prov, "platform").package)

    def publish(body: bytes, tok: str | None = token, view: str = "platform", ctype: str = "application/zip"):
        status, raw = request(url, "POST", f"/api/views/{view}/versions", token=tok, body=body,
                              headers={"Content-Type": ctype})
        return status, json.loads(raw)

    assert publish(archive, "not-a-token") == (401, {"detail": "invalid bearer token"})
    assert publish(archive, None)[0] == 401
    assert publish(archive, ctype="application/json")[0] == 415
    status, body = publish(b"x" * (10 * 1024 * 1024 + 1))
    assert status == 413 and "too large" in body["detail"]
    status, body = publish(b"this is not a zip")
    assert status == 400 and "bad-archive" in body["detail"]
    evil = io.BytesIO()
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../escape.md", "x")
    status, body = publish(evil.getvalue())
    assert status == 400 and "refused" in body["detail"]
    assert not (prov.path / ".runtime" / "escape.md").exists()
    status, body = publish(archive, view="other-view")  # the package names another view
    assert status == 400 and "view-id" in body["detail"]
    assert publish(archive, view="..")[0] in (400, 404)
    status, body = publish(archive)
    assert status == 201 and check_hub_answer("publish", body) == []

    # another provider can neither republish nor invite to alice's view, nor read her inbox
    other = run_cli("--headless", "--json", "shared-view", "hub-token", "--provider", "mallory",
                    "--root", str(prov.path)).json()["token"]
    assert publish(archive, other) == (403, {"detail": "token cannot manage this view"})
    assert post_json(url, "/api/views/platform/invitations", {}, other)[0] == 403
    assert request(url, "GET", "/api/providers/alice/inbox", token=other)[0] == 403
    assert request(url, "GET", "/api/providers/alice/inbox", token="nope")[0] == 401
    assert post_json(url, "/api/views/nowhere/invitations", {}, token) == (404, {"detail": "view not found"})

    # unknown, expired and malformed invitations
    assert request(url, "GET", "/api/invitations/no-such-token/view")[0] == 404
    assert post_json(url, "/api/invitations/no-such-token/accept", {})[0] == 404
    status, inv = post_json(url, "/api/views/platform/invitations", {"expires_at": "2020-01-01T00:00:00Z"}, token)
    assert status == 201
    expired = inv["invitation_url"].rsplit("/", 1)[1]
    assert post_json(url, f"/api/invitations/{expired}/accept", {}) == (404, {"detail": "invitation not found"})
    assert post_json(url, "/api/views/platform/invitations", {"expires_at": "soon"}, token)[0] == 400
    assert post_json(url, "/api/views/platform/invitations", {"label": 7}, token)[0] == 400
    cons = make_consumer(tmp_path)
    r = run_cli("--headless", "shared-view", "accept", f"{url}/i/no-such-token", "--root", str(cons.path))
    assert r.code == 4 and "invitation not found" in r.stderr and "Traceback" not in r.stderr
    assert not (cons.path / "shared_views.toml").exists()
    r = run_cli("--headless", "shared-view", "accept", f"{url}/nothing-here", "--root", str(cons.path))
    assert r.code == 2 and "/i/<token>" in r.stderr

    # a connection token: scoped to its view, bounded bodies, a message required
    status, inv = post_json(url, "/api/views/platform/invitations", {}, token)
    status, acc = post_json(url, f"/api/invitations/{inv['invitation_url'].rsplit('/', 1)[1]}/accept",
                            {"consumer_label": "tests"})
    assert status == 201 and check_hub_answer("accept", acc) == []
    conn = acc["connection_token"]
    assert request(url, "GET", "/api/views/platform/package", token=conn)[1].startswith(b"PK")
    assert request(url, "GET", "/api/views/other/package", token=conn)[0] == 403
    assert post_json(url, "/api/views/platform/interactions", {"message": "  "}, conn)[0] == 400
    assert post_json(url, "/api/views/platform/interactions", ["message"], conn)[0] == 422
    assert post_json(url, "/api/views/platform/interactions", {"message": "x" * 20000}, conn)[0] == 413
    assert post_json(url, "/api/views/platform/interactions", {"message": "hi"}, "wrong")[0] == 401
    assert post_json(url, "/api/views/platform/interactions", {"message": "hi"}, token)[0] == 401  # publish ≠ connect
    status, rec = post_json(url, "/api/views/platform/interactions", {"message": "hi", "extra": [1]}, conn)
    assert status == 201 and check_hub_answer("interaction", rec) == []
    status, raw = request(url, "GET", "/api/providers/alice/inbox", token=token)
    assert [i["payload"] for i in json.loads(raw)["interactions"]] == [{"actor": "consumer", "message": "hi",
                                                                         "extra": [1]}]


def test_note_needs_a_yes_for_a_person(tmp_path, hub):
    prov, url, token = hub
    r = run_cli("--headless", "--json", "shared-view", "invite", "platform", "--hub", url, "--token-env", "HUB_TOKEN",
                "--root", str(prov.path), env={"HUB_TOKEN": token})
    assert r.code == 0, r.stderr
    cons = make_consumer(tmp_path)
    assert run_cli("--headless", "shared-view", "accept", r.json()["invitation"]["invitation_url"], "--no-pull",
                   "--root", str(cons.path)).code == 0
    r = run_cli("--headless", "shared-view", "note", "platform", "hello", "--root", str(cons.path))
    assert r.code == 2 and "--yes" in r.stderr
    assert not (cons.path / ".runtime" / "shared_views" / "notes").exists()
    r = run_cli("--headless", "--json", "shared-view", "note", "platform", "hello", "--yes", "--root", str(cons.path))
    assert r.code == 0 and r.json()["status"] == "recorded"


def test_hub_db_has_the_original_tables(tmp_path):
    from rmtui.engine.views.hubstore import HubStore

    store = HubStore(tmp_path / "hub")
    store.create_provider_token("alice")
    assert check_hub_db(store.db_path) == []
    with sqlite3.connect(store.db_path) as db:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert set(HUB_TABLES) <= names
    assert 'max_package_bytes = 10485760' in (tmp_path / "hub" / "hub.toml").read_text()
    assert Path(tmp_path / "hub" / "storage" / "views").is_dir()


def test_two_providers_creating_one_view_at_once(tmp_path):
    """Real threads, one SQLite hub: exactly one provider owns the new view, the other is refused."""
    import threading

    from rmtui.engine.views.hubstore import HubRefused, HubStore

    prov = make_provider(tmp_path)
    provider.create_file_view(prov, "platform", ["platform"])
    archive = zip_package(provider.build(prov, "platform").package)
    store = HubStore(tmp_path / "hub")
    actors = [store.find_token(store.create_provider_token(p)["token"], "publish") for p in ("alice", "mallory")]
    results: list[object] = []
    start = threading.Barrier(2)

    def run(actor):
        start.wait()
        try:
            results.append(store.publish("platform", archive, actor)["provider_id"])
        except HubRefused as exc:
            results.append(exc.status)

    threads = [threading.Thread(target=run, args=(a,)) for a in actors]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(map(str, results)) in (["403", "alice"], ["403", "mallory"])
    with sqlite3.connect(store.db_path) as db:
        [(owner, current)] = db.execute("SELECT provider_id, current_version_id FROM views").fetchall()
        [(version, made_by)] = db.execute("SELECT id, created_by_token_id FROM view_versions").fetchall()
    winner = next(a for a in actors if a.provider_id == owner)
    assert owner in results and current == version and made_by == winner.token_id
    versions = store.storage_root / "views" / "platform" / "versions"
    assert [p.name for p in versions.iterdir()] == [version]  # the refused one left nothing behind


def test_a_hostile_hub_changes_nothing(tmp_path):
    """A hub whose answers lack what they must carry (or carry a token no header can hold) is refused
    before any file is written."""
    import threading

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    answers: dict[str, object] = {}

    async def view(request):
        return JSONResponse(answers["view"])

    async def accept(request):
        return JSONResponse(answers["accept"], status_code=201)

    app = Starlette(routes=[Route("/api/invitations/{t}/view", view), Route("/api/invitations/{t}/accept", accept,
                                                                            methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/i/abc"
    cons = make_consumer(tmp_path)
    good_view = {"view_id": "platform", "title": "Platform", "kind": "file"}
    cases = [
        ({"view_id": "../etc", "title": "x"}, {}, 2, "view id"),
        ({"title": "no id"}, {}, 4, "view_id"),
        ({"view_id": "q", "kind": "question"}, {}, 2, "question view"),
        (good_view, {"connection_token": "bad\r\nX-Injected: 1"}, 4, "connection_token"),
        (good_view, {"connection_token": ""}, 4, "connection_token"),
        (good_view, {"view_id": "other", "connection_token": "tok"}, 4, "not 'platform'"),
    ]
    try:
        for view_answer, accept_answer, code, words in cases:
            answers.update(view=view_answer, accept=accept_answer)
            r = run_cli("--headless", "shared-view", "accept", url, "--no-pull", "--root", str(cons.path))
            assert r.code == code and words in r.stderr and "Traceback" not in r.stderr, (view_answer, r.stderr)
            assert not (cons.path / "shared_views.toml").exists()
            assert not (cons.path / ".runtime" / "shared_views" / "credentials.toml").exists()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def test_a_publish_killed_halfway_is_swept_by_the_next(tmp_path):
    """A publish that died leaves a hidden candidate folder and no row; the next publish removes it
    once it is older than a live one can be, and a fresh one (a publish still running) stays."""
    from rmtui.engine.views.hubstore import DEAD_CANDIDATE_SECONDS, HubStore

    prov = make_provider(tmp_path)
    provider.create_file_view(prov, "platform", ["platform"])
    archive = zip_package(provider.build(prov, "platform").package)
    store = HubStore(tmp_path / "hub")
    actor = store.find_token(store.create_provider_token("alice")["token"], "publish")
    versions = store.storage_root / "views" / "platform" / "versions"
    dead, live = versions / ".ver_dead.incoming-000000000000", versions / ".ver_live.incoming-111111111111"
    for folder in (dead, live):
        (folder / "dist").mkdir(parents=True)
        (folder / "dist" / "MEMORY.md").write_text("half\n")
    old = time.time() - DEAD_CANDIDATE_SECONDS - 60
    os.utime(dead, (old, old))
    out = store.publish("platform", archive, actor)
    assert sorted(p.name for p in versions.iterdir()) == sorted([live.name, out["version_id"]])


def test_the_originals_client_publishes_and_joins_through_rmtuis_hub(tmp_path, hub):
    """The original's client, as compat_checker makes its requests (urllib, its zip, its bodies):
    publish, invite, read and accept the invitation, download, send a note, read the inbox."""
    from compat_checker import ORIGINAL_IMPORT_NAMES, original_hub_call, original_package_zip

    prov, url, token = hub
    package = provider.build(prov, "platform").package
    status, published = original_hub_call(url, "POST", "/api/views/platform/versions", token=token,
                                          data=original_package_zip(package), content_type="application/zip")
    assert status == 201 and check_hub_answer("publish", published) == []
    status, inv = original_hub_call(url, "POST", "/api/views/platform/invitations", token=token, json_body={})
    assert status == 201 and check_hub_answer("invitation", inv) == []
    invite = inv["invitation_url"].rsplit("/i/", 1)[1]
    status, view = original_hub_call(url, "GET", f"/api/invitations/{invite}/view")
    assert status == 200 and view["view_id"] == "platform" and view["kind"] == "file"
    assert view["ref"] == "rightmemory://mf/platform" and view["current_version_id"] == published["version_id"]
    status, accepted = original_hub_call(url, "POST", f"/api/invitations/{invite}/accept", json_body={})
    assert status == 201 and accepted["consumer_label"] is None
    conn = accepted["connection_token"]
    status, archive = original_hub_call(url, "GET", "/api/views/platform/package", token=conn)
    assert status == 200
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        assert set(zf.namelist()) >= ORIGINAL_IMPORT_NAMES
        assert zf.read("dist/MEMORY.md") == (package / "dist" / "MEMORY.md").read_bytes()
    note = {"created_at": "2026-12-01T00:00:00Z", "heading_id": "platform", "view_type": "file",
            "ref": "rightmemory://mf/platform", "relationship": "human", "maintainer": "alice", "actor": "user",
            "message": "please add the rollback runbook"}
    status, rec = original_hub_call(url, "POST", "/api/views/platform/interactions", token=conn, json_body=note)
    assert status == 201 and check_hub_answer("interaction", rec) == []
    status, inbox = original_hub_call(url, "GET", "/api/providers/alice/inbox", token=token)
    assert status == 200 and check_hub_answer("inbox", inbox) == []
    assert inbox["interactions"][0]["payload"] == note  # every field of the note, as sent
    status, refused = original_hub_call(url, "GET", "/api/providers/alice/inbox", token=conn)
    assert status == 401 and refused == {"detail": "invalid bearer token"}


def _accepted_connection(url: str, token: str) -> str:
    """A connection token of view platform (published, invited, accepted over HTTP)."""
    status, made = post_json(url, "/api/views/platform/invitations", {}, token)
    assert status == 201, made
    invite = made["invitation_url"].rsplit("/i/", 1)[1]
    status, acc = post_json(url, f"/api/invitations/{invite}/accept", {})
    assert status == 201
    return acc["connection_token"]


def _publish(url: str, token: str, prov, view: str = "platform") -> None:
    archive = zip_package(provider.build(prov, view).package)
    status, _ = request(url, "POST", f"/api/views/{view}/versions", token=token, body=archive,
                        headers={"Content-Type": "application/zip"})
    assert status == 201


def test_a_share_invitation_joins_every_view_of_the_share(tmp_path, hub):
    """`invite A B --share S` publishes both views and makes one …/i/share/<token>; the original's
    routes describe and accept it; `accept` of that URL on another root joins and pulls both views."""
    from compat_checker import original_hub_call

    prov, url, token = hub
    provider.create_file_view(prov, "runbooks", ["runbooks"], title="Runbooks")
    r = run_cli("--headless", "--json", "shared-view", "invite", "platform", "runbooks", "--share", "team-ops",
                "--title", "Team ops", "--label", "frontend", "--hub", url, "--token-env", "HUB_TOKEN",
                "--root", str(prov.path), env={"HUB_TOKEN": token})
    assert r.code == 0, r.stderr
    inv = r.json()["invitation"]
    assert check_hub_answer("share_invitation", inv) == []
    assert inv["invitation_url"].startswith(f"{url}/i/share/") and inv["share_id"] == "team-ops"
    share_token = inv["invitation_url"].rsplit("/i/share/", 1)[1]

    status, landing = original_hub_call(url, "GET", f"/i/share/{share_token}")
    assert status == 200 and check_hub_answer("share_landing", landing) == []
    assert landing["api"] == {"view": f"/api/share-invitations/{share_token}/view",
                              "accept": f"/api/share-invitations/{share_token}/accept"}
    status, described = original_hub_call(url, "GET", f"/api/share-invitations/{share_token}/view")
    assert status == 200 and described["title"] == "Team ops" and described["provider_id"] == "alice"
    assert [(p["type"], p["view_id"], p["title"]) for p in described["parts"]] == [
        ("file", "platform", "Platform"), ("file", "runbooks", "Runbooks")]

    cons = make_consumer(tmp_path)
    r = run_cli("--headless", "--json", "shared-view", "accept", inv["invitation_url"], "--relationship",
                "owned-agent", "--consumer-label", "bob", "--root", str(cons.path))
    assert r.code == 0, r.stderr
    joined = r.json()
    assert joined["share_id"] == "team-ops" and [v["pull"]["status"] for v in joined["views"]] == ["pulled"] * 2
    memory = (cons.path / "MEMORY.md").read_text()
    assert "{MF#platform}" in memory and "{MF#runbooks}" in memory
    for view in ("platform", "runbooks"):
        imported = cons.path / ".runtime" / "shared_views" / "imports" / view / "dist" / "MEMORY.md"
        assert imported.read_bytes() == (provider.built_package(prov, view) / "dist" / "MEMORY.md").read_bytes()
    assert share_token not in (cons.path / "shared_views.toml").read_text()
    with sqlite3.connect(prov.path / ".runtime" / "hub" / "hub.db") as db:
        assert db.execute("SELECT accepted_count FROM share_invitations").fetchone()[0] == 1
        assert sorted(db.execute("SELECT view_id, consumer_label FROM connections WHERE invitation_id IS NULL")) == [
            ("platform", "bob"), ("runbooks", "bob")]
    assert check_hub_db(prov.path / ".runtime" / "hub" / "hub.db") == []

    # the original's client accepts a share the same way, and each part's token opens its own view only
    status, accepted = original_hub_call(url, "POST", f"/api/share-invitations/{share_token}/accept", json_body={})
    assert status == 201 and check_hub_answer("share_accept", accepted) == []
    tokens = {p["view_id"]: p["connection_token"] for p in accepted["parts"]}
    assert original_hub_call(url, "GET", "/api/views/runbooks/package", token=tokens["runbooks"])[0] == 200
    assert original_hub_call(url, "GET", "/api/views/platform/package", token=tokens["runbooks"]) == (
        403, {"detail": "token is not scoped to view"})

    # refusals, worded as the original words them
    route = "/api/shares/team-ops/invitations"
    one = [{"type": "file", "view_id": "platform"}]
    assert post_json(url, route, {"title": "x", "parts": one}, "nope") == (401, {"detail": "invalid bearer token"})
    assert post_json(url, route, {"parts": one}, token) == (400, {"detail": "title must be a non-empty string"})
    assert post_json(url, route, {"title": "x", "parts": []}, token) == (
        400, {"detail": "parts must be a non-empty list"})
    assert post_json(url, route, {"title": "x", "parts": [{"type": "file", "view_id": "nowhere"}]}, token) == (
        400, {"detail": "'view not found: nowhere'"})
    assert post_json(url, route, {"title": "x", "parts": [{"type": "question", "view_id": "platform"}]}, token) == (
        400, {"detail": "share part type does not match view kind for platform"})
    other = run_cli("--headless", "--json", "shared-view", "hub-token", "--provider", "mallory",
                    "--root", str(prov.path)).json()["token"]
    assert post_json(url, route, {"title": "x", "parts": one}, other) == (
        400, {"detail": "share part view belongs to another provider: platform"})
    assert original_hub_call(url, "GET", "/api/share-invitations/no-such/view") == (
        404, {"detail": "share invitation not found"})
    status, expired = post_json(url, route, {"title": "x", "parts": one, "expires_at": "2020-01-01T00:00:00Z"}, token)
    assert status == 201
    gone = expired["invitation_url"].rsplit("/", 1)[1]
    assert post_json(url, f"/api/share-invitations/{gone}/accept", {}) == (
        404, {"detail": "share invitation not found"})
    r = run_cli("--headless", "shared-view", "accept", expired["invitation_url"], "--root", str(make_consumer(
        tmp_path / "third").path))
    assert r.code == 4 and "share invitation not found" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("edge", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"])
def test_a_time_at_the_calendars_edge_is_refused_by_name(tmp_path, hub, edge):
    prov, url, token = hub
    _publish(url, token, prov)
    assert post_json(url, "/api/views/platform/invitations", {"expires_at": edge}, token) == (
        400, {"detail": "expires_at must be an ISO datetime"})
    share = {"title": "x", "parts": [{"type": "file", "view_id": "platform"}], "expires_at": edge}
    assert post_json(url, "/api/shares/s/invitations", share, token) == (
        400, {"detail": "expires_at must be an ISO datetime"})
    r = run_cli("--headless", "shared-view", "invite", "platform", "--expires-at", edge, "--hub", url,
                "--token-env", "HUB_TOKEN", "--root", str(prov.path), env={"HUB_TOKEN": token})
    assert r.code == 4 and "expires_at must be an ISO datetime" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    with sqlite3.connect(prov.path / ".runtime" / "hub" / "hub.db") as db:
        assert db.execute("SELECT COUNT(*) FROM invitations").fetchone()[0] == 0


def test_refusals_answer_as_the_original_hub_and_rmtuis_client_reads_either(tmp_path, hub):
    """Every hub route an original client calls refuses with the original's status and body; rmtui's
    client turns the hub's body and its own view routes' body into one line naming the reason."""
    from compat_checker import original_hub_call

    from rmtui.engine.views.client import ProviderClient, ProviderError

    prov, url, token = hub
    _publish(url, token, prov)
    conn = _accepted_connection(url, token)
    for bad in (None, "nope", token):
        assert original_hub_call(url, "GET", "/api/views/platform/package", token=bad) == (
            401, {"detail": "invalid bearer token"})
    assert original_hub_call(url, "GET", "/api/views/nowhere/package", token=conn) == (
        403, {"detail": "token is not scoped to view"})
    assert original_hub_call(url, "GET", "/api/no/such/route") == (404, {"detail": "Not Found"})
    assert original_hub_call(url, "GET", "/api/views/platform/interactions", token=conn) == (
        405, {"detail": "Method Not Allowed"})
    status, body = original_hub_call(url, "POST", "/api/views/platform/interactions", token=conn,
                                     data=b"{not json", content_type="application/json")
    assert status == 422 and body["detail"][0]["type"] == "json_invalid"
    status, body = original_hub_call(url, "POST", "/api/views/platform/interactions", token=conn,
                                     data=b"message=hi", content_type="application/x-www-form-urlencoded")
    assert status == 422 and body["detail"][0]["msg"] == "Input should be a valid dictionary"
    assert original_hub_call(url, "GET", "/api/providers/alice/inbox?limit=x", token=token) == (
        400, {"detail": "limit must be an integer"})
    # a note with a number JSON has no name for would break every later inbox answer: refused
    status, _ = original_hub_call(url, "POST", "/api/views/platform/interactions", token=conn,
                                  data=b'{"message": "hi", "n": Infinity}', content_type="application/json")
    assert status == 422
    assert original_hub_call(url, "GET", "/api/providers/alice/inbox", token=token)[0] == 200

    with pytest.raises(ProviderError) as hub_said:
        ProviderClient(url, "nope").package("platform")
    assert "refused the token (HTTP 401: invalid bearer token)" in hub_said.value.message
    with pytest.raises(ProviderError) as views_said:
        ProviderClient(url, "nope").ready("platform")
    assert "HTTP 401: a valid bearer token is required" in views_said.value.message
    with pytest.raises(ProviderError) as listed:
        ProviderClient(url, conn)._json("POST", "/api/views/platform/interactions", None, "note",
                                        body=b"{not json")
    assert listed.value.message == "note: HTTP 422: JSON decode error"


def test_an_inbox_of_eighty_fifteen_kilobyte_notes_lists_every_one(tmp_path, hub):
    """80 notes of 15 kB from one consumer: the inbox is read in pages, so `shared-view inbox` lists all."""
    prov, url, token = hub
    _publish(url, token, prov)
    conn = _accepted_connection(url, token)
    for n in range(80):
        status, _ = post_json(url, "/api/views/platform/interactions",
                              {"message": f"note {n}", "attachment": f"{n:03d}" + "x" * 15000}, conn)
        assert status == 201
    r = run_cli("--headless", "--json", "shared-view", "inbox", "--hub", url, "--provider", "alice",
                "--token-env", "HUB_TOKEN", "--root", str(prov.path), env={"HUB_TOKEN": token})
    assert r.code == 0, r.stderr
    items = r.json()["interactions"]
    assert sorted(i["payload"]["message"] for i in items) == sorted(f"note {n}" for n in range(80))
    assert check_hub_answer("inbox", r.json()) == []
    # the original's inbox answer, unpaged, is its newest 100: still the same shape
    status, page = request(url, "GET", "/api/providers/alice/inbox?limit=10&offset=75", token=token)
    assert status == 200 and len(json.loads(page)["interactions"]) == 5


def test_one_consumer_cannot_store_more_than_its_daily_quota(tmp_path):
    from rmtui.engine.views.server import Limits, ViewServer

    prov = make_provider(tmp_path)
    provider.create_file_view(prov, "platform", ["platform"])
    srv = ViewServer(prov, port=0, limits=Limits(note_bytes_per_day=64 * 1024))
    url = srv.start()
    try:
        token = srv.hub.create_provider_token("alice")["token"]
        _publish(url, token, prov)
        first, second = _accepted_connection(url, token), _accepted_connection(url, token)
        note = {"message": "hi", "attachment": "x" * 15000}
        answers = [post_json(url, "/api/views/platform/interactions", note, first) for _ in range(6)]
        assert [s for s, _ in answers] == [201, 201, 201, 201, 429, 429]
        assert "at most 65536 per connection a day" in answers[-1][1]["detail"]
        assert post_json(url, "/api/views/platform/interactions", note, second)[0] == 201  # another consumer
        status, raw = request(url, "GET", "/api/providers/alice/inbox", token=token)
        assert status == 200 and len(json.loads(raw)["interactions"]) == 5
    finally:
        srv.stop()


def test_hub_toml_names_the_url_invitations_point_to(tmp_path):
    """The original hub reads `public_base_url` from hub.toml: rmtui writes the URL it hands out,
    moves it with the server while it is rmtui's own, and keeps a person's."""
    import tomllib

    from rmtui.engine.views.server import ViewServer

    prov = make_provider(tmp_path)
    hub_toml = prov.path / ".runtime" / "hub" / "hub.toml"

    def base() -> str:
        return tomllib.loads(hub_toml.read_text())["public_base_url"]

    assert run_cli("--headless", "shared-view", "hub-token", "--provider", "alice", "--root", str(prov.path)).code == 0
    srv = ViewServer(prov, port=0)
    assert base() == srv.url
    assert tomllib.loads(hub_toml.read_text())["limits"]["max_package_bytes"] == 10 * 1024 * 1024
    srv.sock.close()
    again = ViewServer(prov, port=0)  # another port: rmtui's own value follows the server
    assert base() == again.url != srv.url
    again.sock.close()
    hub_toml.write_text(hub_toml.read_text().replace(again.url, "https://hub.example.test"))
    third = ViewServer(prov, port=0)
    assert base() == "https://hub.example.test"  # a person's value is kept, and handed out
    assert third.hub.config().public_base_url == "https://hub.example.test"
    third.sock.close()
    told = ViewServer(prov, port=0, public_url="https://proxy.example.test/hub")
    assert base() == "https://proxy.example.test/hub"
    told.sock.close()
