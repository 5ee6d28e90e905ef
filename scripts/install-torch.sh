#!/usr/bin/env bash
# Install PyTorch 2.13.0 into a venv: the CPU build unless a GPU build is asked for.
#   scripts/install-torch.sh VENV          the CPU build (about 200 MB)
#   scripts/install-torch.sh VENV --gpu    PyPI's default build, with CUDA (several GB of nvidia-* packages)
# PyPI's own torch wheel for Linux is the CUDA build, so the CPU build comes from a wheel pip can
# already see (a find-links folder, a mirror) or from PyTorch's CPU index.
set -euo pipefail
VENV="${1:?usage: install-torch.sh VENV [--gpu]}"
PIP="$VENV/bin/pip"
VERSION=2.13.0
CPU_INDEX="${RMTUI_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
if [ "${2:-}" = "--gpu" ]; then
  echo "      the GPU build (CUDA) from PyPI"
  exec "$PIP" install --quiet "torch==$VERSION"
fi
# 1. a CPU wheel pip already sees (its local version label is +cpu): no extra index asked
if "$PIP" install --quiet "torch==$VERSION+cpu" 2>/dev/null; then
  echo "      the CPU build (torch $VERSION+cpu, found by pip's configured sources)"
  exit 0
fi
# 2. PyTorch's CPU index for torch itself; its dependencies from PyPI
echo "      the CPU build from $CPU_INDEX"
exec "$PIP" install --quiet "torch==$VERSION+cpu" --index-url "$CPU_INDEX" --extra-index-url https://pypi.org/simple
