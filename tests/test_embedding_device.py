"""``embedding.device``: which device runs the embedding model, chosen without importing torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rmtui.engine.errors import UnavailableError
from rmtui.engine.retrieval.modelhost import device as devices


def test_the_setting_takes_the_documented_values_and_refuses_others(root, cli):
    r = str(root.path)
    for value in ("auto", "cpu", "cuda", "cuda:1"):
        res = cli("--headless", "config", "set", "--root", r, "embedding.device", value)
        assert res.code == 0, res.stderr
        assert cli("--headless", "config", "get", "--root", r, "embedding.device").stdout.strip() == value
    res = cli("--headless", "config", "set", "--root", r, "embedding.device", "gpu")
    assert res.code == 2
    assert "embedding.device" in res.stderr and "cuda:N" in res.stderr
    assert cli("--headless", "config", "get", "--root", r, "embedding.device").stdout.strip() == "cuda:1"


def test_auto_on_a_machine_without_a_gpu_is_the_cpu_and_never_imports_torch():
    code = ("import sys; from rmtui.engine.retrieval.modelhost import device as d; "
            "print(d.resolve_device('auto'), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    chosen, imported = out.stdout.split()
    if devices.gpu_present() and devices.torch_built_with_cuda():
        pytest.skip("this machine has a GPU and a CUDA build of torch")
    assert (chosen, imported) == ("cpu", "False")


@pytest.mark.parametrize(("line", "cuda"), [("cuda: Optional[str] = '12.8'", True), ("cuda = '12.4'", True),
                                             ("cuda: Optional[str] = None", False), ("cuda = None", False)])
def test_a_cuda_build_of_torch_is_read_from_its_version_file(tmp_path, monkeypatch, line, cuda):
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('never imported')\n")
    (pkg / "version.py").write_text(f"__version__ = '2.13.0'\ndebug = False\n{line}\ngit_version = 'x'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    assert devices.torch_built_with_cuda() is cuda


def test_a_gpu_named_where_torch_sees_none_is_refused_with_the_fix():
    from rmtui.engine.retrieval.modelhost.embeddings import InProcessBackend

    if devices.resolve_device("auto") != "cpu":
        pytest.skip("this machine has a usable GPU")
    with pytest.raises(UnavailableError) as exc:
        InProcessBackend(device="cuda:0")
    assert 'embedding.device = "cuda:0"' in str(exc.value) and "scripts/install.sh --gpu" in str(exc.value)


def test_the_local_warm_service_runs_on_the_configured_device(tmp_path, monkeypatch):
    from rmtui.engine.retrieval.modelhost.embed_client import ensure_local_service, stop_local_service
    from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path

    monkeypatch.setenv("RMTUI_SERVICE_DIR", str(tmp_path / "services"))
    local = ensure_local_service(resolve_model_path(None, None), None, idle_timeout=60, wait_seconds=60,
                                 device="cpu")
    try:
        state = json.loads((local.state_dir / "state.json").read_text())
        assert state["device"] == "cpu"
        argv = Path(f"/proc/{state['pid']}/cmdline").read_bytes().split(b"\0")
        assert argv[argv.index(b"--device") + 1] == b"cpu"
    finally:
        assert stop_local_service(local.state_dir)
