"""Runtime folders shared across processes (the warm services' folder and each service's state
folder, the MCP fork server's) follow one rule: this user's own, mode 0700, not a symlink; and
their files are opened in place, never through a planted symlink. A folder another user
controls is refused by name, its planted service is never asked, and nothing is written
where its links point.

The hostile tests need another uid: they run as root (as CI does) and chown to ``nobody``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmtui import mcp_forkserver
from rmtui.engine.locks import LinkedLockFile, file_lock, try_lock
from rmtui.engine.retrieval.modelhost import service_lookup
from rmtui.engine.retrieval.modelhost.client_settings import record_settings, settings_digest
from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path
from tests.loopback import JsonAnswers

NOBODY = 65534
as_root = pytest.mark.skipif(os.getuid() != 0, reason="planting a folder of another uid needs root")
FORGED = "FORGED-ANSWER-FROM-A-PLANTED-SERVICE"


def planted_service() -> JsonAnswers:
    """A loopback HTTP service another user runs: it records every request and answers any
    with a forged retrieve result."""
    return JsonAnswers({"ok": True, "stdout": FORGED + "\n", "stderr": "",
                        "data": {"results": [], "text": FORGED}, "text": FORGED})


@pytest.fixture
def planted():
    svc = planted_service()
    yield svc
    svc.close()


def hostile_folder(path: Path, uid: int = NOBODY, mode: int = 0o777) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, uid, uid)
    path.chmod(mode)
    return path


def plant(state_dir: Path, service: JsonAnswers, victim: Path, targets: Path) -> None:
    """What another user leaves in a state folder: a state file naming their service, the log
    a symlink to a file only root may write, the lock files symlinks to files not yet there."""
    (state_dir / "state.json").write_text(json.dumps({"url": service.url, "token": "planted-token", "pid": 1}))
    (state_dir / "service.log").symlink_to(victim)
    (state_dir / "launch.lock").symlink_to(targets / "made-through-launch-lock")
    (state_dir / "alive.lock").symlink_to(targets / "made-through-alive-lock")
    (state_dir / "launch.json").symlink_to(victim)


def retrieve(root, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmtui", "--headless", "retrieve", *extra, "--root",
                           str(root.path), "--session", "s-hostile", "how are tests run"],
                          capture_output=True, text=True, env={**env, "RMTUI_CLIENT_TRACE": "1"}, timeout=180)


@pytest.fixture
def victim(tmp_path) -> Path:
    v = tmp_path / "root-only" / "secret.txt"
    v.parent.mkdir(mode=0o700)
    v.write_text("root's own line\n")
    v.chmod(0o600)
    return v


def state_dir_for(model: Path) -> Path:
    return Path(service_lookup.service_dir(str(model), None))


@as_root
def test_a_services_folder_another_user_controls_is_refused_and_its_service_never_asked(
        memory_root, planted, victim, tmp_path, monkeypatch):
    top = hostile_folder(tmp_path / "shared-services")
    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(top))
    model = resolve_model_path(None, None)
    state_dir = hostile_folder(state_dir_for(model))
    targets = tmp_path / "targets"
    targets.mkdir()
    plant(state_dir, planted, victim, targets)
    # the thin client would serve this root (as after a delegated answer): it must not either
    record_settings(memory_root.path, settings_digest(memory_root.path), model, None)

    for extra in ((), ("--json",)):
        p = retrieve(memory_root, dict(os.environ), *extra)
        assert p.returncode == 0, p.stderr
        assert FORGED not in p.stdout and "pytest-quiet" in p.stdout  # answered here, by BM25
        assert "rmtui: trace: full path (no warm service)" in p.stderr
        assert f"runtime folder {top} is owned by uid {NOBODY}" in p.stderr, p.stderr
        assert service_lookup.FOLDER_RULE in p.stderr and "ranking with BM25 only" in p.stderr
    assert planted.requests == []
    assert victim.read_text() == "root's own line\n" and list(targets.iterdir()) == []
    assert service_lookup.read_state(state_dir) is None

    # mode 0777 but this user's own: others could have planted anything in it, so also refused
    os.chown(top, 0, 0)
    p = retrieve(memory_root, dict(os.environ))
    assert p.returncode == 0 and FORGED not in p.stdout
    assert f"runtime folder {top} has mode 0777" in p.stderr, p.stderr
    assert planted.requests == [] and list(targets.iterdir()) == []

    # the services' folder private again, the state folder still the other user's: refused by name
    top.chmod(0o700)
    p = retrieve(memory_root, dict(os.environ))
    assert p.returncode == 0 and FORGED not in p.stdout
    assert f"runtime folder {state_dir} is owned by uid {NOBODY}" in p.stderr, p.stderr
    assert planted.requests == [] and victim.read_text() == "root's own line\n" and list(targets.iterdir()) == []


@as_root
def test_symlinks_planted_in_a_private_state_folder_are_never_followed(memory_root, planted, victim, tmp_path,
                                                                      monkeypatch):
    top = tmp_path / "services"
    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(top))
    model = resolve_model_path(None, None)
    state_dir = Path(service_lookup.private_folder(service_lookup.private_folder(top) + "/"
                                                   + state_dir_for(model).name))
    targets = tmp_path / "targets"
    targets.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plant(elsewhere, planted, victim, targets)
    for name in ("state.json", "service.log", "launch.lock", "alive.lock", "launch.json"):
        (state_dir / name).symlink_to(elsewhere / name)  # each file a link out of the private folder
    record_settings(memory_root.path, settings_digest(memory_root.path), model, None)

    p = retrieve(memory_root, dict(os.environ))
    assert p.returncode == 0 and FORGED not in p.stdout and "pytest-quiet" in p.stdout
    assert f"lock file {state_dir / 'launch.lock'} is a symlink" in p.stderr, p.stderr
    assert planted.requests == [] and list(targets.iterdir()) == []
    assert service_lookup.read_state(state_dir) is None

    # the lock files in place, the log still a link: the launch refuses to write through it
    for name in ("launch.lock", "alive.lock", "launch.json"):
        (state_dir / name).unlink()
    p = retrieve(memory_root, dict(os.environ))
    assert p.returncode == 0 and FORGED not in p.stdout
    assert f"cannot open its log {state_dir / 'service.log'}" in p.stderr and "a symlink" in p.stderr, p.stderr
    assert victim.read_text() == "root's own line\n" and planted.requests == [] and list(targets.iterdir()) == []


def test_lock_files_are_never_opened_through_a_symlink(tmp_path):
    target = tmp_path / "target"
    link = tmp_path / "x.lock"
    link.symlink_to(target)
    with pytest.raises(LinkedLockFile, match="is a symlink"), file_lock(link, timeout=0.1):
        pass
    with pytest.raises(LinkedLockFile, match="is a symlink"):
        try_lock(link)
    assert not target.exists()
    with file_lock(tmp_path / "plain.lock", timeout=0.1):  # a lock file in place works as always
        assert try_lock(tmp_path / "plain.lock") is None


def test_the_folder_rule_names_the_folder_and_the_rule(tmp_path):
    own = Path(service_lookup.private_folder(tmp_path / "a" / "b"))
    assert own.stat().st_mode & 0o777 == 0o700
    legacy = tmp_path / "legacy"  # an older version made it with the default umask: others could only read
    legacy.mkdir()
    legacy.chmod(0o755)
    service_lookup.private_folder(legacy)
    assert legacy.stat().st_mode & 0o777 == 0o700
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    with pytest.raises(service_lookup.UnsafeFolder) as exc:
        service_lookup.private_folder(open_to_all)
    assert str(exc.value) == f"runtime folder {open_to_all} has mode 0777 (group or others may use it): " \
                             + service_lookup.FOLDER_RULE
    assert open_to_all.stat().st_mode & 0o777 == 0o777  # refused, not changed
    link = tmp_path / "link"
    link.symlink_to(own)
    with pytest.raises(service_lookup.UnsafeFolder, match="is a symlink"):
        service_lookup.private_folder(link)
    (own / "state.json").write_text(json.dumps({"url": "http://127.0.0.1:9", "token": "t"}))
    assert service_lookup.read_state(own) == {"url": "http://127.0.0.1:9", "token": "t"}
    assert service_lookup.read_state(link) is None  # the folder reached through a link is not read


@as_root
def test_a_runtime_dir_of_another_user_is_not_used(tmp_path, monkeypatch):
    monkeypatch.delenv("RMTUI_SERVICE_DIR", raising=False)
    theirs = hostile_folder(tmp_path / "run-user-1000", mode=0o700)  # ``su`` kept the other user's
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(theirs))
    assert service_lookup.services_top() == os.path.expanduser("~/.cache/rmtui/embedding-services")
    ours = tmp_path / "run-user-0"
    ours.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(ours))
    assert service_lookup.services_top() == str(ours / "rmtui" / "embedding-services")
    planted_top = hostile_folder(ours / "rmtui" / "embedding-services")  # planted inside ours: not used
    assert service_lookup.services_top() == os.path.expanduser("~/.cache/rmtui/embedding-services")
    assert planted_top.exists()


@as_root
def test_the_service_and_the_fork_server_refuse_a_folder_of_another_user(tmp_path, monkeypatch):
    state = hostile_folder(tmp_path / "state", mode=0o700)
    p = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "embedding-service", "--port", "0",
                        "--model-path", str(resolve_model_path(None, None)), "--state-dir", str(state)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert f"refusing to serve: runtime folder {state} is owned by uid {NOBODY}" in p.stderr
    assert list(state.iterdir()) == []

    top = hostile_folder(tmp_path / "services")
    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(top))
    monkeypatch.setenv("RMTUI_MCP_FORKSERVER", "1")
    mcp_forkserver.launch()  # nothing is made in a folder another user controls
    assert list(top.iterdir()) == []
    fork_dir = hostile_folder(Path(mcp_forkserver.server_dir()), mode=0o700)
    p = subprocess.run([sys.executable, "-m", "rmtui.mcp_forkserver_main", str(fork_dir), "0.5"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and f"runtime folder {fork_dir} is owned by uid {NOBODY}" in p.stderr
    assert list(fork_dir.iterdir()) == []
