"""A full disk is named, not an internal error, and what did happen is reported as it is.

The root lives on a real, small tmpfs (mounting needs root: elsewhere these tests skip) that
a filler file brings to the edge; nothing is simulated.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmtui.engine.memory.roots import init_root


@pytest.fixture
def disk(tmp_path) -> Iterator[Path]:
    """An 8 MB tmpfs of its own."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path, leave_kb: int) -> Path:
    """Fill ``disk`` until about ``leave_kb`` kB are free."""
    st = os.statvfs(disk)
    size = st.f_bavail * st.f_frsize - leave_kb * 1024
    filler = disk / "filler"
    with open(filler, "wb") as fh:
        try:
            while size > 0:
                fh.write(b"\0" * min(size, 1 << 20))
                size -= 1 << 20
        except OSError:
            pass  # full a little early: as good
    return filler


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_commands_on_a_full_disk_name_it_and_lose_nothing(disk, cli):
    root = init_root(disk / "root")
    rp = str(root.path)
    kept = cli("--headless", "submit", "--json", "--session", "s1", "--root", rp, input="the build uses make\n").json()
    filler = fill(disk, 0)
    head = git(root.path, "rev-parse", "HEAD")
    for argv, text in ((["maintain", "begin"], None), (["guidance", "submit", "--session", "s1", "-"], "prefer make\n"),
                       (["submit", "--session", "s2"], "x" * 60000 + "\n")):
        r = cli("--headless", *argv, "--root", rp, input=text)
        assert r.code == 4, (argv, r.code, r.stderr)
        assert r.stderr.count("\n") == 1 and "internal error" not in r.stderr
        assert f"no space left on device {disk} (writing {root.path}" in r.stderr, r.stderr
        assert "free some space there and run the command again" in r.stderr
    j = cli("--headless", "maintain", "begin", "--root", rp, "--json")
    assert j.code == 4 and j.json()["error"] == "storage" and j.json()["details"]["mount"] == str(disk)

    filler.unlink()
    assert git(root.path, "rev-parse", "HEAD") == head
    assert cli("--headless", "validate", "--root", rp).code == 0
    subprocess.run(["git", "-C", rp, "fsck", "--no-dangling"], check=True, capture_output=True)
    listed = cli("--headless", "evidence", "list", "--root", rp, "--json").json()
    assert [e["uid"] for e in listed] == [kept["uid"]]
    assert cli("--headless", "maintain", "begin", "--root", rp).code == 0  # works again with space


def test_an_update_published_before_the_disk_filled_is_reported_published(disk, cli):
    root = init_root(disk / "root")
    rp = str(root.path)
    for key, value in (("update.async.debounce_seconds", "0"), ("update.async.target_batch_candidates", "1")):
        assert cli("--headless", "config", "set", key, value, "--root", rp).code == 0
    saved = cli("--headless", "submit", "--json", "--session", "s1", "--root", rp, input="the build uses make\n")
    uid = saved.json()["uid"]
    task = cli("--headless", "assistant", "update", "begin", "--root", rp).json()
    assert task["claimed"], task
    wt = Path(task["worktree"])
    (wt / "MEMORY.md").write_text("# Memory\n\n## Build {#build}\n\n- `make` the build uses make → []\n")
    git(wt, "commit", "-qam", "update: the build uses make")
    filler = fill(disk, 100)  # room for the commit and the ref, not for the runtime records after them

    r = cli("--headless", "assistant", "update", "complete", "--task", task["task_id"], "--root", rp)
    receipt = r.json()
    assert r.code == 0, r.stderr
    assert receipt["phase"] == "committed" and receipt["landed_commit"] == git(root.path, "rev-parse", "HEAD")
    assert "internal error" not in r.stderr
    warning = receipt["warnings"][-1]
    assert warning.startswith(f"published as {receipt['landed_commit'][:12]}, but ")
    assert f"no space left on device {disk}" in warning and "`rmtui --headless recover` finishes it" in warning
    assert f"rmtui: warning: {warning}" in r.stderr
    assert (root.path / "update_records" / f"{task['batch_id']}.json").is_file()

    filler.unlink()  # space again: recovery finishes the bookkeeping from the records
    assert cli("--headless", "recover", "--root", rp).code == 0
    op = cli("--headless", "operations", "show", task["task_id"], "--root", rp, "--json").json()
    assert op["phase"] == "committed" and op["landed_commit"] == receipt["landed_commit"]
    assert all(e["state"] == "done" for e in op["effects"]), op["effects"]
    shown = cli("--headless", "evidence", "show", uid, "--root", rp, "--json").json()
    assert shown["state"] == "consumed"
    again = cli("--headless", "assistant", "update", "complete", "--task", task["task_id"], "--root", rp)
    assert again.code == 0 and again.json()["landed_commit"] == receipt["landed_commit"]
    assert cli("--headless", "validate", "--root", rp).code == 0


def test_a_push_to_a_full_upstream_keeps_the_cause(disk, tmp_path):
    from rmtui.engine.sync.remote import Upstream, push

    upstream = disk / "up.git"
    subprocess.run(["git", "init", "-q", "--bare", str(upstream)], check=True)
    root = init_root(tmp_path / "root")
    (root.path / "large.bin").write_bytes(os.urandom(10 << 20))  # more than the upstream's disk holds
    git(root.path, "add", "-f", "large.bin")
    git(root.path, "commit", "-qm", "a large file")
    git(root.path, "remote", "add", "origin", str(upstream))
    out = push(root.path, Upstream("origin", "main"), git(root.path, "rev-parse", "HEAD"))
    assert not out.ok
    assert "No space left on device" in out.message, out.message
    assert "\n" not in out.message


def test_the_cause_is_json_too(disk, cli):
    root = init_root(disk / "root")
    fill(disk, 0)
    r = cli("--headless", "maintain", "begin", "--root", str(root.path), "--json")
    assert r.code == 4
    body = json.loads(r.stdout)
    assert body["error"] == "storage" and f"no space left on device {disk}" in body["message"]
