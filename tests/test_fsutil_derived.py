"""A derived cache written over its last version (fsutil.atomic_write_bytes, durable=False):
the new bytes and nothing else are left, as a new file, and a failed write keeps the old one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rmtui.engine import fsutil


def test_a_derived_cache_replaces_its_last_version_with_a_new_file(tmp_path):
    path = tmp_path / "cache" / "index.bin"
    fsutil.atomic_write_bytes(path, b"old" * 1000, durable=False)
    old_ino = path.stat().st_ino
    fsutil.atomic_write_bytes(path, [b"new ", b"bytes"], durable=False)
    assert path.read_bytes() == b"new bytes"
    assert path.stat().st_ino != old_ino  # removed and renamed into place, never rewritten in place
    assert sorted(os.listdir(path.parent)) == ["index.bin"]  # no temporary file left


def test_a_failed_derived_write_keeps_the_last_version(tmp_path):
    path = tmp_path / "index.bin"
    fsutil.atomic_write_bytes(path, b"kept", durable=False)
    with pytest.raises(TypeError):  # the second part is no buffer: the write fails after the first
        fsutil.atomic_write_bytes(path, [b"part", object()], durable=False)
    assert path.read_bytes() == b"kept"
    assert sorted(os.listdir(tmp_path)) == ["index.bin"]


def test_an_atomic_write_gives_the_mode_the_umask_allows(tmp_path):
    """A process run with umask 077 (a host's setting, handed to a forked MCP child) makes
    files only its user can read, as plain ``open`` would; an explicit mode still wins."""
    code = ("import os, sys; from pathlib import Path; from rmtui.engine.fsutil import atomic_write_bytes, "
            "atomic_write_text; os.umask(int(sys.argv[2], 8)); d = Path(sys.argv[1]); "
            "atomic_write_text(d / 'a.txt', 'x'); atomic_write_bytes(d / 'b.bin', b'y', mode=0o640); "
            "print(oct(os.stat(d / 'a.txt').st_mode & 0o777), oct(os.stat(d / 'b.bin').st_mode & 0o777))")
    for umask, want in (("077", "0o600 0o640"), ("022", "0o644 0o640"), ("002", "0o664 0o640")):
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path), umask], capture_output=True, text=True,
                             check=True, timeout=60)
        assert out.stdout.split() == want.split(), umask
