"""The engine and the headless CLI stay light: no Textual, prompt_toolkit, torch or
sentence-transformers unless a model actually runs in-process (docs/architecture.md, "Layering").

Each check runs in a fresh interpreter so modules imported by other tests do not hide a leak.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("textual", "prompt_toolkit", "torch", "sentence_transformers")

ENGINE_MODULES = (
    "rmtui.engine",
    "rmtui.engine.memory.graph",
    "rmtui.engine.memory.validation",
    "rmtui.engine.evidence.queue",
    "rmtui.engine.memory.config",
    "rmtui.engine.memory.roots",
    "rmtui.engine.host.status",
)


def _loaded_heavy(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def _run(code: str, *args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_importing_the_engine_loads_no_heavy_module():
    code = (
        "import importlib, json, sys\n"
        f"for name in {ENGINE_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    modules = _run(code)
    assert set(ENGINE_MODULES) <= set(modules)
    assert _loaded_heavy(modules) == []


def test_headless_validate_loads_no_heavy_module(root):
    (root.path / "MEMORY.md").write_text("# Memory\n\n- `a` a fact → []\n", encoding="utf-8")
    # Run the real entry point as `python -m rmtui` would, then list what it imported.
    code = (
        "import json, sys\n"
        "from rmtui.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, "--headless", "validate", "--root", str(root.path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    assert proc.stdout.splitlines()[0] == "valid: 0 headings, 1 nodes in 2 files"
    assert "rmtui.engine.memory.validation" in result["modules"]
    assert _loaded_heavy(result["modules"]) == []


def test_python_m_rmtui_validate_importtime_has_no_heavy_module(root):
    """The same through `python -X importtime -m rmtui`, the exact command agents run."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "rmtui", "--headless", "validate",
                           "--root", str(root.path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line]
    assert "rmtui.engine.memory.validation" in imported
    assert _loaded_heavy(imported) == []
