"""A derived cache written over its last version (fsutil.atomic_write_bytes, durable=False):
the new bytes and nothing else are left, as a new file, and a failed write keeps the old one."""

from __future__ import annotations

import os

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
